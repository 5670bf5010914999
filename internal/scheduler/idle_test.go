package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
)

// TestAnIdleRoomSleepsUntilSomeoneWaits: a tick that leaves nobody waiting puts the room to sleep
// for the idle sleep; the ticks in between are skipped, not made up for. A visitor who has to wait,
// or new settings, wake it, and it ticks again on its grid long before the sleep would have ended.
func TestAnIdleRoomSleepsUntilSomeoneWaits(t *testing.T) {
	h := newHarness(t)
	h.s.Ensure(h.queue("idle", builder.Queue("", "")))
	if r := h.mustStep(100 * time.Millisecond); !r.Result.Asleep {
		t.Fatal("a tick with nobody waiting left the room awake")
	}
	skipped := int(defaultIdleSleep/(100*time.Millisecond)) - 1
	for i := range skipped {
		if r, ok := h.step(100 * time.Millisecond); ok {
			t.Fatalf("the sleeping room ticked %s after it fell asleep (tick %d)", r.Scheduled.Sub(gridStart.Add(100*time.Millisecond)), i)
		}
	}
	r := h.mustStep(100 * time.Millisecond)
	if want := gridStart.Add(100*time.Millisecond + defaultIdleSleep); !r.Scheduled.Equal(want) || r.Quota != 14 || !r.Result.Asleep {
		t.Fatalf("the tick at the end of the sleep: at %s quota %d asleep %t; want at %s, one tick's 14, asleep again",
			r.Scheduled, r.Quota, r.Result.Asleep, want)
	}

	// The budget the sleeping tick left admits 14 at once; the 15th has to wait and wakes the room.
	q := h.engine("idle")
	for i := range 15 {
		p, err := q.Enter(context.Background(), fmt.Sprintf("v%02d", i), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if want := queue.Admitted; i == 14 {
			if p.State != queue.Waiting {
				t.Fatalf("the 15th visitor: %v; want it waiting", p.State)
			}
		} else if p.State != want {
			t.Fatalf("visitor %d of a sleeping room's budget: %v; want admitted at once", i, p.State)
		}
	}
	woken := func(what string, done func(TickReport) bool) {
		t.Helper()
		for range 10 {
			r, ok := h.step(100 * time.Millisecond)
			if !ok {
				continue
			}
			if !done(r) {
				t.Fatalf("%s: the tick at %s did %+v", what, r.Scheduled, r)
			}
			if r.Scheduled.After(gridStart.Add(100*time.Millisecond + defaultIdleSleep + time.Second)) {
				t.Fatalf("%s: the room ticked at %s, as late as its sleep", what, r.Scheduled)
			}
			return
		}
		t.Fatalf("%s: the room did not wake", what)
	}
	woken("a visitor who has to wait", func(r TickReport) bool { return len(r.Result.Admitted) == 1 && r.Result.Asleep })

	h.s.Ensure(h.queue("idle", builder.Queue("", "").Suspend(true).Generation(2)))
	woken("a suspension", func(r TickReport) bool { return r.Generation == 2 && r.Quota == 0 })
}

// TestAnAdaptiveRoomSleepsNoLongerThanItsWorkloadRead: the visitors a sleeping room admits at once take
// the budget of its rate, which an Adaptive room must keep following, so it sleeps only until its
// next workload read, not the whole idle sleep.
func TestAnAdaptiveRoomSleepsNoLongerThanItsWorkloadRead(t *testing.T) {
	h := newHarness(t)
	h.s.Ensure(h.queue("adaptive", builder.Queue("", "").Adaptive(10)))
	first := h.mustStep(100 * time.Millisecond)
	if !first.Result.Asleep {
		t.Fatal("a tick with nobody waiting left the Adaptive room awake")
	}
	for i := range int(adaptiveIdleSleep/(100*time.Millisecond)) - 1 {
		if r, ok := h.step(100 * time.Millisecond); ok {
			t.Fatalf("the sleeping room ticked %s after it fell asleep (tick %d)", r.Scheduled.Sub(first.Scheduled), i)
		}
	}
	if r := h.mustStep(100 * time.Millisecond); !r.Scheduled.Equal(first.Scheduled.Add(adaptiveIdleSleep)) {
		t.Fatalf("the Adaptive room woke at %s, want %s after it fell asleep", r.Scheduled.Sub(first.Scheduled), adaptiveIdleSleep)
	}
	if adaptiveIdleSleep >= defaultIdleSleep {
		t.Fatalf("an Adaptive room sleeps %s, a Declared one %s", adaptiveIdleSleep, defaultIdleSleep)
	}
}
