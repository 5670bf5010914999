// Package controllers turns WaitingQueues into running waiting rooms: the reconciler checks and derives
// each generation, runs the admission proxy's objects and hands the queue to the scheduler
// (internal/scheduler), which admits visitors tick by tick on the leader.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

	// minSecretResync is how often, at most, a queue is reconciled without a change: the manager may
	// not list or watch Secrets (docs/guides/operations.md, "Permissions"), so this is how it notices
	// a per-queue Secret that was deleted or edited, and a rotated Redis URL in spec.redis.secretRef.
	minSecretResync = time.Minute
	// secretResyncReads bounds the Secret reads per second that the resyncs of all queues together
	// make: with more than 300 queues each queue's resync grows past a minute instead
	// (docs/performance.md, "A thousand rooms on one manager").
	secretResyncReads = 5
	// failingResync replaces the resync while the queue has no usable Redis, so that a fixed
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
	// Now is the reconciler's clock; nil means time.Now.
	Now func() time.Time
	// GatewayCheckGrace: see Options; 0 means defaultGatewayCheckGrace.
	GatewayCheckGrace time.Duration

	// cleanups delete the deleted rooms' Redis keys beside the reconciles (redis_cleanup.go).
	cleanups redisCleanups
	applied  appliedObjects
	// liveWritten is when each queue's status was last written (liveStatusInterval).
	liveWritten sync.Map // types.UID → time.Time
	// derived are the queues' settings by generation (derive).
	derived sync.Map // types.UID → derivedSettings
	// secretReads are what each room's last reconcile read of its Secrets, until its resync.
	secretReads sync.Map // types.UID → secretRead
	// setLocks hold one apply of a shared proxy set's objects at a time, by namespace/set (applySet).
	setLocks sync.Map // string → *sync.Mutex
	// beaconChains are the beacons' chains read so far, by address and chain hash (draw.go).
	beaconChains sync.Map // beaconKey → beacon.Chain
	// BeaconHTTP reads the beacons' chains; nil means a client with a short timeout.
	BeaconHTTP *http.Client
}

