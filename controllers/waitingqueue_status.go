package controllers

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/draw"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/internal/settings"
)

func snapshotPtr(s scheduler.Snapshot, ok bool) *scheduler.Snapshot {
	if !ok {
		return nil
	}
	return &s
}

// setNotAccepted reports a generation the checks refuse. Only a CRD older than the manager lets one
// through the API server; nothing of it is applied, and the last accepted generation keeps running.
func (r *WaitingQueueReconciler) setNotAccepted(wq *herdgatev1alpha1.WaitingQueue, err error) {
	msg := truncate(err.Error())
	r.setCondition(wq, herdgatev1alpha1.ConditionAccepted, metav1.ConditionFalse, herdgatev1alpha1.ReasonInvalidSpec, msg)
	r.setCondition(wq, herdgatev1alpha1.ConditionProgrammed, metav1.ConditionFalse, herdgatev1alpha1.ReasonNotAccepted,
		fmt.Sprintf("generation %d is not applied; the scheduler and the proxies keep the last accepted one", wq.Generation))
	r.setReady(wq)
}

// setPlanStatus shows the declared plan and the rate ticks run at.
func setPlanStatus(wq *herdgatev1alpha1.WaitingQueue, s *settings.Settings) {
	source := herdgatev1alpha1.PlanDerived
	if s.Plan.Override() {
		source = herdgatev1alpha1.PlanOverride
	}
	p := &herdgatev1alpha1.PlanStatus{
		BatchSize: s.Plan.BatchSize(), AdmissionsPerSecond: s.Plan.RateString(), Source: source,
		EffectiveAdmissionsPerSecond: s.Effective.RateString(),
	}
	if s.Capped {
		limit := s.Effective.BatchSize()
		p.TickLimit = &limit
	}
	wq.Status.Plan = p
}

// refusalOf says what proxy replica p refuses of the generation it reports refused, and what it
// serves meanwhile.
func refusalOf(p queue.ProxyReport) string {
	switch p.Generation {
	case 0:
		return fmt.Sprintf("proxy replica %s cannot apply generation %d and serves no generation of this room yet: %s",
			p.Replica, p.RefusedGeneration, p.Refusal)
	case p.RefusedGeneration:
		// A room of a shared proxy set serves its generation but for a route an older room holds.
		return fmt.Sprintf("proxy replica %s serves generation %d but for what it refuses: %s", p.Replica, p.Generation, p.Refusal)
	}
	return fmt.Sprintf("proxy replica %s cannot apply generation %d and keeps serving generation %d: %s",
		p.Replica, p.RefusedGeneration, p.Generation, p.Refusal)
}

// setProgrammed says whether this generation's objects are applied and every reporting proxy
// replica can apply it.
func (r *WaitingQueueReconciler) setProgrammed(wq *herdgatev1alpha1.WaitingQueue, applyErr error, snap *scheduler.Snapshot) {
	const programmed = herdgatev1alpha1.ConditionProgrammed
	if applyErr != nil {
		reason := herdgatev1alpha1.ReasonApplyFailed
		if sv := (errSecretValue{}); errors.As(applyErr, &sv) {
			reason = sv.reason
		}
		r.setCondition(wq, programmed, metav1.ConditionFalse, reason, truncate(applyErr.Error()))
		return
	}
	if snap == nil {
		r.setCondition(wq, programmed, metav1.ConditionTrue, herdgatev1alpha1.ReasonProgrammed, "the admission proxy's objects are applied")
		return
	}
	var refusals []string
	current := 0
	for _, p := range snap.Proxies {
		switch {
		case p.RefusedGeneration == wq.Generation:
			refusals = append(refusals, refusalOf(p))
		case p.Generation == wq.Generation:
			current++
		}
	}
	if len(refusals) > 0 {
		msg := refusals[0]
		if len(refusals) > 1 {
			msg = fmt.Sprintf("%d of %d proxy replicas refuse generation %d; %s", len(refusals), len(snap.Proxies), wq.Generation, msg)
		}
		r.setCondition(wq, programmed, metav1.ConditionFalse, herdgatev1alpha1.ReasonProxyRefusedConfig, truncate(msg))
		return
	}
	msg := "the admission proxy's objects are applied; no proxy replica has reported yet"
	if len(snap.Proxies) > 0 {
		msg = fmt.Sprintf("the admission proxy's objects are applied; %d of %d reporting proxy replicas serve generation %d",
			current, len(snap.Proxies), wq.Generation)
	}
	r.setCondition(wq, programmed, metav1.ConditionTrue, herdgatev1alpha1.ReasonProgrammed, msg)
}

