package builder

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/testenv"
)

// The reference queue and config/samples are the same queue: users apply the one, tests run the other.
func TestTheReferenceQueueIsTheSample(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "samples", "herdgate_v1alpha1_waitingqueue.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sample := &herdgatev1alpha1.WaitingQueue{}
	if err := yaml.UnmarshalStrict(raw, sample); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sample, Queue("", "orders").Obj()); diff != "" {
		t.Fatalf("config/samples and the reference queue differ (-sample +builder):\n%s", diff)
	}
	if s := Queue("shop", "orders").Settings(); s.Plan.BatchSize() != 14 || s.Plan.RateString() != "140" {
		t.Fatalf("the reference queue admits %d per tick, %s/s; want 14 and 140", s.Plan.BatchSize(), s.Plan.RateString())
	}
}
