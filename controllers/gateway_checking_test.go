package controllers_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
)

var _ = Describe("Gateway checking", func() {
	// reportChecks reports, as one proxy replica, checksPerSecond gateway checks a second, every
	// 200 ms until the spec ends, so that the report never ages out.
	reportChecks := func(q *queue.Queue, replica string, checksPerSecond float64) {
		reportCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for reportCtx.Err() == nil {
				_ = q.ReportProxy(reportCtx, queue.ProxyReport{Replica: replica, Generation: 1, ChecksPerSecond: checksPerSecond})
				select {
				case <-reportCtx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
		DeferCleanup(func() { stop(); <-done })
	}
	// arrive puts n visitors into the queue; the first are admitted at once, the rest wait.
	arrive := func(q *queue.Queue, prefix string, n int) {
		GinkgoHelper()
		for i := range n {
			_, err := q.Enter(ctx, fmt.Sprintf("%s-%05d", prefix, i), time.Hour)
			Expect(err).NotTo(HaveOccurred())
		}
	}
	condition := func(g Gomega, wq *herdgatev1alpha1.WaitingQueue) (*metav1.Condition, herdgatev1alpha1.WaitingQueueStatus) {
		st := get(wq).Status
		c := meta.FindStatusCondition(st.Conditions, herdgatev1alpha1.ConditionGatewayChecking)
		g.Expect(c).NotTo(BeNil(), "no GatewayChecking condition")
		return c, st
	}
	eventOf := func(wq *herdgatev1alpha1.WaitingQueue, reason string) *eventsv1.Event {
		list := &eventsv1.EventList{}
		Expect(k8sClient.List(ctx, list, client.InNamespace(wq.Namespace))).To(Succeed())
		for i, e := range list.Items {
			if e.Regarding.Name == wq.Name && e.Reason == reason {
				return &list.Items[i]
			}
		}
		return nil
	}

	It("says when visitors are admitted to a Gateway room and no gateway asks the check, and when one does", func() {
		wq := builder.From(sampleQueue(mainNamespace, "orders-unchecked")).Enforcement(herdgatev1alpha1.EnforcementGateway).Obj()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		q := engineQueue(wq)

		By("telling nothing before any replica reports")
		Eventually(func(g Gomega) {
			c, _ := condition(g, wq)
			g.Expect(c.Status).To(Equal(metav1.ConditionUnknown))
			g.Expect(c.Reason).To(Equal(herdgatev1alpha1.ReasonNoProxyReports))
		}, timeout, interval).Should(Succeed())

		By("telling nothing while a replica reports no checks and nobody is admitted")
		reportChecks(q, "orders-unchecked-proxy-0", 0)
		Eventually(func(g Gomega) {
			c, st := condition(g, wq)
			g.Expect(c.Status).To(Equal(metav1.ConditionUnknown))
			g.Expect(c.Reason).To(Equal(herdgatev1alpha1.ReasonNoVisitors))
			g.Expect(st.GatewayChecksPerSecond).To(Equal("0"))
		}, timeout, interval).Should(Succeed())

		By("turning False once visitors have been admitted for the grace without a check: a forgotten auth_request")
		arrive(q, "unchecked", 3000) // 140 a second: admissions for about 20 s
		Eventually(func(g Gomega) {
			c, _ := condition(g, wq)
			g.Expect(c.Reason).To(Equal(herdgatev1alpha1.ReasonAwaitingChecks))
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			c, st := condition(g, wq)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(herdgatev1alpha1.ReasonNoChecks))
			g.Expect(c.Message).To(ContainSubstring("no gateway asked the check"))
			ready := meta.FindStatusCondition(st.Conditions, herdgatev1alpha1.ConditionReady)
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Message).To(ContainSubstring(herdgatev1alpha1.ConditionGatewayChecking))
		}, timeout, interval).Should(Succeed())
		Eventually(func() *eventsv1.Event { return eventOf(wq, herdgatev1alpha1.ReasonNoChecks) }, timeout, interval).Should(
			HaveField("Type", "Warning"))
		out := string(kubectlAs("gateway-viewer", "get", "wq", "-n", mainNamespace, wq.Name, "-o", "wide"))
		Expect(out).To(ContainSubstring("CHECKS/S"))
		Expect(out).To(ContainSubstring("Gateway"))

		By("turning True when a gateway asks, and saying how often")
		reportChecks(q, "orders-unchecked-proxy-1", 37.5)
		Eventually(func(g Gomega) {
			c, st := condition(g, wq)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(herdgatev1alpha1.ReasonChecking))
			g.Expect(c.Message).To(ContainSubstring("37.5 times a second, over 2 proxy replicas"))
			g.Expect(st.GatewayChecksPerSecond).To(Equal("37.5"))
			ready := meta.FindStatusCondition(st.Conditions, herdgatev1alpha1.ConditionReady)
			g.Expect(ready.Message).NotTo(ContainSubstring(herdgatev1alpha1.ConditionGatewayChecking))
		}, timeout, interval).Should(Succeed())
		Eventually(func() *eventsv1.Event { return eventOf(wq, herdgatev1alpha1.ReasonChecking) }, timeout, interval).Should(
			HaveField("Type", "Normal"))

		By("dropping the condition and the figure when the proxy enforces the room")
		update(wq, func(b *builder.QueueBuilder) { b.Enforcement(herdgatev1alpha1.EnforcementProxy) })
		Eventually(func(g Gomega) {
			st := get(wq).Status
			g.Expect(meta.FindStatusCondition(st.Conditions, herdgatev1alpha1.ConditionGatewayChecking)).To(BeNil())
			g.Expect(st.GatewayChecksPerSecond).To(BeEmpty())
		}, timeout, interval).Should(Succeed())
	})

	It("keeps what a herd showed once it is through: the gateways asked, at the spell's rate", func() {
		wq := builder.From(sampleQueue(mainNamespace, "orders-herd-checked")).Enforcement(herdgatev1alpha1.EnforcementGateway).Obj()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		q := engineQueue(wq)
		Eventually(func(g Gomega) { g.Expect(get(wq).Status.Plan).NotTo(BeNil()) }, timeout, interval).Should(Succeed())

		By("a herd of 420, three seconds at 140 a second, while a gateway asks the check")
		var checks atomic.Value
		checks.Store(25.0)
		reportCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for reportCtx.Err() == nil {
				_ = q.ReportProxy(reportCtx, queue.ProxyReport{Replica: "orders-herd-checked-proxy-0", Generation: 1, ChecksPerSecond: checks.Load().(float64)})
				select {
				case <-reportCtx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
		DeferCleanup(func() { stop(); <-done })
		arrive(q, "herd", 420)
		Eventually(func(g Gomega) {
			c, _ := condition(g, wq)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		}, timeout, interval).Should(Succeed())

		By("the herd through: the admissions' rate falls to 0, then the gateway's, and the spell and the condition stay")
		Eventually(func(g Gomega) {
			g.Expect(get(wq).Status.AdmittedPerSecond).To(Equal("0"))
		}, 2*timeout, interval).Should(Succeed())
		checks.Store(0.0)
		Eventually(func(g Gomega) {
			c, st := condition(g, wq)
			g.Expect(st.AdmittedPerSecond).To(Equal("0"))
			g.Expect(st.GatewayChecksPerSecond).To(Equal("0"))
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Message).To(ContainSubstring("nobody was admitted since"))
			g.Expect(st.LastBusy).NotTo(BeNil())
			g.Expect(st.LastBusy.Ongoing).To(BeFalse())
			// The first arrivals may be admitted at once, before anyone waits: the ticks admit the rest.
			g.Expect(st.LastBusy.Admitted).To(BeNumerically(">", 380))
			g.Expect(st.LastBusy.Admitted).To(BeNumerically("<=", 420))
			rate, err := strconv.ParseFloat(st.LastBusy.AdmittedPerSecond, 64)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rate).To(BeNumerically("~", 140, 7), "the spell's rate")
			g.Expect(st.LastBusy.PeakDepth).To(BeNumerically(">", 350))
			g.Expect(st.LastBusy.End.Sub(st.LastBusy.Start.Time)).To(BeNumerically("<=", 4*time.Second))
		}, 2*timeout, interval).Should(Succeed())
		out := string(kubectlAs("gateway-viewer", "get", "wq", "-n", mainNamespace, wq.Name, "-o", "wide"))
		Expect(out).To(ContainSubstring("LAST BUSY/S"))
	})

	It("cannot tell for a room whose JWT passes a gateway may verify without asking", func() {
		wq := builder.From(sampleQueue(mainNamespace, "orders-jwt-unchecked")).Enforcement(herdgatev1alpha1.EnforcementGateway).
			JWTPasses("", 0).Obj()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		q := engineQueue(wq)
		reportChecks(q, "orders-jwt-unchecked-proxy-0", 0)
		arrive(q, "jwt-unchecked", 1500)
		Eventually(func(g Gomega) {
			c, _ := condition(g, wq)
			g.Expect(c.Status).To(Equal(metav1.ConditionUnknown))
			g.Expect(c.Reason).To(Equal(herdgatev1alpha1.ReasonJWTPasses))
		}, timeout, interval).Should(Succeed())
		Consistently(func(g Gomega) {
			c, _ := condition(g, wq)
			g.Expect(c.Status).NotTo(Equal(metav1.ConditionFalse))
		}, 5*time.Second, interval).Should(Succeed())
	})
})