func truncate(msg string) string {
	if len(msg) <= maxConditionMessage {
		return msg
	}
	return strings.ToValidUTF8(msg[:maxConditionMessage], "") + "…"
}

// observeProxy copies the Deployment's ready replicas into status.proxy and sets ProxyAvailable.
func (r *WaitingQueueReconciler) observeProxy(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue) error {
	deploy := &appsv1.Deployment{}
	name, replicas := wq.ProxyName(), wq.Spec.EffectiveProxyReplicas()
	set := wq.Spec.ProxySet()
	if set != "" {
		name = herdgatev1alpha1.ProxySetName(set)
	}
	if err := r.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: name}, deploy); err != nil {
		return client.IgnoreNotFound(err)
	}
	if (set != "" || wq.Spec.EffectiveProxyAutoscaling() != nil) && deploy.Spec.Replicas != nil {
		replicas = *deploy.Spec.Replicas // the most the set's rooms ask for, or the autoscaler's choice
	}
	wq.Status.Proxy = &herdgatev1alpha1.ProxyStatus{ReadyReplicas: deploy.Status.ReadyReplicas}
	switch {
	case replicas == 0:
		r.setCondition(wq, herdgatev1alpha1.ConditionProxyAvailable, metav1.ConditionFalse, herdgatev1alpha1.ReasonProxyScaledToZero,
			"spec.proxy.replicas is 0: no proxy serves the waiting room")
	case deploy.Status.ReadyReplicas > 0:
		r.setCondition(wq, herdgatev1alpha1.ConditionProxyAvailable, metav1.ConditionTrue, herdgatev1alpha1.ReasonProxyReady,
			fmt.Sprintf("%d of %d proxy pods ready", deploy.Status.ReadyReplicas, replicas))
	default:
		r.setCondition(wq, herdgatev1alpha1.ConditionProxyAvailable, metav1.ConditionFalse, herdgatev1alpha1.ReasonProxyNotReady,
			fmt.Sprintf("0 of %d proxy pods ready", replicas))
	}
	return nil
}

