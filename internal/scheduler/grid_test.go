package scheduler

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/herdgate/herdgate/test/builder"
)

func TestGrid(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		t     time.Time
		tick  time.Duration
		phase time.Duration
		want  time.Time
	}{
		{gridStart, 100 * ms, 0, gridStart.Add(100 * ms)},
		{gridStart.Add(30 * ms), 100 * ms, 0, gridStart.Add(100 * ms)},
		{gridStart.Add(100 * ms), 200 * ms, 0, gridStart.Add(200 * ms)},
		{gridStart.Add(time.Nanosecond), time.Second, 0, gridStart.Add(time.Second)},
		{gridStart, 100 * ms, 37 * ms, gridStart.Add(37 * ms)},
		{gridStart.Add(37 * ms), 100 * ms, 37 * ms, gridStart.Add(137 * ms)},
		{gridStart.Add(36 * ms), 100 * ms, 37 * ms, gridStart.Add(37 * ms)},
		{gridStart.Add(-2 * ms), 100 * ms, 99 * ms, gridStart.Add(-ms)},
		{gridStart.Add(-time.Nanosecond), 100 * ms, 99 * ms, gridStart.Add(99 * ms)},
	} {
		if got := nextGridPoint(tc.t, tc.tick, tc.phase); !got.Equal(tc.want) {
			t.Errorf("nextGridPoint(%s, %s, %s) = %s, want %s", tc.t, tc.tick, tc.phase, got, tc.want)
		}
	}
}

// TestRoomsSpreadTheirTicksOverTheTick: each room's grid is shifted by a phase of its own, so that
// rooms with one tick length do not all call Redis at the same instant; every room keeps its grid and
// its exact quota, and its phase is the same on every manager.
func TestRoomsSpreadTheirTicksOverTheTick(t *testing.T) {
	const tick = 100 * time.Millisecond
	phases := map[time.Duration]int{}
	for i := range 1000 {
		key := types.NamespacedName{Namespace: "shop", Name: fmt.Sprintf("drop-%d", i)}
		p := GridPhase(key, tick)
		if p < 0 || p >= tick || p%time.Millisecond != 0 {
			t.Fatalf("GridPhase(%s, %s) = %s, want whole milliseconds in [0, %s)", key, tick, p, tick)
		}
		if again := GridPhase(key, tick); again != p {
			t.Fatalf("GridPhase(%s) = %s, then %s", key, p, again)
		}
		phases[p]++
	}
	// 1,000 rooms over 100 phases: no phase should hold more than a few times its share of 10.
	for p, n := range phases {
		if n > 30 {
			t.Errorf("%d of 1,000 rooms tick at phase %s", n, p)
		}
	}
	if len(phases) < 90 {
		t.Errorf("1,000 rooms use %d of the 100 phases of a 100 ms tick", len(phases))
	}
	if p := GridPhase(types.NamespacedName{Name: "x"}, time.Millisecond); p != 0 {
		t.Errorf("a 1 ms tick has phase %s, want 0", p)
	}

	// A room off the aligned grid ticks at its phase, tick after tick, with its quota.
	h := newHarness(t, func(s *Scheduler) { s.gridPhase = GridPhase })
	h.fill("spread", 1000)
	h.s.Ensure(h.queue("spread", builder.Queue("", "")))
	phase := GridPhase(types.NamespacedName{Namespace: "test", Name: "spread"}, tick)
	if phase == 0 {
		t.Fatal("pick a room name whose phase is not 0, or this test shows nothing")
	}
	admitted := 0
	for i := range 20 {
		step := tick
		if i == 0 {
			step = phase // the first point of the room's grid after the clock's start
		}
		r := h.mustStep(step)
		if want := gridStart.Add(phase + time.Duration(i)*tick); !r.Scheduled.Equal(want) {
			t.Fatalf("tick %d scheduled at %s, want %s (phase %s)", i, r.Scheduled, want, phase)
		}
		admitted += len(r.Result.Admitted)
	}
	if admitted != 20*14 {
		t.Fatalf("20 ticks admitted %d, want %d", admitted, 20*14)
	}
}
