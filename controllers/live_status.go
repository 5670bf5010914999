package controllers

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// liveStatusInterval is how often, at most, the manager writes a status whose only changes are live
// figures: a busy room's depth, active visitors, rates, measured workload and the numbers in condition
// messages change with every stats read (every 2 s), and writing each would cost the API server a
// write per busy room every 2 s (docs/architecture.md, "What the manager writes"). Any other change
// (a condition's status or reason, the plan, the phase, the generation) is written at once.
const liveStatusInterval = 10 * time.Second

// holdLiveStatus keeps the status as written when it differs from wq's only in live figures and the
// last write is more recent than liveStatusInterval; it returns how long until the figures are due,
// or 0 when wq's status is to be written as it is.
func (r *WaitingQueueReconciler) holdLiveStatus(before, wq *herdgatev1alpha1.WaitingQueue) time.Duration {
	if equality.Semantic.DeepEqual(before.Status, wq.Status) || !equality.Semantic.DeepEqual(withoutLiveFigures(before.Status), withoutLiveFigures(wq.Status)) {
		return 0
	}
	last, ok := r.liveWritten.Load(wq.UID)
	if !ok {
		return 0
	}
	due := last.(time.Time).Add(liveStatusInterval).Sub(r.now())
	if due <= 0 {
		return 0
	}
	wq.Status = *before.Status.DeepCopy()
	return due
}

// dateLiveFigures keeps the liveFiguresTime written last when the figures are the ones written with
// it: a read that finds nothing new is no change, and an idle room's status is never written for
// the clock alone (docs/architecture.md, "What the manager writes").
func dateLiveFigures(before, wq *herdgatev1alpha1.WaitingQueue) {
	if before.Status.LiveFiguresTime != nil && equality.Semantic.DeepEqual(liveFigures(before.Status), liveFigures(wq.Status)) {
		wq.Status.LiveFiguresTime = before.Status.LiveFiguresTime.DeepCopy()
	}
}

// liveFigures is the part of st that liveFiguresTime dates.
func liveFigures(st herdgatev1alpha1.WaitingQueueStatus) herdgatev1alpha1.WaitingQueueStatus {
	return herdgatev1alpha1.WaitingQueueStatus{
		QueueDepth: st.QueueDepth, ActiveVisitors: st.ActiveVisitors, PreQueueDepth: st.PreQueueDepth,
		AdmittedPerSecond: st.AdmittedPerSecond, ReleasedPerSecond: st.ReleasedPerSecond, GatewayChecksPerSecond: st.GatewayChecksPerSecond,
		Polling: st.Polling, Workload: st.Workload, Lanes: st.Lanes, LastBusy: st.LastBusy,
	}
}

// withoutLiveFigures is st without the figures that change with every stats read.
func withoutLiveFigures(st herdgatev1alpha1.WaitingQueueStatus) herdgatev1alpha1.WaitingQueueStatus {
	out := *st.DeepCopy()
	// Whether anybody waits, holds a pass or sits in the pre-queue is written at once: a room that
	// drains or fills shows it within a tick (docs/architecture.md, "What the manager writes").
	out.QueueDepth, out.ActiveVisitors, out.PreQueueDepth, out.LiveFiguresTime = min(out.QueueDepth, 1), min(out.ActiveVisitors, 1), min(out.PreQueueDepth, 1), nil
	out.AdmittedPerSecond, out.ReleasedPerSecond, out.GatewayChecksPerSecond = "", "", ""
	out.Polling, out.Workload = nil, nil
	if out.LastBusy != nil {
		// A new spell is written at once; its figures, and whether visitors still wait in it, are
		// live (a room of a steady trickle empties and fills its queue at every other tick).
		out.LastBusy = &herdgatev1alpha1.BusySpellStatus{Start: out.LastBusy.Start}
	}
	for i := range out.Lanes {
		out.Lanes[i].Depth, out.Lanes[i].AdmittedPerSecond = min(out.Lanes[i].Depth, 1), ""
	}
	for i := range out.Conditions {
		out.Conditions[i].Message = ""
	}
	return out
}
