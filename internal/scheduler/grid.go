package scheduler

import (
	"context"
	"hash/fnv"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// gridTick is one tick's place on the grid: what the clock and the grid say when the timer fires.
type gridTick struct {
	cfg       *Room
	now       time.Time
	scheduled time.Time // the grid point the timer was set for
	latest    time.Time // the last grid point that has passed: the tick's id
	missed    int64     // grid points between scheduled and latest, made up for by this tick
	// together: the tick wakes a sleeping room at the end of its wake slot, with the other rooms
	// whose sleeps end there (wakeTogether).
	together bool
}

// waitForGridPoint sleeps until the next grid point; false when ctx ended first. A sleeping room is
// woken early by a visitor who has to wait, or by new settings: it then ticks at the next grid point.
func (r *runner) waitForGridPoint(ctx context.Context, st *tickState) bool {
	for {
		at := st.next
		if st.asleep && !st.wakeAt.IsZero() {
			at = st.wakeAt
		}
		timer := r.s.clock.NewTimer(at.Sub(r.s.clock.Now()))
		var woken, changed <-chan struct{}
		if st.asleep {
			woken, changed = st.wakes, r.changed
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C():
			return true
		case <-woken:
		case <-changed:
		}
		timer.Stop()
		st.asleep, st.wakeAt = false, time.Time{}
		st.next = r.nextGridPoint(r.s.clock.Now(), st.tick)
	}
}

// onGrid places the tick that is due on the grid. Ticks missed while this goroutine was late are
// made up for by this one (up to a bound), so a late tick shifts none of the ones after it and the
// long-run rate stays exact. A new tick length applies from this tick on: its quota now, its cadence
// from the next grid point; ticks missed on the old cadence are not made up with the new quota.
func (r *runner) onGrid(st *tickState) gridTick {
	t := gridTick{cfg: r.cfg.Load(), now: r.s.clock.Now(), scheduled: st.next, together: st.asleep && !st.wakeAt.IsZero()}
	st.wakeAt = time.Time{}
	lag := max(0, t.now.Sub(t.scheduled))
	t.missed = int64(lag / st.tick)
	t.latest = t.scheduled.Add(time.Duration(t.missed) * st.tick)
	// The event in force at the grid point runs this tick: the room switches at the edges of its
	// events on its grid.
	t.cfg = t.cfg.at(t.latest)
	if t.together {
		// A room that slept keeps no time for anyone: nobody waited, its slot ends up to a tick after
		// its grid point, and the ticks it slept through are not made up for.
		t.missed = 0
	} else {
		// From the grid point the timer was set for: a tick that ran whole ticks late shows it.
		st.metrics.tickLag.Observe(lag.Seconds())
	}
	if tick := t.cfg.Effective.Tick(); tick != st.tick {
		st.tick = tick
		st.next = r.nextGridPoint(t.latest, st.tick)
		t.missed = 0
	} else {
		st.next = t.latest.Add(st.tick)
	}
	return t
}

// resume makes a runner that just started (on a new leader, after a restart) carry on from the last
// tick any scheduler ran on the queue: the grid points missed in between are made up for, within the
// same bound as a late tick's, so that a failover costs no admissions beyond that bound.
func (r *runner) resume(ctx context.Context, st *tickState, t *gridTick) error {
	last, err := st.q.LastTick(ctx)
	if err != nil {
		return err
	}
	st.resumed = true
	lastAt := time.UnixMilli(last)
	if last <= 0 || !lastAt.Before(t.latest) {
		return nil
	}
	// Grid points strictly between the last tick and this one.
	t.missed = max(t.missed, int64(t.latest.Sub(lastAt)/st.tick)-1)
	return nil
}

// nextGridPoint is the first point of the room's grid after t: the grid of its tick, shifted by
// its phase (GridPhase).
func (r *runner) nextGridPoint(t time.Time, tick time.Duration) time.Time {
	return nextGridPoint(t, tick, r.s.gridPhase(r.key, tick))
}

// GridPhase is where in each tick a room's grid points fall: a whole number of milliseconds below
// the tick, the same for the room on every manager. Rooms with one tick length are spread over it
// rather than all calling Redis at the same instant, which would make the last of a thousand rooms
// wait for the other 999 on every tick (docs/performance.md, "A thousand rooms on one manager").
func GridPhase(key types.NamespacedName, tick time.Duration) time.Duration {
	ms := uint64(tick / time.Millisecond)
	if ms < 2 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key.Namespace + "/" + key.Name))
	return time.Duration(h.Sum64()%ms) * time.Millisecond
}

// nextGridPoint is the first multiple of tick (counted from the Unix epoch), plus phase, after t.
// Every manager computes the same grid, so ticks of two schedulers carry the same tick id.
func nextGridPoint(t time.Time, tick, phase time.Duration) time.Time {
	ns := t.UnixNano() - int64(phase)
	return time.Unix(0, (ns/int64(tick)+1)*int64(tick)+int64(phase))
}
