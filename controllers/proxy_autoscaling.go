package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// HandoverFieldOwner is the field manager that holds a proxy Deployment's replica count between the
// operator and its HorizontalPodAutoscaler (spec.proxy.autoscaling): server-side apply removes a field
// its last owner stops applying, so the operator gives the count to this manager first and never
// applies it again; the autoscaler's first scaling takes it over from there.
const HandoverFieldOwner = "herdgate-autoscaling-handover"

// replicaHandOver is a replica count to hand over, before the Deployment is applied (it exists and
// the operator owns its count) or after (it is new, and gets the autoscaler's minimum).
type replicaHandOver struct {
	replicas int32
	before   bool
}

// replicasToHandOver tells whether w's replica count is to be handed over: only with autoscaling,
// and only until the autoscaler exists. Once it does, the count is its own; this reads the cache.
func (r *WaitingQueueReconciler) replicasToHandOver(ctx context.Context, w proxyWorkload, ours func(client.Object) bool) (*replicaHandOver, error) {
	if w.autoscaling == nil {
		return nil, nil
	}
	name := types.NamespacedName{Namespace: w.namespace, Name: w.name}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	switch err := r.Get(ctx, name, hpa); {
	case err == nil && ours(hpa):
		return nil, nil
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading the proxy's HorizontalPodAutoscaler: %w", err)
	}
	deploy := &appsv1.Deployment{}
	switch err := r.Get(ctx, name, deploy); {
	case apierrors.IsNotFound(err):
		return &replicaHandOver{replicas: *w.autoscaling.MinReplicas}, nil
	case err != nil:
		return nil, fmt.Errorf("reading the proxy's Deployment: %w", err)
	case deploy.Spec.Replicas == nil:
		return &replicaHandOver{replicas: *w.autoscaling.MinReplicas, before: true}, nil
	}
	// The count the pods run at now: the autoscaler starts from it.
	return &replicaHandOver{replicas: *deploy.Spec.Replicas, before: true}, nil
}

// handOverReplicas applies the Deployment's replica count, and nothing else, as HandoverFieldOwner.
func (r *WaitingQueueReconciler) handOverReplicas(ctx context.Context, w proxyWorkload, replicas int32) error {
	count := appsv1ac.Deployment(w.name, w.namespace).WithSpec(appsv1ac.DeploymentSpec().WithReplicas(replicas))
	if err := r.Apply(ctx, count, client.FieldOwner(HandoverFieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("handing the proxy's replica count over to its autoscaler: %w", err)
	}
	return nil
}

// applyAutoscaler applies w's HorizontalPodAutoscaler with autoscaling, and deletes one that ours says
// is its own without.
func (r *WaitingQueueReconciler) applyAutoscaler(ctx context.Context, memo types.UID, w proxyWorkload, ours func(client.Object) bool) error {
	if w.autoscaling != nil {
		return r.applyOwned(ctx, memo, ownedObject{configuration: w.autoscaler(), cached: &autoscalingv2.HorizontalPodAutoscaler{}})
	}
	return r.deleteIfOurs(ctx, w, &autoscalingv2.HorizontalPodAutoscaler{}, ours)
}
