package pass_test

import (
	"strings"
	"testing"

	"github.com/herdgate/herdgate/test/testenv"
)

// TestVerifyingAPassNeedsNoQueue: what signs and verifies passes, places and cookies depends on no
// queue engine and no Redis client, so that whatever checks a pass (a gateway's plugin, a test kit)
// carries none of them.
func TestVerifyingAPassNeedsNoQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	deps, err := testenv.Deps("github.com/herdgate/herdgate/internal/pass")
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range deps {
		if dep == "github.com/herdgate/herdgate/internal/queue" || strings.HasPrefix(dep, "github.com/redis/") {
			t.Errorf("internal/pass depends on %s", dep)
		}
	}
}
