package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/settings"
)

// Keys of the ConfigMap (ES256) or Secret (HS256) <name>-herdgate-pass-keys that publish what
// gateways verify JWT passes with. The slots keep their names across rotations, so that a gateway's
// configuration (HAProxy's jwt_verify takes a file) never changes; only their content does.
const (
	PassKeysJWKS = "jwks.json"
	// PassKeysEnvoyJWKS holds the same JWKS under the key Envoy Gateway's localJWKS reads from a
	// ConfigMap (it takes the first key otherwise).
	PassKeysEnvoyJWKS = "jwks"
	PassKeysPrevious  = "previous"
	PassKeysCurrent   = "current"
	PassKeysNext      = "next"
)

// passKeyClockSkew is how long beyond a pass's life its key stays published, for gateways whose
// clocks run behind.
const passKeyClockSkew = time.Minute

// passRotation is how the queue's keys rotate.
func passRotation(s *settings.Settings) pass.Rotation {
	return pass.Rotation{Algorithm: pass.Algorithm(s.PassAlgorithm), Every: s.KeyRotation, Keep: s.PassTTL + passKeyClockSkew}
}

// rotatePassKeys brings the JWT pass keys in the Secret's data to what they must be at now, and
// returns them; nil for a queue of HMAC passes, whose data it leaves alone (keys kept there for a
// return to JWT are rotated then). A key set that cannot be read is replaced: the passes it signed
// no longer verify, which is the only way on.
func rotatePassKeys(data map[string][]byte, s *settings.Settings, now time.Time) (*pass.KeySet, error) {
	if s.PassFormat != herdgatev1alpha1.PassFormatJWT {
		return nil, nil
	}
	keys := &pass.KeySet{}
	if raw, ok := data[herdgatev1alpha1.SecretPassKeys]; ok {
		if parsed, err := pass.ParseKeySet(raw); err == nil {
			keys = parsed
		}
	}
	changed, err := keys.Rotate(now, passRotation(s))
	if err != nil || !changed {
		return keys, err
	}
	raw, err := keys.Marshal()
	if err != nil {
		return nil, err
	}
	data[herdgatev1alpha1.SecretPassKeys] = raw
	return keys, nil
}

// passKeySlots are the keys gateways must accept at now, by slot (pass.KeySet.Slots).
func passKeySlots(keys *pass.KeySet, now time.Time) map[string]*pass.Key {
	previous, current, next := keys.Slots(now)
	return map[string]*pass.Key{PassKeysPrevious: previous, PassKeysCurrent: current, PassKeysNext: next}
}

// publishPassKeys publishes what gateways verify the queue's JWT passes with: for ES256 a ConfigMap
// with the JWKS and a PEM per slot; for HS256 a Secret with the JWKS of the secrets and a raw key
// per slot. A queue with HMAC passes publishes nothing, and what it published before is taken back.
// everKept says the queue's Secret holds pass keys: without them nothing was ever published, and
// the queue costs no call (the default, an HMAC queue that never had JWT passes).
func (r *WaitingQueueReconciler) publishPassKeys(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue, keys *pass.KeySet, everKept bool) error {
	if !everKept {
		return nil
	}
	name := types.NamespacedName{Namespace: wq.Namespace, Name: wq.PassKeysName()}
	if keys == nil || wq.Spec.EffectivePassAlgorithm() != herdgatev1alpha1.PassAlgorithmES256 {
		if err := r.deleteOwned(ctx, &corev1.ConfigMap{}, name, wq); err != nil {
			return err
		}
	}
	if keys == nil || wq.Spec.EffectivePassAlgorithm() != herdgatev1alpha1.PassAlgorithmHS256 {
		if err := r.emptyOwnedSecret(ctx, name, wq); err != nil {
			return err
		}
	}
	if keys == nil {
		return nil
	}
	if wq.Spec.EffectivePassAlgorithm() == herdgatev1alpha1.PassAlgorithmHS256 {
		slots := passKeySlots(keys, r.now())
		jwks, err := keys.SecretJWKS()
		if err != nil {
			return err
		}
		data := map[string][]byte{PassKeysJWKS: jwks}
		for slot, k := range slots {
			data[slot+".key"] = k.Secret()
		}
		return r.Apply(ctx, corev1ac.Secret(name.Name, name.Namespace).
			WithLabels(proxyLabels(wq)).WithOwnerReferences(ownerRef(wq)).
			WithType(corev1.SecretTypeOpaque).WithData(data), FieldOwner, client.ForceOwnership)
	}
	jwks, err := keys.PublicJWKS()
	if err != nil {
		return err
	}
	data := map[string]string{PassKeysJWKS: string(jwks), PassKeysEnvoyJWKS: string(jwks)}
	pems, err := keys.PublicPEMs(r.now())
	if err != nil {
		return err
	}
	for slot, pem := range pems {
		data[slot+".pem"] = string(pem)
	}
	return r.Apply(ctx, corev1ac.ConfigMap(name.Name, name.Namespace).
		WithLabels(proxyLabels(wq)).WithOwnerReferences(ownerRef(wq)).
		WithData(data), FieldOwner, client.ForceOwnership)
}

// deleteOwned deletes the object by name when the queue controls it.
func (r *WaitingQueueReconciler) deleteOwned(ctx context.Context, obj client.Object, name types.NamespacedName, wq *herdgatev1alpha1.WaitingQueue) error {
	err := r.APIReader.Get(ctx, name, obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case !metav1.IsControlledBy(obj, wq):
		return nil
	}
	return client.IgnoreNotFound(r.Delete(ctx, obj))
}

// emptyOwnedSecret takes the HS256 keys out of the queue's published Secret. The manager may not
// delete Secrets; the empty Secret goes with the queue.
func (r *WaitingQueueReconciler) emptyOwnedSecret(ctx context.Context, name types.NamespacedName, wq *herdgatev1alpha1.WaitingQueue) error {
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, name, secret)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case !metav1.IsControlledBy(secret, wq) || len(secret.Data) == 0:
		return nil
	}
	if err := r.Apply(ctx, corev1ac.Secret(name.Name, name.Namespace).
		WithLabels(proxyLabels(wq)).WithOwnerReferences(ownerRef(wq)).WithType(corev1.SecretTypeOpaque),
		FieldOwner, client.ForceOwnership); err != nil {
		return fmt.Errorf("emptying the Secret %s: %w", name.Name, err)
	}
	return nil
}
