package main

import (
	"strings"
	"testing"

	"github.com/herdgate/herdgate/test/testenv"
)

// TestThePluginLinksNoProxy: the plugin checks passes and reads rooms with the packages the manager
// and the proxy share (internal/pass, internal/settings); the proxy itself (package admission and its
// fronts) is never among its dependencies, so a change to the gate does not rebuild or grow it.
func TestThePluginLinksNoProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	deps, err := testenv.Deps("github.com/herdgate/herdgate/cmd/kubectl-herdgate")
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range deps {
		if dep == "github.com/herdgate/herdgate/admission" || strings.HasPrefix(dep, "github.com/herdgate/herdgate/admission/") {
			t.Errorf("the plugin links %s", dep)
		}
	}
}
