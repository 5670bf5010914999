package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTheImagesBinariesLinkNoTestServers: the programs the images hold never link envtest, whose
// set-up writes to /tmp as the program loads and panics on a read-only root, as a pod's is.
func TestTheImagesBinariesLinkNoTestServers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	for _, cmd := range []string{"herd", "manager", "herdgate-proxy"} {
		out, err := exec.Command("go", "list", "-deps", "github.com/herdgate/herdgate/cmd/"+cmd).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", cmd, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list listed %d packages for %s", len(deps), cmd)
		}
		for _, dep := range deps {
			if strings.Contains(dep, "controller-runtime/pkg/envtest") || strings.HasSuffix(dep, "test/testenv/controlplane") {
				t.Errorf("cmd/%s links %s", cmd, dep)
			}
		}
	}
}
