package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

var _ = Describe("Redis durability", func() {
	// unacknowledged reads herdgate_redis_unacknowledged_writes_total of wq from the manager's registry.
	unacknowledged := func(wq *herdgatev1alpha1.WaitingQueue) float64 {
		GinkgoHelper()
		n, err := testenv.RoomCounter(ctrlmetrics.Registry, "herdgate_redis_unacknowledged_writes_total", wq.Namespace, wq.Name)
		Expect(err).NotTo(HaveOccurred())
		return n
	}

	It("keeps a queue that sets only spec.redis.durability on the manager's Redis, its admissions waiting for a replica", func() {
		// Suspended, to fill the queue before the first admission.
		wq := builder.Queue(mainNamespace, "orders-replicated").Durability(herdgatev1alpha1.RedisDurabilityReplicated).Suspend(true).Obj()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		Expect(get(wq).Spec.Redis.SecretRef).To(BeNil())
		enter(engineQueue(wq), "r", 100)

		gen := update(wq, func(b *builder.QueueBuilder) { b.Suspend(false) })
		Eventually(func() int { return admittedIn(since(ticks.of(keyOf(wq)), gen)) }, timeout, interval).Should(Equal(100))
		Eventually(func() *metav1.Condition { return condition(wq, herdgatev1alpha1.ConditionRedisAvailable) }, timeout, interval).
			Should(HaveField("Status", metav1.ConditionTrue))
		// The test's Redis has no replica: every tick that admitted waited in vain, and is counted
		// at the tick after it.
		admitting := 0
		for _, r := range since(ticks.of(keyOf(wq)), gen) {
			if len(r.Result.Admitted) > 0 {
				admitting++
			}
		}
		Expect(admitting).To(BeNumerically(">=", 2))
		Eventually(func() float64 { return unacknowledged(wq) }, timeout, interval).Should(BeEquivalentTo(admitting))
	})
})
