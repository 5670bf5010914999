package scheduler

import (
	"reflect"
	"time"

	"github.com/herdgate/herdgate/internal/queue"
)

// liveNotifyInterval is how often, at most, a room tells the reconciler of a snapshot whose changes
// are only live figures (depth, active visitors, rates, what the polls and the workload cost). The
// reconciler writes those at most every 10 s anyway (its liveStatusInterval), and each reconcile
// reads the room's Secret from the API server: told at every stats read, a hundred busy rooms cost
// it fifty reconciles a second that wrote nothing (docs/architecture.md, "What the manager writes").
const liveNotifyInterval = 10 * time.Second

// notify tells the reconciler that the snapshot changed, at most once per statsInterval (unless the
// room just fell asleep: it ticks again only when it wakes), and at most once per
// liveNotifyInterval when only live figures changed. A read that finds the figures as they were is
// no change.
func (r *runner) notify(st *tickState, now time.Time) {
	if r.s.notify == nil {
		return
	}
	snap := r.snapshot()
	// When the last tick ran and when the figures were read move with the clock alone: news is a
	// figure or a state that changed, and a room at rest tells nothing
	// (docs/architecture.md, "What the manager writes").
	snap.LastTick, snap.StatsAt = time.Time{}, time.Time{}
	drained := st.drainedNow
	st.drainedNow = false
	if reflect.DeepEqual(snap, st.notified) || (now.Before(st.notifyAt) && !drained) {
		return
	}
	if now.Before(st.notifiedAt.Add(liveNotifyInterval)) && reflect.DeepEqual(withoutLiveFigures(snap), withoutLiveFigures(st.notified)) {
		return
	}
	if r.s.notify(r.key) {
		st.notified, st.notifyAt, st.notifiedAt = snap, now.Add(statsInterval), now
	}
}

// withoutLiveFigures is s without the figures that change with every stats read and reach the
// status only as figures and messages: what a condition's status or reason follows stays (whether
// the poll budget holds, the adaptive controller's reason, the proxies' generations).
func withoutLiveFigures(s Snapshot) Snapshot {
	// Whether anybody waits, holds a pass or sits in the pre-queue is told at once: a room that
	// drains or fills shows it within a tick, not a live interval later.
	s.Depth, s.Active, s.PreQueued = min(s.Depth, 1), min(s.Active, 1), min(s.PreQueued, 1)
	s.AdmittedPerSecond, s.ReleasedPerSecond = "", ""
	if s.LastBusy != nil {
		// A new spell is told at once; its figures, and whether visitors still wait in it, are live
		// (a room of a steady trickle empties and fills its queue at every other tick).
		s.LastBusy = &BusySpell{Start: s.LastBusy.Start}
	}
	s.Polling = Polling{Fits: s.Polling.Fits}
	if s.Workload != nil {
		s.Workload = &Workload{Reason: s.Workload.Reason}
	}
	if len(s.Proxies) > 0 {
		// Whether a gateway asks at all is GatewayChecking's status; how often is a figure.
		proxies := make([]queue.ProxyReport, len(s.Proxies))
		for i, p := range s.Proxies {
			proxies[i] = p
			if p.ChecksPerSecond > 0 {
				proxies[i].ChecksPerSecond = 1
			}
		}
		s.Proxies = proxies
	}
	if len(s.Lanes) > 0 {
		lanes := make([]LaneSnapshot, len(s.Lanes))
		for i, l := range s.Lanes {
			lanes[i] = LaneSnapshot{Name: l.Name, Depth: min(l.Depth, 1)}
		}
		s.Lanes = lanes
	}
	return s
}
