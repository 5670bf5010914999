package controllers

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/draw"
)

// errRedisConfig marks a Redis URL that cannot be used; retrying will not help until something changes.
type errRedisConfig struct{ msg string }

func (e errRedisConfig) Error() string { return e.msg }

// redisURL is the queue's Redis URL: from spec.redis.secretRef, else the manager's default.
func (r *WaitingQueueReconciler) redisURL(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue) (string, error) {
	if wq.Spec.Redis == nil {
		if r.DefaultRedisURL == "" {
			return "", errRedisConfig{"the queue sets no spec.redis and the manager has no --redis-url"}
		}
		return r.DefaultRedisURL, nil
	}
	ref := wq.Spec.Redis.SecretRef
	key := ref.Key
	if key == "" {
		key = herdgatev1alpha1.DefaultRedisSecretKey
	}
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return "", errRedisConfig{fmt.Sprintf("Secret %s named in spec.redis.secretRef does not exist", ref.Name)}
		}
		return "", err
	}
	url := string(secret.Data[key])
	if url == "" {
		return "", errRedisConfig{fmt.Sprintf("Secret %s has no key %q with a Redis URL", ref.Name, key)}
	}
	return url, nil
}

// ensureSecret creates the per-queue Secret with a fresh HMAC key once and never replaces that key;
// it keeps the Redis URL current. A scheduled queue's Secret also holds the seed of its draw, which
// it returns: made once per opening, kept when opensAt moves before the seed was revealed, and made
// anew for an opensAt after a reveal (a revealed seed would let anyone predict the next draw).
func (r *WaitingQueueReconciler) ensureSecret(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue, redisURL string) ([]byte, error) {
	newKey := func() ([]byte, error) {
		key := make([]byte, 32)
		_, err := rand.Read(key)
		return key, err
	}
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.SecretName()}, secret)
	if apierrors.IsNotFound(err) {
		key, err := newKey()
		if err != nil {
			return nil, err
		}
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: wq.SecretName(), Namespace: wq.Namespace, Labels: proxyLabels(wq)},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{herdgatev1alpha1.SecretHMACKey: key, herdgatev1alpha1.SecretRedisURL: []byte(redisURL)},
		}
		seed, err := r.drawSeed(wq, secret)
		if err != nil {
			return nil, err
		}
		if err := controllerutil.SetControllerReference(wq, secret, r.Scheme); err != nil {
			return nil, err
		}
		return seed, r.Create(ctx, secret)
	}
	if err != nil {
		return nil, err
	}
	patch := client.MergeFrom(secret.DeepCopy())
	before := secret.DeepCopy()
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	secret.Data[herdgatev1alpha1.SecretRedisURL] = []byte(redisURL)
	if len(secret.Data[herdgatev1alpha1.SecretHMACKey]) < 32 {
		// Someone removed the key: a new one is the only way on (existing passes become invalid).
		if secret.Data[herdgatev1alpha1.SecretHMACKey], err = newKey(); err != nil {
			return nil, err
		}
	}
	seed, err := r.drawSeed(wq, secret)
	if err != nil || equality.Semantic.DeepEqual(before.Data, secret.Data) {
		return seed, err
	}
	return seed, r.Patch(ctx, secret, patch)
}

// drawSeed puts the seed of the queue's next draw in secret.Data and returns it; nil without a
// schedule.
func (r *WaitingQueueReconciler) drawSeed(wq *herdgatev1alpha1.WaitingQueue, secret *corev1.Secret) ([]byte, error) {
	sc := wq.Spec.Schedule
	if sc == nil {
		return nil, nil
	}
	opensAt := sc.OpensAt.UTC().Format(time.RFC3339Nano)
	seed := secret.Data[herdgatev1alpha1.SecretDrawSeed]
	if was := string(secret.Data[herdgatev1alpha1.SecretDrawSeedFor]); len(seed) == draw.SeedBytes && was != opensAt {
		// The seed was made for another opening: it still serves unless that opening came and its
		// seed may have been revealed.
		if prev, err := time.Parse(time.RFC3339Nano, was); err != nil || !r.now().Before(prev) {
			seed = nil
		}
	}
	if len(seed) != draw.SeedBytes {
		var err error
		if seed, err = draw.NewSeed(); err != nil {
			return nil, err
		}
	}
	secret.Data[herdgatev1alpha1.SecretDrawSeed] = seed
	secret.Data[herdgatev1alpha1.SecretDrawSeedFor] = []byte(opensAt)
	return seed, nil
}

// ensureProxy applies the proxy's ServiceAccount, Role, RoleBinding, Deployment and Service, and its
// PodDisruptionBudget while it runs more than one replica.
func (r *WaitingQueueReconciler) ensureProxy(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue, redisURL string) error {
	objs := []runtime.ApplyConfiguration{
		proxyServiceAccount(wq),
		proxyRole(wq),
		proxyRoleBinding(wq),
		proxyDeployment(wq, r.ProxyImage, redisURL),
		proxyService(wq),
	}
	if wq.Spec.EffectiveProxyReplicas() > 1 {
		objs = append(objs, proxyDisruptionBudget(wq))
	} else {
		// Read from the cache first: most reconciles find none, and need no call to the API server.
		pdb := &policyv1.PodDisruptionBudget{}
		err := r.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.ProxyName()}, pdb)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("reading the proxy's PodDisruptionBudget: %w", err)
		case metav1.IsControlledBy(pdb, wq):
			if err := r.Delete(ctx, pdb); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting the proxy's PodDisruptionBudget: %w", err)
			}
		}
	}
	for _, obj := range objs {
		if err := r.Apply(ctx, obj, FieldOwner, client.ForceOwnership); err != nil {
			return err
		}
	}
	return nil
}

func (r *WaitingQueueReconciler) deleteRedisKeys(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue) error {
	url, err := r.redisURL(ctx, wq)
	if err != nil {
		return err
	}
	store, release, err := r.Pool.Acquire(url)
	if err != nil {
		return err
	}
	defer release()
	q, err := store.Queue(wq.Namespace, wq.Name)
	if err != nil {
		return err
	}
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return q.Delete(callCtx)
}
