package controllers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/controllers"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

// Decision 22: an idle room writes nothing, and a new room is reconciled as soon as a worker is free,
// however many rooms requeue (docs/architecture.md, "What the manager writes").
var _ = Describe("Many rooms", func() {
	It("writes nothing for a room nobody visits, however often it wakes and reads its figures", func() {
		const namespace = "rooms-at-rest"
		createNamespace(namespace)
		clock := clocktesting.NewFakeClock(time.Now())
		requests := &requestLog{}
		rc := rest.CopyConfig(cfg)
		rc.Wrap(requests.wrap)
		wakes := &tickLog{}
		managerCtx, stopManager := context.WithCancel(ctx)
		stopped := startManager(managerCtx, managerOptions{namespaces: []string{namespace}, restConfig: rc, onTick: wakes.add,
			scheduler: []scheduler.Option{scheduler.WithClock(clock)}})
		DeferCleanup(func() { stopManager(); <-stopped })
		// The scheduler's time runs fifty times as fast as the reconciler's: a second every 20 ms.
		stopClock := driveClock(clock, time.Second, 20*time.Millisecond)
		DeferCleanup(stopClock)

		wq := sampleQueue(namespace, "resting")
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { deleteAndWait(wq) })
		Eventually(func(g Gomega) {
			g.Expect(condition(wq, herdgatev1alpha1.ConditionAdmitting)).To(HaveField("Status", metav1.ConditionTrue))
			g.Expect(get(wq).Status.LiveFiguresTime).NotTo(BeNil())
		}, timeout, interval).Should(Succeed())
		By("letting the room come to rest")
		writes := func() int {
			n := 0
			for _, c := range requests.of("/") {
				n += c
			}
			return n
		}
		// Its first figures may wait for the reconciler's live-figure interval (10 s) after its first status.
		Eventually(writes, timeout, interval).Should(stableFor(12*time.Second), "the manager kept writing for a room nobody visits")

		By("watching it over more than two of the reconciler's live-figure intervals")
		written, woken := requests.of("/"), len(wakes.of(keyOf(wq)))
		Consistently(func() map[string]int { return requests.of("/") }, 22*time.Second, 500*time.Millisecond).Should(Equal(written),
			"a room nobody visits was written")
		// Fifty times 22 s of the scheduler's time: the room woke and read its figures every idle sleep.
		Expect(len(wakes.of(keyOf(wq)))-woken).To(BeNumerically(">=", 50), "the resting room did not wake")

		By("having written each status as a whole: Ready names just the conditions that are not True")
		patches := requests.statusPatchesOf(fmt.Sprintf("/apis/herdgate.io/v1alpha1/namespaces/%s/waitingqueues/%s/status", namespace, wq.Name))
		Expect(patches).NotTo(BeEmpty())
		for i, body := range patches {
			var patch struct {
				Status struct {
					Conditions []metav1.Condition `json:"conditions"`
				} `json:"status"`
			}
			Expect(json.Unmarshal(body, &patch)).To(Succeed())
			var notTrue []string
			var ready *metav1.Condition
			for _, c := range patch.Status.Conditions {
				switch {
				case c.Type == herdgatev1alpha1.ConditionReady:
					ready = &c
				case c.Status != metav1.ConditionTrue && c.Type != herdgatev1alpha1.ConditionWithinPollBudget && c.Type != herdgatev1alpha1.ConditionOpen:
					notTrue = append(notTrue, c.Type)
				}
			}
			if ready == nil {
				continue // a patch of live figures alone
			}
			for _, held := range strings.FieldsFunc(strings.TrimPrefix(ready.Message, "not true: "), func(r rune) bool { return r == '[' || r == ']' || r == ' ' }) {
				Expect(notTrue).To(ContainElement(held), "status write %d says Ready waits for %s, which it writes True: %s", i+1, held, body)
			}
		}
	})

	It("reconciles a new room before the requeues of two hundred busy ones", func() {
		const namespace, busyRooms = "rooms-behind-busy", 200
		createNamespace(namespace)
		requests := &requestLog{}
		rc := rest.CopyConfig(cfg)
		rc.QPS, rc.Burst = 1000, 2000
		rc.Wrap(requests.wrap)
		managerCtx, stopManager := context.WithCancel(ctx)
		// One worker: the order the queue gives is all that decides who waits.
		stopped := startManager(managerCtx, managerOptions{namespaces: []string{namespace}, restConfig: rc, workers: 1})
		DeferCleanup(func() { stopManager(); <-stopped })

		By("making rooms whose Redis Secret is missing: each is looked at again every 5 s")
		for i := range busyRooms {
			busy := builder.Queue(namespace, fmt.Sprintf("busy-%03d", i)).Redis("missing-redis", "url").Obj()
			Expect(k8sClient.Create(ctx, busy)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			list := &herdgatev1alpha1.WaitingQueueList{}
			g.Expect(k8sClient.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
			failing := 0
			for _, wq := range list.Items {
				if c := apimeta.FindStatusCondition(wq.Status.Conditions, herdgatev1alpha1.ConditionRedisAvailable); c != nil && c.Status == metav1.ConditionFalse {
					failing++
				}
			}
			g.Expect(failing).To(Equal(busyRooms))
		}, 2*timeout, interval).Should(Succeed())
		missing := fmt.Sprintf("GET /api/v1/namespaces/%s/secrets/missing-redis", namespace)

		By("answering the manager late, so that their requeues come faster than one worker takes them")
		requests.delay.Store(int64(40 * time.Millisecond))
		DeferCleanup(func() { requests.delay.Store(0) })
		backlog := requests.count("GET", "/api/v1/namespaces/"+namespace+"/secrets/missing-redis")
		Eventually(func() int {
			return requests.count("GET", "/api/v1/namespaces/"+namespace+"/secrets/missing-redis") - backlog
		}, timeout, interval).Should(BeNumerically(">=", busyRooms), "the busy rooms were not looked at again")

		newcomer := sampleQueue(namespace, "newcomer")
		Expect(k8sClient.Create(ctx, newcomer)).To(Succeed())
		DeferCleanup(func() { requests.delay.Store(0); deleteAndWait(newcomer) })
		Eventually(func(g Gomega) {
			st := get(newcomer).Status
			g.Expect(st.Plan).NotTo(BeNil())
			g.Expect(st.ObservedGeneration).To(Equal(get(newcomer).Generation))
		}, 2*timeout, interval).Should(Succeed())

		// From the newcomer's first request (its finalizer) to its first status, the one worker may
		// finish the busy room it holds, and nothing more.
		sent := requests.requests()
		room := fmt.Sprintf("/namespaces/%s/waitingqueues/newcomer", namespace)
		first := slices.IndexFunc(sent, func(r string) bool { return strings.HasSuffix(r, room) })
		status := slices.IndexFunc(sent, func(r string) bool { return r == "PATCH /apis/herdgate.io/v1alpha1"+room+"/status" })
		Expect(first).To(BeNumerically(">=", 0))
		Expect(status).To(BeNumerically(">", first))
		between := 0
		for _, r := range sent[first:status] {
			if r == missing {
				between++
			}
		}
		Expect(between).To(BeNumerically("<=", 2), "the busy rooms were reconciled %d times while the new room waited", between)
	})
})

