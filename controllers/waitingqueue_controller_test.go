package controllers_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/controllers"
	"github.com/herdgate/herdgate/internal/beacon"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/draw"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

const tick = 100 * time.Millisecond

// sampleQueue is the reference queue (40 slots, 200 ms, 70 %, 100 ms tick), as config/samples holds it.
func sampleQueue(namespace, name string) *herdgatev1alpha1.WaitingQueue {
	return builder.Queue(namespace, name).Obj()
}

func keyOf(obj client.Object) types.NamespacedName { return client.ObjectKeyFromObject(obj) }

func get(wq *herdgatev1alpha1.WaitingQueue) *herdgatev1alpha1.WaitingQueue {
	GinkgoHelper()
	out := &herdgatev1alpha1.WaitingQueue{}
	Expect(k8sClient.Get(ctx, keyOf(wq), out)).To(Succeed())
	return out
}

// update changes a WaitingQueue's spec through the builder, as its owner edits it, and returns the
// new generation.
func update(wq *herdgatev1alpha1.WaitingQueue, change func(*builder.QueueBuilder)) int64 {
	GinkgoHelper()
	var gen int64
	Eventually(func() error {
		cur := get(wq)
		b := builder.From(cur)
		change(b)
		cur.Spec = b.Obj().Spec
		if err := k8sClient.Update(ctx, cur); err != nil {
			return err
		}
		gen = cur.Generation
		return nil
	}, timeout, interval).Should(Succeed())
	return gen
}

func engineQueue(wq *herdgatev1alpha1.WaitingQueue) *queue.Queue {
	GinkgoHelper()
	q, err := redisRDB.Queue(wq.Namespace, wq.Name)
	Expect(err).NotTo(HaveOccurred())
	return q
}

// enter puts n visitors named prefix-0000… into the queue, in order.
func enter(q *queue.Queue, prefix string, n int) []string {
	GinkgoHelper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%05d", prefix, i)
		p, err := q.Enter(ctx, ids[i], time.Hour)
		Expect(err).NotTo(HaveOccurred())
		Expect(p.State).To(Equal(queue.Waiting))
	}
	return ids
}

// kubectlAs runs kubectl as a new cluster admin named user and returns what it printed.
func kubectlAs(user string, args ...string) []byte {
	GinkgoHelper()
	u, err := testEnv.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	Expect(err).NotTo(HaveOccurred())
	kubectl, err := u.Kubectl()
	Expect(err).NotTo(HaveOccurred())
	kubectl.Path = kubectlPath()
	stdout, stderr, err := kubectl.Run(args...)
	errText, _ := io.ReadAll(stderr)
	Expect(err).NotTo(HaveOccurred(), string(errText))
	out, _ := io.ReadAll(stdout)
	return out
}

func condition(wq *herdgatev1alpha1.WaitingQueue, t string) *metav1.Condition {
	return meta.FindStatusCondition(get(wq).Status.Conditions, t)
}

// since returns the reports of key whose config generation is at least gen.
func since(reports []scheduler.TickReport, gen int64) []scheduler.TickReport {
	var out []scheduler.TickReport
	for _, r := range reports {
		if r.Generation >= gen {
			out = append(out, r)
		}
	}
	return out
}

func admittedIn(reports []scheduler.TickReport) int {
	n := 0
	for _, r := range reports {
		n += len(r.Result.Admitted)
	}
	return n
}

// expectExactTicks checks that consecutive ticks follow the room's grid of period t (shifted by its
// scheduler.GridPhase) with a quota of perTick for every grid point they cover: a late tick makes up for the ones it missed, none is lost or doubled;
// a room that slept (nobody waited) makes up for none.
func expectExactTicks(reports []scheduler.TickReport, t time.Duration, perTick int64) {
	GinkgoHelper()
	for i, r := range reports {
		Expect(r.Err).NotTo(HaveOccurred())
		phase := scheduler.GridPhase(r.Key, t)
		Expect(r.Scheduled.Add(-phase).UnixNano()%int64(t)).To(BeZero(), "tick %d is off the %s grid of phase %s", i, t, phase)
		if i == 0 {
			continue
		}
		covered := int64(r.Scheduled.Sub(reports[i-1].Scheduled) / t)
		Expect(covered).To(BeNumerically(">=", 1), "tick %d repeats a grid point", i)
		if reports[i-1].Result.Asleep {
			// Nobody waited: the ticks the room slept through had nobody to admit.
			Expect(r.Quota).To(Equal(perTick), "tick %d after a sleep", i)
			continue
		}
		Expect(r.Quota).To(Equal(perTick*min(covered, 11)), "tick %d covers %d grid points", i, covered)
	}
}

func createNamespace(name string) {
	GinkgoHelper()
	Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
}