// The manager writes with patches (server-side apply, merge patches), never with full updates. It
// reads Secrets by name only (get): it never lists or watches them, so it cannot enumerate the
// cluster's Secrets, and the proxy reads its key from a mounted volume instead of the API.
// +kubebuilder:rbac:groups=herdgate.io,resources=waitingqueues,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=herdgate.io,resources=waitingqueues/status,verbs=get;patch
// +kubebuilder:rbac:groups=herdgate.io,resources=waitingqueues/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services;serviceaccounts,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one WaitingQueue's world in line with its spec.
func (r *WaitingQueueReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wq := &herdgatev1alpha1.WaitingQueue{}
	if err := r.Get(ctx, req.NamespacedName, wq); err != nil {
		if apierrors.IsNotFound(err) {
			// Gone without its finalizer: a reconcile that began before the room went may have
			// handed it to the scheduler after its delete event stopped it (forgetRoom).
			r.Scheduler.StopNamed(req.NamespacedName)
		}
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
	s, err := r.derive(wq)
	if err != nil {
		r.setNotAccepted(wq, err)
		return requeueAfter(r.secretResync()), r.patchStatus(ctx, before, wq)
	}
	r.setCondition(wq, herdgatev1alpha1.ConditionAccepted, metav1.ConditionTrue, herdgatev1alpha1.ReasonAccepted,
		"the spec passes the checks the admission proxy runs")
	// The settings in force: an event's while the scheduler ticks one (spec.events).
	cur := inForce(s, snapshotPtr(r.Scheduler.Snapshot(wq.UID)), r.now())
	setPlanStatus(wq, cur)
	// The Secrets the room refers to, as read at its last resync, or read now (secret_reads.go).
	read, fresh := r.lastRead(wq)
	r.secretReads.Delete(wq.UID)
	var refErr error
	if !fresh {
		if read.redisURL, err = r.redisURL(ctx, wq); err != nil {
			r.Scheduler.Remove(wq.UID)
			r.setStatus(wq, cur, nil, err)
			r.setProgrammed(wq, nil, nil)
			r.setReady(wq)
			return requeueAfter(failingResync), r.patchStatus(ctx, before, wq)
		}
		read.refs, refErr = r.referencedValues(ctx, wq, s)
		if refErr != nil && !errors.As(refErr, new(errSecretValue)) {
			return ctrl.Result{}, fmt.Errorf("reading the Secrets the spec refers to: %w", refErr)
		}
		read.at, read.spread = r.now(), rand.Float64()
	}
	redisURL := read.redisURL
	secret, applyErr := r.ensureSecret(ctx, wq, s, redisURL, read.refs, read.secret)
	seed := secret.seed
	if s.NextOpening(r.now()) == nil || seed != nil {
		// A scheduled queue runs only with the seed of its draw; without the Secret it waits. The
		// scheduler starts before the proxy's objects are applied, so that a new room's first tick
		// comes while they are, and its first status says it admits.
		r.Scheduler.Ensure(scheduler.Room{Settings: s, RedisURL: redisURL, DrawSeed: seed})
	}
	if applyErr != nil {
		applyErr = fmt.Errorf("ensuring the Secret %s: %w", wq.SecretName(), applyErr)
	} else if err := r.publishPassKeys(ctx, wq, secret.passKeys, secret.passKeysKept); err != nil {
		applyErr = fmt.Errorf("publishing the pass keys in %s: %w", wq.PassKeysName(), err)
	} else if err := r.ensureProxy(ctx, wq, redisURL, secret); err != nil {
		applyErr = fmt.Errorf("applying the admission proxy's objects: %w", err)
	} else if refErr != nil {
		// The proxies keep the values copied last, or refuse the spec until the value comes.
		applyErr = refErr
	}
	if err := r.observeProxy(ctx, wq); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the proxy Deployment: %w", err)
	}
	snap := snapshotPtr(r.Scheduler.Snapshot(wq.UID))
	cur = inForce(s, snap, r.now())
	setPlanStatus(wq, cur)
	wq.Status.Event = cur.Event
	r.setStatus(wq, cur, snap, nil)
	r.setDrawStatus(ctx, wq, s, snap, seed)
	r.setProgrammed(wq, applyErr, snap)
	r.setReady(wq)
	dateLiveFigures(before, wq)
	hold := r.holdLiveStatus(before, wq)
	if err := r.patchStatus(ctx, before, wq); err != nil {
		return ctrl.Result{}, err
	}
	if applyErr == nil && (snap == nil || snap.RedisError == "") {
		// Anything failing reads again at its retry: a value being fixed, a Redis URL rotated.
		read.secret = secret.secret
		r.rememberRead(wq, read)
	}
	if errors.As(applyErr, new(errSecretValue)) {
		// Waiting for a Secret the user makes: looked at again soon, without backoff.
		return requeueAfter(failingResync), nil
	}
	if applyErr != nil && !apierrors.IsInvalid(applyErr) && !apierrors.IsBadRequest(applyErr) {
		// Transient (a conflict, a timeout, a missing permission being fixed): retry with backoff.
		// An invalid object waits for the spec to change, or the next resync.
		return ctrl.Result{}, applyErr
	}
	if snap != nil && snap.RedisError != "" {
		return requeueAfter(failingResync), nil
	}
	if hold > 0 {
		return requeueAfter(hold), nil
	}
	// The resync, when the Secrets are read again.
	resync := max(time.Second, r.readDue(read).Sub(r.now()))
	if due := r.gatewayCheckDue(wq); due > 0 && due < resync {
		resync = due // GatewayChecking turns False then, unless a check comes
	}
	if edge := s.NextEdge(r.now()); !edge.IsZero() && edge.Sub(r.now()) < resync {
		// The calendar turns there: the status, and the next draw's seed, follow.
		resync = edge.Sub(r.now()) + time.Second
	}
	return requeueAfter(resync), nil
}

// inForce is the settings the room runs with: the event the scheduler last ticked, or, before it
// ticked, the event in force at now.
func inForce(s *settings.Settings, snap *scheduler.Snapshot, now time.Time) *settings.Settings {
	if snap == nil || snap.LastTick.IsZero() {
		return s.At(now)
	}
	for _, e := range s.Events {
		if e.Name == snap.Event {
			return e.Settings
		}
	}
	return s
}

