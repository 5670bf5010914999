package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
)

// TestAReplicatedRoomsAdmissionsWaitForAReplica: on a Redis without a replica, every tick of a
// Replicated room that admitted someone waits for a replica in vain and is counted in
// herdgate_redis_unacknowledged_writes_total, a tick that admitted nobody is not, and an Async room
// beside it never waits; a room switched back to Async stops waiting. The admissions stand either
// way.
func TestAReplicatedRoomsAdmissionsWaitForAReplica(t *testing.T) {
	const name = "replicated-room"
	h := newHarness(t)
	t.Cleanup(func() { forgetQueueMetrics("test", name) })
	unacknowledged := func() float64 {
		t.Helper()
		m := &dto.Metric{}
		if err := unacknowledgedCounter.WithLabelValues("test", name).Write(m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	room := func(generation int64, d herdgatev1alpha1.RedisDurability) Room {
		// 14 a tick.
		return h.queue(name, builder.Queue("", "").Generation(generation).Capacity(20, 100*time.Millisecond, 70).Durability(d))
	}
	// fill returns how many entered a sleeping room and were admitted at once.
	fill := func(prefix string, n int) (atOnce int) {
		t.Helper()
		q := h.engine(name)
		for i := range n {
			p, err := q.Enter(context.Background(), fmt.Sprintf("%s%d", prefix, i), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if p.State == queue.Admitted {
				atOnce++
			}
		}
		return atOnce
	}
	ticks := func(n int) (admitted int) {
		for range n {
			admitted += len(h.mustStep(100 * time.Millisecond).Result.Admitted)
		}
		return admitted
	}

	// Three ticks admit and wait; the fourth admits nobody, and counts the third's wait (a tick
	// counts the waits before it).
	fill("a", 42)
	h.s.Ensure(room(1, herdgatev1alpha1.RedisDurabilityReplicated))
	if admitted := ticks(4); admitted != 42 {
		t.Fatalf("the Replicated room admitted %d, want all 42: a write no replica acknowledged stands", admitted)
	}
	if got := unacknowledged(); got != 3 {
		t.Fatalf("herdgate_redis_unacknowledged_writes_total = %v for a Replicated room without a replica, want 3 (one per tick that admitted)", got)
	}

	// The room sleeps now: the first entries are admitted at once, by enter, which the manager
	// does not wait for.
	h.s.Ensure(room(2, herdgatev1alpha1.RedisDurabilityAsync))
	atOnce := fill("b", 42)
	if admitted := ticks(4); admitted == 0 || atOnce+admitted != 42 {
		t.Fatalf("the room back to Async admitted %d at once and %d at ticks, want ticks to admit and 42 in all", atOnce, admitted)
	}
	if got := unacknowledged(); got != 3 {
		t.Fatalf("herdgate_redis_unacknowledged_writes_total = %v after the room went back to Async, want it to stay 3", got)
	}
}
