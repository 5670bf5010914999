package kubectl

import (
	"bytes"
	"strings"
	"testing"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/builder"
)

// TestStatusShowsTheLanes: a room with lanes shows each lane's share, depth and rate.
func TestStatusShowsTheLanes(t *testing.T) {
	wq := builder.Queue("shop", "orders").Lanes(builder.LaneByCode("members", 20, "lanes", "key")).Obj()
	wq.Status.Lanes = []herdgatev1alpha1.LaneStatus{{Name: "main", Depth: 900, AdmittedPerSecond: "112"}, {Name: "members", Depth: 40, AdmittedPerSecond: "28"}}
	var out bytes.Buffer
	if err := writeStatus(&out, wq); err != nil {
		t.Fatal(err)
	}
	want := "Lanes:         main (80 %) 900 waiting, 112 a second; members (20 %) 40 waiting, 28 a second"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("status without the lanes as %q:\n%s", want, out.String())
	}
}
