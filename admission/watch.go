package admission

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// WatchQueue watches one WaitingQueue and its Secret (by name only: the proxy's Role allows nothing
// else) and calls apply with a fresh Config whenever either changes, starting with the current one.
// A change that does not make a valid config is logged and skipped; the last good config stays.
// WatchQueue returns when ctx ends, or early with an error when the first config cannot be built.
func WatchQueue(ctx context.Context, cfg *rest.Config, key types.NamespacedName, apply func(*Config), log logr.Logger) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := herdgatev1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	secretName := (&herdgatev1alpha1.WaitingQueue{ObjectMeta: metav1.ObjectMeta{Name: key.Name}}).SecretName()
	c, err := cache.New(cfg, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{key.Namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&herdgatev1alpha1.WaitingQueue{}: {Field: fields.OneTermEqualSelector("metadata.name", key.Name)},
			&corev1.Secret{}:                 {Field: fields.OneTermEqualSelector("metadata.name", secretName)},
		},
	})
	if err != nil {
		return fmt.Errorf("creating the watch cache: %w", err)
	}
	changed := make(chan struct{}, 1)
	notify := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	}
	for _, obj := range []client.Object{&herdgatev1alpha1.WaitingQueue{}, &corev1.Secret{}} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	errs := make(chan error, 1)
	go func() { errs <- c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("watching WaitingQueue %s: the cache never synced (check the proxy's RBAC)", key)
	}

	build := func() (*Config, error) {
		wq := &herdgatev1alpha1.WaitingQueue{}
		if err := c.Get(ctx, key, wq); err != nil {
			return nil, fmt.Errorf("reading WaitingQueue %s: %w", key, err)
		}
		secret := &corev1.Secret{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: secretName}, secret); err != nil {
			return nil, fmt.Errorf("reading Secret %s/%s: %w", key.Namespace, secretName, err)
		}
		return NewConfig(wq, secret.Data[herdgatev1alpha1.SecretHMACKey])
	}
	first, err := build()
	if err != nil {
		return err
	}
	apply(first)
	for {
		select {
		case <-ctx.Done():
			return <-errs
		case <-changed:
			next, err := build()
			if err != nil {
				log.Error(err, "Ignoring a change that does not make a valid config; keeping the last one")
				continue
			}
			log.Info("Applying a changed WaitingQueue or Secret")
			apply(next)
		}
	}
}
