package scheduler

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
)

// TestAnEventRunsItsSettingsOnTheTickGrid: the room runs an event's capacity from the
// first grid point at its start to the last before its end, publishes the event's plan for the
// proxies, and says which event runs; without a restart, and without a tick lost or doubled.
func TestAnEventRunsItsSettingsOnTheTickGrid(t *testing.T) {
	h := newHarness(t)
	h.fill("sale", 1000)
	// The API keeps times in whole seconds.
	sale := builder.Event("sale", gridStart.Add(time.Second), gridStart.Add(2*time.Second))
	sale.Capacity = &herdgatev1alpha1.EventCapacity{BatchSizeOverride: ptr.To(int32(28))}
	cfg := h.queue("sale", builder.Queue("", "").Events(sale))
	h.s.Ensure(cfg)
	for i := 1; i <= 22; i++ {
		r := h.mustStep(100 * time.Millisecond)
		at := gridStart.Add(time.Duration(i) * 100 * time.Millisecond)
		quota, event := int64(14), ""
		if i >= 10 && i < 20 {
			quota, event = 28, "sale"
		}
		if !r.Scheduled.Equal(at) || r.Quota != quota || int64(len(r.Result.Admitted)) != quota {
			t.Fatalf("tick %d at %s: quota %d, admitted %d; want %d at %s", i, r.Scheduled, r.Quota, len(r.Result.Admitted), quota, at)
		}
		if snap, _ := h.s.Snapshot(cfg.UID); snap.Event != event {
			t.Fatalf("tick %d: the snapshot says event %q, want %q", i, snap.Event, event)
		}
		if i == 10 || i == 20 {
			p, err := publishedPlan(h.engine("sale"), func(p queue.PublishedPlan) bool { return p.Quota.BatchSize() == quota })
			if err != nil || p.Quota.BatchSize() != quota {
				t.Fatalf("the plan published at tick %d: %d a tick, %v; want %d", i, p.Quota.BatchSize(), err, quota)
			}
		}
	}
}

// TestASleepingRoomWakesForAnEvent: a room nobody waits in sleeps no further than the next edge of
// its calendar, so the event's first grid point runs the event's plan.
func TestASleepingRoomWakesForAnEvent(t *testing.T) {
	h := newHarness(t, WithIdleSleep(time.Minute))
	sale := builder.Event("sale", gridStart.Add(2*time.Second), gridStart.Add(3*time.Second))
	sale.Capacity = &herdgatev1alpha1.EventCapacity{BatchSizeOverride: ptr.To(int32(28))}
	cfg := h.queue("quiet", builder.Queue("", "").Events(sale))
	h.s.Ensure(cfg)
	if first := h.mustStep(100 * time.Millisecond); !first.Result.Asleep {
		t.Fatalf("the first tick of an empty room did not put it to sleep: %+v", first)
	}
	for i := 2; i < 20; i++ {
		if r, ok := h.step(100 * time.Millisecond); ok {
			t.Fatalf("the sleeping room ticked at %s, before the event", r.Scheduled)
		}
	}
	if r := h.mustStep(100 * time.Millisecond); !r.Scheduled.Equal(gridStart.Add(2*time.Second)) || r.Quota != 28 {
		t.Fatalf("the tick after the sleep at %s with quota %d; want the event's 28 at its start", r.Scheduled, r.Quota)
	}
}
