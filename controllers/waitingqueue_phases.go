package controllers

import (
	"context"
	"crypto/rand"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/draw"
	"github.com/herdgate/herdgate/internal/page"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/settings"
)

// errRedisConfig marks a Redis URL that cannot be used; retrying will not help until something changes.
type errRedisConfig struct{ msg string }

func (e errRedisConfig) Error() string { return e.msg }

// redisURL is the queue's Redis URL: from spec.redis.secretRef, else the manager's default.
// errSecretValue is a value the spec refers to that cannot be read or serve: the queue waits for a
// good one, keeping the last copy (see ensureSecret). reason is the Programmed condition's.
type errSecretValue struct{ msg, reason string }

func (e errSecretValue) Error() string { return e.msg }

// referencedValues reads the values the spec refers to, by their keys in the queue's Secret. A value
// that cannot be read is nil in the map, and the first such is the error, naming its field.
func (r *WaitingQueueReconciler) referencedValues(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue, s *settings.Settings) (map[string][]byte, error) {
	values := map[string][]byte{}
	var missing error
	secrets := map[string]*corev1.Secret{}
	for _, ref := range s.SecretRefs() {
		key := herdgatev1alpha1.SecretRefKey(ref.Name, ref.Key)
		values[key] = nil
		secret, seen := secrets[ref.Name]
		if !seen {
			secret = &corev1.Secret{}
			if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: ref.Name}, secret); err != nil {
				if !apierrors.IsNotFound(err) {
					return nil, err
				}
				secret = nil
			}
			secrets[ref.Name] = secret
		}
		switch {
		case secret == nil:
			if missing == nil {
				missing = errSecretValue{fmt.Sprintf("%s: Secret %s does not exist", ref.Field, ref.Name), herdgatev1alpha1.ReasonSecretValueMissing}
			}
		case len(secret.Data[ref.Key]) == 0:
			if missing == nil {
				missing = errSecretValue{fmt.Sprintf("%s: Secret %s has no key %q", ref.Field, ref.Name, ref.Key), herdgatev1alpha1.ReasonSecretValueMissing}
			}
		default:
			// The proxy's own check of the value: one it would refuse is not copied to it.
			if err := ref.CheckValue(secret.Data[ref.Key]); err != nil {
				if missing == nil {
					missing = errSecretValue{err.Error() + "; the value copied last stays in force", herdgatev1alpha1.ReasonSecretValueInvalid}
				}
				continue
			}
			values[key] = secret.Data[ref.Key]
		}
	}
	for _, t := range pageTemplates(s) {
		if err := r.pageTemplate(ctx, wq, t, values); err != nil && missing == nil {
			missing = err
		}
	}
	return values, missing
}

// pageTemplates are the page templates of the room and of its events, each once.
func pageTemplates(s *settings.Settings) []settings.SecretRef {
	var out []settings.SecretRef
	seen := map[string]bool{}
	add := func(s *settings.Settings) {
		if s.Page == nil || s.Page.Template == nil {
			return
		}
		key := herdgatev1alpha1.ConfigMapRefKey(s.Page.Template.Name, s.Page.Template.Key)
		if !seen[key] {
			seen[key] = true
			out = append(out, *s.Page.Template)
		}
	}
	add(s)
	for _, e := range s.Events {
		add(e.Settings)
	}
	return out
}

// pageTemplate reads spec.page.template's ConfigMap value into values and checks that it renders; a
// template that does not is left out (its last good copy stays) and named in the error.
func (r *WaitingQueueReconciler) pageTemplate(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue, ref settings.SecretRef, values map[string][]byte) error {
	key := herdgatev1alpha1.ConfigMapRefKey(ref.Name, ref.Key)
	values[key] = nil
	cm := &corev1.ConfigMap{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: ref.Name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return errSecretValue{fmt.Sprintf("%s: ConfigMap %s does not exist", ref.Field, ref.Name), herdgatev1alpha1.ReasonSecretValueMissing}
		}
		return err
	}
	text, ok := cm.Data[ref.Key]
	if !ok {
		return errSecretValue{fmt.Sprintf("%s: ConfigMap %s has no key %q", ref.Field, ref.Name, ref.Key), herdgatev1alpha1.ReasonSecretValueMissing}
	}
	if err := page.Check(text); err != nil {
		return errSecretValue{fmt.Sprintf("%s: ConfigMap %s key %s: %v; the page in force stays", ref.Field, ref.Name, ref.Key, err), herdgatev1alpha1.ReasonPageTemplateInvalid}
	}
	values[key] = []byte(text)
	return nil
}

