package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// appliedObjects remembers, per queue, the configuration the manager last applied to each object it
// owns and the resourceVersion the API server gave the result. A reconcile that would apply the same
// configuration to an object the cache still holds at that version makes no call: an idle queue is
// reconciled at every resync and every change the scheduler reports, and a server-side apply that
// changes nothing still costs the API server a decode, a merge and a comparison
// (docs/architecture.md, "What the manager writes"). Anyone else's change to the object gives it
// another resourceVersion, and the next reconcile applies again.
type appliedObjects struct {
	mu      sync.Mutex
	byQueue map[types.UID]map[string]appliedObject
}

type appliedObject struct {
	configuration   [sha256.Size]byte
	resourceVersion string
}

// forget drops what is remembered of a queue's objects.
func (a *appliedObjects) forget(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.byQueue, uid)
}

// forgetObject drops what is remembered of one object of a queue, by its key in applyOwned.
func (a *appliedObjects) forgetObject(uid types.UID, key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.byQueue[uid], key)
}

func (a *appliedObjects) get(uid types.UID, key string) (appliedObject, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.byQueue[uid][key]
	return o, ok
}

func (a *appliedObjects) set(uid types.UID, key string, o appliedObject) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byQueue == nil {
		a.byQueue = map[types.UID]map[string]appliedObject{}
	}
	if a.byQueue[uid] == nil {
		a.byQueue[uid] = map[string]appliedObject{}
	}
	a.byQueue[uid][key] = o
}

// ownedObject is an object of a queue to apply: its configuration, and an empty object of its type
// to read it from the cache into.
type ownedObject struct {
	configuration namedConfiguration
	cached        client.Object
	// owner is the field manager that applies it; FieldOwner when empty.
	owner client.FieldOwner
	// uncached: the manager does not watch the object's kind (a Secret); it is read from the API.
	uncached bool
}

// namedConfiguration is an object's apply configuration, which names it.
type namedConfiguration interface {
	runtime.ApplyConfiguration
	GetName() *string
	GetNamespace() *string
}

// applyOwned applies o for the queue uid unless the cache holds it at the version the same
// configuration gave last.
func (r *WaitingQueueReconciler) applyOwned(ctx context.Context, uid types.UID, o ownedObject) error {
	name := types.NamespacedName{Namespace: ptr.Deref(o.configuration.GetNamespace(), ""), Name: ptr.Deref(o.configuration.GetName(), "")}
	desired, err := json.Marshal(o.configuration)
	if err != nil {
		return fmt.Errorf("encoding %T: %w", o.configuration, err)
	}
	sum := sha256.Sum256(desired)
	key := fmt.Sprintf("%T/%s", o.cached, name.Name)
	if last, ok := r.applied.get(uid, key); ok && last.configuration == sum {
		var read client.Reader = r.Client
		if o.uncached {
			read = r.APIReader
		}
		err := read.Get(ctx, name, o.cached)
		if err == nil && o.cached.GetResourceVersion() == last.resourceVersion {
			return nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	owner := FieldOwner
	if o.owner != "" {
		owner = o.owner
	}
	if err := r.Apply(ctx, o.configuration, owner, client.ForceOwnership); err != nil {
		return err
	}
	// Apply decoded the object the API server returned into the configuration.
	var result struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if b, err := json.Marshal(o.configuration); err == nil && json.Unmarshal(b, &result) == nil && result.Metadata.ResourceVersion != "" {
		r.applied.set(uid, key, appliedObject{configuration: sum, resourceVersion: result.Metadata.ResourceVersion})
	}
	return nil
}
