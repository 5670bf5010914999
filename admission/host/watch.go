// Package host runs the admission proxy's rooms in Kubernetes: it watches a room's WaitingQueue,
// or the rooms of a shared proxy set, and hands the gate a fresh config whenever one or its key
// changes. It is the only part of the proxy that links controller-runtime; the gate (package
// admission) takes its config from anywhere, a file included.
package host

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"os"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// DefaultResync is how often WatchRoom rebuilds the config without a change, to pick up a new key.
const DefaultResync = 30 * time.Second

// WatchOptions configure WatchRoom.
type WatchOptions struct {
	// HMACKey returns the queue's HMAC key; it is read again for every config built. KeyFile reads it
	// from the file the operator's Deployment mounts from the queue's Secret.
	HMACKey func() ([]byte, error)
	// Values reads the copies of the Secret values the queue's fields refer to; SecretFiles reads
	// them from the directory the HMAC key is mounted in. It may be nil for queues that refer to none.
	Values admission.SecretValues
	// Apply receives every new valid config, starting with the first.
	Apply func(*admission.Config)
	// Refuse receives a WaitingQueue generation that does not make a valid config, and why; the
	// last valid config stays in force. It may be nil.
	Refuse func(generation int64, err error)
	// Resync rebuilds the config this often even when the WaitingQueue did not change; 0 means
	// DefaultResync.
	Resync time.Duration
	Log    logr.Logger
}

// KeyFile returns an HMACKey that reads path, as mounted from the queue's Secret.
func KeyFile(path string) func() ([]byte, error) {
	return func() ([]byte, error) {
		key, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading the HMAC key: %w", err)
		}
		return key, nil
	}
}

// WatchRoom watches one WaitingQueue (by name only: the proxy's Role allows nothing else) and
// hands Apply a fresh admission.Config whenever it or the key changes. A change that does not make a valid
// config goes to Refuse, and the last good config stays; a proxy whose first config is refused
// keeps waiting for a valid one rather than exiting. WatchRoom returns when ctx ends, or with an
// error when the watch cannot be set up.
func WatchRoom(ctx context.Context, cfg *rest.Config, key types.NamespacedName, opts WatchOptions) error {
	c, changed, errs, err := watchQueues(ctx, cfg, key.Namespace, fields.OneTermEqualSelector("metadata.name", key.Name))
	if err != nil {
		return fmt.Errorf("watching WaitingQueue %s: %w", key, err)
	}
	if c == nil {
		return <-errs
	}

	w := queueWatch{opts: opts, key: key, read: c}
	return keepUpdating(ctx, changed, errs, opts.Resync, w.update)
}

// keepUpdating calls update now, after every change and every resync (DefaultResync when 0) until
// ctx ends, and returns the watch cache's end.
func keepUpdating(ctx context.Context, changed <-chan struct{}, errs <-chan error, resync time.Duration, update func(context.Context)) error {
	if resync <= 0 {
		resync = DefaultResync
	}
	ticker := time.NewTicker(resync)
	defer ticker.Stop()
	update(ctx)
	for {
		select {
		case <-ctx.Done():
			return <-errs
		case <-changed:
		case <-ticker.C:
		}
		update(ctx)
	}
}

// watchQueues starts a cache of the WaitingQueues of namespace that match selector and waits for it
// to sync. changed receives a value after any change; errs the cache's end. A nil cache means ctx
// ended before the sync: errs says why.
func watchQueues(ctx context.Context, cfg *rest.Config, namespace string, selector fields.Selector) (cache.Cache, <-chan struct{}, <-chan error, error) {
	scheme := runtime.NewScheme()
	if err := herdgatev1alpha1.AddToScheme(scheme); err != nil {
		return nil, nil, nil, err
	}
	c, err := cache.New(cfg, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject:          map[client.Object]cache.ByObject{&herdgatev1alpha1.WaitingQueue{}: {Field: selector}},
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("creating the watch cache: %w", err)
	}
	changed := make(chan struct{}, 1)
	notify := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	inf, err := c.GetInformer(ctx, &herdgatev1alpha1.WaitingQueue{})
	if err != nil {
		return nil, nil, nil, err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	}); err != nil {
		return nil, nil, nil, err
	}
	errs := make(chan error, 1)
	go func() { errs <- c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, nil, errs, nil
	}
	return c, changed, errs, nil
}

// queueWatch builds configs and hands on only the new ones.
type queueWatch struct {
	opts WatchOptions
	key  types.NamespacedName
	read client.Reader
	// What the config in force was built from: the WaitingQueue's version and a digest of the key and
	// the Secret values read.
	version string
	secrets [sha256.Size]byte
}

func (w *queueWatch) update(ctx context.Context) {
	wq := &herdgatev1alpha1.WaitingQueue{}
	if err := w.read.Get(ctx, w.key, wq); err != nil {
		if ctx.Err() == nil {
			w.opts.Log.Info("Cannot read the WaitingQueue; keeping the config in force", "waitingqueue", w.key.String(), "error", err.Error())
		}
		return
	}
	hmacKey, err := w.opts.HMACKey()
	var cfg *admission.Config
	digest := sha256.New()
	if err == nil {
		digest.Write(hmacKey)
		cfg, err = admission.NewConfigWithSecrets(wq, hmacKey, w.recording(digest))
	}
	var secrets [sha256.Size]byte
	digest.Sum(secrets[:0])
	if err == nil && w.version == wq.ResourceVersion && secrets == w.secrets {
		return // nothing new
	}
	if err != nil {
		if w.opts.Refuse != nil {
			w.opts.Refuse(wq.Generation, err)
		}
		return
	}
	w.version, w.secrets = wq.ResourceVersion, secrets
	w.opts.Log.Info("Applying the WaitingQueue", "generation", wq.Generation)
	w.opts.Apply(cfg)
}

// recording reads values through the watch's reader and adds each to digest, so that a changed value
// makes a new config.
func (w *queueWatch) recording(digest hash.Hash) admission.SecretValues {
	if w.opts.Values == nil {
		return nil
	}
	return func(key string) ([]byte, error) {
		v, err := w.opts.Values(key)
		if err != nil {
			return nil, err
		}
		digest.Write([]byte(key))
		digest.Write([]byte{0})
		digest.Write(v)
		digest.Write([]byte{0})
		return v, nil
	}
}
