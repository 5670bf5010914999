package controllers

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// A shared proxy set (spec.proxy.shared) is one proxy Deployment for the rooms of a namespace that
// name it (docs/guides/proxy-sets.md). Its objects are named herdgate-set-<set> and owned by every
// member room, so that they go with the last one. Each room copies its values into the set's Secret
// as a field manager of its own: a room that leaves takes back its values and nothing else.

// LabelProxySet names the shared proxy set an object belongs to.
const LabelProxySet = "herdgate.io/proxy-set"

// AnnotationProxySet, on a room's own Secret, names the set the room copied its values into last, so
// that a room that moves to another set, or to a proxy of its own, takes them back from the old one.
const AnnotationProxySet = "herdgate.io/proxy-set"

func proxySetSelector(set string) map[string]string {
	return map[string]string{labelName: "herdgate-proxy-set", labelInstance: set}
}

func proxySetLabels(set string) map[string]string {
	l := proxySetSelector(set)
	l[labelComponent] = "admission-proxy"
	l[labelManagedBy] = "herdgate"
	l[LabelProxySet] = set
	return l
}

// memberRef is a room's reference on the set's objects: an owner, not the controller.
func memberRef(wq *herdgatev1alpha1.WaitingQueue) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(herdgatev1alpha1.GroupVersion.String()).
		WithKind("WaitingQueue").
		WithName(wq.Name).
		WithUID(wq.UID)
}

// roomFieldOwner is the field manager of one room's values in its set's Secret.
func roomFieldOwner(wq *herdgatev1alpha1.WaitingQueue) client.FieldOwner {
	sum := sha256.Sum256([]byte(wq.UID))
	return client.FieldOwner("herdgate-room-" + hex.EncodeToString(sum[:8]))
}

// setMembers are the rooms of namespace in set, not being deleted, oldest first.
func (r *WaitingQueueReconciler) setMembers(ctx context.Context, namespace, set string) ([]*herdgatev1alpha1.WaitingQueue, error) {
	list := &herdgatev1alpha1.WaitingQueueList{}
	if err := r.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var out []*herdgatev1alpha1.WaitingQueue
	for i := range list.Items {
		wq := &list.Items[i]
		if wq.Spec.ProxySet() == set && wq.DeletionTimestamp.IsZero() {
			out = append(out, wq)
		}
	}
	slices.SortFunc(out, func(a, b *herdgatev1alpha1.WaitingQueue) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// setWorkload is the proxy Deployment of set's members: the most replicas any asks for, the
// resources of the oldest.
func setWorkload(namespace, set, image string, members []*herdgatev1alpha1.WaitingQueue) proxyWorkload {
	w := proxyWorkload{
		name: herdgatev1alpha1.ProxySetName(set), namespace: namespace, labels: proxySetLabels(set), selector: proxySetSelector(set),
		resources: proxyResources(members[0]),
		args:      []string{"--proxy-set=" + namespace + "/" + set, "--secret-dir=" + keyMountPath},
		secret:    corev1ac.SecretVolumeSource().WithSecretName(herdgatev1alpha1.ProxySetName(set)),
		// Each room's Redis URL is read as it joins: only the image restarts the pods.
		configHash: configHash("", image, nil),
		role: rbacv1ac.PolicyRule().WithAPIGroups(herdgatev1alpha1.GroupVersion.Group).WithResources("waitingqueues").
			WithVerbs("get", "list", "watch"),
		serviceName: herdgatev1alpha1.ProxySetName(set),
	}
	for _, m := range members {
		w.owners = append(w.owners, memberRef(m))
		w.replicas = max(w.replicas, m.Spec.EffectiveProxyReplicas())
	}
	return w
}

// setMemo is the key under which appliedObjects remembers a set's objects.
func setMemo(namespace, set string) types.UID { return types.UID("proxy-set/" + namespace + "/" + set) }

// ensureInSet makes wq a member of its set: its values copied into the set's Secret, the set's
// objects applied for the members there are, and its own proxy's objects, and its values in a set it
// left, taken back.
func (r *WaitingQueueReconciler) ensureInSet(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue, secret *corev1.Secret, mounted []string) error {
	set := wq.Spec.ProxySet()
	if err := r.leaveOldSet(ctx, wq, secret); err != nil {
		return err
	}
	if err := r.deleteOwnProxy(ctx, wq); err != nil {
		return err
	}
	data := map[string][]byte{}
	for _, k := range append([]string{herdgatev1alpha1.SecretHMACKey, herdgatev1alpha1.SecretRedisURL}, mounted...) {
		if v, ok := secret.Data[k]; ok {
			data[herdgatev1alpha1.ProxySetKey(wq.Name, k)] = v
		}
	}
	values := corev1ac.Secret(herdgatev1alpha1.ProxySetName(set), wq.Namespace).
		WithLabels(proxySetLabels(set)).WithType(corev1.SecretTypeOpaque).
		WithOwnerReferences(memberRef(wq)).WithData(data)
	if err := r.applyOwned(ctx, wq.UID, ownedObject{configuration: values, cached: &corev1.Secret{}, owner: roomFieldOwner(wq), uncached: true}); err != nil {
		return fmt.Errorf("copying the room's values into the proxy set's Secret: %w", err)
	}
	if err := r.recordSet(ctx, secret, set); err != nil {
		return err
	}
	return r.applySet(ctx, wq.Namespace, set)
}

// applySet applies the objects of set for its members, or deletes them when none is left. The rooms
// of one set are reconciled by several workers at once, so one applies the set at a time: each from
// the members it lists then, the last from the latest.
func (r *WaitingQueueReconciler) applySet(ctx context.Context, namespace, set string) error {
	lock, _ := r.setLocks.LoadOrStore(namespace+"/"+set, &sync.Mutex{})
	lock.(*sync.Mutex).Lock()
	defer lock.(*sync.Mutex).Unlock()
	members, err := r.setMembers(ctx, namespace, set)
	if err != nil {
		return err
	}
	name := types.NamespacedName{Namespace: namespace, Name: herdgatev1alpha1.ProxySetName(set)}
	if len(members) == 0 {
		r.applied.forget(setMemo(namespace, set))
		for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}, &rbacv1.RoleBinding{}, &rbacv1.Role{}, &corev1.ServiceAccount{}, &corev1.Secret{}} {
			obj.SetNamespace(name.Namespace)
			obj.SetName(name.Name)
			if err := r.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting the proxy set's %T: %w", obj, err)
			}
		}
		return nil
	}
	w := setWorkload(namespace, set, r.ProxyImage, members)
	return r.applyWorkload(ctx, setMemo(namespace, set), w, func(obj client.Object) bool { return obj.GetLabels()[LabelProxySet] == set })
}

