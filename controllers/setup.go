package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
)

// Options configure the operator.
type Options struct {
	// RedisURL is the Redis of queues without spec.redis.
	RedisURL string
	// ProxyImage is the admission proxy's container image.
	ProxyImage string
	// RedisClient adjusts every Redis client (TLS roots, client name).
	RedisClient queue.ClientOptions
	// Scheduler, when set, replaces the default scheduler (tests inject clocks and randomness).
	Scheduler *Scheduler
}

// Setup registers the scheduler and the WaitingQueue reconciler with mgr.
func Setup(mgr ctrl.Manager, opts Options) (*Scheduler, error) {
	sched := opts.Scheduler
	if sched == nil {
		sched = NewScheduler(&RedisPool{Options: opts.RedisClient})
	}
	if err := mgr.Add(sched); err != nil {
		return nil, fmt.Errorf("adding the scheduler: %w", err)
	}
	r := &WaitingQueueReconciler{
		Client:          mgr.GetClient(),
		APIReader:       mgr.GetAPIReader(),
		Scheme:          mgr.GetScheme(),
		Recorder:        mgr.GetEventRecorder("herdgate-manager"),
		Scheduler:       sched,
		Pool:            sched.Pool,
		DefaultRedisURL: opts.RedisURL,
		ProxyImage:      opts.ProxyImage,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	return sched, nil
}

// SetupWithManager wires the reconciler's watches.
func (r *WaitingQueueReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &herdgatev1alpha1.WaitingQueue{}, redisSecretIndex,
		func(obj client.Object) []string {
			wq := obj.(*herdgatev1alpha1.WaitingQueue)
			if wq.Spec.Redis == nil {
				return nil
			}
			return []string{wq.Spec.Redis.SecretRef.Name}
		}); err != nil {
		return fmt.Errorf("indexing WaitingQueues by Redis Secret: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("waitingqueue").
		// Own status writes change neither generation nor finalizers: they do not come back here.
		For(&herdgatev1alpha1.WaitingQueue{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, finalizersChanged()))).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&rbacv1.Role{}).
		Owns(&rbacv1.RoleBinding{}).
		// Secrets are watched by metadata only: the manager never caches Secret data.
		Owns(&corev1.Secret{}, builder.OnlyMetadata).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.queuesUsingSecret), builder.OnlyMetadata).
		WatchesRawSource(source.Channel(r.Scheduler.events, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// queuesUsingSecret maps a Secret to the WaitingQueues that take their Redis URL from it.
func (r *WaitingQueueReconciler) queuesUsingSecret(ctx context.Context, secret client.Object) []reconcile.Request {
	list := &herdgatev1alpha1.WaitingQueueList{}
	if err := r.List(ctx, list, client.InNamespace(secret.GetNamespace()), client.MatchingFields{redisSecretIndex: secret.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing WaitingQueues that use a Secret", "secret", client.ObjectKeyFromObject(secret))
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}}
	}
	return reqs
}

func finalizersChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return fmt.Sprint(e.ObjectOld.GetFinalizers()) != fmt.Sprint(e.ObjectNew.GetFinalizers())
		},
	}
}