var _ = Describe("WaitingQueue reconciler", func() {
	It("derives the reference plan, runs the proxy's objects and fills kubectl get wq", func() {
		wq := sampleQueue(mainNamespace, "orders-plan")
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })

		Eventually(func(g Gomega) {
			st := get(wq).Status
			g.Expect(st.Plan).NotTo(BeNil())
			g.Expect(st.Plan.BatchSize).To(BeEquivalentTo(14))
			g.Expect(st.Plan.AdmissionsPerSecond).To(Equal("140"))
			g.Expect(st.Plan.Source).To(Equal(herdgatev1alpha1.PlanDerived))
			g.Expect(meta.IsStatusConditionTrue(st.Conditions, herdgatev1alpha1.ConditionRedisAvailable)).To(BeTrue())
			g.Expect(meta.IsStatusConditionTrue(st.Conditions, herdgatev1alpha1.ConditionAdmitting)).To(BeTrue())
			g.Expect(st.AdmittedPerSecond).To(Equal("0"))
		}, timeout, interval).Should(Succeed())
		Expect(condition(wq, herdgatev1alpha1.ConditionProxyAvailable).Reason).To(Equal(herdgatev1alpha1.ReasonProxyNotReady))
		for _, c := range get(wq).Status.Conditions {
			Expect(c.ObservedGeneration).To(Equal(get(wq).Generation), "condition %s", c.Type)
		}

		By("building the proxy's objects")
		deploy := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.ProxyName()}, deploy)).To(Succeed())
		Expect(deploy.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
		pod := deploy.Spec.Template.Spec
		Expect(pod.ServiceAccountName).To(Equal(wq.ProxyName()))
		Expect(pod.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
		Expect(pod.Containers).To(HaveLen(1))
		c := pod.Containers[0]
		Expect(c.Image).To(Equal(proxyImage))
		Expect(c.Args).To(ContainElement("--waitingqueue=" + mainNamespace + "/orders-plan"))
		Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
		Expect(c.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
		Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/.herdgate/readyz"))
		Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/.herdgate/healthz"))
		Expect(deploy.Spec.Template.Annotations).To(HaveKey(controllers.ConfigHashAnnotation))
		Expect(deploy.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue()).To(BeZero(), "a rollout never serves on fewer replicas")
		Expect(deploy.Spec.Strategy.RollingUpdate.MaxSurge.IntValue()).To(Equal(1))
		Expect(pod.TopologySpreadConstraints).To(HaveLen(2))
		for _, spread := range pod.TopologySpreadConstraints {
			Expect(spread.LabelSelector.MatchLabels).To(Equal(deploy.Spec.Selector.MatchLabels))
			Expect(spread.WhenUnsatisfiable).To(Equal(corev1.ScheduleAnyway), "one node must still run every replica")
		}

		By("keeping all proxy pods but one through a voluntary disruption while there are two or more")
		pdb := &policyv1.PodDisruptionBudget{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.ProxyName()}, pdb)).To(Succeed())
		Expect(pdb.Spec.MaxUnavailable.IntValue()).To(Equal(1))
		Expect(pdb.Spec.Selector.MatchLabels).To(Equal(deploy.Spec.Selector.MatchLabels))
		Expect(metav1.IsControlledBy(pdb, get(wq))).To(BeTrue())

		svc := &corev1.Service{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.ServiceName()}, svc)).To(Succeed())
		Expect(svc.Spec.Selector).To(Equal(deploy.Spec.Selector.MatchLabels))

		role := &rbacv1.Role{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.ProxyName()}, role)).To(Succeed())
		Expect(role.Rules).To(HaveLen(1), "the proxy reads its WaitingQueue and nothing else; its key comes mounted")
		Expect(role.Rules[0].Resources).To(ConsistOf("waitingqueues"))
		Expect(role.Rules[0].Verbs).To(ConsistOf("get", "list", "watch"))
		Expect(role.Rules[0].ResourceNames).To(ConsistOf(wq.Name), "the proxy reads only its own WaitingQueue")
		Expect(pod.Volumes).To(HaveLen(1))
		Expect(pod.Volumes[0].Secret.SecretName).To(Equal(wq.SecretName()))
		Expect(pod.Volumes[0].Secret.Items).To(ConsistOf(corev1.KeyToPath{Key: herdgatev1alpha1.SecretHMACKey, Path: herdgatev1alpha1.SecretHMACKey}),
			"only the HMAC key is mounted, not the Redis URL")
		Expect(c.Args).To(ContainElement("--hmac-key-file=/etc/herdgate/secret/" + herdgatev1alpha1.SecretHMACKey))

		secret := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.SecretName()}, secret)).To(Succeed())
		key := secret.Data[herdgatev1alpha1.SecretHMACKey]
		Expect(key).To(HaveLen(32))
		Expect(string(secret.Data[herdgatev1alpha1.SecretRedisURL])).To(Equal(redisSrv.URL()))

		By("keeping the HMAC key and rolling the proxy when its settings change")
		hash := deploy.Spec.Template.Annotations[controllers.ConfigHashAnnotation]
		update(wq, func(b *builder.QueueBuilder) { b.ProxyReplicas(3) })
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, keyOf(deploy), deploy)).To(Succeed())
			g.Expect(deploy.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
		}, timeout, interval).Should(Succeed())
		Expect(deploy.Spec.Template.Annotations[controllers.ConfigHashAnnotation]).To(Equal(hash), "a replica change must not restart pods")
		Expect(k8sClient.Get(ctx, keyOf(secret), secret)).To(Succeed())
		Expect(secret.Data[herdgatev1alpha1.SecretHMACKey]).To(Equal(key))

		By("dropping the disruption budget at one replica, where it would only block a node's drain")
		update(wq, func(b *builder.QueueBuilder) { b.ProxyReplicas(1) })
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, keyOf(pdb), &policyv1.PodDisruptionBudget{}))
		}, timeout, interval).Should(BeTrue())
		update(wq, func(b *builder.QueueBuilder) { b.ProxyReplicas(3) })
		Eventually(func() error { return k8sClient.Get(ctx, keyOf(pdb), &policyv1.PodDisruptionBudget{}) }, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, keyOf(deploy), deploy)).To(Succeed())
			g.Expect(deploy.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
		}, timeout, interval).Should(Succeed())

		By("reporting the proxy ready once its Deployment is")
		deploy.Status.Replicas, deploy.Status.ReadyReplicas = 3, 3
		Expect(k8sClient.Status().Update(ctx, deploy)).To(Succeed())
		Eventually(func(g Gomega) {
			st := get(wq).Status
			g.Expect(st.Proxy).NotTo(BeNil())
			g.Expect(st.Proxy.ReadyReplicas).To(BeEquivalentTo(3))
			g.Expect(meta.IsStatusConditionTrue(st.Conditions, herdgatev1alpha1.ConditionReady)).To(BeTrue())
		}, timeout, interval).Should(Succeed())

		By("showing the plan in kubectl get wq")
		out := kubectlAs("viewer", "get", "wq", "-n", mainNamespace, "orders-plan")
		GinkgoWriter.Println(string(out))
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		Expect(lines).To(HaveLen(2))
		Expect(strings.Fields(lines[0])).To(Equal([]string{"NAME", "BATCH", "RATE", "DEPTH", "ADMITTED/S", "PHASE", "READY", "AGE"}))
		row := strings.Fields(lines[1])
		Expect(row).To(HaveLen(8))
		Expect(row[:7]).To(Equal([]string{"orders-plan", "14", "140", "0", "0", "Open", "True"}))
	})

	It("admits 300 waiting visitors 14 per tick, spread over each tick's jitter window", func() {
		wq := builder.From(sampleQueue(mainNamespace, "orders-admit")).Suspend(true).Obj() // fill the queue before the first admission
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		q := engineQueue(wq)
		ids := enter(q, "v", 300)

		gen := update(wq, func(b *builder.QueueBuilder) { b.Suspend(false) })
		Eventually(func() int { return admittedIn(since(ticks.of(keyOf(wq)), gen)) }, timeout, interval).Should(Equal(300))
		Eventually(func(g Gomega) {
			st := get(wq).Status
			g.Expect(st.QueueDepth).To(BeZero())
			g.Expect(st.ActiveVisitors).To(BeEquivalentTo(300))
		}, timeout, interval).Should(Succeed())

		reports := since(ticks.of(keyOf(wq)), gen)
		var working []scheduler.TickReport // ticks up to the one that emptied the queue
		var order []string
		for _, r := range reports {
			if len(order) < 300 {
				working = append(working, r)
			}
			for _, a := range r.Result.Admitted {
				order = append(order, a.ID)
			}
		}
		Expect(order).To(Equal(ids), "admissions must follow arrival order")
		expectExactTicks(working, tick, 14)
		for i, r := range working {
			admitted := r.Result.Admitted
			Expect(int64(len(admitted))).To(Equal(min(r.Quota, int64(300-admittedIn(working[:i])))))
			Expect(r.Window).To(Equal(tick))
			Expect(r.Lead).To(Equal(600 * time.Millisecond)) // the default minInterval, 500 ms, plus its 20 % spread
			lo, hi := admitted[0].Pass.NotBefore, admitted[0].Pass.NotBefore
			for _, a := range admitted {
				Expect(a.Pass.NotBefore).To(BeTemporally(">=", r.Result.Now.Add(r.Lead)))
				Expect(a.Pass.NotBefore).To(BeTemporally("<", r.Result.Now.Add(r.Lead+tick)))
				Expect(a.Pass.NotBefore).To(BeTemporally(">=", lo), "earlier in line, earlier through the gate")
				lo = a.Pass.NotBefore
				hi = a.Pass.NotBefore
			}
			if len(admitted) == 14 {
				// 14 uniform draws over 100 ms span less than 20 ms with probability below 1e-8.
				Expect(hi.Sub(admitted[0].Pass.NotBefore)).To(BeNumerically(">", 20*time.Millisecond),
					"tick %d's passes are not spread over the window", i)
			}
		}
	})

	It("shares every tick between the main queue and its lanes by their percentages, and shows each lane in status", func() {
		// Suspended: the lanes fill before the first admission.
		wq := builder.From(sampleQueue(mainNamespace, "orders-lanes")).Suspend(true).Lanes(builder.LaneByHeader("members", 20, "X-Member-Tier", "lanes", "members"),
			builder.LaneByHeader("presale", 30, "X-Presale", "lanes", "presale")).Obj()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		q := engineQueue(wq)
		Expect(q.SetLanes([]string{"members", "presale"})).To(Succeed())
		// Deep enough that every lane stays busy for 40 s: past the rates' window (10 to 12 s) and two
		// writes of live figures (every 10 s), so that a written status shows a window of busy ticks.
		enter(q, "a", 3000)
		for lane, n := range map[string]int{"members": 1200, "presale": 1800} {
			for i := range n {
				p, err := q.EnterFrom(ctx, fmt.Sprintf("%c-%05d", lane[0], i), time.Hour, queue.EntryLimit{Lane: lane})
				Expect(err).NotTo(HaveOccurred())
				Expect(p.Lane).To(Equal(lane))
			}
		}
		gen := update(wq, func(b *builder.QueueBuilder) { b.Suspend(false) })
		Eventually(func() int { return admittedIn(since(ticks.of(keyOf(wq)), gen)) }, timeout, interval).Should(BeNumerically(">=", 500))
		// The first 35 ticks of 14, while every lane is busy: 50 %, 20 % and 30 % of their 490, to within
		// the visitor one tick's fraction carries.
		counts, total := map[byte]int{}, 0
		for _, r := range since(ticks.of(keyOf(wq)), gen) {
			if total+len(r.Result.Admitted) > 490 {
				break
			}
			for _, a := range r.Result.Admitted {
				counts[a.ID[0]]++
			}
			total += len(r.Result.Admitted)
		}
		Expect(total).To(Equal(490))
		Expect(counts['a']).To(BeNumerically("~", 245, 1))
		Expect(counts['m']).To(BeNumerically("~", 98, 1))
		Expect(counts['p']).To(BeNumerically("~", 147, 1))
		Eventually(func(g Gomega) {
			lanes := get(wq).Status.Lanes
			g.Expect(lanes).To(HaveLen(3))
			g.Expect(lanes[0].Name).To(Equal("main"))
			g.Expect(lanes[1].Name).To(Equal("members"))
			rate := func(i int) float64 {
				f, err := strconv.ParseFloat(lanes[i].AdmittedPerSecond, 64)
				g.Expect(err).NotTo(HaveOccurred())
				return f
			}
			g.Expect(rate(0)).To(BeNumerically("~", 70, 2), "50 %% of 140 a second")
			g.Expect(rate(1)).To(BeNumerically("~", 28, 1), "20 %% of 140 a second while the lane is busy")
			g.Expect(rate(2)).To(BeNumerically("~", 42, 1.5))
			g.Expect(lanes[1].Depth).To(BeNumerically(">", 0))
		}, timeout, interval).Should(Succeed())

		// Dropping a lane moves its visitors to the main queue, at their arrival.
		update(wq, func(b *builder.QueueBuilder) { b.Suspend(true) })
		// The queue may have drained by now: the tick that publishes the suspension also takes back
		// the instant budget, so the late member cannot be admitted at once.
		Eventually(func(g Gomega) {
			plan, err := q.ReadPlan(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(plan.Suspended).To(BeTrue())
		}, timeout, interval).Should(Succeed())
		late, err := q.EnterFrom(ctx, "m-late", time.Hour, queue.EntryLimit{Lane: "members"})
		Expect(err).NotTo(HaveOccurred())
		Expect(late.Lane).To(Equal("members"))
		update(wq, func(b *builder.QueueBuilder) { b.Lanes(wq.Spec.Lanes[1:]...) })
		Eventually(func(g Gomega) {
			lanes := get(wq).Status.Lanes
			g.Expect(lanes).To(HaveLen(2))
			g.Expect(lanes[1].Name).To(Equal("presale"))
		}, timeout, interval).Should(Succeed())
		Expect(q.SetLanes([]string{"presale"})).To(Succeed())
		p, err := q.Status(ctx, "m-late", time.Hour)
		Expect(err).NotTo(HaveOccurred())
		Expect(p.State).To(Equal(queue.Waiting))
		Expect(p.Lane).To(BeEmpty(), "the member waits in the main queue now")
		Expect(p.Position).To(Equal(p.Depth), "behind everyone who came before it")
	})

	It("runs an event's settings in its window, says so in status and Events, and goes back after", func() {
		start := time.Now().Truncate(time.Second).Add(3 * time.Second)
		sale := builder.Event("sale", start, start.Add(3*time.Second))
		sale.Capacity = &herdgatev1alpha1.EventCapacity{BatchSizeOverride: ptr.To(int32(28))}
		wq := builder.From(sampleQueue(mainNamespace, "orders-event")).Events(sale).Obj()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		enter(engineQueue(wq), "v", 2000)
		Eventually(func(g Gomega) {
			st := get(wq).Status
			g.Expect(st.Event).To(BeEmpty())
			g.Expect(st.Plan).NotTo(BeNil())
			g.Expect(st.Plan.BatchSize).To(BeEquivalentTo(14))
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			st := get(wq).Status
			g.Expect(st.Event).To(Equal("sale"))
			g.Expect(st.Plan.BatchSize).To(BeEquivalentTo(28))
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			st := get(wq).Status
			g.Expect(st.Event).To(BeEmpty())
			g.Expect(st.Plan.BatchSize).To(BeEquivalentTo(14))
		}, timeout, interval).Should(Succeed())
		// The ticks ran the event's plan exactly in its window, on the grid.
		for _, r := range ticks.of(keyOf(wq)) {
			in := !r.Scheduled.Before(start) && r.Scheduled.Before(start.Add(3*time.Second))
			want := int64(14)
			if in {
				want = 28
			}
			Expect(r.Quota).To(Equal(want), "the tick at %s", r.Scheduled)
		}
		Eventually(func(g Gomega) {
			reasons := eventReasons(g, wq)
			g.Expect(reasons).To(ContainElement("EventStarted"))
			g.Expect(reasons).To(ContainElement("EventEnded"))
		}, timeout, interval).Should(Succeed())
	})

	It("applies a new tick from the next tick on, without a lost or doubled tick", func() {
		wq := builder.From(sampleQueue(mainNamespace, "orders-tick")).Suspend(true).Obj()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		enter(engineQueue(wq), "t", 3000)

		running := update(wq, func(b *builder.QueueBuilder) { b.Suspend(false) })
		Eventually(func() int { return len(since(ticks.of(keyOf(wq)), running)) }, timeout, interval).Should(BeNumerically(">=", 5))

		slower := update(wq, func(b *builder.QueueBuilder) { b.Tick(2 * tick) })
		Eventually(func(g Gomega) {
			g.Expect(get(wq).Status.Plan.BatchSize).To(BeEquivalentTo(28))
			g.Expect(get(wq).Status.Plan.AdmissionsPerSecond).To(Equal("140"))
		}, timeout, interval).Should(Succeed())
		Eventually(func() int { return len(since(ticks.of(keyOf(wq)), slower)) }, timeout, interval).Should(BeNumerically(">=", 5))

		all := since(ticks.of(keyOf(wq)), running)
		var before, after []scheduler.TickReport
		for _, r := range all {
			if r.Generation < slower {
				before = append(before, r)
			} else {
				after = append(after, r)
			}
		}
		expectExactTicks(before, tick, 14)
		expectExactTicks(after[1:], 2*tick, 28)
		first, last := after[0], before[len(before)-1]
		Expect(first.Quota).To(Equal(int64(28)), "the first tick after the change admits the new batch")
		Expect(first.Scheduled.Sub(last.Scheduled)).To(Equal(tick), "the change neither skips nor repeats a tick")
		Expect(after[1].Scheduled.Sub(first.Scheduled)).To(BeNumerically("<=", 2*tick))
		for _, r := range after {
			Expect(int64(len(r.Result.Admitted))).To(Equal(r.Quota))
		}
	})

	It("stops admitting within one tick of suspend and resumes when it is cleared", func() {
		wq := sampleQueue(mainNamespace, "orders-suspend")
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		q := engineQueue(wq)
		enter(q, "s", 2000)
		Eventually(func() int { return admittedIn(ticks.of(keyOf(wq))) }, timeout, interval).Should(BeNumerically(">", 0))

		suspended := update(wq, func(b *builder.QueueBuilder) { b.Suspend(true) })
		Eventually(func() int { return len(since(ticks.of(keyOf(wq)), suspended)) }, timeout, interval).Should(BeNumerically(">=", 10))
		Eventually(func(g Gomega) {
			c := condition(wq, herdgatev1alpha1.ConditionAdmitting)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(herdgatev1alpha1.ReasonSuspended))
		}, timeout, interval).Should(Succeed())
		depth, err := q.Stats(ctx)
		Expect(err).NotTo(HaveOccurred())
		enter(q, "late", 5) // the queue keeps accepting visitors
		Consistently(func() int64 {
			st, err := q.Stats(ctx)
			Expect(err).NotTo(HaveOccurred())
			return st.Depth
		}, 5*tick, tick).Should(Equal(depth.Depth + 5))

		resumed := update(wq, func(b *builder.QueueBuilder) { b.Suspend(false) })
		Eventually(func() int { return len(since(ticks.of(keyOf(wq)), resumed)) }, timeout, interval).Should(BeNumerically(">=", 3))
		for _, r := range ticks.of(keyOf(wq)) {
			switch {
			case r.Generation >= resumed:
				Expect(r.Result.Admitted).To(HaveLen(int(r.Quota)))
				Expect(r.Quota).To(BeNumerically(">=", 14))
			case r.Generation >= suspended:
				Expect(r.Quota).To(BeZero(), "a suspended tick has no quota")
				Expect(r.Result.Admitted).To(BeEmpty())
			}
		}
	})

	It("shows the room's phase and admits nobody while it is closed or passed through", func() {
		wq := sampleQueue(mainNamespace, "orders-modes")
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		q := engineQueue(wq)
		enter(q, "m", 2000)
		Eventually(func(g Gomega) {
			c := condition(wq, herdgatev1alpha1.ConditionOpen)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(herdgatev1alpha1.ReasonOpen))
		}, timeout, interval).Should(Succeed())

		for _, tc := range []struct {
			mode         herdgatev1alpha1.Mode
			open         metav1.ConditionStatus
			reason       string
			admittingWhy string
		}{
			{herdgatev1alpha1.ModeClosed, metav1.ConditionFalse, herdgatev1alpha1.ReasonClosed, herdgatev1alpha1.ReasonClosed},
			{herdgatev1alpha1.ModePassthrough, metav1.ConditionTrue, herdgatev1alpha1.ReasonPassthrough, herdgatev1alpha1.ReasonPassthrough},
		} {
			By("switching to " + string(tc.mode))
			gen := update(wq, func(b *builder.QueueBuilder) { b.Mode(tc.mode) })
			Eventually(func(g Gomega) {
				st := get(wq).Status
				open := meta.FindStatusCondition(st.Conditions, herdgatev1alpha1.ConditionOpen)
				g.Expect(open.Status).To(Equal(tc.open))
				g.Expect(open.Reason).To(Equal(tc.reason))
				g.Expect(open.ObservedGeneration).To(Equal(gen))
				g.Expect(meta.FindStatusCondition(st.Conditions, herdgatev1alpha1.ConditionAdmitting).Reason).To(Equal(tc.admittingWhy))
			}, timeout, interval).Should(Succeed())
			Eventually(func() int { return len(since(ticks.of(keyOf(wq)), gen)) }, timeout, interval).Should(BeNumerically(">=", 5))
			for _, r := range since(ticks.of(keyOf(wq)), gen) {
				Expect(r.Quota).To(BeZero(), "a tick in %s mode has a quota", tc.mode)
				Expect(r.Result.Admitted).To(BeEmpty())
			}
		}
		back := update(wq, func(b *builder.QueueBuilder) { b.Mode(herdgatev1alpha1.ModeQueue) })
		Eventually(func() int { return admittedIn(since(ticks.of(keyOf(wq)), back)) }, timeout, interval).Should(BeNumerically(">=", 14))
	})

	It("publishes the seed's commitment before the pre-queue, draws the pre-queue at opening and reveals the seed", func() {
		now := time.Now()
		// The pre-queue lasts long enough for its depth to reach status, which shows live figures
		// up to 10 s late (liveStatusInterval).
		preQueueFrom, opensAt := now.Add(8*time.Second), now.Add(28*time.Second)
		wq := builder.Queue(mainNamespace, "orders-launch").Schedule(preQueueFrom, opensAt, time.Time{}).Obj()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		q := engineQueue(wq)

		By("committing to the seed while the room is Scheduled")
		var commitment string
		Eventually(func(g Gomega) {
			st := get(wq).Status
			open := meta.FindStatusCondition(st.Conditions, herdgatev1alpha1.ConditionOpen)
			g.Expect(open).NotTo(BeNil())
			g.Expect(open.Reason).To(Equal(herdgatev1alpha1.ReasonScheduled))
			g.Expect(open.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(st.SeedCommitment).To(HaveLen(64))
			g.Expect(st.Seed).To(BeEmpty())
			commitment = st.SeedCommitment
		}, timeout, interval).Should(Succeed())
		// The engine learns the phase from the plan the first tick publishes.
		Eventually(func() int { return len(ticks.of(keyOf(wq))) }, timeout, interval).Should(BeNumerically(">=", 1))
		p, err := q.Enter(ctx, "too-early", time.Hour)
		Expect(err).NotTo(HaveOccurred())
		Expect(time.Now().Before(preQueueFrom)).To(BeTrue(), "the commitment came after the pre-queue opened")
		Expect(p.State).To(Equal(queue.TurnedAway))

		By("taking pre-queue places once the pre-queue opens")
		Eventually(func() string { return condition(wq, herdgatev1alpha1.ConditionOpen).Reason }, timeout, interval).
			Should(Equal(herdgatev1alpha1.ReasonPreQueue))
		const n = 300
		arrivals := map[int64]string{}
		for i := range n {
			id := fmt.Sprintf("early-%03d", i)
			p, err := q.Enter(ctx, id, time.Hour)
			Expect(err).NotTo(HaveOccurred())
			Expect(p.State).To(Equal(queue.PreQueued), "visitor %s at %s", id, time.Now())
			arrivals[p.Arrival] = id
		}
		Eventually(func() int64 { return get(wq).Status.PreQueueDepth }, timeout, interval).Should(BeEquivalentTo(n))
		Expect(get(wq).Status.Seed).To(BeEmpty(), "the seed was revealed before the opening")

		By("opening: the seed is revealed, hashes to the commitment and orders the admissions")
		var seed []byte
		Eventually(func(g Gomega) {
			st := get(wq).Status
			g.Expect(meta.FindStatusCondition(st.Conditions, herdgatev1alpha1.ConditionOpen).Reason).To(Equal(herdgatev1alpha1.ReasonOpen))
			g.Expect(st.Seed).NotTo(BeEmpty())
			seed, err = draw.ParseSeed(st.Seed)
			g.Expect(err).NotTo(HaveOccurred())
		}, timeout, interval).Should(Succeed())
		Expect(draw.Commitment(seed)).To(Equal(commitment))
		Expect(get(wq).Status.SeedCommitment).To(Equal(commitment))

		var admitted []string
		Eventually(func() int {
			admitted = admitted[:0]
			for _, r := range ticks.of(keyOf(wq)) {
				for _, a := range r.Result.Admitted {
					admitted = append(admitted, a.ID)
				}
			}
			return len(admitted)
		}, timeout, interval).Should(Equal(n))
		order := make([]int64, 0, n)
		for a := range arrivals {
			order = append(order, a)
		}
		draw.Order(seed, order)
		want := make([]string, n)
		for i, a := range order {
			want[i] = arrivals[a]
		}
		Expect(admitted).To(Equal(want), "the admissions do not follow the drawn order")

		Eventually(func(g Gomega) {
			list := &eventsv1.EventList{}
			g.Expect(k8sClient.List(ctx, list, client.InNamespace(mainNamespace))).To(Succeed())
			reasons := map[string]bool{}
			for _, e := range list.Items {
				if e.Regarding.Name == wq.Name && (e.Reason == "PhaseChanged" || e.Reason == "SeedRevealed") {
					reasons[e.Reason+" "+strings.SplitN(e.Note, ":", 2)[0]] = true
				}
			}
			g.Expect(reasons).To(HaveKey("PhaseChanged " + herdgatev1alpha1.ReasonPreQueue))
			g.Expect(reasons).To(HaveKey("PhaseChanged " + herdgatev1alpha1.ReasonOpen))
			g.Expect(reasons).To(HaveKey("SeedRevealed The pre-queue's draw began; its seed is " + hex.EncodeToString(seed) + " (SHA-256 " + commitment + ", as committed in status.seedCommitment)"))
		}, timeout, interval).Should(Succeed())
	})

	It("commits to a beacon's round before the pre-queue and draws with it, or without it when it fails", func() {
		for _, tc := range []struct {
			name    string
			forge   bool
			source  herdgatev1alpha1.DrawSeedSource
			event   string
			maxWait time.Duration
		}{
			{name: "orders-beacon", source: herdgatev1alpha1.DrawSeedBeacon, event: "BeaconRoundTaken", maxWait: 30 * time.Second},
			{name: "orders-forged", forge: true, source: herdgatev1alpha1.DrawSeedCommitReveal, event: "BeaconFallback", maxWait: time.Second},
		} {
			By(tc.name)
			b := testenv.StartBeacon(GinkgoT(), testenv.BeaconOptions{})
			if tc.forge {
				b.Forge()
			}
			now := time.Now()
			preQueueFrom, opensAt := now.Add(4*time.Second), now.Add(9*time.Second)
			wq := builder.Queue(mainNamespace, tc.name).Schedule(preQueueFrom, opensAt, time.Time{}).Beacon(b.URL, b.Hash, tc.maxWait).Obj()
			Expect(k8sClient.Create(ctx, wq)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
			q := engineQueue(wq)

			chain := beacon.Chain{Period: b.Period, GenesisTime: b.Genesis.Unix()}
			round := chain.RoundAfter(opensAt.Truncate(time.Second))
			Eventually(func(g Gomega) {
				st := get(wq).Status
				g.Expect(st.SeedCommitment).To(HaveLen(64))
				g.Expect(st.Draw).NotTo(BeNil())
				g.Expect(st.Draw.SeedSource).To(Equal(herdgatev1alpha1.DrawSeedBeacon))
				g.Expect(st.Draw.Beacon).NotTo(BeNil())
				g.Expect(st.Draw.Beacon.Round).To(BeEquivalentTo(round))
				g.Expect(st.Draw.Beacon.PublicKey).To(Equal(b.PublicKey()))
				g.Expect(st.Draw.Beacon.Signature).To(BeEmpty())
			}, timeout, interval).Should(Succeed())
			Expect(time.Now().Before(preQueueFrom)).To(BeTrue(), "the round was committed to after the pre-queue opened")

			Eventually(func() string { return condition(wq, herdgatev1alpha1.ConditionOpen).Reason }, timeout, interval).
				Should(Equal(herdgatev1alpha1.ReasonPreQueue))
			const n = 50
			arrivals := map[int64]string{}
			for i := range n {
				id := fmt.Sprintf("early-%03d", i)
				p, err := q.Enter(ctx, id, time.Hour)
				Expect(err).NotTo(HaveOccurred())
				Expect(p.State).To(Equal(queue.PreQueued))
				arrivals[p.Arrival] = id
			}

			var st herdgatev1alpha1.WaitingQueueStatus
			Eventually(func(g Gomega) {
				st = get(wq).Status
				g.Expect(meta.FindStatusCondition(st.Conditions, herdgatev1alpha1.ConditionOpen).Reason).To(Equal(herdgatev1alpha1.ReasonOpen))
				g.Expect(st.Seed).NotTo(BeEmpty())
				g.Expect(st.Draw.SeedSource).To(Equal(tc.source))
			}, timeout, interval).Should(Succeed())
			secret, err := draw.ParseSeed(st.Seed)
			Expect(err).NotTo(HaveOccurred())
			seed := secret
			if tc.source == herdgatev1alpha1.DrawSeedBeacon {
				sig, _ := b.Sign(round)
				Expect(st.Draw.Beacon.Signature).To(Equal(hex.EncodeToString(sig)))
				randomness, err := hex.DecodeString(st.Draw.Beacon.Randomness)
				Expect(err).NotTo(HaveOccurred())
				seed, err = beacon.Seed(secret, b.Hash, round, randomness)
				Expect(err).NotTo(HaveOccurred())
			} else {
				Expect(st.Draw.FallbackReason).To(ContainSubstring("does not verify"))
			}

			var admitted []string
			Eventually(func() int {
				admitted = admitted[:0]
				for _, r := range ticks.of(keyOf(wq)) {
					for _, a := range r.Result.Admitted {
						admitted = append(admitted, a.ID)
					}
				}
				return len(admitted)
			}, timeout, interval).Should(Equal(n))
			order := make([]int64, 0, n)
			for a := range arrivals {
				order = append(order, a)
			}
			draw.Order(seed, order)
			want := make([]string, n)
			for i, a := range order {
				want[i] = arrivals[a]
			}
			Expect(admitted).To(Equal(want), "the admissions do not follow the order the %s seed draws", tc.source)
			Eventually(func(g Gomega) {
				reasons := eventReasons(g, wq)
				g.Expect(reasons).To(ContainElement(tc.event))
			}, timeout, interval).Should(Succeed())
		}
	})

	It("says an empty pre-queue's draw revealed the committed seed alone, whether or not its beacon answers", func() {
		b := testenv.StartBeacon(GinkgoT(), testenv.BeaconOptions{})
		for _, tc := range []struct{ name, url string }{
			{name: "orders-empty-draw", url: b.URL},
			{name: "orders-empty-dark", url: "http://127.0.0.1:1"},
		} {
			By(tc.name)
			now := time.Now()
			wq := builder.Queue(mainNamespace, tc.name).Schedule(now.Add(2*time.Second), now.Add(5*time.Second), time.Time{}).Beacon(tc.url, b.Hash, time.Second).Obj()
			Expect(k8sClient.Create(ctx, wq)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
			Eventually(func(g Gomega) {
				st := get(wq).Status
				open := meta.FindStatusCondition(st.Conditions, herdgatev1alpha1.ConditionOpen)
				g.Expect(open).NotTo(BeNil())
				g.Expect(open.Reason).To(Equal(herdgatev1alpha1.ReasonOpen))
				g.Expect(st.Seed).NotTo(BeEmpty())
				g.Expect(st.Draw).NotTo(BeNil())
				g.Expect(st.Draw.SeedSource).To(Equal(herdgatev1alpha1.DrawSeedCommitReveal))
				g.Expect(st.Draw.FallbackReason).To(ContainSubstring("pre-queue was empty"))
				if st.Draw.Beacon != nil {
					g.Expect(st.Draw.Beacon.Signature).To(BeEmpty(), "a round was told as taken")
				}
			}, timeout, interval).Should(Succeed())
			Eventually(func(g Gomega) {
				reasons := eventReasons(g, wq)
				g.Expect(reasons).To(ContainElement("BeaconFallback"))
				g.Expect(reasons).NotTo(ContainElement("BeaconRoundTaken"))
			}, timeout, interval).Should(Succeed())
		}
	})

	It("deletes the queue's Redis keys and owns every object it made", func() {
		wq := sampleQueue(mainNamespace, "orders-delete")
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		q := engineQueue(wq)
		enter(q, "d", 50)
		Eventually(func() int { return admittedIn(ticks.of(keyOf(wq))) }, timeout, interval).Should(Equal(50))
		wq = get(wq)

		objects := []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.Secret{}, &corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}}
		names := []string{wq.ProxyName(), wq.ServiceName(), wq.SecretName(), wq.ProxyName(), wq.ProxyName(), wq.ProxyName()}
		for i, obj := range objects {
			Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: names[i]}, obj)).To(Succeed())
			owner := metav1.GetControllerOf(obj)
			Expect(owner).NotTo(BeNil(), "%T %s has no controller", obj, names[i])
			Expect(owner.UID).To(Equal(wq.UID))
			Expect(owner.Kind).To(Equal("WaitingQueue"))
			Expect(owner.BlockOwnerDeletion).To(HaveValue(BeTrue()))
		}
		Expect(redisKeys(wq)).NotTo(BeEmpty())

		Expect(k8sClient.Delete(ctx, wq)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, keyOf(wq), &herdgatev1alpha1.WaitingQueue{}))
		}, timeout, interval).Should(BeTrue(), "the finalizer did not let go")
		Expect(redisKeys(wq)).To(BeEmpty())
		n := len(ticks.of(keyOf(wq)))
		Consistently(func() int { return len(ticks.of(keyOf(wq))) }, 3*tick, tick).Should(Equal(n), "the scheduler still ticks a deleted queue")
	})

	It("writes none of an idle queue's objects again, and puts back what someone else changed", func() {
		wq := sampleQueue(mainNamespace, "orders-idle")
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		wq = get(wq)
		ns := "/namespaces/" + wq.Namespace + "/"
		paths := map[string]string{
			"Deployment":     "/apis/apps/v1" + ns + "deployments/" + wq.ProxyName(),
			"Service":        "/api/v1" + ns + "services/" + wq.ServiceName(),
			"ServiceAccount": "/api/v1" + ns + "serviceaccounts/" + wq.ProxyName(),
			"RoleBinding":    "/apis/rbac.authorization.k8s.io/v1" + ns + "rolebindings/" + wq.ProxyName(),
			"Secret":         "/api/v1" + ns + "secrets/" + wq.SecretName(),
		}
		role := "/apis/rbac.authorization.k8s.io/v1" + ns + "roles/" + wq.ProxyName()
		writes := func() map[string]int {
			out := map[string]int{}
			for kind, path := range paths {
				for _, n := range managerWrites.of(path) {
					out[kind] += n
				}
			}
			return out
		}
		roleWrites := func() int {
			n := 0
			for _, c := range managerWrites.of(role) {
				n += c
			}
			return n
		}
		Eventually(func(g Gomega) {
			g.Expect(condition(wq, herdgatev1alpha1.ConditionAdmitting)).NotTo(BeNil())
			// The Secret is created in its collection; later writes to it would be patches.
			g.Expect(writes()).To(SatisfyAll(HaveKey("Deployment"), HaveKey("Service"), HaveKey("ServiceAccount"), HaveKey("RoleBinding")))
		}, timeout, interval).Should(Succeed())
		// The first reconciles may meet a cache that has not seen the manager's own writes yet. The Role
		// settles too: an apply of it still on its way when the test touches it would land on the
		// touched Role, and be the one write the touch provokes.
		var settled map[string]int
		Eventually(func() bool {
			before, beforeRole := writes(), roleWrites()
			time.Sleep(2 * time.Second)
			settled = writes()
			return maps.Equal(before, settled) && roleWrites() == beforeRole
		}, timeout, interval).Should(BeTrue(), "the manager kept writing")

		By("reconciling it again and again while nothing changes")
		for i := range 3 {
			r := &rbacv1.Role{}
			Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.ProxyName()}, r)).To(Succeed())
			n := roleWrites()
			metav1.SetMetaDataAnnotation(&r.ObjectMeta, "example.com/touched", strconv.Itoa(i))
			Expect(k8sClient.Update(ctx, r)).To(Succeed())
			// Someone else's change to the Role: a reconcile, which applies the Role alone again.
			Eventually(roleWrites, timeout, interval).Should(BeNumerically(">", n))
		}
		Expect(writes()).To(Equal(settled), "a reconcile wrote objects nobody changed")

		By("putting back what someone else changed")
		deploy := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.ProxyName()}, deploy)).To(Succeed())
		deploy.Spec.Replicas = ptr.To[int32](5)
		Expect(k8sClient.Update(ctx, deploy)).To(Succeed())
		Eventually(func() *int32 {
			Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.ProxyName()}, deploy)).To(Succeed())
			return deploy.Spec.Replicas
		}, timeout, interval).Should(HaveValue(BeEquivalentTo(2)))
	})

	It("serves the rooms of a shared proxy set with one Deployment, each room's values apart, and follows who joins and leaves", func() {
		setName := types.NamespacedName{Namespace: mainNamespace, Name: herdgatev1alpha1.ProxySetName("pool")}
		rooms := []*herdgatev1alpha1.WaitingQueue{
			builder.From(sampleQueue(mainNamespace, "pool-a")).Proxy(&herdgatev1alpha1.ProxySpec{Replicas: ptr.To[int32](1)}).Shared("pool", "a.shop.example").Obj(),
			builder.From(sampleQueue(mainNamespace, "pool-b")).Shared("pool", "b.shop.example").Obj(),
			builder.From(sampleQueue(mainNamespace, "pool-c")).Proxy(&herdgatev1alpha1.ProxySpec{Replicas: ptr.To[int32](3)}).Shared("pool", "c.shop.example", "www.c.shop.example").Obj(),
		}
		for _, wq := range rooms {
			Expect(k8sClient.Create(ctx, wq)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		}
		ownerNames := func(obj client.Object) []string {
			var out []string
			for _, ref := range obj.GetOwnerReferences() {
				Expect(ref.Controller).To(Or(BeNil(), HaveValue(BeFalse())), "a set's object has no controller")
				out = append(out, ref.Name)
			}
			return out
		}
		setValues := func(g Gomega) map[string][]byte {
			secret := &corev1.Secret{}
			g.Expect(k8sClient.Get(ctx, setName, secret)).To(Succeed())
			return secret.Data
		}
		roomKey := func(g Gomega, wq *herdgatev1alpha1.WaitingQueue) []byte {
			own := &corev1.Secret{}
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.SecretName()}, own)).To(Succeed())
			return own.Data[herdgatev1alpha1.SecretHMACKey]
		}

		By("running one Deployment for the three rooms, at the most replicas any asks for")
		Eventually(func(g Gomega) {
			deploy := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(ctx, setName, deploy)).To(Succeed())
			g.Expect(deploy.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
			g.Expect(ownerNames(deploy)).To(ConsistOf("pool-a", "pool-b", "pool-c"))
			g.Expect(deploy.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--proxy-set="+mainNamespace+"/pool", "--secret-dir=/etc/herdgate/secret"))
			g.Expect(deploy.Spec.Template.Spec.Volumes[0].Secret.SecretName).To(Equal(setName.Name))
			for _, obj := range []client.Object{&corev1.Service{}, &corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}, &policyv1.PodDisruptionBudget{}} {
				g.Expect(k8sClient.Get(ctx, setName, obj)).To(Succeed(), "the set's %T", obj)
				g.Expect(ownerNames(obj)).To(ConsistOf("pool-a", "pool-b", "pool-c"))
			}
			values := setValues(g)
			for _, wq := range rooms {
				g.Expect(values).To(HaveKeyWithValue(herdgatev1alpha1.ProxySetKey(wq.Name, herdgatev1alpha1.SecretHMACKey), roomKey(g, wq)))
				g.Expect(values).To(HaveKeyWithValue(herdgatev1alpha1.ProxySetKey(wq.Name, herdgatev1alpha1.SecretRedisURL), []byte(redisSrv.URL())))
				// No room of a set has a proxy of its own.
				g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.ProxyName()}, &appsv1.Deployment{}))).To(BeTrue())
				g.Expect(condition(get(wq), herdgatev1alpha1.ConditionAdmitting)).To(HaveField("Status", metav1.ConditionTrue))
			}
			role := &rbacv1.Role{}
			g.Expect(k8sClient.Get(ctx, setName, role)).To(Succeed())
			g.Expect(role.Rules).To(ConsistOf(HaveField("ResourceNames", BeEmpty())))
		}, timeout, interval).Should(Succeed())

		By("taking back the values of a room that leaves for a proxy of its own")
		update(rooms[1], func(b *builder.QueueBuilder) { b.Proxy(nil) })
		Eventually(func(g Gomega) {
			g.Expect(setValues(g)).NotTo(HaveKey(HavePrefix("pool-b_")))
			g.Expect(setValues(g)).To(HaveKey(herdgatev1alpha1.ProxySetKey("pool-a", herdgatev1alpha1.SecretHMACKey)))
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: mainNamespace, Name: rooms[1].ProxyName()}, &appsv1.Deployment{})).To(Succeed())
			deploy := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(ctx, setName, deploy)).To(Succeed())
			g.Expect(ownerNames(deploy)).To(ConsistOf("pool-a", "pool-c"))
		}, timeout, interval).Should(Succeed())

		By("deleting the own proxy of a room that joins")
		update(rooms[1], func(b *builder.QueueBuilder) { b.Shared("pool", "b.shop.example") })
		Eventually(func(g Gomega) {
			g.Expect(setValues(g)).To(HaveKey(herdgatev1alpha1.ProxySetKey("pool-b", herdgatev1alpha1.SecretHMACKey)))
			g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, types.NamespacedName{Namespace: mainNamespace, Name: rooms[1].ProxyName()}, &appsv1.Deployment{}))).To(BeTrue())
			g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, types.NamespacedName{Namespace: mainNamespace, Name: rooms[1].ServiceName()}, &corev1.Service{}))).To(BeTrue())
		}, timeout, interval).Should(Succeed())

		By("following the rooms that are deleted, down to the set's objects with the last")
		Expect(k8sClient.Delete(ctx, rooms[2])).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(setValues(g)).NotTo(HaveKey(HavePrefix("pool-c_")))
			deploy := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(ctx, setName, deploy)).To(Succeed())
			g.Expect(ownerNames(deploy)).To(ConsistOf("pool-a", "pool-b"))
			g.Expect(deploy.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
		}, timeout, interval).Should(Succeed())
		Expect(k8sClient.Delete(ctx, rooms[0])).To(Succeed())
		Expect(k8sClient.Delete(ctx, rooms[1])).To(Succeed())
		Eventually(func(g Gomega) {
			for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.Secret{}, &corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}, &policyv1.PodDisruptionBudget{}} {
				g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, setName, obj))).To(BeTrue(), "the set's %T outlived its rooms", obj)
			}
		}, timeout, interval).Should(Succeed())
	})

	It("reports an object the API server refuses in Programmed, with its message, and keeps the plan", func() {
		// The schema takes it; only the Deployment's own validation can tell: extended resources are whole.
		wq := builder.Queue(mainNamespace, "orders-refused").ProxyResources(&herdgatev1alpha1.ProxyResources{
			Requests: herdgatev1alpha1.ResourceQuantities{"example.com/device": "500m"},
			Limits:   herdgatev1alpha1.ResourceQuantities{"example.com/device": "500m"},
		}).Obj()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		Eventually(func(g Gomega) {
			st := get(wq).Status
			c := meta.FindStatusCondition(st.Conditions, herdgatev1alpha1.ConditionProgrammed)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(herdgatev1alpha1.ReasonApplyFailed))
			g.Expect(c.Message).To(ContainSubstring("Deployment"))
			g.Expect(c.Message).To(ContainSubstring("example.com/device"))
			g.Expect(st.Plan).NotTo(BeNil())
			g.Expect(st.Plan.BatchSize).To(BeEquivalentTo(14))
			g.Expect(meta.IsStatusConditionTrue(st.Conditions, herdgatev1alpha1.ConditionAccepted)).To(BeTrue())
			g.Expect(meta.IsStatusConditionTrue(st.Conditions, herdgatev1alpha1.ConditionReady)).To(BeFalse())
		}, timeout, interval).Should(Succeed())
		GinkgoWriter.Println("Programmed:", condition(wq, herdgatev1alpha1.ConditionProgrammed).Message)

		By("applying once the spec is fixed")
		update(wq, func(b *builder.QueueBuilder) {
			b.ProxyResources(&herdgatev1alpha1.ProxyResources{Requests: herdgatev1alpha1.ResourceQuantities{"example.com/device": "1"},
				Limits: herdgatev1alpha1.ResourceQuantities{"example.com/device": "1"}})
		})
		Eventually(func(g Gomega) {
			c := condition(wq, herdgatev1alpha1.ConditionProgrammed)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.ObservedGeneration).To(Equal(get(wq).Generation))
		}, timeout, interval).Should(Succeed())
		deploy := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.ProxyName()}, deploy)).To(Succeed())
		Expect(deploy.Spec.Template.Spec.Containers[0].Resources.Requests).To(HaveKey(corev1.ResourceName("example.com/device")))
	})

	It("explains a plan larger than a tick admits, and shows a slow rate without rounding it to 0", func() {
		largest := builder.From(sampleQueue(mainNamespace, "orders-largest")).Capacity(1_000_000, time.Millisecond, 100).Tick(10 * time.Second).Obj()
		slow := builder.From(sampleQueue(mainNamespace, "orders-slow")).Capacity(1, 10*time.Minute, 1).Obj()
		for _, wq := range []*herdgatev1alpha1.WaitingQueue{largest, slow} {
			Expect(k8sClient.Create(ctx, wq)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		}
		Eventually(func(g Gomega) {
			st := get(largest).Status
			g.Expect(st.Plan).NotTo(BeNil())
			g.Expect(st.Plan.BatchSize).To(BeEquivalentTo(10_000_000_000))
			g.Expect(st.Plan.TickLimit).To(HaveValue(BeEquivalentTo(queue.MaxAdmitPerTick)))
			g.Expect(st.Plan.EffectiveAdmissionsPerSecond).To(Equal("25"))
			c := meta.FindStatusCondition(st.Conditions, herdgatev1alpha1.ConditionAdmitting)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(herdgatev1alpha1.ReasonTickLimited))
			g.Expect(c.Message).To(ContainSubstring("one tick admits at most 250"))
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			st := get(slow).Status
			g.Expect(st.Plan).NotTo(BeNil())
			g.Expect(st.Plan.AdmissionsPerSecond).To(Equal("0.0000166"))
			g.Expect(st.Plan.TickLimit).To(BeNil())
		}, timeout, interval).Should(Succeed())
	})

	It("explains an Adaptive rate in status, the Adapted condition and Events, from what a replica reports", func() {
		wq := builder.From(sampleQueue(mainNamespace, "orders-adaptive")).Adaptive(0).Obj()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })

		By("admitting at the plan while no replica reports")
		Eventually(func(g Gomega) {
			st := get(wq).Status
			c := meta.FindStatusCondition(st.Conditions, herdgatev1alpha1.ConditionAdapted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(capacity.ReasonNoReports))
			g.Expect(st.Workload).NotTo(BeNil())
			g.Expect(st.Workload.AdmissionsPerSecond).To(Equal("140"))
			g.Expect(st.Workload.TargetInFlight).To(Equal("28"))
		}, timeout, interval).Should(Succeed())

		By("following a replica that measures orders of 400 ms")
		q := engineQueue(wq)
		stop := make(chan struct{})
		reported := make(chan struct{})
		go func() {
			defer close(reported)
			// 70 orders a second of 400 ms each: 28 in flight, the target, at half the plan's rate.
			// Of every ten visitors it admits, eight were told their wait within 2 %, one within 10 %
			// and one within 15 %.
			r := queue.WorkloadReport{Replica: "orders-adaptive-proxy-0", Epoch: "test", Buckets: make([]int64, queue.LatencyBucket(400*time.Millisecond)+1),
				EstimateErrors: make([]int64, 4)}
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				r.ElapsedMicros += 100_000
				r.Requests += 7
				r.LatencyMicros += 7 * 400_000
				r.FlightMicros += 28 * 100_000
				r.Buckets[len(r.Buckets)-1] += 7
				r.EstimateErrors[0] += 8
				r.EstimateErrors[2]++
				r.EstimateErrors[3]++
				_ = q.ReportWorkload(ctx, r, nil)
			}
		}()
		DeferCleanup(func() {
			select {
			case <-stop:
			default:
				close(stop)
			}
			<-reported
		})
		Eventually(func(g Gomega) {
			st := get(wq).Status
			c := meta.FindStatusCondition(st.Conditions, herdgatev1alpha1.ConditionAdapted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(capacity.ReasonLatencyAbove))
			g.Expect(c.Message).To(ContainSubstring("where the plan says 140"))
			w := st.Workload
			g.Expect(w.ReportingReplicas).To(BeEquivalentTo(1))
			g.Expect(w.LatencyP95).NotTo(BeNil())
			g.Expect(w.LatencyP95.Duration).To(BeNumerically(">=", 400*time.Millisecond))
			g.Expect(w.LatencyP95.Duration).To(BeNumerically("<", 440*time.Millisecond))
			g.Expect(w.InFlight).To(Equal("28"))
			g.Expect(w.WaitEstimatesJudged).To(BeNumerically(">=", 10))
			g.Expect(w.WaitEstimateErrorP90Percent).To(Equal("10"))
			rate, err := strconv.ParseFloat(w.AdmissionsPerSecond, 64)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rate).To(BeNumerically("~", 70, 3))
		}, timeout, interval).Should(Succeed())
		expectEvent := func(reason string) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				g.Expect(eventReasons(g, wq)).To(ContainElement(reason), "no %s event", reason)
			}, timeout, interval).Should(Succeed())
		}
		expectEvent("ThrottlingStarted")
		out := kubectlAs("adaptive-viewer", "get", "wq", "-n", mainNamespace, wq.Name, "-o", "wide")
		Expect(string(out)).To(ContainSubstring("LATENCY P95"))
		Expect(string(out)).To(ContainSubstring(capacity.ReasonLatencyAbove))

		By("falling back to the plan when the replica stops reporting")
		close(stop)
		Eventually(func(g Gomega) {
			st := get(wq).Status
			c := meta.FindStatusCondition(st.Conditions, herdgatev1alpha1.ConditionAdapted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(capacity.ReasonNoReports))
			g.Expect(st.Workload.AdmissionsPerSecond).To(Equal("140"))
		}, timeout, interval).Should(Succeed())
		expectEvent("ThrottlingStopped")
	})

	It("says in status when the queue is deeper than its poll budget holds, and when it fits again", func() {
		wq := builder.From(sampleQueue(mainNamespace, "orders-budget")).PollBudget(1).Suspend(true).Obj() // nobody admitted: the depth stays
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		enter(engineQueue(wq), "budget", 300)
		Eventually(func(g Gomega) {
			st := get(wq).Status
			c := meta.FindStatusCondition(st.Conditions, herdgatev1alpha1.ConditionWithinPollBudget)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(herdgatev1alpha1.ReasonDepthBeyondBudget))
			g.Expect(c.Message).To(ContainSubstring("300 waiting"))
			g.Expect(c.Message).To(ContainSubstring("raise spec.polling.budget or spec.abandonAfter"))
			g.Expect(st.Polling).NotTo(BeNil())
			g.Expect(st.Polling.FarInterval.Duration).To(BeNumerically(">", 5*time.Second))
		}, timeout, interval).Should(Succeed())
		update(wq, func(b *builder.QueueBuilder) { b.PollBudget(20000) })
		Eventually(func(g Gomega) {
			st := get(wq).Status
			c := meta.FindStatusCondition(st.Conditions, herdgatev1alpha1.ConditionWithinPollBudget)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(st.Polling.FarInterval.Duration).To(Equal(5 * time.Second))
			g.Expect(st.Polling.SupportedDepth).To(BeNumerically(">", 1_000_000))
		}, timeout, interval).Should(Succeed())
	})

	It("copies the Secret values the spec refers to for the proxy, and keeps the last copy while one is missing", func() {
		wq := builder.From(sampleQueue(mainNamespace, "orders-refs")).Suspend(true).
			Entry(&herdgatev1alpha1.EntrySpec{Invitation: &herdgatev1alpha1.InvitationSpec{
				KeySecretRef: herdgatev1alpha1.SecretValueRef{Name: "orders-invites", Key: "signing-key"}}}).
			Bypass(herdgatev1alpha1.BypassRule{Name: "monitor", Header: &herdgatev1alpha1.BypassHeader{Name: "X-Monitor",
				ValueSecretRef: herdgatev1alpha1.SecretValueRef{Name: "orders-monitor", Key: "token"}}}).Obj()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		inviteKey := herdgatev1alpha1.SecretRefKey("orders-invites", "signing-key")
		monitorKey := herdgatev1alpha1.SecretRefKey("orders-monitor", "token")
		queueSecret := func() map[string][]byte {
			GinkgoHelper()
			s := &corev1.Secret{}
			Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.SecretName()}, s)).To(Succeed())
			return s.Data
		}
		mounted := func() []string {
			GinkgoHelper()
			deploy := &appsv1.Deployment{}
			Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.ProxyName()}, deploy)).To(Succeed())
			var keys []string
			for _, v := range deploy.Spec.Template.Spec.Volumes {
				if v.Secret != nil {
					for _, item := range v.Secret.Items {
						keys = append(keys, item.Key)
					}
				}
			}
			return keys
		}
		programmed := func(g Gomega, status metav1.ConditionStatus, reason, message string) {
			c := condition(wq, herdgatev1alpha1.ConditionProgrammed)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(status))
			g.Expect(c.Reason).To(Equal(reason))
			g.Expect(c.Message).To(ContainSubstring(message))
		}

		By("naming the field whose Secret does not exist")
		Eventually(func(g Gomega) {
			programmed(g, metav1.ConditionFalse, herdgatev1alpha1.ReasonSecretValueMissing,
				"spec.entry.invitation.keySecretRef: Secret orders-invites does not exist")
		}, timeout, interval).Should(Succeed())
		Expect(mounted()).To(Equal([]string{herdgatev1alpha1.SecretHMACKey}), "nothing to mount yet but the pass key")

		By("copying the values once the Secrets exist, and mounting only them beside the key")
		invites := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: mainNamespace, Name: "orders-invites"},
			StringData: map[string]string{"signing-key": "the site's invitation key, 32 bytes or more"}}
		Expect(k8sClient.Create(ctx, invites)).To(Succeed())
		Eventually(func(g Gomega) {
			programmed(g, metav1.ConditionFalse, herdgatev1alpha1.ReasonSecretValueMissing,
				`spec.bypass[0].header.valueSecretRef: Secret orders-monitor does not exist`)
		}, timeout, interval).Should(Succeed())
		monitor := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: mainNamespace, Name: "orders-monitor"},
			StringData: map[string]string{"token": "a monitor token of 16 bytes or more"}}
		Expect(k8sClient.Create(ctx, monitor)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, monitor))).To(Succeed()) })
		Eventually(func(g Gomega) {
			programmed(g, metav1.ConditionTrue, herdgatev1alpha1.ReasonProgrammed, "applied")
		}, timeout, interval).Should(Succeed())
		Expect(string(queueSecret()[inviteKey])).To(Equal("the site's invitation key, 32 bytes or more"))
		Expect(string(queueSecret()[monitorKey])).To(Equal("a monitor token of 16 bytes or more"))
		Expect(mounted()).To(ConsistOf(herdgatev1alpha1.SecretHMACKey, inviteKey, monitorKey))
		Expect(queueSecret()).To(HaveKey(herdgatev1alpha1.SecretRedisURL), "the Redis URL stays in the Secret, unmounted")

		By("refusing, with the proxy's own check, a value the proxy would refuse: the last good copy stays")
		invites.StringData = map[string]string{"signing-key": "twelve bytes"}
		Expect(k8sClient.Update(ctx, invites)).To(Succeed())
		update(wq, func(b *builder.QueueBuilder) { b.Page(&herdgatev1alpha1.PageSpec{Message: "a short key"}) })
		Eventually(func(g Gomega) {
			programmed(g, metav1.ConditionFalse, herdgatev1alpha1.ReasonSecretValueInvalid,
				"spec.entry.invitation.keySecretRef: Secret orders-invites key signing-key holds 12 bytes, at least 32 required")
		}, timeout, interval).Should(Succeed())
		Expect(string(queueSecret()[inviteKey])).To(Equal("the site's invitation key, 32 bytes or more"))

		By("keeping the last copy when a Secret goes away")
		Expect(k8sClient.Delete(ctx, invites)).To(Succeed())
		// The manager does not watch Secrets: it notices at its next resync (a minute), or at once
		// on a change of the spec, as here.
		update(wq, func(b *builder.QueueBuilder) { b.Page(&herdgatev1alpha1.PageSpec{Message: "touched"}) })
		Eventually(func(g Gomega) {
			programmed(g, metav1.ConditionFalse, herdgatev1alpha1.ReasonSecretValueMissing, "Secret orders-invites does not exist")
		}, timeout, interval).Should(Succeed())
		Expect(string(queueSecret()[inviteKey])).To(Equal("the site's invitation key, 32 bytes or more"))
		Expect(mounted()).To(ContainElement(inviteKey))

		By("dropping the copy no field refers to any more")
		update(wq, func(b *builder.QueueBuilder) { b.Entry(nil) })
		Eventually(func(g Gomega) {
			programmed(g, metav1.ConditionTrue, herdgatev1alpha1.ReasonProgrammed, "applied")
		}, timeout, interval).Should(Succeed())
		Expect(queueSecret()).NotTo(HaveKey(inviteKey))
		Expect(mounted()).To(ConsistOf(herdgatev1alpha1.SecretHMACKey, monitorKey))
	})

	It("keeps a JWT queue's pass keys in its Secret, publishes what gateways verify with, and takes it back", func() {
		wq := builder.From(sampleQueue(mainNamespace, "orders-jwt")).Suspend(true).Enforcement(herdgatev1alpha1.EnforcementGateway).JWTPasses("", 0).Obj()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
		published := types.NamespacedName{Namespace: wq.Namespace, Name: wq.PassKeysName()}
		queueSecret := &corev1.Secret{}

		By("keeping the keys in the queue's Secret and publishing the public ones in a ConfigMap")
		cm := &corev1.ConfigMap{}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, published, cm)).To(Succeed())
		}, timeout, interval).Should(Succeed())
		Expect(metav1.IsControlledBy(cm, get(wq))).To(BeTrue())
		Expect(cm.Data).To(HaveKey(controllers.PassKeysJWKS))
		Expect(cm.Data[controllers.PassKeysEnvoyJWKS]).To(Equal(cm.Data[controllers.PassKeysJWKS]), "for Envoy Gateway's localJWKS")
		for _, slot := range []string{controllers.PassKeysPrevious, controllers.PassKeysCurrent, controllers.PassKeysNext} {
			Expect(cm.Data[slot+".pem"]).To(HavePrefix("-----BEGIN PUBLIC KEY-----"), slot)
		}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.SecretName()}, queueSecret)).To(Succeed())
		keys, err := pass.ParseKeySet(queueSecret.Data[herdgatev1alpha1.SecretPassKeys])
		Expect(err).NotTo(HaveOccurred())
		Expect(keys.Keys).To(HaveLen(2), "the signing key and the next one, published ahead")
		Expect(keys.Keys[1].ActiveFrom).To(BeTemporally("~", keys.Keys[0].ActiveFrom.Add(herdgatev1alpha1.DefaultKeyRotation), time.Minute))
		Expect(cm.Data[controllers.PassKeysNext+".pem"]).NotTo(Equal(cm.Data[controllers.PassKeysCurrent+".pem"]))

		By("signing passes the proxy's config accepts and a JOSE library verifies with the published JWKS")
		values := func(key string) ([]byte, error) {
			if v, ok := queueSecret.Data[key]; ok {
				return v, nil
			}
			return nil, fmt.Errorf("no key %s", key)
		}
		cfg, err := admission.NewConfigWithSecrets(get(wq), queueSecret.Data[herdgatev1alpha1.SecretHMACKey], values)
		Expect(err).NotTo(HaveOccurred())
		now := time.Now()
		token := cfg.Passes.Issue("ada", now, now.Add(time.Minute))
		var set jose.JSONWebKeySet
		Expect(json.Unmarshal([]byte(cm.Data[controllers.PassKeysJWKS]), &set)).To(Succeed())
		parsed, err := josejwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
		Expect(err).NotTo(HaveOccurred())
		signer := set.Key(parsed.Headers[0].KeyID)
		Expect(signer).To(HaveLen(1))
		var claims josejwt.Claims
		Expect(parsed.Claims(signer[0].Key, &claims)).To(Succeed())
		Expect(claims.Audience).To(ConsistOf(wq.Namespace + "/" + wq.Name))

		By("mounting the keys in the proxy beside the HMAC key")
		Eventually(func(g Gomega) {
			deploy := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.ProxyName()}, deploy)).To(Succeed())
			var items []string
			for _, v := range deploy.Spec.Template.Spec.Volumes {
				if v.Secret != nil {
					for _, item := range v.Secret.Items {
						items = append(items, item.Key)
					}
				}
			}
			g.Expect(items).To(ConsistOf(herdgatev1alpha1.SecretHMACKey, herdgatev1alpha1.SecretPassKeys))
			g.Expect(deploy.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--ext-authz-listen=:9191"),
				"a gateway-enforced queue serves the gRPC check")
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			svc := &corev1.Service{}
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.ServiceName()}, svc)).To(Succeed())
			g.Expect(svc.Spec.Ports).To(ContainElement(SatisfyAll(
				HaveField("Name", "ext-authz"), HaveField("Port", BeEquivalentTo(controllers.ProxyExtAuthzPort)),
				HaveField("AppProtocol", HaveValue(Equal("kubernetes.io/h2c"))))))
		}, timeout, interval).Should(Succeed())

		By("publishing HS256 keys in a Secret, never in the ConfigMap")
		update(wq, func(b *builder.QueueBuilder) { b.JWTPasses(herdgatev1alpha1.PassAlgorithmHS256, 0) })
		hs := &corev1.Secret{}
		Eventually(func(g Gomega) {
			g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, published, &corev1.ConfigMap{}))).To(BeTrue())
			g.Expect(k8sClient.Get(ctx, published, hs)).To(Succeed())
			g.Expect(hs.Data).To(HaveKey(controllers.PassKeysCurrent + ".key"))
		}, timeout, interval).Should(Succeed())
		Expect(string(hs.Data[controllers.PassKeysCurrent+".key"])).To(MatchRegexp(`^[A-Za-z0-9_-]{43}$`), "32 random bytes as printable text")

		By("taking the published keys back when the queue returns to HMAC passes")
		update(wq, func(b *builder.QueueBuilder) {
			b.PassSpec(&herdgatev1alpha1.PassSpec{Format: herdgatev1alpha1.PassFormatHMAC})
		})
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, published, hs)).To(Succeed())
			g.Expect(hs.Data).To(BeEmpty())
		}, timeout, interval).Should(Succeed())
	})

	It("reports an unreachable Redis while other queues keep their exact rate", func() {
		port, err := testenv.FreePort()
		Expect(err).NotTo(HaveOccurred())
		nowhere := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: mainNamespace, Name: "redis-nowhere"},
			StringData: map[string]string{"url": fmt.Sprintf("redis://127.0.0.1:%d", port)},
		}
		Expect(k8sClient.Create(ctx, nowhere)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, nowhere)).To(Succeed()) })

		healthy := builder.From(sampleQueue(mainNamespace, "orders-healthy")).Suspend(true).Obj()
		Expect(k8sClient.Create(ctx, healthy)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, healthy))).To(Succeed()) })
		enter(engineQueue(healthy), "h", 2000)

		broken := builder.From(sampleQueue(mainNamespace, "orders-broken")).Redis(nowhere.Name, "").Obj()
		Expect(k8sClient.Create(ctx, broken)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, broken))).To(Succeed()) })
		missing := builder.From(sampleQueue(mainNamespace, "orders-missing")).Redis("no-such-secret", "").Obj()
		Expect(k8sClient.Create(ctx, missing)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, missing))).To(Succeed()) })

		running := update(healthy, func(b *builder.QueueBuilder) { b.Suspend(false) })
		Eventually(func(g Gomega) {
			c := condition(broken, herdgatev1alpha1.ConditionRedisAvailable)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(herdgatev1alpha1.ReasonRedisUnreachable))
			g.Expect(c.Message).To(ContainSubstring("connection refused"))
			g.Expect(condition(broken, herdgatev1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			c := condition(missing, herdgatev1alpha1.ConditionRedisAvailable)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(herdgatev1alpha1.ReasonRedisConfigInvalid))
			g.Expect(c.Message).To(ContainSubstring("no-such-secret"))
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			list := &eventsv1.EventList{}
			g.Expect(k8sClient.List(ctx, list, client.InNamespace(mainNamespace))).To(Succeed())
			found := false
			for _, e := range list.Items {
				found = found || (e.Regarding.Name == broken.Name && e.Type == corev1.EventTypeWarning && e.Reason == herdgatev1alpha1.ReasonRedisUnreachable)
			}
			g.Expect(found).To(BeTrue(), "no Warning event for the unreachable Redis")
		}, timeout, interval).Should(Succeed())

		// Meanwhile the healthy queue ticks on its grid at 14 per tick, none lost.
		Eventually(func() int { return len(since(ticks.of(keyOf(healthy)), running)) }, timeout, interval).Should(BeNumerically(">=", 30))
		reports := since(ticks.of(keyOf(healthy)), running)
		expectExactTicks(reports, tick, 14)
		for _, r := range reports {
			Expect(int64(len(r.Result.Admitted))).To(Equal(r.Quota))
		}

		By("recovering when the Secret points at a working Redis")
		nowhere.StringData = map[string]string{"url": redisSrv.URL()}
		Expect(k8sClient.Update(ctx, nowhere)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(condition(broken, herdgatev1alpha1.ConditionRedisAvailable).Status).To(Equal(metav1.ConditionTrue))
		}, timeout, interval).Should(Succeed())
	})
})

