package scheduler

import (
	"time"
)

// sleepFor is how long the room may sleep after the tick at latest: the scheduler's idle sleep (an
// Adaptive room's is shorter) in whole ticks, ending no later than the grid point at which the
// schedule closes the room; 0 when that is less than two ticks.
func (r *runner) sleepFor(cfg *Room, tick time.Duration, latest time.Time) time.Duration {
	d := r.s.idleSleep
	if adaptive(cfg) {
		d = min(d, adaptiveIdleSleep)
	}
	if sc := cfg.Schedule; sc != nil && !sc.ClosesAt.IsZero() && sc.ClosesAt.After(latest) {
		d = min(d, sc.ClosesAt.Sub(latest))
	}
	if edge := cfg.nextEdge(latest); !edge.IsZero() {
		// An event's edge changes the plan: the room is awake for the tick that runs the new one.
		d = min(d, edge.Sub(latest))
	}
	if n := d / tick; n >= 2 {
		return n * tick
	}
	return 0
}

// wakeUp is when a room that sleeps after the tick at latest wakes.
type wakeUp struct {
	// at is where its timer fires: the end of a wake slot; zero when it wakes at its grid point
	// next.
	at time.Time
	// next is the room's last grid point at or before at: the tick that wakes it.
	next time.Time
	// budget is how long its budget for visitors let in at once lasts: to its first grid point at
	// or after at, so that no visitor meets a room out of budget before the tick that renews it.
	budget time.Duration
}

// wakeTogether places the end of a sleep of sleepFor after latest on the scheduler's wake slot:
// the first multiple of the slot at or after it, where the rooms whose sleeps end in the same slot
// wake too and share their round trips to Redis (queue.TickTogether). Without a slot, or when the
// budget would last past the moment the schedule closes the room, the room wakes at its own grid
// point.
func (r *runner) wakeTogether(cfg *Room, tick time.Duration, latest time.Time, sleepFor time.Duration) wakeUp {
	end := latest.Add(sleepFor)
	own := wakeUp{next: end, budget: sleepFor}
	slot := r.s.wakeSlot
	if slot <= 0 {
		return own
	}
	at := time.Unix(0, (end.UnixNano()+int64(slot)-1)/int64(slot)*int64(slot))
	first := r.nextGridPoint(at.Add(-1), tick) // the first grid point at or after at
	if sc := cfg.Schedule; sc != nil && !sc.ClosesAt.IsZero() && first.After(sc.ClosesAt) {
		return own
	}
	if edge := cfg.nextEdge(latest); !edge.IsZero() && first.After(edge) {
		return own
	}
	next := first
	if first.After(at) {
		next = first.Add(-tick)
	}
	return wakeUp{at: at, next: next, budget: first.Sub(latest)}
}
