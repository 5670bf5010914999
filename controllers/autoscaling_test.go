package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/controllers"
	"github.com/herdgate/herdgate/test/builder"
)

var _ = Describe("Proxy autoscaling", func() {
	// scaleTo changes the Deployment's scale the way a HorizontalPodAutoscaler does: through its scale
	// subresource, as a field manager of its own.
	scaleTo := func(deploy *appsv1.Deployment, replicas int32) {
		GinkgoHelper()
		scale := &autoscalingv1.Scale{}
		Expect(k8sClient.SubResource("scale").Get(ctx, deploy, scale)).To(Succeed())
		scale.Spec.Replicas = replicas
		Expect(k8sClient.SubResource("scale").Update(ctx, deploy, client.WithSubResourceBody(scale), client.FieldOwner("horizontal-pod-autoscaler"))).To(Succeed())
	}
	replicasAre := func(deploy *appsv1.Deployment, want int32) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, keyOf(deploy), deploy)).To(Succeed())
			g.Expect(deploy.Spec.Replicas).To(HaveValue(Equal(want)))
		}, timeout, interval).Should(Succeed())
	}

	It("creates the autoscaler, leaves the replica count to it through spec changes, and takes it back", func() {
		wq := builder.Queue(mainNamespace, "orders-autoscaled").Autoscaling(2, 6).Obj()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		key := types.NamespacedName{Namespace: wq.Namespace, Name: wq.ProxyName()}

		By("creating a HorizontalPodAutoscaler on the proxy's CPU, and starting the Deployment at its minimum")
		hpa := &autoscalingv2.HorizontalPodAutoscaler{}
		Eventually(func() error { return k8sClient.Get(ctx, key, hpa) }, timeout, interval).Should(Succeed())
		Expect(metav1.IsControlledBy(hpa, get(wq))).To(BeTrue())
		Expect(hpa.Spec.ScaleTargetRef).To(Equal(autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: wq.ProxyName()}))
		Expect(hpa.Spec.MinReplicas).To(HaveValue(BeEquivalentTo(2)))
		Expect(hpa.Spec.MaxReplicas).To(BeEquivalentTo(6))
		Expect(hpa.Spec.Metrics).To(HaveLen(1))
		Expect(hpa.Spec.Metrics[0].Resource.Name).To(Equal(corev1.ResourceCPU))
		Expect(hpa.Spec.Metrics[0].Resource.Target.AverageUtilization).To(HaveValue(BeEquivalentTo(herdgatev1alpha1.DefaultProxyTargetCPUPercent)))
		deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		replicasAre(deploy, 2)
		Expect(k8sClient.Get(ctx, key, &policyv1.PodDisruptionBudget{})).To(Succeed(), "two pods at the least keep a disruption budget")
		for _, f := range deploy.ManagedFields {
			if f.Manager == string(controllers.FieldOwner) && f.Operation == metav1.ManagedFieldsOperationApply {
				Expect(f.FieldsV1.GetRawString()).NotTo(ContainSubstring(`"f:replicas"`), "the operator applies no replica count")
			}
		}

		By("keeping the count the autoscaler chose when the spec changes")
		scaleTo(deploy, 5)
		hash := deploy.Spec.Template.Annotations[controllers.ConfigHashAnnotation]
		update(wq, func(b *builder.QueueBuilder) {
			b.ProxyResources(&herdgatev1alpha1.ProxyResources{Requests: herdgatev1alpha1.ResourceQuantities{corev1.ResourceCPU: "250m"}})
		})
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, deploy)).To(Succeed())
			g.Expect(deploy.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()).To(BeEquivalentTo(250))
		}, timeout, interval).Should(Succeed())
		Expect(deploy.Spec.Replicas).To(HaveValue(BeEquivalentTo(5)), "the reconcile reset the autoscaler's choice")
		Expect(deploy.Spec.Template.Annotations[controllers.ConfigHashAnnotation]).To(Equal(hash))
		Consistently(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, deploy)).To(Succeed())
			g.Expect(deploy.Spec.Replicas).To(HaveValue(BeEquivalentTo(5)))
		}, "2s", interval).Should(Succeed())

		By("following the bounds, and the disruption budget the minimum")
		update(wq, func(b *builder.QueueBuilder) { b.Autoscaling(1, 8) })
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, hpa)).To(Succeed())
			g.Expect(hpa.Spec.MinReplicas).To(HaveValue(BeEquivalentTo(1)))
			g.Expect(hpa.Spec.MaxReplicas).To(BeEquivalentTo(8))
			g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, key, &policyv1.PodDisruptionBudget{}))).To(BeTrue())
		}, timeout, interval).Should(Succeed())
		replicasAre(deploy, 5)

		By("taking the count back, and deleting the autoscaler, when autoscaling is removed")
		update(wq, func(b *builder.QueueBuilder) { b.WithoutAutoscaling().ProxyReplicas(3) })
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, key, &autoscalingv2.HorizontalPodAutoscaler{}))
		}, timeout, interval).Should(BeTrue())
		replicasAre(deploy, 3)
	})

	It("hands a fixed count over to the autoscaler without dropping it", func() {
		wq := builder.Queue(mainNamespace, "orders-fixed-then-autoscaled").ProxyReplicas(4).Obj()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: wq.Namespace, Name: wq.ProxyName()}}
		replicasAre(deploy, 4)

		// Server-side apply removes a field its only owner stops applying: without the handover the
		// count would fall to the API's default of 1 until the autoscaler acts.
		update(wq, func(b *builder.QueueBuilder) { b.Autoscaling(2, 10) })
		Eventually(func() error {
			return k8sClient.Get(ctx, keyOf(deploy), &autoscalingv2.HorizontalPodAutoscaler{})
		}, timeout, interval).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, keyOf(deploy), deploy)).To(Succeed())
			g.Expect(deploy.Spec.Replicas).To(HaveValue(BeEquivalentTo(4)))
		}, "2s", interval).Should(Succeed())
	})

	It("refuses autoscaling for a shared proxy set and bounds that cross", func() {
		shared := builder.Queue(mainNamespace, "orders-shared-autoscaled").Shared("pool", "shop.example").Autoscaling(2, 4).Obj()
		err := k8sClient.Create(ctx, shared)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.proxy.autoscaling"))
		Expect(err.Error()).To(ContainSubstring("a shared proxy set runs the replicas its rooms ask for"))

		crossed := builder.Queue(mainNamespace, "orders-crossed").Autoscaling(5, 3).Obj()
		err = k8sClient.Create(ctx, crossed)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.proxy.autoscaling.minReplicas"))
		Expect(err.Error()).To(ContainSubstring("must not exceed maxReplicas"))
	})
})
