package admission_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTheGateImportsNoFront: the gate decides over an Exchange; what carries bytes (fasthttp,
// net/http's reverse proxy, the fronts themselves) is never among its dependencies, so that a new
// front is an adapter and the gate does not change for it.
func TestTheGateImportsNoFront(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/herdgate/herdgate/admission").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list listed %d packages: %q", len(deps), out)
	}
	for _, dep := range deps {
		switch {
		case dep == "net/http/httputil", strings.HasPrefix(dep, "github.com/valyala/fasthttp"),
			strings.HasPrefix(dep, "github.com/herdgate/herdgate/admission/front"):
			t.Errorf("the gate depends on %s", dep)
		}
	}
}