// setStatus fills the observed counters and the RedisAvailable, Admitting and Ready conditions.
func (r *WaitingQueueReconciler) setStatus(wq *herdgatev1alpha1.WaitingQueue, s *settings.Settings, snap *scheduler.Snapshot, configErr error) {
	const redis, admitting = herdgatev1alpha1.ConditionRedisAvailable, herdgatev1alpha1.ConditionAdmitting
	switch {
	case configErr != nil:
		reason := herdgatev1alpha1.ReasonRedisConfigInvalid
		if !errors.As(configErr, new(errRedisConfig)) {
			reason = herdgatev1alpha1.ReasonRedisUnreachable
		}
		r.setCondition(wq, redis, metav1.ConditionFalse, reason, truncate(configErr.Error()))
		r.setCondition(wq, admitting, metav1.ConditionFalse, reason, "no usable Redis")
	case snap == nil || (snap.LastTick.IsZero() && snap.RedisError == ""):
		r.setCondition(wq, redis, metav1.ConditionUnknown, herdgatev1alpha1.ReasonSchedulerPending, "the scheduler has not reached Redis yet")
		r.setCondition(wq, admitting, metav1.ConditionUnknown, herdgatev1alpha1.ReasonSchedulerPending, "the scheduler has not ticked yet")
	case snap.RedisError != "":
		msg := fmt.Sprintf("since %s: %s", snap.RedisErrorSince.UTC().Format(time.RFC3339), snap.RedisError)
		r.setCondition(wq, redis, metav1.ConditionFalse, herdgatev1alpha1.ReasonRedisUnreachable, truncate(msg))
		r.setCondition(wq, admitting, metav1.ConditionFalse, herdgatev1alpha1.ReasonRedisUnreachable, truncate("Redis is unreachable: "+snap.RedisError))
	default:
		r.setCondition(wq, redis, metav1.ConditionTrue, herdgatev1alpha1.ReasonRedisReachable, "the last tick reached Redis")
		switch {
		case s.Mode == herdgatev1alpha1.ModeClosed:
			r.setCondition(wq, admitting, metav1.ConditionFalse, herdgatev1alpha1.ReasonClosed, "spec.mode is Closed: visitors keep their places but nobody is admitted")
		case s.Mode == herdgatev1alpha1.ModePassthrough:
			r.setCondition(wq, admitting, metav1.ConditionFalse, herdgatev1alpha1.ReasonPassthrough, "spec.mode is Passthrough: protected routes need no pass, so nobody needs admitting")
		case s.Suspended:
			r.setCondition(wq, admitting, metav1.ConditionFalse, herdgatev1alpha1.ReasonSuspended, "spec.suspend is true: visitors queue but nobody is admitted")
		case s.Capped:
			r.setCondition(wq, admitting, metav1.ConditionTrue, herdgatev1alpha1.ReasonTickLimited,
				fmt.Sprintf("the plan asks for %s per second, %d per %s tick, but one tick admits at most %d (a bound on each tick's work in Redis): admitting %s per second; a shorter spec.tick admits more",
					s.Plan.RateString(), s.Plan.BatchSize(), s.Plan.Tick(), s.Effective.BatchSize(), s.Effective.RateString()))
		default:
			r.setCondition(wq, admitting, metav1.ConditionTrue, herdgatev1alpha1.ReasonSchedulerRunning,
				fmt.Sprintf("admitting %s per second, %d per %s tick", s.Plan.RateString(), s.Plan.BatchSize(), s.Plan.Tick()))
		}
	}
	if snap != nil && snap.HaveStats {
		wq.Status.QueueDepth, wq.Status.ActiveVisitors, wq.Status.AdmittedPerSecond = snap.Depth, snap.Active, readable(snap.AdmittedPerSecond)
		wq.Status.ReleasedPerSecond, wq.Status.PreQueueDepth = readable(snap.ReleasedPerSecond), snap.PreQueued
		read := metav1.NewTime(snap.StatsAt.Truncate(time.Second))
		wq.Status.LiveFiguresTime = &read
		wq.Status.Lanes = nil
		for _, l := range snap.Lanes {
			wq.Status.Lanes = append(wq.Status.Lanes, herdgatev1alpha1.LaneStatus{Name: l.Name, Depth: l.Depth, AdmittedPerSecond: readable(l.AdmittedPerSecond)})
		}
	}
	if len(s.Lanes) == 0 {
		wq.Status.Lanes = nil
	}
	// A scheduler that took over knows no spell yet: the last one written stays.
	if snap != nil && snap.LastBusy != nil {
		wq.Status.LastBusy = busySpellStatus(snap.LastBusy)
	}
	wq.Status.MaxActive = nil
	if s.MaxActive > 0 {
		maxActive := s.MaxActive
		wq.Status.MaxActive = &maxActive
	}
	r.setOpen(wq, s, snap)
	r.setWorkload(wq, s, snap)
	r.setPolling(wq, s, snap)
	r.setGatewayChecking(wq, s, snap)
}

// setOpen says whether the protected routes are open; the reason is the room's phase: the mode's,
// else the schedule's as the scheduler last ticked it (the schedule's at this time until it has).
func (r *WaitingQueueReconciler) setOpen(wq *herdgatev1alpha1.WaitingQueue, s *settings.Settings, snap *scheduler.Snapshot) {
	const open = herdgatev1alpha1.ConditionOpen
	switch s.Mode {
	case herdgatev1alpha1.ModeClosed:
		r.setCondition(wq, open, metav1.ConditionFalse, herdgatev1alpha1.ReasonClosed,
			"spec.mode is Closed: the protected routes are closed to everyone; browsers see the closed page, API clients get 503")
		return
	case herdgatev1alpha1.ModePassthrough:
		r.setCondition(wq, open, metav1.ConditionTrue, herdgatev1alpha1.ReasonPassthrough,
			"spec.mode is Passthrough: the protected routes are open to everyone, without a pass")
		return
	}
	sc := s.Schedule
	if sc == nil {
		r.setCondition(wq, open, metav1.ConditionTrue, herdgatev1alpha1.ReasonOpen, "visitors queue and reach the protected routes with a pass")
		return
	}
	current := s.PhaseAt(r.now())
	if snap != nil && snap.Phase != "" {
		current = snap.Phase
	}
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	switch current {
	case phase.Scheduled:
		r.setCondition(wq, open, metav1.ConditionFalse, herdgatev1alpha1.ReasonScheduled,
			fmt.Sprintf("opens at %s; the pre-queue opens at %s; until then the protected routes are closed to visitors without a pass", at(sc.OpensAt), at(sc.PreQueueFrom)))
	case phase.PreQueue:
		r.setCondition(wq, open, metav1.ConditionFalse, herdgatev1alpha1.ReasonPreQueue,
			fmt.Sprintf("visitors take pre-queue places until %s, when their order is drawn", at(sc.OpensAt)))
	case phase.Opening:
		msg := "drawing the pre-queue's order"
		if snap != nil && snap.DrawError != "" {
			msg = "cannot draw the pre-queue: " + snap.DrawError
		} else if snap != nil && snap.Draw != nil {
			msg = fmt.Sprintf("drawing the pre-queue's order: %d of %d placed", snap.Draw.Placed+snap.Draw.Dropped, snap.Draw.Size)
		}
		r.setCondition(wq, open, metav1.ConditionTrue, herdgatev1alpha1.ReasonOpening, msg)
	case phase.Closed:
		r.setCondition(wq, open, metav1.ConditionFalse, herdgatev1alpha1.ReasonClosed,
			fmt.Sprintf("closed to new visitors since %s; those in the queue are still admitted", at(sc.ClosesAt)))
	default:
		r.setCondition(wq, open, metav1.ConditionTrue, herdgatev1alpha1.ReasonOpen, "visitors queue and reach the protected routes with a pass")
	}
}

