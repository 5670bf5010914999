package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herdgate/herdgate/test/builder"
)

var _ = Describe("Live figures", func() {
	It("follow the room: who waits, who holds a pass, a drained room at once, and how old they are", func() {
		wq := builder.From(sampleQueue(mainNamespace, "orders-figures")).Suspend(true).Obj()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		q := engineQueue(wq)

		By("showing the visitors who wait in a suspended room")
		enter(q, "figures", 300)
		Eventually(func(g Gomega) {
			st := get(wq).Status
			g.Expect(st.QueueDepth).To(BeEquivalentTo(300))
			g.Expect(st.ActiveVisitors).To(BeZero())
			g.Expect(st.LiveFiguresTime).NotTo(BeNil())
			g.Expect(time.Since(st.LiveFiguresTime.Time)).To(BeNumerically("<", 15*time.Second))
		}, timeout, interval).Should(Succeed())

		Expect(string(kubectlAs("figures-viewer", "get", "wq", "-n", mainNamespace, wq.Name, "-o", "wide"))).To(ContainSubstring("FIGURES"))

		By("showing a drained room as drained within the tick that drained it, not at its next read")
		update(wq, func(b *builder.QueueBuilder) { b.Suspend(false) })
		// 300 at 14 a tick drain in about 2 s; the room then sleeps 10 s before it reads again, and a
		// status of live figures alone waits up to 10 s more: 8 s tells the two apart.
		Eventually(func(g Gomega) {
			st := get(wq).Status
			g.Expect(st.QueueDepth).To(BeZero())
			g.Expect(st.ActiveVisitors).To(BeNumerically(">", 0))
		}, 8*time.Second, interval).Should(Succeed())

		By("showing every pass held while the room sleeps")
		Eventually(func() int64 { return get(wq).Status.ActiveVisitors }, timeout, interval).Should(BeEquivalentTo(300))
	})
})
