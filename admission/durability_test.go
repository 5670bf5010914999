package admission_test

import (
	"net/http"
	"testing"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// TestAReplicatedRoomsEntriesWaitForAReplica: on a Redis without a replica, an entry into a
// Replicated room waits for a replica in vain, takes its place all the same, and is counted in
// herdgate_proxy_redis_unacknowledged_writes_total; once the room is Async again, entries no longer
// wait.
func TestAReplicatedRoomsEntriesWaitForAReplica(t *testing.T) {
	h := newHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.Redis = &herdgatev1alpha1.RedisSpec{Durability: herdgatev1alpha1.RedisDurabilityReplicated}
	})
	const series = "herdgate_proxy_redis_unacknowledged_writes_total"
	for i := range 2 {
		if res := h.visitor().enter(); res.StatusCode != http.StatusOK || res.json(t)["position"] != float64(i+1) {
			t.Fatalf("entry %d into a Replicated room without a replica: %d %s, want its place", i, res.StatusCode, res.body)
		}
	}
	if n := h.metric(series, ""); n != 2 {
		t.Fatalf("%s = %v after two entries no replica acknowledged, want 2", series, n)
	}

	async := h.wq.DeepCopy()
	async.Spec.Redis.Durability = herdgatev1alpha1.RedisDurabilityAsync
	cfg, err := admission.NewConfig(async, h.key)
	if err != nil {
		t.Fatal(err)
	}
	h.room.SetConfig(cfg)
	if res := h.visitor().enter(); res.StatusCode != http.StatusOK {
		t.Fatalf("entry into the room back to Async: %d %s", res.StatusCode, res.body)
	}
	if n := h.metric(series, ""); n != 2 {
		t.Fatalf("%s = %v after an Async entry, want it to stay 2", series, n)
	}
}
