// Package controllers turns WaitingQueues into running waiting rooms: the reconciler checks and derives
// each generation, runs the admission proxy's objects and hands the queue to the scheduler
// (internal/scheduler), which admits visitors tick by tick on the leader.
package controllers

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/internal/settings"
)

const (
	// Finalizer keeps a WaitingQueue until its Redis keys are deleted.
	Finalizer = "herdgate.io/finalizer"
	// FieldOwner is the manager's server-side apply field manager.
	FieldOwner = client.FieldOwner("herdgate-manager")

	// finalizeAttempts bounds how often deletion tries to reach Redis before it lets go.
	finalizeAttempts = 5
	// secretResync is how often a queue is reconciled without a change: the manager may not list or
	// watch Secrets (see the README's permissions), so this is how it notices a per-queue Secret that
	// was deleted or edited, and a rotated Redis URL in spec.redis.secretRef.
	secretResync = time.Minute
	// failingResync replaces secretResync while the queue has no usable Redis, so that a fixed
	// Secret is picked up within seconds.
	failingResync = 5 * time.Second
	// maxConditionMessage bounds the API server's and the proxies' messages copied into a condition.
	maxConditionMessage = 2048
)

// WaitingQueueReconciler reconciles a WaitingQueue: plan, Secret, the admission proxy's objects,
// the scheduler's queue, and status.
type WaitingQueueReconciler struct {
	client.Client
	// APIReader reads Secrets straight from the API server, so the manager caches no Secret data.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	Scheduler *scheduler.Scheduler
	Pool      *queue.Pool
	// DefaultRedisURL is used by queues without spec.redis.
	DefaultRedisURL string
	// ProxyImage is the admission proxy's container image.
	ProxyImage string

	mu       sync.Mutex
	attempts map[types.UID]int // failed Redis cleanups per deleted queue
}

// The manager writes with patches (server-side apply, merge patches), never with full updates. It
// reads Secrets by name only (get): it never lists or watches them, so it cannot enumerate the
// cluster's Secrets, and the proxy reads its key from a mounted volume instead of the API.
// +kubebuilder:rbac:groups=herdgate.io,resources=waitingqueues,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=herdgate.io,resources=waitingqueues/status,verbs=get;patch
// +kubebuilder:rbac:groups=herdgate.io,resources=waitingqueues/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;patch
// +kubebuilder:rbac:groups="",resources=services;serviceaccounts,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one WaitingQueue's world in line with its spec.
func (r *WaitingQueueReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wq := &herdgatev1alpha1.WaitingQueue{}
	if err := r.Get(ctx, req.NamespacedName, wq); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !wq.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, wq)
	}
	if !controllerutil.ContainsFinalizer(wq, Finalizer) {
		patch := client.MergeFrom(wq.DeepCopy())
		controllerutil.AddFinalizer(wq, Finalizer)
		return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, wq, patch))
	}

	before := wq.DeepCopy()
	wq.Status.ObservedGeneration = wq.Generation
	// The checks the proxy runs: a generation they refuse is applied nowhere, and says why.
	s, err := settings.Derive(wq)
	if err != nil {
		r.setNotAccepted(wq, err)
		return ctrl.Result{RequeueAfter: secretResync}, r.patchStatus(ctx, before, wq)
	}
	r.setCondition(wq, herdgatev1alpha1.ConditionAccepted, metav1.ConditionTrue, herdgatev1alpha1.ReasonAccepted,
		"the spec passes the checks the admission proxy runs")
	setPlanStatus(wq, s)
	redisURL, err := r.redisURL(ctx, wq)
	if err != nil {
		r.Scheduler.Remove(wq.UID)
		r.setStatus(wq, s, nil, err)
		r.setProgrammed(wq, nil, nil)
		return ctrl.Result{RequeueAfter: failingResync}, r.patchStatus(ctx, before, wq)
	}
	applyErr := r.ensureSecret(ctx, wq, redisURL)
	if applyErr != nil {
		applyErr = fmt.Errorf("ensuring the Secret %s: %w", wq.SecretName(), applyErr)
	} else if err := r.ensureProxy(ctx, wq, redisURL); err != nil {
		applyErr = fmt.Errorf("applying the admission proxy's objects: %w", err)
	}
	r.Scheduler.Ensure(scheduler.Queue{Settings: s, RedisURL: redisURL})

	if err := r.observeProxy(ctx, wq); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the proxy Deployment: %w", err)
	}
	snap := snapshotPtr(r.Scheduler.Snapshot(wq.UID))
	r.setStatus(wq, s, snap, nil)
	r.setProgrammed(wq, applyErr, snap)
	if err := r.patchStatus(ctx, before, wq); err != nil {
		return ctrl.Result{}, err
	}
	if applyErr != nil && !apierrors.IsInvalid(applyErr) && !apierrors.IsBadRequest(applyErr) {
		// Transient (a conflict, a timeout, a missing permission being fixed): retry with backoff.
		// An invalid object waits for the spec to change, or the next resync.
		return ctrl.Result{}, applyErr
	}
	if snap != nil && snap.RedisError != "" {
		return ctrl.Result{RequeueAfter: failingResync}, nil
	}
	return ctrl.Result{RequeueAfter: secretResync}, nil
}

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

