package main

import (
	"context"
	"encoding/json"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// statuses reads every room's status, by name.
func (r *run) statuses(ctx context.Context) (map[string]herdgatev1alpha1.WaitingQueueStatus, error) {
	list := &herdgatev1alpha1.WaitingQueueList{}
	if err := r.admin.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	out := make(map[string]herdgatev1alpha1.WaitingQueueStatus, len(list.Items))
	for _, wq := range list.Items {
		out[wq.Name] = wq.Status
	}
	return out, nil
}

// reportStatusChanges logs how many rooms' status changed since before, and how the first one did,
// so that a status write in an idle window can be told apart from a room still settling.
func (r *run) reportStatusChanges(ctx context.Context, before map[string]herdgatev1alpha1.WaitingQueueStatus) error {
	after, err := r.statuses(ctx)
	if err != nil {
		return err
	}
	var changed []string
	for name, st := range after {
		if !equality.Semantic.DeepEqual(before[name], st) {
			changed = append(changed, name)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	slices.Sort(changed)
	was, _ := json.Marshal(before[changed[0]])
	is, _ := json.Marshal(after[changed[0]])
	r.logf("%d rooms changed their status while idle; %s went from %s to %s", len(changed), changed[0], was, is)
	return nil
}
