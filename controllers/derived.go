package controllers

import (
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/settings"
)

// derivedSettings is what settings.Derive made of one generation of a queue's spec.
type derivedSettings struct {
	generation int64
	settings   *settings.Settings
	err        error
}

// derive is settings.Derive, done once per generation of each queue. Derive checks the spec against
// the CRD's schema and CEL rules, which is most of what a resync of an idle room costs the manager
// (docs/performance.md, "A thousand rooms on one manager"); the spec, and so the result, changes
// only with the generation. The settings returned are shared: callers must not change them.
func (r *WaitingQueueReconciler) derive(wq *herdgatev1alpha1.WaitingQueue) (*settings.Settings, error) {
	if v, ok := r.derived.Load(wq.UID); ok && wq.Generation > 0 {
		if d := v.(derivedSettings); d.generation == wq.Generation {
			return d.settings, d.err
		}
	}
	s, err := settings.Derive(wq)
	if wq.UID != "" && wq.Generation > 0 {
		r.derived.Store(wq.UID, derivedSettings{generation: wq.Generation, settings: s, err: err})
	}
	return s, err
}
