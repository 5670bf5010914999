package admission_test

import (
	"strings"
	"testing"

	"github.com/herdgate/herdgate/test/testenv"
)

// TestTheGateImportsNoFront: the gate decides over an Exchange; what carries bytes (fasthttp,
// net/http's reverse proxy, the fronts themselves) is never among its dependencies, so that a new
// front is an adapter and the gate does not change for it. Nor is what hosts it in Kubernetes
// (controller-runtime, client-go, admission/host): the gate takes its config from anywhere.
func TestTheGateImportsNoFront(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	deps, err := testenv.Deps("github.com/herdgate/herdgate/admission")
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range deps {
		switch {
		case dep == "net/http/httputil", strings.HasPrefix(dep, "github.com/valyala/fasthttp"),
			strings.HasPrefix(dep, "github.com/herdgate/herdgate/admission/front"),
			strings.HasPrefix(dep, "sigs.k8s.io/controller-runtime"), strings.HasPrefix(dep, "k8s.io/client-go"),
			dep == "github.com/herdgate/herdgate/admission/host":
			t.Errorf("the gate depends on %s", dep)
		}
	}
}