// setDrawStatus publishes the commitment to the draw's seed as soon as the queue has a schedule, and
// the seed once this opening's draw began (the pre-queue is frozen by then, so knowing the seed
// helps nobody). A seed in status stays while it is the current one.
func (r *WaitingQueueReconciler) setDrawStatus(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue, s *settings.Settings, snap *scheduler.Snapshot, seed []byte) {
	sc := s.NextOpening(r.now())
	if sc == nil || seed == nil {
		wq.Status.SeedCommitment, wq.Status.Seed, wq.Status.Draw = "", "", nil
		return
	}
	wq.Status.Draw = r.drawStatus(ctx, sc, snap)
	wq.Status.SeedCommitment = draw.Commitment(seed)
	revealed := hex.EncodeToString(seed)
	began := snap != nil && snap.Draw != nil && snap.Draw.OpensAt.Equal(sc.OpensAt)
	if !began && wq.Status.Seed != revealed {
		wq.Status.Seed = ""
		return
	}
	wq.Status.Seed = revealed
}

// setReady sums the other conditions up: it comes last, once every other condition is set, or a
// new room's first status would say it is held back by conditions it does not have yet.
func (r *WaitingQueueReconciler) setReady(wq *herdgatev1alpha1.WaitingQueue) {
	ready, why := true, []string{}
	for _, t := range []string{herdgatev1alpha1.ConditionAccepted, herdgatev1alpha1.ConditionProgrammed,
		herdgatev1alpha1.ConditionRedisAvailable, herdgatev1alpha1.ConditionProxyAvailable} {
		if !meta.IsStatusConditionTrue(wq.Status.Conditions, t) {
			ready, why = false, append(why, t)
		}
	}
	idleOnPurpose := wq.Spec.IsSuspended() || wq.Spec.EffectiveMode() != herdgatev1alpha1.ModeQueue
	if !idleOnPurpose && !meta.IsStatusConditionTrue(wq.Status.Conditions, herdgatev1alpha1.ConditionAdmitting) {
		ready, why = false, append(why, herdgatev1alpha1.ConditionAdmitting)
	}
	if meta.IsStatusConditionFalse(wq.Status.Conditions, herdgatev1alpha1.ConditionGatewayChecking) {
		ready, why = false, append(why, herdgatev1alpha1.ConditionGatewayChecking)
	}
	if ready {
		r.setCondition(wq, herdgatev1alpha1.ConditionReady, metav1.ConditionTrue, herdgatev1alpha1.ReasonReady, "the waiting room is open")
	} else {
		r.setCondition(wq, herdgatev1alpha1.ConditionReady, metav1.ConditionFalse, herdgatev1alpha1.ReasonNotReady, fmt.Sprintf("not true: %v", why))
	}
}

// throttling: the adaptive rate is below the plan.
func throttling(wq *herdgatev1alpha1.WaitingQueue) bool {
	c := meta.FindStatusCondition(wq.Status.Conditions, herdgatev1alpha1.ConditionAdapted)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason != capacity.ReasonNoShows
}