// setProgrammed says whether this generation's objects are applied and every reporting proxy
// replica can apply it.
func (r *WaitingQueueReconciler) setProgrammed(wq *herdgatev1alpha1.WaitingQueue, applyErr error, snap *scheduler.Snapshot) {
	const programmed = herdgatev1alpha1.ConditionProgrammed
	if applyErr != nil {
		r.setCondition(wq, programmed, metav1.ConditionFalse, herdgatev1alpha1.ReasonApplyFailed, truncate(applyErr.Error()))
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
			refusals = append(refusals, fmt.Sprintf("proxy replica %s cannot apply generation %d and keeps serving generation %d: %s",
				p.Replica, p.RefusedGeneration, p.Generation, p.Refusal))
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

// errRedisConfig marks a Redis URL that cannot be used; retrying will not help until something changes.
type errRedisConfig struct{ msg string }

func (e errRedisConfig) Error() string { return e.msg }

// redisURL is the queue's Redis URL: from spec.redis.secretRef, else the manager's default.
func (r *WaitingQueueReconciler) redisURL(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue) (string, error) {
	if wq.Spec.Redis == nil {
		if r.DefaultRedisURL == "" {
			return "", errRedisConfig{"the queue sets no spec.redis and the manager has no --redis-url"}
		}
		return r.DefaultRedisURL, nil
	}
	ref := wq.Spec.Redis.SecretRef
	key := ref.Key
	if key == "" {
		key = herdgatev1alpha1.DefaultRedisSecretKey
	}
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return "", errRedisConfig{fmt.Sprintf("Secret %s named in spec.redis.secretRef does not exist", ref.Name)}
		}
		return "", err
	}
	url := string(secret.Data[key])
	if url == "" {
		return "", errRedisConfig{fmt.Sprintf("Secret %s has no key %q with a Redis URL", ref.Name, key)}
	}
	return url, nil
}

// ensureSecret creates the per-queue Secret with a fresh HMAC key once and never replaces that key;
// it keeps the Redis URL current.
func (r *WaitingQueueReconciler) ensureSecret(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue, redisURL string) error {
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.SecretName()}, secret)
	if apierrors.IsNotFound(err) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return err
		}
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: wq.SecretName(), Namespace: wq.Namespace, Labels: proxyLabels(wq)},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{herdgatev1alpha1.SecretHMACKey: key, herdgatev1alpha1.SecretRedisURL: []byte(redisURL)},
		}
		if err := controllerutil.SetControllerReference(wq, secret, r.Scheme); err != nil {
			return err
		}
		return r.Create(ctx, secret)
	}
	if err != nil {
		return err
	}
	patch := client.MergeFrom(secret.DeepCopy())
	changed := false
	if string(secret.Data[herdgatev1alpha1.SecretRedisURL]) != redisURL {
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		secret.Data[herdgatev1alpha1.SecretRedisURL] = []byte(redisURL)
		changed = true
	}
	if len(secret.Data[herdgatev1alpha1.SecretHMACKey]) < 32 {
		// Someone removed the key: a new one is the only way on (existing passes become invalid).
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return err
		}
		secret.Data[herdgatev1alpha1.SecretHMACKey] = key
		changed = true
	}
	if !changed {
		return nil
	}
	return r.Patch(ctx, secret, patch)
}

// ensureProxy applies the proxy's ServiceAccount, Role, RoleBinding, Deployment and Service.
func (r *WaitingQueueReconciler) ensureProxy(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue, redisURL string) error {
	for _, obj := range []runtime.ApplyConfiguration{
		proxyServiceAccount(wq),
		proxyRole(wq),
		proxyRoleBinding(wq),
		proxyDeployment(wq, r.ProxyImage, redisURL),
		proxyService(wq),
	} {
		if err := r.Apply(ctx, obj, FieldOwner, client.ForceOwnership); err != nil {
			return err
		}
	}
	return nil
}