var _ = Describe("Leader election", Ordered, func() {
	const namespace = "leader-election"
	const lease = 3 * time.Second

	It("runs one scheduler at a time and hands over within the lease", func() {
		createNamespace(namespace)
		logA, logB := &tickLog{}, &tickLog{}
		ctxA, cancelA := context.WithCancel(ctx)
		defer cancelA()
		ctxB, cancelB := context.WithCancel(ctx)
		defer cancelB()
		stoppedA := startManager(ctxA, managerOptions{namespaces: []string{namespace}, leaderElection: "herdgate-test", lease: lease, onTick: logA.add})

		wq := builder.From(sampleQueue(namespace, "orders-le")).Suspend(true).Obj()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		enter(engineQueue(wq), "l", 3000)
		running := update(wq, func(b *builder.QueueBuilder) { b.Suspend(false) })
		Eventually(func() int { return len(since(logA.of(keyOf(wq)), running)) }, timeout, interval).Should(BeNumerically(">", 0))
		stoppedB := startManager(ctxB, managerOptions{namespaces: []string{namespace}, leaderElection: "herdgate-test", lease: lease, onTick: logB.add})

		Eventually(func() int { return len(since(logA.of(keyOf(wq)), running)) }, timeout, interval).Should(BeNumerically(">=", 20))
		Expect(logB.of(keyOf(wq))).To(BeEmpty(), "the follower's scheduler ran")

		By("killing the leader without releasing its lease")
		cancelA()
		Eventually(stoppedA, timeout).Should(BeClosed())
		killedAt := time.Now()
		Eventually(func() int { return len(logB.of(keyOf(wq))) }, timeout, interval).Should(BeNumerically(">=", 20))
		a, b := since(logA.of(keyOf(wq)), running), logB.of(keyOf(wq))
		gap := b[0].Started.Sub(a[len(a)-1].Started)
		GinkgoWriter.Printf("handover: last tick of A to first tick of B %s (killed %s after A's last tick)\n", gap, killedAt.Sub(a[len(a)-1].Started))
		// The follower waits out the lease, then one retry, then starts its controller (caches, the
		// first reconcile) and the queue's scheduler: on a loaded 2-core machine that start alone took
		// 1.2 s, so 3 s are left for it. A follower that waited for a second lease would miss it.
		Expect(gap).To(BeNumerically("<=", lease+3*time.Second), "the follower took over later than the lease allows")

		stopped := update(wq, func(b *builder.QueueBuilder) { b.Suspend(true) })
		Eventually(func() int { return len(since(logB.of(keyOf(wq)), stopped)) }, timeout, interval).Should(BeNumerically(">", 0))
		cancelB()
		Eventually(stoppedB, timeout).Should(BeClosed())

		By("admitting no tick twice, rate × time while a scheduler ran, and the grid points the new leader made up")
		b = logB.of(keyOf(wq))
		seen := map[time.Time]int{}
		var admitted int64
		var expected int64
		var firstAndLast [][2]time.Time
		for _, period := range [][]scheduler.TickReport{a, b} {
			var active []scheduler.TickReport
			for _, r := range period {
				if r.Err == nil && !r.Result.Duplicate && r.Generation >= running && r.Generation < stopped {
					active = append(active, r)
				}
			}
			Expect(active).NotTo(BeEmpty())
			for _, r := range active {
				seen[r.Scheduled]++
				Expect(seen[r.Scheduled]).To(Equal(1), "tick %s admitted twice", r.Scheduled)
				Expect(int64(len(r.Result.Admitted))).To(BeNumerically("<=", r.Quota))
				admitted += int64(len(r.Result.Admitted))
			}
			ticksRun := int64(active[len(active)-1].Scheduled.Sub(active[0].Scheduled)/tick) + 1
			expected += 14 * ticksRun
			firstAndLast = append(firstAndLast, [2]time.Time{active[0].Scheduled, active[len(active)-1].Scheduled})
		}
		// B carries on from A's last tick in Redis: the grid points between them, up to the ten a late
		// tick makes up.
		madeUp := min(int64(firstAndLast[1][0].Sub(firstAndLast[0][1])/tick)-1, 10)
		expected += 14 * madeUp
		st, err := engineQueue(wq).Stats(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.AdmittedTotal).To(Equal(admitted), "Redis counted admissions no scheduler reported")
		Expect(admitted).To(BeNumerically("~", expected, 14))
		GinkgoWriter.Printf("admitted %d, rate × time %d (%d ticks made up by the new leader)\n", admitted, expected, madeUp)
	})
})

// redisKeys lists the queue's keys in the suite's Redis.
func redisKeys(wq *herdgatev1alpha1.WaitingQueue) []string {
	GinkgoHelper()
	return redisKeysIn(redisRDB.Client(), wq)
}

// redisKeysIn are wq's keys in the Redis rdb talks to.
func redisKeysIn(rdb redis.Cmdable, wq *herdgatev1alpha1.WaitingQueue) []string {
	GinkgoHelper()
	keys, err := rdb.Keys(ctx, fmt.Sprintf("{hg:%s/%s}*", wq.Namespace, wq.Name)).Result()
	Expect(err).NotTo(HaveOccurred())
	return keys
}

func kubectlPath() string {
	p, err := testenv.Kubectl()
	Expect(err).NotTo(HaveOccurred())
	return p
}