// secretResync is how long a queue waits for its next resync: a minute, or more when there are so
// many queues that their resyncs would read more than secretResyncReads Secrets a second; a tenth
// more or less at random, so that queues made together do not resync together.
func (r *WaitingQueueReconciler) secretResync() time.Duration {
	return r.resyncAfter(rand.Float64())
}

// resyncAfter is the resync at spread, the room's place in the spread of a tenth either way (0 to
// 1): a room keeps its place while the rooms' count, and so the resync, grows.
func (r *WaitingQueueReconciler) resyncAfter(spread float64) time.Duration {
	d := max(minSecretResync, time.Duration(r.Scheduler.Len())*time.Second/secretResyncReads)
	return d + time.Duration((spread-0.5)*0.2*float64(d))
}

func (r *WaitingQueueReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// forgetRoom drops what the manager keeps of a room that is gone. After a finalizer that ran there is
// nothing left; a room whose finalizer somebody removed before it ran leaves its scheduler, which
// would tick it until the manager restarts. Its keys stay in Redis: a room of the same name made
// since shares their prefix.
func (r *WaitingQueueReconciler) forgetRoom(uid types.UID) {
	r.Scheduler.Stop(uid)
	r.cleanups.forget(uid)
	r.applied.forget(uid)
	r.liveWritten.Delete(uid)
	r.derived.Delete(uid)
	r.secretReads.Delete(uid)
}

// finalize stops the queue's scheduler, deletes its Redis keys and releases the finalizer. The keys are
// deleted beside the reconcile (redis_cleanup.go), which comes back when they are gone. When Redis stays
// unreachable it gives up after a bounded number of tries and says so in an Event, so that a missing
// Redis never wedges the deletion.
func (r *WaitingQueueReconciler) finalize(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(wq, Finalizer) {
		return ctrl.Result{}, nil
	}
	r.applied.forget(wq.UID)
	r.liveWritten.Delete(wq.UID)
	r.derived.Delete(wq.UID)

	// The room admits nobody from now on; a tick on its way to Redis ends before its keys are deleted.
	stopped := r.Scheduler.Stop(wq.UID)
	deleted, log := wq.DeepCopy(), ctrl.LoggerFrom(ctx)
	lastURL := r.lastRedisURL(wq)
	cleanup := r.cleanups.take(client.ObjectKeyFromObject(wq), wq.UID, func(ctx context.Context, try int) error {
		var err error
		select {
		case <-stopped:
			err = r.deleteRedisKeys(ctx, deleted, lastURL)
		case <-ctx.Done():
			err = fmt.Errorf("waiting for the scheduler's last tick: %w", ctx.Err())
		}
		if err != nil {
			// Told as the try fails, not when the room is reconciled next.
			log.Info("Deleting the queue's Redis keys failed", "try", try, "of", finalizeAttempts, "error", err.Error())
			r.Recorder.Eventf(deleted, nil, corev1.EventTypeWarning, "RedisCleanupFailed", "Finalize",
				"Deleting the queue's Redis keys failed (try %d of %d): %v", try, finalizeAttempts, err)
		}
		return err
	})
	switch {
	case cleanup.pending:
		return requeueAfter(cleanupWait), nil
	case cleanup.retry:
		return ctrl.Result{RequeueAfter: cleanup.retryAfter}, nil
	case cleanup.err != nil:
		r.Recorder.Eventf(wq, nil, corev1.EventTypeWarning, "RedisCleanupSkipped", "Finalize",
			"Gave up deleting the queue's Redis keys after %d attempts (%v); they stay in Redis under the prefix {hg:%s/%s}",
			cleanup.failures, cleanup.err, wq.Namespace, wq.Name)
	}
	r.secretReads.Delete(wq.UID)
	if set := wq.Spec.ProxySet(); set != "" {
		// The set's other rooms keep their values; the set's objects follow the rooms left.
		if err := r.takeBackValues(ctx, wq, set); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.applySet(ctx, wq.Namespace, set); err != nil {
			return ctrl.Result{}, err
		}
	}

	patch := client.MergeFrom(wq.DeepCopy())
	controllerutil.RemoveFinalizer(wq, Finalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, wq, patch))
}