// observeProxy copies the Deployment's ready replicas into status.proxy and sets ProxyAvailable.
func (r *WaitingQueueReconciler) observeProxy(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue) error {
	deploy := &appsv1.Deployment{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.ProxyName()}, deploy); err != nil {
		return client.IgnoreNotFound(err)
	}
	wq.Status.Proxy = &herdgatev1alpha1.ProxyStatus{ReadyReplicas: deploy.Status.ReadyReplicas}
	switch {
	case wq.Spec.EffectiveProxyReplicas() == 0:
		r.setCondition(wq, herdgatev1alpha1.ConditionProxyAvailable, metav1.ConditionFalse, herdgatev1alpha1.ReasonProxyScaledToZero,
			"spec.proxy.replicas is 0: no proxy serves the waiting room")
	case deploy.Status.ReadyReplicas > 0:
		r.setCondition(wq, herdgatev1alpha1.ConditionProxyAvailable, metav1.ConditionTrue, herdgatev1alpha1.ReasonProxyReady,
			fmt.Sprintf("%d of %d proxy pods ready", deploy.Status.ReadyReplicas, wq.Spec.EffectiveProxyReplicas()))
	default:
		r.setCondition(wq, herdgatev1alpha1.ConditionProxyAvailable, metav1.ConditionFalse, herdgatev1alpha1.ReasonProxyNotReady,
			fmt.Sprintf("0 of %d proxy pods ready", wq.Spec.EffectiveProxyReplicas()))
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
		wq.Status.QueueDepth, wq.Status.ActiveVisitors, wq.Status.AdmittedPerSecond = snap.Depth, snap.Active, snap.AdmittedPerSecond
	}
	r.setReady(wq)
}

// setReady sums the other conditions up.
func (r *WaitingQueueReconciler) setReady(wq *herdgatev1alpha1.WaitingQueue) {
	ready, why := true, []string{}
	for _, t := range []string{herdgatev1alpha1.ConditionAccepted, herdgatev1alpha1.ConditionProgrammed,
		herdgatev1alpha1.ConditionRedisAvailable, herdgatev1alpha1.ConditionProxyAvailable} {
		if !meta.IsStatusConditionTrue(wq.Status.Conditions, t) {
			ready, why = false, append(why, t)
		}
	}
	if !wq.Spec.IsSuspended() && !meta.IsStatusConditionTrue(wq.Status.Conditions, herdgatev1alpha1.ConditionAdmitting) {
		ready, why = false, append(why, herdgatev1alpha1.ConditionAdmitting)
	}
	if ready {
		r.setCondition(wq, herdgatev1alpha1.ConditionReady, metav1.ConditionTrue, herdgatev1alpha1.ReasonReady, "the waiting room is open")
	} else {
		r.setCondition(wq, herdgatev1alpha1.ConditionReady, metav1.ConditionFalse, herdgatev1alpha1.ReasonNotReady, fmt.Sprintf("not true: %v", why))
	}
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
	if p := wq.Status.Plan; p != nil && !equality.Semantic.DeepEqual(before.Status.Plan, p) {
		r.Recorder.Eventf(wq, nil, corev1.EventTypeNormal, "PlanChanged", "Plan",
			"Admitting %s per second: %d per %s tick (%s)", p.AdmissionsPerSecond, p.BatchSize, wq.Spec.EffectiveTick(), p.Source)
	}
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

// finalize stops the queue's scheduler, deletes its Redis keys and releases the finalizer. When Redis
// stays unreachable it gives up after a bounded number of tries and says so in an Event, so that a
// missing Redis never wedges the deletion.
func (r *WaitingQueueReconciler) finalize(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(wq, Finalizer) {
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx)
	r.Scheduler.Remove(wq.UID)

	err := r.deleteRedisKeys(ctx, wq)
	if err != nil {
		r.mu.Lock()
		if r.attempts == nil {
			r.attempts = map[types.UID]int{}
		}
		r.attempts[wq.UID]++
		n := r.attempts[wq.UID]
		r.mu.Unlock()
		if n < finalizeAttempts {
			log.Info("Deleting the queue's Redis keys failed; will retry", "attempt", n, "error", err.Error())
			return ctrl.Result{RequeueAfter: time.Duration(1<<n) * time.Second}, nil
		}
		r.Recorder.Eventf(wq, nil, corev1.EventTypeWarning, "RedisCleanupSkipped", "Finalize",
			"Gave up deleting the queue's Redis keys after %d attempts (%v); they stay in Redis under the prefix {hg:%s/%s}",
			n, err, wq.Namespace, wq.Name)
	}
	r.mu.Lock()
	delete(r.attempts, wq.UID)
	r.mu.Unlock()

	patch := client.MergeFrom(wq.DeepCopy())
	controllerutil.RemoveFinalizer(wq, Finalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, wq, patch))
}

func (r *WaitingQueueReconciler) deleteRedisKeys(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue) error {
	url, err := r.redisURL(ctx, wq)
	if err != nil {
		return err
	}
	store, release, err := r.Pool.Acquire(url)
	if err != nil {
		return err
	}
	defer release()
	q, err := store.Queue(wq.Namespace, wq.Name)
	if err != nil {
		return err
	}
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return q.Delete(callCtx)
}
