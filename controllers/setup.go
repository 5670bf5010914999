package controllers

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/scheduler"
)

// Options configure the operator.
type Options struct {
	// RedisURL is the Redis of queues without spec.redis.
	RedisURL string
	// ProxyImage is the admission proxy's container image.
	ProxyImage string
	// RedisClient adjusts every Redis client (TLS roots, client name).
	RedisClient queue.ClientOptions
	// Scheduler adds options to the scheduler (tests watch its ticks and steer its clock).
	Scheduler []scheduler.Option
	// GatewayCheckGrace is how long a Gateway room admits visitors without a gateway check before
	// GatewayChecking turns False; 0 means 30 s, three of the proxies' report intervals.
	GatewayCheckGrace time.Duration
	// MaxConcurrentReconciles is how many rooms are reconciled at once; 0 means
	// DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
}

// DefaultMaxConcurrentReconciles is how many rooms the manager reconciles at once unless told
// otherwise: a reconcile mostly waits for the API server, so a few workers keep up with a thousand
// rooms created at once on two cores (docs/performance.md, "A thousand rooms on one manager").
const DefaultMaxConcurrentReconciles = 8

// Setup registers the scheduler and the WaitingQueue reconciler with mgr. The scheduler tells the
// reconciler of a queue whose observed state changed through the notification function handed in
// here, which feeds the reconciler's channel source; so do the deleted rooms' Redis cleanups.
func Setup(mgr ctrl.Manager, opts Options) (*scheduler.Scheduler, error) {
	changed := make(chan event.GenericEvent, 1024)
	notify := func(key types.NamespacedName) bool {
		wq := &herdgatev1alpha1.WaitingQueue{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		select {
		case changed <- event.GenericEvent{Object: wq}:
			return true
		default: // the reconciler is behind; the scheduler tries again at the next change
			return false
		}
	}
	sched := scheduler.New(&queue.Pool{Options: opts.RedisClient}, append([]scheduler.Option{scheduler.WithNotify(notify)}, opts.Scheduler...)...)
	if err := mgr.Add(sched); err != nil {
		return nil, fmt.Errorf("adding the scheduler: %w", err)
	}
	r := &WaitingQueueReconciler{
		Client:            mgr.GetClient(),
		APIReader:         mgr.GetAPIReader(),
		Scheme:            mgr.GetScheme(),
		Recorder:          mgr.GetEventRecorder("herdgate-manager"),
		Scheduler:         sched,
		Pool:              sched.Pool(),
		DefaultRedisURL:   opts.RedisURL,
		ProxyImage:        opts.ProxyImage,
		GatewayCheckGrace: opts.GatewayCheckGrace,
	}
	// A deleted room whose Redis keys are gone is reconciled again to release its finalizer.
	r.cleanups.notify = func(key types.NamespacedName) { notify(key) }
	workers := opts.MaxConcurrentReconciles
	if workers <= 0 {
		workers = DefaultMaxConcurrentReconciles
	}
	r.cleanups.slots = make(chan struct{}, workers)
	if err := r.SetupWithManager(mgr, changed, workers); err != nil {
		return nil, err
	}
	return sched, nil
}

// SetupWithManager wires the reconciler's watches, with workers reconciling rooms at once. Secrets
// are not watched: the manager may not list or watch them, so a queue is reconciled every minute or
// more (secretResync) to notice changed Secrets. Rooms are queued by priority (priority.go).
func (r *WaitingQueueReconciler) SetupWithManager(mgr ctrl.Manager, changed <-chan event.GenericEvent, workers int) error {
	owned := func() handler.EventHandler {
		return handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &herdgatev1alpha1.WaitingQueue{}, handler.OnlyControllerOwner())
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("waitingqueue").
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		// Own status writes change neither generation nor finalizers: they do not come back here.
		Watches(&herdgatev1alpha1.WaitingQueue{}, roomEvents{gone: r.forgetRoom}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, finalizersChanged())))
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ServiceAccount{}, &rbacv1.Role{},
		&rbacv1.RoleBinding{}, &policyv1.PodDisruptionBudget{}, &autoscalingv2.HorizontalPodAutoscaler{}} {
		b = b.Watches(obj, owned())
	}
	return b.
		// A shared proxy set's Deployment has no controller: its rooms hear of its pods by its label.
		Watches(&appsv1.Deployment{}, handler.EnqueueRequestsFromMapFunc(r.roomsOfSet)).
		WatchesRawSource(source.Channel(changed, roomEvents{})).
		Complete(r)
}

// roomsOfSet are the rooms of the shared proxy set obj belongs to, if it belongs to one.
func (r *WaitingQueueReconciler) roomsOfSet(ctx context.Context, obj client.Object) []reconcile.Request {
	set := obj.GetLabels()[LabelProxySet]
	if set == "" {
		return nil
	}
	members, err := r.setMembers(ctx, obj.GetNamespace(), set)
	if err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(members))
	for _, m := range members {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(m)})
	}
	return out
}

func finalizersChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return fmt.Sprint(e.ObjectOld.GetFinalizers()) != fmt.Sprint(e.ObjectNew.GetFinalizers())
		},
	}
}
