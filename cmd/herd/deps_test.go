package main

import (
	"strings"
	"testing"

	"github.com/herdgate/herdgate/test/testenv"
)

// TestTheImagesBinariesLinkNoTestServers: the programs the images hold never link envtest, whose
// set-up writes to /tmp as the program loads and panics on a read-only root, as a pod's is.
func TestTheImagesBinariesLinkNoTestServers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	for _, cmd := range []string{"herd", "manager", "herdgate-proxy"} {
		deps, err := testenv.Deps("github.com/herdgate/herdgate/cmd/" + cmd)
		if err != nil {
			t.Fatal(err)
		}
		for _, dep := range deps {
			if strings.Contains(dep, "controller-runtime/pkg/envtest") || strings.HasSuffix(dep, "test/testenv/controlplane") {
				t.Errorf("cmd/%s links %s", cmd, dep)
			}
		}
	}
}
