package controllers

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// The order in which the reconciler's workers take rooms (controller-runtime's priority queue takes
// the highest priority first, and the oldest within one): a room whose status does not show its
// spec yet goes before anything else; a change the scheduler or an owned object reports, at the
// default priority; a room's own periodic work (resyncs, held live figures, retries while a Secret or
// Redis is missing) after both. However many rooms requeue, a new room is reconciled as soon as a
// worker is free (docs/architecture.md, "What the manager writes").
const (
	// priorityUnreconciled is a room that is new, changed, or being deleted.
	priorityUnreconciled = 100
	// priorityPeriodic is a room's next resync or retry.
	priorityPeriodic = handler.LowPriority
)

// requeueAfter is the result of a reconcile that looks at the room again after d, as periodic work.
func requeueAfter(d time.Duration) ctrl.Result {
	return ctrl.Result{RequeueAfter: d, Priority: new(priorityPeriodic)}
}

// unreconciled says wq's status does not show its spec yet: a new room, a changed spec, a room
// without its finalizer or being deleted.
func unreconciled(wq *herdgatev1alpha1.WaitingQueue) bool {
	return wq.Status.ObservedGeneration != wq.Generation || !wq.DeletionTimestamp.IsZero() ||
		!controllerutil.ContainsFinalizer(wq, Finalizer)
}

// roomEvents enqueues a WaitingQueue at its priority: unreconciled first, then any change; a room
// the manager finds reconciled when it starts waits behind both (as controller-runtime's own
// handlers do with the objects of their first list). The scheduler's news of a room (a generic event
// that names it and holds nothing else) comes at the default priority.
type roomEvents struct {
	// gone, when set, is told of each room that is gone (forgetRoom).
	gone func(types.UID)
}

var _ handler.EventHandler = roomEvents{}

func (roomEvents) Create(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	priority := 0
	if e.IsInInitialList {
		priority = priorityPeriodic
	}
	enqueueRoom(q, e.Object, roomPriority(e.Object, priority))
}

func (roomEvents) Update(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueueRoom(q, e.ObjectNew, roomPriority(e.ObjectNew, 0))
}

// Delete needs no reconcile: the finalizer ran while the room was being deleted, unless somebody
// removed it first. Either way what the manager keeps of the room goes.
func (h roomEvents) Delete(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if h.gone != nil && e.Object != nil {
		h.gone(e.Object.GetUID())
	}
}

func (roomEvents) Generic(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueueRoom(q, e.Object, 0)
}

// roomPriority is priorityUnreconciled for an unreconciled room, else otherwise.
func roomPriority(obj client.Object, otherwise int) int {
	if wq, ok := obj.(*herdgatev1alpha1.WaitingQueue); ok && unreconciled(wq) {
		return priorityUnreconciled
	}
	return otherwise
}

// enqueueRoom adds obj's request at priority.
func enqueueRoom(q workqueue.TypedRateLimitingInterface[reconcile.Request], obj client.Object, priority int) {
	if obj == nil {
		return
	}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)}
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok {
		q.Add(req)
		return
	}
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: &priority}, req)
}
