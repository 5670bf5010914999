package controllers

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/internal/settings"
	"github.com/herdgate/herdgate/test/builder"
)

// TestAGoneRoomLeavesNothingBehind: a room that is gone (its finalizer removed by hand before it ran)
// leaves the scheduler no queue to tick and the reconciler nothing kept for it.
func TestAGoneRoomLeavesNothingBehind(t *testing.T) {
	sched := scheduler.New(&queue.Pool{})
	r := &WaitingQueueReconciler{Scheduler: sched}
	gone := builder.Queue("shop", "launch").UID("launch-uid").Obj()
	kept := builder.Queue("shop", "other").UID("other-uid").Obj()
	for _, wq := range []*herdgatev1alpha1.WaitingQueue{gone, kept} {
		sched.Ensure(scheduler.Room{Settings: &settings.Settings{UID: wq.UID, Namespace: wq.Namespace, Name: wq.Name}})
		r.secretReads.Store(wq.UID, secretRead{redisURL: "redis://redis:6379"})
		r.cleanups.take(client.ObjectKeyFromObject(wq), wq.UID, func(context.Context, int) error { return nil })
	}

	roomEvents{gone: r.forgetRoom}.Delete(context.Background(), event.DeleteEvent{Object: gone}, nil)

	if _, ok := sched.Snapshot(gone.UID); ok {
		t.Error("the scheduler still runs the room that is gone")
	}
	if _, ok := sched.Snapshot(kept.UID); !ok {
		t.Error("the scheduler stopped another room")
	}
	if r.lastRedisURL(gone) != "" || r.lastRedisURL(kept) == "" {
		t.Errorf("kept Redis URLs: gone %q, other %q; want only the other's", r.lastRedisURL(gone), r.lastRedisURL(kept))
	}
	r.cleanups.mu.Lock()
	_, goneKept := r.cleanups.byRoom[gone.UID]
	r.cleanups.mu.Unlock()
	if goneKept {
		t.Error("the cleanup of the room that is gone is still kept")
	}
}

// TestAReconcileThatFindsTheRoomGoneStopsItsScheduler: a reconcile that began before the room went can
// hand it to the scheduler after the delete event stopped it; the next reconcile, which finds no room
// of that name, stops any queue of that name.
func TestAReconcileThatFindsTheRoomGoneStopsItsScheduler(t *testing.T) {
	sched := scheduler.New(&queue.Pool{})
	gone := builder.Queue("shop", "launch").UID("launch-uid").Obj()
	kept := builder.Queue("shop", "other").UID("other-uid").Obj()
	for _, wq := range []*herdgatev1alpha1.WaitingQueue{gone, kept} {
		sched.Ensure(scheduler.Room{Settings: &settings.Settings{UID: wq.UID, Namespace: wq.Namespace, Name: wq.Name}})
	}
	scheme := runtime.NewScheme()
	if err := herdgatev1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	r := &WaitingQueueReconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(kept).Build(), Scheduler: sched}

	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(gone)}); err != nil {
		t.Fatal(err)
	}
	if _, ok := sched.Snapshot(gone.UID); ok {
		t.Error("the scheduler still runs the room that is gone")
	}
	if _, ok := sched.Snapshot(kept.UID); !ok {
		t.Error("the scheduler stopped another room")
	}
}