// Deleting a room deletes its Redis keys beside the reconciles (controllers/redis_cleanup.go).
var _ = Describe("Deleted rooms", func() {
	It("reconcile a new room while their Redis stalls, and go once it answers", func() {
		const namespace, deleted = "rooms-deleted-on-a-stall", 2 * controllers.DefaultMaxConcurrentReconciles
		createNamespace(namespace)
		stalling, err := testenv.NewRedis(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(stalling.Stop)
		rdb := redis.NewClient(&redis.Options{Addr: stalling.Addr()})
		DeferCleanup(rdb.Close)
		managerCtx, stopManager := context.WithCancel(ctx)
		stopped := startManager(managerCtx, managerOptions{namespaces: []string{namespace}, redisURL: stalling.URL()})
		DeferCleanup(func() { stopManager(); <-stopped })
		keysOf := func(wq *herdgatev1alpha1.WaitingQueue) []string { return redisKeysIn(rdb, wq) }

		By("making rooms whose scheduler has written their keys")
		rooms := make([]*herdgatev1alpha1.WaitingQueue, deleted)
		for i := range rooms {
			rooms[i] = sampleQueue(namespace, fmt.Sprintf("deleted-%02d", i))
			Expect(k8sClient.Create(ctx, rooms[i])).To(Succeed())
		}
		for _, wq := range rooms {
			Eventually(func() []string { return keysOf(wq) }, timeout, interval).ShouldNot(BeEmpty())
		}

		By("pausing their Redis, deleting them all, then making a new room")
		resume, err := stalling.Pause()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(resume)
		for _, wq := range rooms {
			Expect(k8sClient.Delete(ctx, wq)).To(Succeed())
		}
		newcomer := sampleQueue(namespace, "newcomer")
		Expect(k8sClient.Create(ctx, newcomer)).To(Succeed())
		// Redis answers again before the new room goes, even when a step below failed.
		DeferCleanup(func() { resume(); deleteAndWait(newcomer) })
		Eventually(func(g Gomega) {
			now := get(newcomer)
			g.Expect(now.Finalizers).To(ContainElement(controllers.Finalizer))
			g.Expect(now.Status.ObservedGeneration).To(Equal(now.Generation))
		}, timeout, interval).Should(Succeed())

		By("having reconciled it before any deleted room's try at Redis came back")
		for _, wq := range rooms {
			Expect(k8sClient.Get(ctx, keyOf(wq), &herdgatev1alpha1.WaitingQueue{})).To(Succeed(), "%s went while its Redis was paused", wq.Name)
			Expect(eventReasons(Default, wq)).NotTo(ContainElement("RedisCleanupFailed"), "%s's cleanup failed before the new room was reconciled", wq.Name)
		}

		By("letting Redis answer: each deleted room goes, and its keys with it")
		resume()
		for _, wq := range rooms {
			Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, keyOf(wq), &herdgatev1alpha1.WaitingQueue{}))
			}, timeout, interval).Should(BeTrue(), "%s was not let go", wq.Name)
			Expect(keysOf(wq)).To(BeEmpty())
		}
		Expect(keysOf(newcomer)).NotTo(BeEmpty(), "the new room's keys went with the deleted ones")
	})

	It("delete their keys when their Redis Secret went first, after a restart of the manager too", func() {
		const namespace = "rooms-deleted-after-their-secret"
		createNamespace(namespace)
		redisSecret := func(name string) *corev1.Secret {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, StringData: map[string]string{"url": redisSrv.URL()}}
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
			return s
		}
		var stopManager func()
		runManager := func() {
			managerCtx, cancel := context.WithCancel(ctx)
			stopped := startManager(managerCtx, managerOptions{namespaces: []string{namespace}})
			stopManager = func() { cancel(); <-stopped }
		}
		runManager()
		DeferCleanup(func() { stopManager() })
		remembered := builder.Queue(namespace, "remembered").Redis(redisSecret("redis-of-remembered").Name, "url").Obj()
		restarted := builder.Queue(namespace, "restarted").Redis(redisSecret("redis-of-restarted").Name, "url").Obj()
		for _, wq := range []*herdgatev1alpha1.WaitingQueue{remembered, restarted} {
			Expect(k8sClient.Create(ctx, wq)).To(Succeed())
			Eventually(func() []string { return redisKeys(wq) }, timeout, interval).ShouldNot(BeEmpty())
		}
		gone := func(wq *herdgatev1alpha1.WaitingQueue) {
			GinkgoHelper()
			Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, keyOf(wq), &herdgatev1alpha1.WaitingQueue{}))
			}, timeout, interval).Should(BeTrue(), "%s was not let go", wq.Name)
			Expect(redisKeys(wq)).To(BeEmpty(), "%s's keys stayed in Redis", wq.Name)
			Expect(eventReasons(Default, wq)).NotTo(ContainElement("RedisCleanupFailed"))
		}

		By("deleting a room's Redis Secret and its own (as a foreground deletion does), then the room: the manager remembers where it ran")
		for _, name := range []string{"redis-of-remembered", remembered.SecretName()} {
			Expect(k8sClient.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})).To(Succeed())
		}
		Expect(k8sClient.Delete(ctx, remembered)).To(Succeed())
		gone(remembered)

		By("the same with the manager stopped in between: the room's own Secret says where it ran")
		stopManager()
		Expect(k8sClient.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "redis-of-restarted"}})).To(Succeed())
		Expect(k8sClient.Delete(ctx, restarted)).To(Succeed())
		runManager()
		gone(restarted)
	})

	It("leave no scheduler ticking when their finalizer was removed by hand", func() {
		wq := sampleQueue(mainNamespace, "finalizer-removed")
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		// Enough waiting for the ticks to go on well past the checks below.
		enter(engineQueue(wq), "f", 5000)
		Eventually(func() int { return len(ticks.of(keyOf(wq))) }, timeout, interval).Should(BeNumerically(">", 3))

		// The finalizer goes, and the room right after: gone at once, unless the manager put its
		// finalizer back in between, in which case it runs.
		patch := client.MergeFrom(get(wq))
		stripped := get(wq)
		stripped.Finalizers = nil
		Expect(k8sClient.Patch(ctx, stripped, patch)).To(Succeed())
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, keyOf(wq), &herdgatev1alpha1.WaitingQueue{}))
		}, timeout, interval).Should(BeTrue())

		// A tick on its way when the room went may still report; none after it.
		Eventually(func() int { return len(ticks.of(keyOf(wq))) }, timeout, interval).Should(stableFor(time.Second),
			"the scheduler still ticks a room that is gone")
		n := len(ticks.of(keyOf(wq)))
		Consistently(func() int { return len(ticks.of(keyOf(wq))) }, 3*time.Second, 100*time.Millisecond).Should(Equal(n),
			"the scheduler still ticks a room that is gone")
	})

	It("let go of a room whose Redis never answers, after a bounded number of tries", func() {
		const namespace = "rooms-deleted-without-redis"
		createNamespace(namespace)
		port, err := testenv.FreePort()
		Expect(err).NotTo(HaveOccurred())
		managerCtx, stopManager := context.WithCancel(ctx)
		stopped := startManager(managerCtx, managerOptions{namespaces: []string{namespace}, redisURL: fmt.Sprintf("redis://127.0.0.1:%d", port)})
		DeferCleanup(func() { stopManager(); <-stopped })

		wq := sampleQueue(namespace, "unreachable")
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		Eventually(func() []string { return get(wq).Finalizers }, timeout, interval).Should(ContainElement(controllers.Finalizer))
		Expect(k8sClient.Delete(ctx, wq)).To(Succeed())
		// Four retries, 2, 4, 8 and 16 s apart.
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, keyOf(wq), &herdgatev1alpha1.WaitingQueue{}))
		}, 2*timeout, interval).Should(BeTrue(), "the finalizer did not let go")
		Eventually(func(g Gomega) {
			reasons := eventReasons(g, wq)
			g.Expect(reasons).To(ContainElement("RedisCleanupFailed"))
			g.Expect(reasons).To(ContainElement("RedisCleanupSkipped"))
		}, timeout, interval).Should(Succeed())
	})
})

// driveClock steps clock by step every real interval until the returned function is called.
func driveClock(clock *clocktesting.FakeClock, step, every time.Duration) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				clock.Step(step)
			}
		}
	}()
	return func() { close(done); <-finished }
}

// stableFor matches a value that stayed the same over d of polls: it remembers the value and when
// it last changed.
func stableFor(d time.Duration) OmegaMatcher {
	var last any
	var since time.Time
	return WithTransform(func(v any) bool {
		if since.IsZero() || fmt.Sprint(v) != fmt.Sprint(last) {
			last, since = v, time.Now()
		}
		return time.Since(since) >= d
	}, BeTrue())
}

// deleteAndWait deletes a room and waits until its finalizer let it go.
func deleteAndWait(wq *herdgatev1alpha1.WaitingQueue) {
	GinkgoHelper()
	Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, keyOf(wq), &herdgatev1alpha1.WaitingQueue{}))
	}, timeout, interval).Should(BeTrue())
}
