package controllers

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/internal/settings"
)

// defaultGatewayCheckGrace is how long visitors may be admitted without a gateway check before
// GatewayChecking turns False: three of the replicas' report intervals, so that the first checks of
// a room that just opened have been reported (replica.ReportInterval, in admission/replica).
const defaultGatewayCheckGrace = 30 * time.Second

func (r *WaitingQueueReconciler) gatewayCheckGrace() time.Duration {
	if r.GatewayCheckGrace > 0 {
		return r.GatewayCheckGrace
	}
	return defaultGatewayCheckGrace
}

// setGatewayChecking reports, for a room the gateway enforces, whether any gateway asks the check:
// a gateway that lost its auth_request or ForwardAuth forwards everyone, and looks from herdgate's
// side like a room nobody visits, except that visitors still enter through /.herdgate/.
func (r *WaitingQueueReconciler) setGatewayChecking(wq *herdgatev1alpha1.WaitingQueue, s *settings.Settings, snap *scheduler.Snapshot) {
	const checking = herdgatev1alpha1.ConditionGatewayChecking
	if s.Enforcement != herdgatev1alpha1.EnforcementGateway {
		wq.Status.GatewayChecksPerSecond = ""
		meta.RemoveStatusCondition(&wq.Status.Conditions, checking)
		return
	}
	if snap == nil || !snap.HaveStats {
		if meta.FindStatusCondition(wq.Status.Conditions, checking) == nil {
			r.setCondition(wq, checking, metav1.ConditionUnknown, herdgatev1alpha1.ReasonSchedulerPending, "the scheduler has not read the proxies' reports yet")
		}
		return
	}
	checks := scheduler.ChecksPerSecond(snap.Proxies)
	wq.Status.GatewayChecksPerSecond = readable(strconv.FormatFloat(checks, 'f', -1, 64))
	admitted, _ := strconv.ParseFloat(snap.AdmittedPerSecond, 64)
	switch {
	case len(snap.Proxies) == 0:
		r.setCondition(wq, checking, metav1.ConditionUnknown, herdgatev1alpha1.ReasonNoProxyReports,
			"no proxy replica reported lately, so nobody can tell whether a gateway asks the check")
	case checks > 0:
		r.setCondition(wq, checking, metav1.ConditionTrue, herdgatev1alpha1.ReasonChecking,
			fmt.Sprintf("the gateways ask the check %s times a second, over %d proxy replicas", wq.Status.GatewayChecksPerSecond, len(snap.Proxies)))
	case s.PassFormat == herdgatev1alpha1.PassFormatJWT:
		r.setCondition(wq, checking, metav1.ConditionUnknown, herdgatev1alpha1.ReasonJWTPasses,
			"no gateway asks the check, and the passes are JWTs a gateway may verify without asking: make sure it does (docs/guides/gateways.md)")
	case admitted <= 0 && meta.IsStatusConditionTrue(wq.Status.Conditions, checking):
		// Idle after a busy spell the gateways asked about: what was seen last still holds, and
		// visitors admitted without a check turn it Unknown, then False, as ever.
		r.setCondition(wq, checking, metav1.ConditionTrue, herdgatev1alpha1.ReasonChecking,
			"the gateways asked the check while visitors were last admitted; nobody was admitted since")
	case admitted <= 0:
		r.setCondition(wq, checking, metav1.ConditionUnknown, herdgatev1alpha1.ReasonNoVisitors,
			"nobody was admitted lately and no gateway asked the check: nothing tells yet whether the gateway enforces the room")
	default:
		r.setNoChecks(wq, snap.AdmittedPerSecond)
	}
}

// setNoChecks turns GatewayChecking False once visitors have been admitted without a check for
// gatewayCheckGrace; until then it is Unknown (AwaitingChecks), from when the wait began.
func (r *WaitingQueueReconciler) setNoChecks(wq *herdgatev1alpha1.WaitingQueue, admitted string) {
	const checking = herdgatev1alpha1.ConditionGatewayChecking
	c := meta.FindStatusCondition(wq.Status.Conditions, checking)
	switch {
	case c != nil && c.Reason == herdgatev1alpha1.ReasonNoChecks,
		c != nil && c.Reason == herdgatev1alpha1.ReasonAwaitingChecks && r.now().Sub(c.LastTransitionTime.Time) >= r.gatewayCheckGrace():
		r.setCondition(wq, checking, metav1.ConditionFalse, herdgatev1alpha1.ReasonNoChecks,
			fmt.Sprintf("visitors are admitted (%s a second) but no gateway asked the check for %s: a gateway without its auth_request or ForwardAuth "+
				"lets everyone reach the workload (docs/runbooks/HerdgateGatewayNotChecking.md)", admitted, r.gatewayCheckGrace()))
	case c != nil && c.Reason == herdgatev1alpha1.ReasonAwaitingChecks:
		// Still waiting: the message keeps the figure, the transition time keeps when it began.
		r.setCondition(wq, checking, metav1.ConditionUnknown, herdgatev1alpha1.ReasonAwaitingChecks, r.awaitingChecks(admitted))
	default:
		// A new wait: SetStatusCondition keeps the transition time of an Unknown condition.
		meta.RemoveStatusCondition(&wq.Status.Conditions, checking)
		meta.SetStatusCondition(&wq.Status.Conditions, metav1.Condition{Type: checking, Status: metav1.ConditionUnknown,
			Reason: herdgatev1alpha1.ReasonAwaitingChecks, Message: r.awaitingChecks(admitted), ObservedGeneration: wq.Generation,
			LastTransitionTime: metav1.NewTime(r.now())})
	}
}

func (r *WaitingQueueReconciler) awaitingChecks(admitted string) string {
	return fmt.Sprintf("visitors are admitted (%s a second) and no gateway asked the check yet; False after %s without one", admitted, r.gatewayCheckGrace())
}

// gatewayCheckDue is how long until GatewayChecking may turn False, or 0 when it is not waiting.
func (r *WaitingQueueReconciler) gatewayCheckDue(wq *herdgatev1alpha1.WaitingQueue) time.Duration {
	c := meta.FindStatusCondition(wq.Status.Conditions, herdgatev1alpha1.ConditionGatewayChecking)
	if c == nil || c.Reason != herdgatev1alpha1.ReasonAwaitingChecks {
		return 0
	}
	return max(time.Second, c.LastTransitionTime.Add(r.gatewayCheckGrace()).Sub(r.now())+time.Second)
}

// recordGatewayChecking records a Warning when GatewayChecking turns False, and a Normal Event when
// the checks come back.
func (r *WaitingQueueReconciler) recordGatewayChecking(before, wq *herdgatev1alpha1.WaitingQueue) {
	was := meta.FindStatusCondition(before.Status.Conditions, herdgatev1alpha1.ConditionGatewayChecking)
	now := meta.FindStatusCondition(wq.Status.Conditions, herdgatev1alpha1.ConditionGatewayChecking)
	switch {
	case now == nil || (was != nil && was.Status == now.Status):
	case now.Status == metav1.ConditionFalse:
		r.Recorder.Eventf(wq, nil, corev1.EventTypeWarning, now.Reason, "GatewayCheck", "%s", now.Message)
	case now.Status == metav1.ConditionTrue && was != nil && was.Status == metav1.ConditionFalse:
		r.Recorder.Eventf(wq, nil, corev1.EventTypeNormal, now.Reason, "GatewayCheck", "The gateways ask the check again")
	}
}