func (r *WaitingQueueReconciler) redisURL(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue) (string, error) {
	if wq.Spec.Redis == nil || wq.Spec.Redis.SecretRef == nil {
		if r.DefaultRedisURL == "" {
			return "", errRedisConfig{"the queue sets no spec.redis.secretRef and the manager has no --redis-url"}
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
//
// It also holds the copies of the values the spec refers to (refs, by SecretRefKey; a nil value is
// one that cannot be read now, whose last copy is kept), and drops copies no field refers to any
// more. It returns the keys of the copies it holds, which the proxy mounts.
//
// With JWT passes it also keeps their keys (rotatePassKeys), returned in secretState.passKeys and
// mounted too.
//
// known is the Secret as the last reconcile left it (secretRead), nil to read it.
func (r *WaitingQueueReconciler) ensureSecret(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue, s *settings.Settings, redisURL string, refs map[string][]byte, known *corev1.Secret) (secretState, error) {
	newKey := func() ([]byte, error) {
		key := make([]byte, 32)
		_, err := rand.Read(key)
		return key, err
	}
	var st secretState
	var err error
	secret := known.DeepCopy()
	if secret == nil {
		secret = &corev1.Secret{}
		err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.SecretName()}, secret)
	}
	if apierrors.IsNotFound(err) {
		key, err := newKey()
		if err != nil {
			return st, err
		}
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: wq.SecretName(), Namespace: wq.Namespace, Labels: proxyLabels(wq)},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{herdgatev1alpha1.SecretHMACKey: key, herdgatev1alpha1.SecretRedisURL: []byte(redisURL)},
		}
		if err := st.fill(secret.Data, refs, s, r.now()); err != nil {
			return st, err
		}
		if st.seed, err = r.drawSeed(s, secret); err != nil {
			return st, err
		}
		if err := controllerutil.SetControllerReference(wq, secret, r.Scheme); err != nil {
			return st, err
		}
		st.secret = secret
		return st, r.Create(ctx, secret)
	}
	if err != nil {
		return st, err
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
			return st, err
		}
	}
	if err := st.fill(secret.Data, refs, s, r.now()); err != nil {
		return st, err
	}
	st.seed, err = r.drawSeed(s, secret)
	st.secret = secret
	if err != nil || equality.Semantic.DeepEqual(before.Data, secret.Data) {
		return st, err
	}
	return st, r.Patch(ctx, secret, patch)
}

// secretState is what the queue's Secret holds for the rest of the reconcile: the seed of the draw
// (nil without a schedule), the keys the proxy mounts beside the HMAC key, and the JWT pass keys
// (nil with HMAC passes).
type secretState struct {
	// secret is the queue's Secret as the reconcile left it.
	secret   *corev1.Secret
	seed     []byte
	mounted  []string
	passKeys *pass.KeySet
	// passKeysKept: the Secret holds pass keys, now or from the queue's JWT days.
	passKeysKept bool
}

// fill puts the copies of the referred values and the JWT pass keys into the Secret's data.
func (st *secretState) fill(data map[string][]byte, refs map[string][]byte, s *settings.Settings, now time.Time) error {
	st.mounted = copyRefs(data, refs)
	var err error
	if st.passKeys, err = rotatePassKeys(data, s, now); err != nil {
		return fmt.Errorf("rotating the pass keys: %w", err)
	}
	if st.passKeys != nil {
		st.mounted = append(st.mounted, herdgatev1alpha1.SecretPassKeys)
	}
	_, st.passKeysKept = data[herdgatev1alpha1.SecretPassKeys]
	return nil
}