func (r *WaitingQueueReconciler) setCondition(wq *herdgatev1alpha1.WaitingQueue, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&wq.Status.Conditions, metav1.Condition{
		Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: wq.Generation,
	})
}

// patchStatus writes status when it changed, and records Events for plan changes and Redis trouble.
func (r *WaitingQueueReconciler) patchStatus(ctx context.Context, before, wq *herdgatev1alpha1.WaitingQueue) error {
	if equality.Semantic.DeepEqual(before.Status, wq.Status) {
		return nil
	}
	r.liveWritten.Store(wq.UID, r.now())
	if p := wq.Status.Plan; p != nil && !equality.Semantic.DeepEqual(before.Status.Plan, p) {
		r.Recorder.Eventf(wq, nil, corev1.EventTypeNormal, "PlanChanged", "Plan",
			"Admitting %s per second: %d per %s tick (%s)", p.AdmissionsPerSecond, p.BatchSize, wq.Spec.EffectiveTick(), p.Source)
	}
	wasOpen := meta.FindStatusCondition(before.Status.Conditions, herdgatev1alpha1.ConditionOpen)
	if open := meta.FindStatusCondition(wq.Status.Conditions, herdgatev1alpha1.ConditionOpen); open != nil && (wasOpen == nil || wasOpen.Reason != open.Reason) {
		r.Recorder.Eventf(wq, nil, corev1.EventTypeNormal, "PhaseChanged", "Phase", "%s: %s", open.Reason, open.Message)
	}
	if was, now := before.Status.Event, wq.Status.Event; was != now {
		if was != "" {
			r.Recorder.Eventf(wq, nil, corev1.EventTypeNormal, "EventEnded", "Calendar", "The event %s ended; the room runs its own settings again", was)
		}
		if now != "" {
			r.Recorder.Eventf(wq, nil, corev1.EventTypeNormal, "EventStarted", "Calendar", "The event %s runs: its settings are in force", now)
		}
	}
	r.recordDrawSeed(before, wq)
	if wq.Status.Seed != "" && before.Status.Seed != wq.Status.Seed {
		r.Recorder.Eventf(wq, nil, corev1.EventTypeNormal, "SeedRevealed", "Draw",
			"The pre-queue's draw began; its seed is %s (SHA-256 %s, as committed in status.seedCommitment)", wq.Status.Seed, wq.Status.SeedCommitment)
	}
	if was, now := throttling(before), throttling(wq); was != now {
		if now {
			c := meta.FindStatusCondition(wq.Status.Conditions, herdgatev1alpha1.ConditionAdapted)
			r.Recorder.Eventf(wq, nil, corev1.EventTypeNormal, "ThrottlingStarted", "Adapt", "%s: %s", c.Reason, c.Message)
		} else {
			r.Recorder.Eventf(wq, nil, corev1.EventTypeNormal, "ThrottlingStopped", "Adapt", "Admitting at the plan again, or above it for no-shows")
		}
	}
	r.recordGatewayChecking(before, wq)
	was := meta.FindStatusCondition(before.Status.Conditions, herdgatev1alpha1.ConditionRedisAvailable)
	now := meta.FindStatusCondition(wq.Status.Conditions, herdgatev1alpha1.ConditionRedisAvailable)
	if now != nil && (was == nil || was.Status != now.Status) {
		switch now.Status {
		case metav1.ConditionFalse:
			r.Recorder.Eventf(wq, nil, corev1.EventTypeWarning, now.Reason, "Redis", "%s", now.Message)
		case metav1.ConditionTrue:
			if was != nil && was.Status == metav1.ConditionFalse {
				r.Recorder.Eventf(wq, nil, corev1.EventTypeNormal, now.Reason, "Redis", "Redis is reachable again")
			}
		}
	}
	if err := r.Status().Patch(ctx, wq, client.MergeFrom(before)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("patching status: %w", err))
	}
	return nil
}

// busySpellStatus is b as status.lastBusy shows it, its times in whole seconds as the API server
// stores them (so that a spell read again is no change).
func busySpellStatus(b *scheduler.BusySpell) *herdgatev1alpha1.BusySpellStatus {
	return &herdgatev1alpha1.BusySpellStatus{
		Start: metav1.NewTime(b.Start.Truncate(time.Second)), End: metav1.NewTime(b.End.Truncate(time.Second)), Ongoing: b.Ongoing,
		Admitted: b.Admitted, AdmittedPerSecond: readable(b.AdmittedPerSecond()), PeakDepth: b.PeakDepth,
	}
}
