package scheduler

import (
	"context"
	"math/big"
	"slices"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
)

// The room's metered lanes (spec.lanes) as the scheduler runs them: each tick shares its batch by
// the lanes' percentages (queue.AdmitRequest.Lanes), a lane the spec drops has its visitors moved to
// the main queue, and each lane's depth and admissions per second go to status and the metrics.

// LaneSnapshot is one lane as the scheduler last read it; the main queue is named queue.MainLane.
type LaneSnapshot struct {
	Name  string
	Depth int64
	// AdmittedPerSecond is the lane's admission rate over the last 10 s, as a decimal string.
	AdmittedPerSecond string
}

// laneShares are cfg's lanes as the engine takes them.
func laneShares(cfg *Room) []queue.LaneShare {
	if len(cfg.Lanes) == 0 {
		return nil
	}
	out := make([]queue.LaneShare, len(cfg.Lanes))
	for i, l := range cfg.Lanes {
		out[i] = queue.LaneShare{Name: l.Name, Percent: l.Percent}
	}
	return out
}

// applyLanes gives the room's engine the spec's lanes, and, when they changed (and once after the
// runner started), moves the visitors of the lanes it dropped to the main queue. A failure leaves it
// for the next tick.
func (r *runner) applyLanes(ctx context.Context, st *tickState, cfg *Room) {
	names := cfg.LaneNames()
	if st.lanesApplied && slices.Equal(st.lanes, names) {
		return
	}
	if err := st.q.SetLanes(names); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Setting the room's lanes", "waitingqueue", r.key.String())
		return
	}
	retired, err := st.q.ReconcileLanes(ctx, names)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Reconciling the room's lanes in Redis; trying again at the next tick", "waitingqueue", r.key.String())
		return
	}
	if len(retired) > 0 {
		ctrl.LoggerFrom(ctx).Info("Moved the visitors of lanes the spec dropped to the main queue", "waitingqueue", r.key.String(), "lanes", retired)
		for _, l := range retired {
			st.metrics.forgetLane(l)
		}
	}
	st.lanes, st.lanesApplied = names, true
}

// laneSnapshots are the lanes' figures from stats, their rates over the samples' window since first.
func (st *tickState) laneSnapshots(stats queue.Stats, first rateSample, now time.Time) []LaneSnapshot {
	if len(stats.Lanes) == 0 {
		return nil
	}
	out := make([]LaneSnapshot, len(stats.Lanes))
	for i, l := range stats.Lanes {
		rate := "0"
		if since, ok := first.lanes[l.Name]; ok && now.Sub(first.at) > 0 {
			rate = capacity.DecimalString(new(big.Rat).SetFrac64((l.AdmittedTotal-since)*int64(time.Second), int64(now.Sub(first.at))))
		}
		out[i] = LaneSnapshot{Name: l.Name, Depth: l.Depth, AdmittedPerSecond: rate}
		st.metrics.lane(l.Name, l.Depth, l.AdmittedTotal)
	}
	return out
}

// laneTotals are the lanes' admission totals of stats, by lane, for a rate sample.
func laneTotals(stats queue.Stats) map[string]int64 {
	if len(stats.Lanes) == 0 {
		return nil
	}
	out := make(map[string]int64, len(stats.Lanes))
	for _, l := range stats.Lanes {
		out[l.Name] = l.AdmittedTotal
	}
	return out
}