// copyRefs puts the values the spec refers to into data, keeps the last copy of one that cannot be
// read now, drops copies of values no field refers to, and returns the keys of the copies held.
func copyRefs(data map[string][]byte, refs map[string][]byte) []string {
	for k := range data {
		if _, wanted := refs[k]; strings.HasPrefix(k, herdgatev1alpha1.SecretRefKeyPrefix) && !wanted {
			delete(data, k)
		}
	}
	var held []string
	for k, v := range refs {
		if v != nil {
			data[k] = v
		}
		if _, ok := data[k]; ok {
			held = append(held, k)
		}
	}
	slices.Sort(held)
	return held
}

// drawSeed puts the seed of the queue's next draw in secret.Data and returns it: its schedule's, or
// its events' next launch's (spec.events); nil without one.
func (r *WaitingQueueReconciler) drawSeed(s *settings.Settings, secret *corev1.Secret) ([]byte, error) {
	sc := s.NextOpening(r.now())
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

// ensureProxy applies the objects of the room's proxy: its own ServiceAccount, Role, RoleBinding,
// Deployment and Service, and its PodDisruptionBudget while it runs more than one replica; or, for a
// room in a shared proxy set, its values in the set's Secret and the set's objects (proxy_set.go).
func (r *WaitingQueueReconciler) ensureProxy(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue, redisURL string, secret secretState) error {
	if wq.Spec.ProxySet() != "" {
		return r.ensureInSet(ctx, wq, secret.secret, secret.mounted)
	}
	if err := r.leaveOldSet(ctx, wq, secret.secret); err != nil {
		return err
	}
	w := workloadOf(wq, redisURL, r.ProxyImage, secret.mounted)
	return r.applyWorkload(ctx, wq.UID, w, func(obj client.Object) bool { return metav1.IsControlledBy(obj, wq) })
}

// applyWorkload applies w's objects, remembered under memo (applyOwned); its PodDisruptionBudget
// only while it runs more than one replica at the least, and its HorizontalPodAutoscaler only with
// autoscaling, deleting one that ours says is its own.
func (r *WaitingQueueReconciler) applyWorkload(ctx context.Context, memo types.UID, w proxyWorkload, ours func(client.Object) bool) error {
	handOver, err := r.replicasToHandOver(ctx, w, ours)
	if err != nil {
		return err
	}
	if handOver != nil && handOver.before {
		if err := r.handOverReplicas(ctx, w, handOver.replicas); err != nil {
			return err
		}
	}
	objs := []ownedObject{
		{configuration: w.serviceAccount(), cached: &corev1.ServiceAccount{}},
		{configuration: w.roleConfig(), cached: &rbacv1.Role{}},
		{configuration: w.roleBinding(), cached: &rbacv1.RoleBinding{}},
		{configuration: w.deployment(r.ProxyImage), cached: &appsv1.Deployment{}},
		{configuration: w.service(), cached: &corev1.Service{}},
	}
	if w.minReplicas() > 1 {
		objs = append(objs, ownedObject{configuration: w.disruptionBudget(), cached: &policyv1.PodDisruptionBudget{}})
	} else if err := r.deleteIfOurs(ctx, w, &policyv1.PodDisruptionBudget{}, ours); err != nil {
		return err
	}
	for _, obj := range objs {
		if err := r.applyOwned(ctx, memo, obj); err != nil {
			return err
		}
	}
	if handOver != nil && !handOver.before {
		if err := r.handOverReplicas(ctx, w, handOver.replicas); err != nil {
			return err
		}
	}
	return r.applyAutoscaler(ctx, memo, w, ours)
}

// deleteIfOurs deletes w's object of obj's kind, when ours says it is its own. It reads the cache
// first: most reconciles find none, and need no call to the API server.
func (r *WaitingQueueReconciler) deleteIfOurs(ctx context.Context, w proxyWorkload, obj client.Object, ours func(client.Object) bool) error {
	kind := reflect.TypeOf(obj).Elem().Name()
	err := r.Get(ctx, types.NamespacedName{Namespace: w.namespace, Name: w.name}, obj)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading the proxy's %s: %w", kind, err)
	case ours(obj):
		if err := r.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the proxy's %s: %w", kind, err)
		}
	}
	return nil
}