// leaveOldSet takes wq's values back from the set its Secret says it joined, when that is not the
// set it names now, and lets the old set's objects follow their members.
func (r *WaitingQueueReconciler) leaveOldSet(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue, secret *corev1.Secret) error {
	old := ""
	if secret != nil {
		old = secret.Annotations[AnnotationProxySet]
	}
	if old == "" || old == wq.Spec.ProxySet() {
		return nil
	}
	if err := r.takeBackValues(ctx, wq, old); err != nil {
		return err
	}
	if err := r.applySet(ctx, wq.Namespace, old); err != nil {
		return err
	}
	return r.recordSet(ctx, secret, "")
}

// takeBackValues removes wq's values and reference from set's Secret: an apply by the room's field
// manager that holds nothing releases all it held.
func (r *WaitingQueueReconciler) takeBackValues(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue, set string) error {
	name := herdgatev1alpha1.ProxySetName(set)
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: name}, &corev1.Secret{}); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	r.applied.forgetObject(wq.UID, fmt.Sprintf("%T/%s", &corev1.Secret{}, name))
	err := r.Apply(ctx, corev1ac.Secret(name, wq.Namespace), roomFieldOwner(wq), client.ForceOwnership)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("taking the room's values back from the proxy set's Secret: %w", err)
	}
	return nil
}

// recordSet notes on the room's own Secret the set it copied its values into ("" for none).
func (r *WaitingQueueReconciler) recordSet(ctx context.Context, secret *corev1.Secret, set string) error {
	if secret == nil || secret.Annotations[AnnotationProxySet] == set {
		return nil
	}
	patch := client.MergeFrom(secret.DeepCopy())
	if set == "" {
		delete(secret.Annotations, AnnotationProxySet)
	} else {
		if secret.Annotations == nil {
			secret.Annotations = map[string]string{}
		}
		secret.Annotations[AnnotationProxySet] = set
	}
	if err := r.Patch(ctx, secret, patch); err != nil {
		return fmt.Errorf("noting the proxy set on the room's Secret: %w", err)
	}
	return nil
}

// deleteOwnProxy deletes the objects of the proxy wq had of its own before it joined a set. The
// cache says whether there are any: a member of a set costs no call for them.
func (r *WaitingQueueReconciler) deleteOwnProxy(ctx context.Context, wq *herdgatev1alpha1.WaitingQueue) error {
	deleted := false
	for _, obj := range []client.Object{&autoscalingv2.HorizontalPodAutoscaler{}, &appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}, &rbacv1.RoleBinding{}, &rbacv1.Role{}, &corev1.ServiceAccount{}} {
		name := wq.ProxyName()
		if _, ok := obj.(*corev1.Service); ok {
			name = wq.ServiceName()
		}
		if err := r.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: name}, obj); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return err
		}
		if !isControlledBy(obj, wq) {
			continue
		}
		if err := r.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the room's own proxy %T: %w", obj, err)
		}
		deleted = true
	}
	if deleted {
		for _, kind := range []client.Object{&autoscalingv2.HorizontalPodAutoscaler{}, &appsv1.Deployment{}, &policyv1.PodDisruptionBudget{}, &rbacv1.RoleBinding{}, &rbacv1.Role{}, &corev1.ServiceAccount{}} {
			r.applied.forgetObject(wq.UID, fmt.Sprintf("%T/%s", kind, wq.ProxyName()))
		}
		r.applied.forgetObject(wq.UID, fmt.Sprintf("%T/%s", &corev1.Service{}, wq.ServiceName()))
	}
	return nil
}

func isControlledBy(obj client.Object, wq *herdgatev1alpha1.WaitingQueue) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == wq.UID && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}
