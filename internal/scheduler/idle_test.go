package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

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
	// The sleep ends where the wake slot that its length reaches into ends.
	want := slotEnd(gridStart.Add(100*time.Millisecond + defaultIdleSleep))
	skipped := int(want.Sub(gridStart.Add(100*time.Millisecond))/(100*time.Millisecond)) - 1
	for i := range skipped {
		if r, ok := h.step(100 * time.Millisecond); ok {
			t.Fatalf("the sleeping room ticked %s after it fell asleep (tick %d)", r.Scheduled.Sub(gridStart.Add(100*time.Millisecond)), i)
		}
	}
	r := h.mustStep(100 * time.Millisecond)
	if !r.Scheduled.Equal(want) || r.Quota != 14 || !r.Result.Asleep {
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
			if r.Scheduled.After(want.Add(time.Second)) {
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
	want := slotEnd(first.Scheduled.Add(adaptiveIdleSleep))
	for i := range int(want.Sub(first.Scheduled)/(100*time.Millisecond)) - 1 {
		if r, ok := h.step(100 * time.Millisecond); ok {
			t.Fatalf("the sleeping room ticked %s after it fell asleep (tick %d)", r.Scheduled.Sub(first.Scheduled), i)
		}
	}
	if r := h.mustStep(100 * time.Millisecond); !r.Scheduled.Equal(want) {
		t.Fatalf("the Adaptive room woke %s after it fell asleep, want %s", r.Scheduled.Sub(first.Scheduled), want.Sub(first.Scheduled))
	}
	if adaptiveIdleSleep >= defaultIdleSleep {
		t.Fatalf("an Adaptive room sleeps %s, a Declared one %s", adaptiveIdleSleep, defaultIdleSleep)
	}
}

// slotEnd is the end of the default wake slot that t falls in: its first multiple at or after t.
func slotEnd(t time.Time) time.Time {
	slot := int64(defaultWakeSlot)
	return time.Unix(0, (t.UnixNano()+slot-1)/slot*slot)
}

// TestSleepingRoomsWakeTogether: rooms at different grid phases that fall asleep in one tick wake at
// the end of the same wake slot, each at its own grid point before it, in shared round trips, and
// with one tick's quota even when the slot's timer fires late.
func TestSleepingRoomsWakeTogether(t *testing.T) {
	phases := map[string]time.Duration{"a": 0, "b": 37 * time.Millisecond, "c": 83 * time.Millisecond}
	h := newHarness(t, func(s *Scheduler) {
		s.gridPhase = func(key types.NamespacedName, _ time.Duration) time.Duration { return phases[key.Name] }
	})
	for name := range phases {
		h.s.Ensure(h.queue(name, builder.Queue("", "")))
	}
	// reports moves the clock by d and collects the ticks of every room that follow.
	reports := func(d time.Duration) map[string]TickReport {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); h.clock.Waiters() < len(phases); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d rooms wait for their next tick", h.clock.Waiters())
			}
		}
		h.move(d)
		got := map[string]TickReport{}
		for deadline := time.After(5 * time.Second); len(got) < len(phases); {
			select {
			case r := <-h.reports:
				got[r.Key.Name] = r
			case <-deadline:
				t.Fatalf("after moving the clock by %s only %d rooms ticked: %v", d, len(got), got)
			}
		}
		return got
	}
	for name, r := range reports(100 * time.Millisecond) {
		if !r.Result.Asleep {
			t.Fatalf("room %s stayed awake with nobody waiting", name)
		}
	}
	slot := slotEnd(gridStart.Add(100*time.Millisecond + defaultIdleSleep))
	h.move(slot.Sub(h.clock.Now()) - time.Millisecond)
	select {
	case r := <-h.reports:
		t.Fatalf("room %s woke at its own grid point %s, before its wake slot ends at %s", r.Key.Name, r.Scheduled, slot)
	case <-time.After(200 * time.Millisecond):
	}
	store, release, err := h.s.Pool().Acquire(h.redis.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	_, before := store.TickRoundTrips()
	for name, r := range reports(time.Millisecond) {
		want := slot.Add(phases[name])
		if want.After(slot) {
			want = want.Add(-100 * time.Millisecond)
		}
		if !r.Scheduled.Equal(want) || r.Quota != 14 || !r.Result.Asleep {
			t.Errorf("room %s woke at %s with quota %d, asleep %t; want its grid point %s before the slot's end, one tick's 14, asleep again",
				name, r.Scheduled, r.Quota, r.Result.Asleep, want)
		}
	}
	if _, after := store.TickRoundTrips(); after-before != int64(len(phases)) {
		t.Errorf("%d wake ticks went through the shared round trips, want %d", after-before, len(phases))
	}

	// A slot's timer that fires half a second late makes up for none of the ticks in between.
	next := slotEnd(slot.Add(defaultIdleSleep - 100*time.Millisecond))
	late := next.Add(500 * time.Millisecond)
	for name, r := range reports(late.Sub(h.clock.Now())) {
		want := late.Add(phases[name])
		if want.After(late) {
			want = want.Add(-100 * time.Millisecond)
		}
		if !r.Scheduled.Equal(want) || r.Quota != 14 {
			t.Errorf("room %s woke late at %s with quota %d; want the tick at %s with one tick's 14", name, r.Scheduled, r.Quota, want)
		}
	}
}

// TestASleepEndsOnItsGridWhenTheScheduleClosesInTheSlot: a room whose schedule closes before the
// wake slot its sleep reaches into ends would keep a budget past the closing; it wakes at its own
// grid point instead.
func TestASleepEndsOnItsGridWhenTheScheduleClosesInTheSlot(t *testing.T) {
	// At this phase the room's grid points fall 63 ms before the wake slots end.
	h := newHarness(t, func(s *Scheduler) {
		s.gridPhase = func(types.NamespacedName, time.Duration) time.Duration { return 37 * time.Millisecond }
	})
	closesAt := gridStart.Add(defaultIdleSleep + 90*time.Millisecond)
	cfg := h.queue("closing", builder.Queue("", "").Schedule(time.Time{}, gridStart.Add(-time.Minute), closesAt))
	cfg.DrawSeed = []byte("the seed of the closing test....")
	h.s.Ensure(cfg)
	asleep := h.mustStep(37 * time.Millisecond)
	if !asleep.Result.Asleep {
		t.Fatalf("the room with nobody waiting stayed awake: %+v", asleep)
	}
	want := asleep.Scheduled.Add(defaultIdleSleep)
	if !slotEnd(want).After(want) || closesAt.Before(want) || !closesAt.Before(slotEnd(want)) {
		t.Fatalf("the room fell asleep at %s: its sleep ends at %s, its slot at %s, not around the closing at %s", asleep.Scheduled, want, slotEnd(want), closesAt)
	}
	for range int(defaultIdleSleep/(100*time.Millisecond)) + 5 {
		r, ok := h.step(100 * time.Millisecond)
		if !ok {
			continue
		}
		if !r.Scheduled.Equal(want) {
			t.Fatalf("the room closing at %s woke at %s; want its grid point %s, not the end of the slot", closesAt, r.Scheduled, want)
		}
		return
	}
	t.Fatal("the room did not wake")
}
