package controllers

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/internal/settings"
)

// setPolling reports what the waiting visitors' polls cost under spec.polling.budget, and whether the
// budget holds at the queue's depth.
func (r *WaitingQueueReconciler) setPolling(wq *herdgatev1alpha1.WaitingQueue, s *settings.Settings, snap *scheduler.Snapshot) {
	if snap == nil || !snap.HaveStats {
		return
	}
	p := snap.Polling
	wq.Status.Polling = &herdgatev1alpha1.PollingStatus{FarInterval: &metav1.Duration{Duration: p.FarInterval},
		ExpectedPollsPerSecond: decimal(p.Expected), SupportedDepth: p.SupportedDepth}
	const within = herdgatev1alpha1.ConditionWithinPollBudget
	if p.Fits {
		r.setCondition(wq, within, metav1.ConditionTrue, herdgatev1alpha1.ReasonWithinBudget,
			fmt.Sprintf("%d waiting poll about %s times a second of a budget of %s; the budget holds up to %d waiting with abandonAfter %s",
				snap.Depth, decimal(p.Expected), decimal(p.Budget), p.SupportedDepth, s.AbandonAfter))
		return
	}
	r.setCondition(wq, within, metav1.ConditionFalse, herdgatev1alpha1.ReasonDepthBeyondBudget,
		fmt.Sprintf("%d waiting poll about %s times a second, above the budget of %s, which holds up to %d waiting with abandonAfter %s: "+
			"raise spec.polling.budget or spec.abandonAfter", snap.Depth, decimal(p.Expected), decimal(p.Budget), p.SupportedDepth, s.AbandonAfter))
}

// setWorkload reports what the proxies measured and, for an Adaptive capacity, the Adapted
// condition: why the rate differs from the plan.
func (r *WaitingQueueReconciler) setWorkload(wq *herdgatev1alpha1.WaitingQueue, s *settings.Settings, snap *scheduler.Snapshot) {
	var w *scheduler.Workload
	if snap != nil {
		w = snap.Workload
	}
	wq.Status.Workload = nil
	if w != nil {
		out := &herdgatev1alpha1.WorkloadStatus{ReportingReplicas: int32(w.Reporting), ErrorPercent: w.ErrorPercent, NoShowPercent: w.NoShowPercent,
			InFlight: decimal(w.InFlight), TargetInFlight: decimal(w.TargetInFlight), AdmissionsPerSecond: w.AdmissionsPerSecond, Reason: w.Reason}
		if w.LatencyP50 > 0 {
			out.LatencyP50 = &metav1.Duration{Duration: readableDuration(w.LatencyP50)}
			out.LatencyP95 = &metav1.Duration{Duration: readableDuration(w.LatencyP95)}
		}
		if w.EstimatesJudged > 0 {
			out.WaitEstimatesJudged, out.WaitEstimateErrorP90Percent = w.EstimatesJudged, errorPercent(w.EstimateErrorP90)
		}
		wq.Status.Workload = out
	}
	if s.Adaptive == nil {
		meta.RemoveStatusCondition(&wq.Status.Conditions, herdgatev1alpha1.ConditionAdapted)
		return
	}
	const adapted = herdgatev1alpha1.ConditionAdapted
	switch {
	case !s.Admits():
		r.setCondition(wq, adapted, metav1.ConditionFalse, herdgatev1alpha1.ReasonNotAdmitting, "nobody is admitted in this mode, so no rate is adapted")
	case w == nil || w.Reason == "":
		r.setCondition(wq, adapted, metav1.ConditionUnknown, herdgatev1alpha1.ReasonSchedulerPending, "the scheduler has not measured the workload yet")
	case w.Reason == capacity.ReasonNoReports:
		r.setCondition(wq, adapted, metav1.ConditionFalse, w.Reason,
			fmt.Sprintf("no proxy replica reports what it measures: admitting at the plan's %s per second", s.Effective.RateString()))
	case w.Reason == capacity.ReasonDeclared:
		r.setCondition(wq, adapted, metav1.ConditionFalse, w.Reason,
			fmt.Sprintf("the workload takes the plan: admitting %s per second; %s", w.AdmissionsPerSecond, measured(w)))
	default:
		r.setCondition(wq, adapted, metav1.ConditionTrue, w.Reason,
			fmt.Sprintf("admitting %s per second where the plan says %s: %s", w.AdmissionsPerSecond, s.Effective.RateString(), measured(w)))
	}
}

// measured says what the replicas measured, for a condition's message.
func measured(w *scheduler.Workload) string {
	latency := "no protected request answered lately"
	if w.LatencyP50 > 0 {
		latency = fmt.Sprintf("upstream latency p50 %s, p95 %s", w.LatencyP50.Round(time.Millisecond), w.LatencyP95.Round(time.Millisecond))
	}
	return fmt.Sprintf("%s, %s in flight of a target %s, %d%% errors, %d%% no-shows, over %d proxy replicas",
		latency, decimal(w.InFlight), decimal(w.TargetInFlight), w.ErrorPercent, w.NoShowPercent, w.Reporting)
}

// decimal writes a measured number to a tenth.
func decimal(f float64) string { return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64) }

// readable rounds a measured rate, a decimal string, to what a person reads in a column: three
// significant digits, and no decimals above 100 ("139", "48.9", "0.0123"). The metrics keep the
// measurement whole; the status shows it the way kubectl get does. A string that is not a number is
// left as it is.
func readable(rate string) string {
	f, err := strconv.ParseFloat(rate, 64)
	if err != nil || f == 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return rate
	}
	decimals := max(0, 2-int(math.Floor(math.Log10(math.Abs(f)))))
	unit := math.Pow(10, float64(decimals))
	return strconv.FormatFloat(math.Round(f*unit)/unit, 'f', -1, 64)
}

// readableDuration rounds a measured duration to three significant digits, at least to the
// microsecond, so that a column shows 252ms rather than 252.354ms.
func readableDuration(d time.Duration) time.Duration {
	unit := time.Microsecond
	for limit := time.Millisecond; limit <= d && unit < time.Hour; limit *= 10 {
		unit *= 10
	}
	return d.Round(unit)
}

// errorPercent is a relative error's histogram bound in percent, as status.workload shows it:
// ">200" beyond the last bound.
func errorPercent(ratio float64) string {
	if math.IsInf(ratio, 1) {
		return fmt.Sprintf(">%d", int(math.Round(100*queue.EstimateErrorBounds[len(queue.EstimateErrorBounds)-1])))
	}
	return fmt.Sprintf("%d", int(math.Round(100*ratio)))
}
