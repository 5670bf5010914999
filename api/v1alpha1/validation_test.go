package v1alpha1_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/settings"
	"github.com/herdgate/herdgate/test/builder"
)

// sampleQueue is the reference queue, as config/samples holds it (test/builder checks that), with a
// unique name.
func sampleQueue() *herdgatev1alpha1.WaitingQueue {
	name := fmt.Sprintf("orders-%d", GinkgoRandomSeed()+int64(CurrentSpecReport().LeafNodeLocation.LineNumber)+time.Now().UnixNano()%1e6)
	return builder.Queue("default", name).Obj()
}

func duration(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// at is a fixed instant d after 2027-03-01T00:00:00Z, in whole seconds as the API stores them.
func at(d time.Duration) metav1.Time {
	return metav1.NewTime(time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC).Add(d))
}

var _ = Describe("WaitingQueue validation", func() {
	It("accepts the sample and fills in every default", func() {
		wq := sampleQueue()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, wq)).To(Succeed()) })

		got := &herdgatev1alpha1.WaitingQueue{}
		Expect(k8sClient.Get(ctx, keyOf(wq), got)).To(Succeed())
		s := got.Spec
		Expect(s.Capacity.PoolSize).To(BeEquivalentTo(40))
		Expect(s.Capacity.RequestLatency.Duration).To(Equal(200 * time.Millisecond))
		Expect(s.Capacity.UtilizationPercent).To(HaveValue(BeEquivalentTo(70)))
		Expect(s.Tick).To(HaveValue(Equal(metav1.Duration{Duration: 100 * time.Millisecond})))
		Expect(s.Jitter).NotTo(BeNil())
		Expect(s.Jitter.Mode).To(Equal(herdgatev1alpha1.JitterUniform))
		Expect(s.Pass.TTL.Duration).To(Equal(herdgatev1alpha1.DefaultPassTTL))
		Expect(s.Polling.MinInterval.Duration).To(Equal(herdgatev1alpha1.DefaultPollMinInterval))
		Expect(s.Polling.MaxInterval.Duration).To(Equal(herdgatev1alpha1.DefaultPollMaxInterval))
		Expect(s.AbandonAfter.Duration).To(Equal(herdgatev1alpha1.DefaultAbandonAfter))
		Expect(s.AbandonAtTurnAfter).To(BeNil())
		Expect(s.EffectiveAbandonAtTurnAfter()).To(Equal(herdgatev1alpha1.DefaultAbandonAfter))
		Expect(s.Proxy.Replicas).To(HaveValue(BeEquivalentTo(herdgatev1alpha1.DefaultProxyReplicas)))
		Expect(s.Proxy.FailurePolicy).To(Equal(herdgatev1alpha1.FailClosed))
		Expect(s.Mode).To(Equal(herdgatev1alpha1.ModeQueue))
		Expect(s.Pass.Renewal).To(Equal(herdgatev1alpha1.RenewalFixed))
		Expect(s.ProtectedRoutes).To(HaveLen(2))
		Expect(*s.ProtectedRoutes[1].Path).To(Equal(herdgatev1alpha1.RoutePath("/api/v1/orders/direct")))
	})

	It("accepts abandonAtTurnAfter from twice polling.maxInterval up to abandonAfter", func() {
		for _, d := range []time.Duration{10 * time.Second, herdgatev1alpha1.DefaultAbandonAfter} {
			wq := sampleQueue()
			wq.Name = fmt.Sprintf("turn-%d", int(d.Seconds()))
			wq.Spec.AbandonAtTurnAfter = &metav1.Duration{Duration: d}
			Expect(k8sClient.Create(ctx, wq)).To(Succeed())
			Expect(k8sClient.Delete(ctx, wq)).To(Succeed())
		}
	})

	It("accepts a schedule whose pre-queue is exactly 24 hours long, and one without preQueueFrom or closesAt", func() {
		for i, sc := range []*herdgatev1alpha1.ScheduleSpec{
			{OpensAt: at(30 * time.Hour), PreQueueFrom: ptr.To(at(6 * time.Hour)), ClosesAt: ptr.To(at(31 * time.Hour))},
			{OpensAt: at(30 * time.Hour)},
		} {
			wq := sampleQueue()
			wq.Name = fmt.Sprintf("scheduled-%d", i)
			wq.Spec.Schedule = sc
			Expect(k8sClient.Create(ctx, wq)).To(Succeed())
			DeferCleanup(func() { Expect(k8sClient.Delete(ctx, wq)).To(Succeed()) })
			got := &herdgatev1alpha1.WaitingQueue{}
			Expect(k8sClient.Get(ctx, keyOf(wq), got)).To(Succeed())
			Expect(got.Spec.Schedule.OpensAt.Equal(&sc.OpensAt)).To(BeTrue())
			want := sc.OpensAt.Add(-herdgatev1alpha1.DefaultPreQueue)
			if sc.PreQueueFrom != nil {
				want = sc.PreQueueFrom.Time
			}
			Expect(got.Spec.EffectivePreQueueFrom().Equal(want)).To(BeTrue())
		}
	})

	It("accepts one path protected on several hosts, and on one host for some methods and others", func() {
		wq := builder.From(sampleQueue()).Routes(
			builder.RouteOn("shop.example", "/checkout", true, "POST"),
			builder.RouteOn("tickets.example", "/checkout", true, "POST"),
			builder.Route("/checkout", true, "GET"),
			builder.RouteOn("shop.example", "/checkout", true, "GET"),
		).Obj()
		wq.Name = "several-hosts"
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, wq)).To(Succeed()) })
		_, err := settings.Derive(wq)
		Expect(err).NotTo(HaveOccurred())
	})

	It("shows the enforcement and the releases per second in kubectl get -o wide", func() {
		wq := sampleQueue()
		wq.Spec.Enforcement = herdgatev1alpha1.EnforcementGateway
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, wq)).To(Succeed()) })
		wq.Status.ReleasedPerSecond = "3.5"
		Expect(k8sClient.Status().Update(ctx, wq)).To(Succeed())

		// What kubectl asks for: the server's table of the resource.
		httpClient, err := rest.HTTPClientFor(cfg)
		Expect(err).NotTo(HaveOccurred())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet,
			strings.TrimSuffix(cfg.Host, "/")+"/apis/herdgate.io/v1alpha1/namespaces/default/waitingqueues/"+wq.Name, nil)
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		res, err := httpClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer res.Body.Close()
		Expect(res.StatusCode).To(Equal(http.StatusOK), "GET %s", req.URL)
		var table metav1.Table
		Expect(json.NewDecoder(res.Body).Decode(&table)).To(Succeed())
		Expect(table.Rows).To(HaveLen(1))
		cells := map[string]any{}
		wide := map[string]bool{}
		for i, c := range table.ColumnDefinitions {
			cells[c.Name] = table.Rows[0].Cells[i]
			wide[c.Name] = c.Priority > 0
		}
		Expect(cells).To(HaveKeyWithValue("Released/s", "3.5"))
		Expect(cells).To(HaveKeyWithValue("Enforcement", "Gateway"))
		Expect(wide["Released/s"]).To(BeTrue(), "Released/s belongs to -o wide")
	})

	It("accepts a gateway-enforced queue with JWT passes, and defaults their algorithm and rotation", func() {
		wq := sampleQueue()
		wq.Name = "gateway-jwt"
		wq.Spec.Enforcement = herdgatev1alpha1.EnforcementGateway
		wq.Spec.Pass = &herdgatev1alpha1.PassSpec{Format: herdgatev1alpha1.PassFormatJWT}
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, wq)).To(Succeed()) })
		got := &herdgatev1alpha1.WaitingQueue{}
		Expect(k8sClient.Get(ctx, keyOf(wq), got)).To(Succeed())
		Expect(got.Spec.Enforcement).To(Equal(herdgatev1alpha1.EnforcementGateway))
		Expect(got.Spec.EffectivePassAlgorithm()).To(Equal(herdgatev1alpha1.PassAlgorithmES256))
		Expect(got.Spec.EffectiveKeyRotation()).To(Equal(herdgatev1alpha1.DefaultKeyRotation))
		s, err := settings.Derive(got)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.PassFormat).To(Equal(herdgatev1alpha1.PassFormatJWT))
	})

	It("accepts Adaptive capacity enforced by a gateway when the workload can release", func() {
		wq := builder.From(sampleQueue()).Enforcement(herdgatev1alpha1.EnforcementGateway).Adaptive(0).ReleaseKey("orders-release", "key").Obj()
		wq.Name = "gateway-adaptive"
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, wq)).To(Succeed()) })
		s, err := settings.Derive(wq)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Adaptive).NotTo(BeNil())
	})

	It("fills the same defaults as the Go accessors when only the required fields are given", func() {
		wq := &herdgatev1alpha1.WaitingQueue{
			ObjectMeta: metav1.ObjectMeta{Name: "minimal", Namespace: "default"},
			Spec: herdgatev1alpha1.WaitingQueueSpec{
				Capacity:        herdgatev1alpha1.CapacitySpec{PoolSize: 5, RequestLatency: metav1.Duration{Duration: time.Second}},
				Upstream:        herdgatev1alpha1.UpstreamSpec{URL: ptr.To("http://orders.example:8080")},
				ProtectedRoutes: []herdgatev1alpha1.ProtectedRoute{{PathPrefix: ptr.To(herdgatev1alpha1.RoutePath("/checkout"))}},
				Redis:           &herdgatev1alpha1.RedisSpec{SecretRef: &herdgatev1alpha1.SecretKeyRef{Name: "redis"}},
			},
		}
		// The Go accessors of an object nobody defaulted ...
		unset := wq.Spec.DeepCopy()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, wq)).To(Succeed()) })
		got := &herdgatev1alpha1.WaitingQueue{}
		Expect(k8sClient.Get(ctx, keyOf(wq), got)).To(Succeed())
		defaulted := got.Spec

		// ... must agree with what the API server filled in.
		Expect(defaulted.Capacity.UtilizationPercent).NotTo(BeNil())
		Expect(defaulted.Tick).NotTo(BeNil())
		Expect(defaulted.Pass.TTL).NotTo(BeNil())
		Expect(defaulted.Polling.MinInterval).NotTo(BeNil())
		Expect(defaulted.Polling.MaxInterval).NotTo(BeNil())
		Expect(defaulted.AbandonAfter).NotTo(BeNil())
		Expect(defaulted.Proxy.Replicas).NotTo(BeNil())
		Expect(defaulted.EffectiveUtilizationPercent()).To(Equal(unset.EffectiveUtilizationPercent()))
		Expect(defaulted.EffectiveTick()).To(Equal(unset.EffectiveTick()))
		Expect(defaulted.EffectiveJitterMode()).To(Equal(unset.EffectiveJitterMode()))
		Expect(defaulted.EffectiveJitterWindow()).To(Equal(unset.EffectiveJitterWindow()))
		Expect(defaulted.EffectivePassTTL()).To(Equal(unset.EffectivePassTTL()))
		minD, maxD := defaulted.EffectivePolling()
		minU, maxU := unset.EffectivePolling()
		Expect([]time.Duration{minD, maxD}).To(Equal([]time.Duration{minU, maxU}))
		Expect(defaulted.EffectiveAbandonAfter()).To(Equal(unset.EffectiveAbandonAfter()))
		Expect(defaulted.EffectiveProxyReplicas()).To(Equal(unset.EffectiveProxyReplicas()))
		Expect(defaulted.EffectiveFailurePolicy()).To(Equal(unset.EffectiveFailurePolicy()))
		Expect(defaulted.EffectiveMode()).To(Equal(unset.EffectiveMode()))
		Expect(defaulted.Capacity.Mode).To(Equal(herdgatev1alpha1.CapacityDeclared))
		Expect(defaulted.EffectiveCapacityMode()).To(Equal(unset.EffectiveCapacityMode()))
		Expect(defaulted.EffectivePassRenewal()).To(Equal(unset.EffectivePassRenewal()))
		Expect(defaulted.EffectiveMaxSession()).To(Equal(unset.EffectiveMaxSession()))
		Expect(defaulted.Enforcement).To(Equal(herdgatev1alpha1.EnforcementProxy))
		Expect(defaulted.EffectiveEnforcement()).To(Equal(unset.EffectiveEnforcement()))
		Expect(defaulted.EffectivePassFormat()).To(Equal(unset.EffectivePassFormat()))
		Expect(defaulted.ProtectedRoutes[0].Methods).To(Equal(unset.ProtectedRoutes[0].EffectiveMethods()))
		Expect(defaulted.Redis.SecretRef.Key).To(Equal(herdgatev1alpha1.DefaultRedisSecretKey))
		Expect(defaulted.Redis.Durability).To(Equal(herdgatev1alpha1.RedisDurabilityAsync))
		Expect(defaulted.EffectiveRedisDurability()).To(Equal(unset.EffectiveRedisDurability()))
	})

	// A DNS name (RFC 1123): labels of 1 to 63 letters, digits and '-', neither first nor last a '-',
	// at most 253 in all.
	label63, label64 := strings.Repeat("a", 63), strings.Repeat("b", 64)
	longest := strings.Repeat(label63+".", 3) + strings.Repeat("c", 61) // 253
	hostFields := map[string]func(*herdgatev1alpha1.WaitingQueue, string){
		"spec.proxy.hosts[0]": func(wq *herdgatev1alpha1.WaitingQueue, host string) {
			wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{Shared: "pool", Hosts: []herdgatev1alpha1.Hostname{herdgatev1alpha1.Hostname(host)}}
		},
		"spec.protectedRoutes[0].host": func(wq *herdgatev1alpha1.WaitingQueue, host string) {
			wq.Spec.ProtectedRoutes[0].Host = ptr.To(herdgatev1alpha1.Hostname(host))
		},
	}
	DescribeTable("checks every host name against the DNS grammar",
		func(host string, valid bool) {
			for field, set := range hostFields {
				wq := sampleQueue()
				set(wq, host)
				err := k8sClient.Create(ctx, wq)
				if valid {
					Expect(err).NotTo(HaveOccurred(), "%s %q", field, host)
					Expect(k8sClient.Delete(ctx, wq)).To(Succeed())
					continue
				}
				Expect(err).To(HaveOccurred(), "the API server accepted %s %q", field, host)
				Expect(err.Error()).To(ContainSubstring(field))
				// A file gets the same answer as the API server.
				obj, convErr := runtimeToUnstructured(wq)
				Expect(convErr).NotTo(HaveOccurred())
				Expect(settings.ValidateObject(obj)).To(MatchError(ContainSubstring(field)), "a config file took %s %q", field, host)
			}
		},
		Entry("one label", "shop", true),
		Entry("labels of 63", label63+"."+label63, true),
		Entry("253 characters", longest, true),
		Entry("digits and hyphens inside", "1-shop.ex-ample", true),
		Entry("a label of 64", label64+".example", false),
		Entry("a last label of 64", "shop."+label64, false),
		Entry("254 characters", longest+"c", false),
		Entry("an empty label", "shop..example", false),
		Entry("a final dot", "shop.example.", false),
		Entry("a label starting with '-'", "-shop.example", false),
		Entry("a label ending with '-'", "shop-.example", false),
		Entry("an underscore", "shop_1.example", false),
		Entry("a port", "shop.example:443", false),
		Entry("upper case", "Shop.example", false),
		Entry("an address with a scheme", "https://shop.example", false),
	)

	// A URL's host is an IP address or a DNS name (RFC 1123, any case), with a port of 1 to 65535.
	urlFields := map[string]func(*herdgatev1alpha1.WaitingQueue, string){
		"spec.upstream.url": func(wq *herdgatev1alpha1.WaitingQueue, u string) { *wq = *builder.From(wq).UpstreamURL(u).Obj() },
		"spec.entry.challenge.external.verifyURL": func(wq *herdgatev1alpha1.WaitingQueue, u string) {
			wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{External: &herdgatev1alpha1.ExternalChallengeSpec{
				VerifyURL: u, SecretKeyRef: herdgatev1alpha1.SecretValueRef{Name: "captcha", Key: "secret"}}}}
		},
		"spec.draw.beacon.url": func(wq *herdgatev1alpha1.WaitingQueue, u string) {
			*wq = *builder.From(wq).Beacon(u, strings.Repeat("ab", 32), 0).Obj()
		},
	}
	DescribeTable("checks every URL against the URL and DNS grammars",
		func(u string, valid bool) {
			for field, set := range urlFields {
				wq := sampleQueue()
				set(wq, u)
				err := k8sClient.Create(ctx, wq)
				if valid {
					Expect(err).NotTo(HaveOccurred(), "%s %q", field, u)
					Expect(k8sClient.Delete(ctx, wq)).To(Succeed())
					continue
				}
				Expect(err).To(HaveOccurred(), "the API server accepted %s %q", field, u)
				Expect(err.Error()).To(ContainSubstring(field))
				obj, convErr := runtimeToUnstructured(wq)
				Expect(convErr).NotTo(HaveOccurred())
				Expect(settings.ValidateObject(obj)).To(MatchError(ContainSubstring(field)), "a config file took %s %q", field, u)
			}
		},
		Entry("a DNS name", "https://verify.example/siteverify", true),
		Entry("a Service's name with a port", "http://orders.shop.svc.cluster.local:8080/base", true),
		Entry("upper case", "https://Verify.Example", true),
		Entry("an IPv4 address", "http://10.0.0.7:8080", true),
		Entry("an IPv6 address", "http://[fd00::7]:8080/base", true),
		Entry("labels of 63", "https://"+label63+"."+label63, true),
		Entry("a label of 64", "https://"+label64+".example", false),
		Entry("an empty label", "https://verify..example", false),
		Entry("a label starting with '-'", "https://-verify.example", false),
		Entry("an underscore", "https://verify_1.example", false),
		Entry("a host of 254 characters", "https://"+longest+"c", false),
		Entry("port 0", "https://verify.example:0", false),
		Entry("port 65536", "https://verify.example:65536", false),
		Entry("a leading zero in the port", "https://verify.example:0443", false),
		Entry("no host", "https:///siteverify", false),
		Entry("another scheme", "ftp://verify.example", false),
		Entry("no scheme", "verify.example/siteverify", false),
		Entry("credentials", "https://user:pw@verify.example", false),
		Entry("a query", "https://verify.example/?a=1", false),
		Entry("a fragment", "https://verify.example/#a", false),
		Entry("a space in the host", "https://ver ify.example", false),
	)

	// A duration is Go's: decimal numbers, each with a unit of ns, us, µs, ms, s, m or h.
	DescribeTable("checks every duration against Go's grammar",
		func(d string) {
			for _, field := range []string{"spec.tick", "spec.abandonAfter", "spec.capacity.requestLatency", "spec.pass.ttl", "spec.polling.minInterval"} {
				obj, err := runtimeToUnstructured(sampleQueue())
				Expect(err).NotTo(HaveOccurred())
				Expect(unstructured.SetNestedField(obj, d, strings.Split(field, ".")...)).To(Succeed())
				err = k8sClient.Create(ctx, &unstructured.Unstructured{Object: obj})
				Expect(err).To(HaveOccurred(), "the API server accepted %s %q", field, d)
				Expect(err.Error()).To(ContainSubstring(field))
				Expect(settings.ValidateObject(obj)).To(MatchError(ContainSubstring(field)), "a config file took %s %q", field, d)
			}
		},
		Entry("no unit", "100"),
		Entry("a day", "1d"),
		Entry("a sign", "-1s"),
		Entry("a space", "1 s"),
		Entry("a word", "soon"),
		Entry("a bare dot", ".5s"),
		Entry("upper case", "1S"),
	)

	DescribeTable("rejects an invalid spec with a message that names the field",
		func(mutate func(*herdgatev1alpha1.WaitingQueue), wantField, wantMessage string) {
			wq := sampleQueue()
			mutate(wq)
			err := k8sClient.Create(ctx, wq)
			Expect(err).To(HaveOccurred(), "the API server accepted an invalid WaitingQueue")
			Expect(err.Error()).To(ContainSubstring(wantField))
			Expect(err.Error()).To(ContainSubstring(wantMessage))
		},
		Entry("pool size 0",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Capacity.PoolSize = 0 },
			"spec.capacity.poolSize", "greater than or equal to 1"),
		Entry("overlapping events",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Events = []herdgatev1alpha1.Event{builder.Event("a", at(time.Hour).Time, at(2*time.Hour).Time), builder.Event("b", at(90*time.Minute).Time, at(3*time.Hour).Time)}
			},
			"spec.events", "events must not overlap"),
		Entry("an event's pre-queue over the event before",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				b := builder.Event("b", at(3*time.Hour).Time, at(4*time.Hour).Time)
				b.PreQueueFrom = ptr.To(at(90 * time.Minute))
				wq.Spec.Events = []herdgatev1alpha1.Event{builder.Event("a", at(time.Hour).Time, at(2*time.Hour).Time), b}
			},
			"spec.events", "events must not overlap"),
		Entry("an event that ends before it starts",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Events = []herdgatev1alpha1.Event{builder.Event("a", at(2*time.Hour).Time, at(time.Hour).Time)}
			},
			"spec.events[0].end", "start must be before its end"),
		Entry("an event's pre-queue within a tick of its start",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Tick = duration(10 * time.Second)
				a := builder.Event("a", at(time.Hour).Time, at(2*time.Hour).Time)
				a.PreQueueFrom = ptr.To(at(time.Hour - 5*time.Second))
				wq.Spec.Events = []herdgatev1alpha1.Event{a}
			},
			"spec.events", "at least one tick before its start"),
		Entry("events beside a schedule",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Schedule = &herdgatev1alpha1.ScheduleSpec{OpensAt: at(5 * time.Hour)}
				wq.Spec.Events = []herdgatev1alpha1.Event{builder.Event("a", at(time.Hour).Time, at(2*time.Hour).Time)}
			},
			"spec.events", "either events or a schedule"),
		Entry("an event's pool of 0",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				a := builder.Event("a", at(time.Hour).Time, at(2*time.Hour).Time)
				a.Capacity = &herdgatev1alpha1.EventCapacity{PoolSize: ptr.To(int32(0))}
				wq.Spec.Events = []herdgatev1alpha1.Event{a}
			},
			"spec.events[0].capacity.poolSize", "greater than or equal to 1"),
		Entry("lanes that take the whole batch",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Lanes = []herdgatev1alpha1.Lane{builder.LaneByCode("members", 60, "codes", "key"), builder.LaneByCode("presale", 40, "codes", "key")}
			},
			"spec.lanes", "the lanes' weightPercent add up to at most 99"),
		Entry("a lane named main",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Lanes = []herdgatev1alpha1.Lane{builder.LaneByCode("main", 20, "codes", "key")}
			},
			"spec.lanes[0].name", "not main"),
		Entry("a lane nobody can join",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Lanes = []herdgatev1alpha1.Lane{{Name: "members", WeightPercent: 20}}
			},
			"spec.lanes[0].join", "at least one of code, invitation, header or cookie"),
		Entry("a lane joined by invitation without invitations",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Lanes = []herdgatev1alpha1.Lane{{Name: "members", WeightPercent: 20, Join: herdgatev1alpha1.LaneJoin{Invitation: true}}}
			},
			"spec.lanes", "needs entry.invitation"),
		Entry("a beacon without seedSource Beacon",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Draw = &herdgatev1alpha1.DrawSpec{Beacon: &herdgatev1alpha1.BeaconSpec{URL: "https://beacon.example", ChainHash: strings.Repeat("ab", 32)}}
			},
			"spec.draw.beacon", "beacon is set with seedSource Beacon, and only then"),
		Entry("seedSource Beacon without a beacon",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Draw = &herdgatev1alpha1.DrawSpec{SeedSource: herdgatev1alpha1.DrawSeedBeacon}
			},
			"spec.draw.beacon", "beacon is set with seedSource Beacon, and only then"),
		Entry("a chain hash in upper case",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				*wq = *builder.From(wq).Beacon("https://beacon.example", strings.Repeat("AB", 32), 0).Obj()
			},
			"spec.draw.beacon.chainHash", "should match"),
		Entry("a beacon waited for two hours",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				*wq = *builder.From(wq).Beacon("https://beacon.example", strings.Repeat("ab", 32), 2*time.Hour).Obj()
			},
			"spec.draw.beacon.maxWait", "between 1s and 1h"),
		Entry("a beacon address with credentials",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				*wq = *builder.From(wq).Beacon("https://user:pw@beacon.example", strings.Repeat("ab", 32), 0).Obj()
			},
			"spec.draw.beacon.url", "must not hold credentials"),
		Entry("a shadow queue with no trigger",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{ShadowQueue: &herdgatev1alpha1.ShadowQueueSpec{}}
			},
			"spec.entry.shadowQueue", "needs challengeFailed or overEntryLimitFactor"),
		Entry("a shadow queue for failed challenges without a challenge",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{ShadowQueue: &herdgatev1alpha1.ShadowQueueSpec{ChallengeFailed: true}}
			},
			"spec.entry.shadowQueue.challengeFailed", "needs entry.challenge"),
		Entry("a shadow queue over a limit that is not set",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{ShadowQueue: &herdgatev1alpha1.ShadowQueueSpec{OverEntryLimitFactor: ptr.To(int32(3))}}
			},
			"spec.entry.shadowQueue.overEntryLimitFactor", "needs entry.perClient"),
		Entry("a shadow factor of 1, which would shadow the limit itself",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{PerClient: &herdgatev1alpha1.PerClientLimit{},
					ShadowQueue: &herdgatev1alpha1.ShadowQueueSpec{OverEntryLimitFactor: ptr.To(int32(1))}}
			},
			"spec.entry.shadowQueue.overEntryLimitFactor", "greater than or equal to 2"),
		Entry("two lanes of one name",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Lanes = []herdgatev1alpha1.Lane{builder.LaneByCode("members", 20, "codes", "key"), builder.LaneByCode("members", 10, "codes", "key")}
			},
			"spec.lanes[1]", "Duplicate value"),
		Entry("a lane header of herdgate's own",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Lanes = []herdgatev1alpha1.Lane{builder.LaneByHeader("members", 20, "X-Herdgate-Pass", "members", "tier")}
			},
			"spec.lanes[0].join.header.name", "other than herdgate's own"),
		Entry("a queueing status that is neither 200, 202 nor 429",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Page = &herdgatev1alpha1.PageSpec{QueueingStatusCode: ptr.To(int32(503))}
			},
			"spec.page.queueingStatusCode", "supported values: \"200\", \"202\", \"429\""),
		Entry("a trusted proxy that is no CIDR",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{TrustedProxies: []herdgatev1alpha1.CIDR{"10.0.0.0/8", "10.0.0.300/8"}}
			},
			"spec.entry.trustedProxies[1]", "must be a CIDR"),
		Entry("an invitation key in no Secret name",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Invitation: &herdgatev1alpha1.InvitationSpec{
					KeySecretRef: herdgatev1alpha1.SecretValueRef{Name: "Invites!", Key: "key"}}}
			},
			"spec.entry.invitation.keySecretRef.name", "must be a Secret name"),
		Entry("a proof of work of 30 bits",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{ProofOfWork: &herdgatev1alpha1.ProofOfWorkSpec{Difficulty: 30}}}
			},
			"spec.entry.challenge.proofOfWork.difficulty", "less than or equal to 24"),
		Entry("both challenges",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{
					ProofOfWork: &herdgatev1alpha1.ProofOfWorkSpec{Difficulty: 16},
					External: &herdgatev1alpha1.ExternalChallengeSpec{VerifyURL: "https://verify.example/siteverify",
						SecretKeyRef: herdgatev1alpha1.SecretValueRef{Name: "captcha", Key: "secret"}}}}
			},
			"spec.entry.challenge", "challenge needs exactly one of proofOfWork or external"),
		Entry("an external verifyURL that is not http",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{
					External: &herdgatev1alpha1.ExternalChallengeSpec{VerifyURL: "gopher://verify.example/",
						SecretKeyRef: herdgatev1alpha1.SecretValueRef{Name: "captcha", Key: "secret"}}}}
			},
			"spec.entry.challenge.external.verifyURL", "verifyURL must be an absolute http or https URL"),
		Entry("a bypass rule of two kinds",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Bypass = []herdgatev1alpha1.BypassRule{{Name: "two", Path: ptr.To(herdgatev1alpha1.RoutePath("/a")), PathPrefix: ptr.To(herdgatev1alpha1.RoutePath("/b"))}}
			},
			"spec.bypass[0]", "a bypass rule needs exactly one of sourceCIDRs, header, path or pathPrefix"),
		Entry("a bypass header of herdgate's own",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Bypass = []herdgatev1alpha1.BypassRule{{Name: "own", Header: &herdgatev1alpha1.BypassHeader{Name: "X-Herdgate-Pass",
					ValueSecretRef: herdgatev1alpha1.SecretValueRef{Name: "monitor", Key: "token"}}}}
			},
			"spec.bypass[0].header.name", "header.name must be a header name"),
		Entry("a bypass source that is no CIDR",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Bypass = []herdgatev1alpha1.BypassRule{{Name: "office", SourceCIDRs: []herdgatev1alpha1.CIDR{"office"}}}
			},
			"spec.bypass[0].sourceCIDRs[0]", "must be a CIDR"),
		Entry("two bypass rules of one name",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Bypass = []herdgatev1alpha1.BypassRule{{Name: "a", Path: ptr.To(herdgatev1alpha1.RoutePath("/a"))}, {Name: "a", Path: ptr.To(herdgatev1alpha1.RoutePath("/b"))}}
			},
			"spec.bypass[1]", "Duplicate value"),
		Entry("an entry burst of 0",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{PerClient: &herdgatev1alpha1.PerClientLimit{Burst: ptr.To[int32](0)}}
			},
			"spec.entry.perClient.burst", "greater than or equal to 1"),
		Entry("an IPv4 client of 4 bits",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{PerClient: &herdgatev1alpha1.PerClientLimit{IPv4PrefixLength: ptr.To[int32](4)}}
			},
			"spec.entry.perClient.ipv4PrefixLength", "greater than or equal to 8"),
		Entry("a client's polls at 0 a second",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{PerClient: &herdgatev1alpha1.PerClientLimit{PollsPerSecond: ptr.To[int32](0)}}
			},
			"spec.entry.perClient.pollsPerSecond", "greater than or equal to 1"),
		Entry("a client's polls at 100,001 a second",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{PerClient: &herdgatev1alpha1.PerClientLimit{PollsPerSecond: ptr.To[int32](100001)}}
			},
			"spec.entry.perClient.pollsPerSecond", "less than or equal to 100000"),
		Entry("pool size above a million",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Capacity.PoolSize = 1_000_001 },
			"spec.capacity.poolSize", "less than or equal to 1000000"),
		Entry("utilization 0",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Capacity.UtilizationPercent = ptr.To[int32](0) },
			"spec.capacity.utilizationPercent", "greater than or equal to 1"),
		Entry("utilization 101",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Capacity.UtilizationPercent = ptr.To[int32](101) },
			"spec.capacity.utilizationPercent", "less than or equal to 100"),
		Entry("latency 0",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Capacity.RequestLatency = metav1.Duration{} },
			"spec.capacity.requestLatency", "requestLatency must be between 1ms and 10m"),
		Entry("latency above 10 minutes",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Capacity.RequestLatency = metav1.Duration{Duration: 11 * time.Minute}
			},
			"spec.capacity.requestLatency", "requestLatency must be between 1ms and 10m"),
		Entry("an exact zone of 4,999 positions",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Polling = &herdgatev1alpha1.PollingSpec{ExactPositions: ptr.To[int32](4999)}
			},
			"spec.polling.exactPositions", "greater than or equal to 5000"),
		Entry("an exact zone beyond 10⁸ positions",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Polling = &herdgatev1alpha1.PollingSpec{ExactPositions: ptr.To[int32](100_000_001)}
			},
			"spec.polling.exactPositions", "less than or equal to 100000000"),
		Entry("batch size override 0",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Capacity.BatchSizeOverride = ptr.To[int32](0) },
			"spec.capacity.batchSizeOverride", "greater than or equal to 1"),
		Entry("capacity mode unknown",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Capacity.Mode = "Fast" },
			"spec.capacity.mode", `Unsupported value: "Fast"`),
		Entry("a negative floor",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Capacity.MinAdmissionsPerSecond = ptr.To[int32](-1) },
			"spec.capacity.minAdmissionsPerSecond", "greater than or equal to 0"),
		Entry("tick 5 ms",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Tick = duration(5 * time.Millisecond) },
			"spec.tick", "tick must be between 10ms and 10s"),
		Entry("tick 11 s",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Tick = duration(11 * time.Second) },
			"spec.tick", "tick must be between 10ms and 10s"),
		Entry("polling min above max",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Polling = &herdgatev1alpha1.PollingSpec{MinInterval: duration(6 * time.Second), MaxInterval: duration(5 * time.Second)}
			},
			"spec.polling.minInterval", "polling.minInterval must not be longer than polling.maxInterval"),
		Entry("polling min below 100 ms",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Polling = &herdgatev1alpha1.PollingSpec{MinInterval: duration(50 * time.Millisecond)}
			},
			"spec.polling.minInterval", "polling.minInterval must be between 100ms and 10m"),
		Entry("jitter window longer than the tick",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Jitter = &herdgatev1alpha1.JitterSpec{Window: duration(150 * time.Millisecond)}
			},
			"spec.jitter.window", "jitter.window must not be longer than tick"),
		Entry("jitter window longer than the default tick",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Tick = nil
				wq.Spec.Jitter = &herdgatev1alpha1.JitterSpec{Window: duration(time.Second)}
			},
			"spec.jitter.window", "jitter.window must not be longer than tick"),
		Entry("unknown jitter mode",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Jitter = &herdgatev1alpha1.JitterSpec{Mode: "Gaussian"}
			},
			"spec.jitter.mode", `supported values: "Uniform", "None"`),
		Entry("pass TTL of 5 s",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Pass = &herdgatev1alpha1.PassSpec{TTL: duration(5 * time.Second)}
			},
			"spec.pass.ttl", "pass.ttl must be between 10s and 24h"),
		Entry("abandonAfter shorter than two poll intervals",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.AbandonAfter = duration(15 * time.Second)
				wq.Spec.Polling = &herdgatev1alpha1.PollingSpec{MaxInterval: duration(10 * time.Second)}
			},
			"spec.abandonAfter", "abandonAfter must be at least twice polling.maxInterval"),
		Entry("abandonAtTurnAfter longer than abandonAfter",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.AbandonAfter = duration(time.Minute)
				wq.Spec.AbandonAtTurnAfter = duration(2 * time.Minute)
			},
			"spec.abandonAtTurnAfter", "abandonAtTurnAfter must not be longer than abandonAfter"),
		Entry("abandonAtTurnAfter shorter than two poll intervals",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.AbandonAtTurnAfter = duration(8 * time.Second) },
			"spec.abandonAtTurnAfter", "abandonAtTurnAfter must be at least twice polling.maxInterval"),
		Entry("abandonAtTurnAfter of a moment",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.AbandonAtTurnAfter = duration(500 * time.Millisecond)
				wq.Spec.Polling = &herdgatev1alpha1.PollingSpec{MaxInterval: duration(100 * time.Millisecond)}
			},
			"spec.abandonAtTurnAfter", "abandonAtTurnAfter must be between 1s and 24h"),
		Entry("both upstream forms",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Upstream.URL = ptr.To("http://orders:8080") },
			"spec.upstream", "exactly one of upstream.service or upstream.url must be set"),
		Entry("neither upstream form",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Upstream = herdgatev1alpha1.UpstreamSpec{} },
			"spec.upstream", "exactly one of upstream.service or upstream.url must be set"),
		Entry("an upstream URL that is not http",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Upstream = herdgatev1alpha1.UpstreamSpec{URL: ptr.To("ftp://orders/")}
			},
			"spec.upstream.url", "upstream.url must be an absolute http or https URL"),
		Entry("33 protected routes",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.ProtectedRoutes = nil
				for i := range 33 {
					wq.Spec.ProtectedRoutes = append(wq.Spec.ProtectedRoutes, herdgatev1alpha1.ProtectedRoute{Path: ptr.To(herdgatev1alpha1.RoutePath(fmt.Sprintf("/r%d", i)))})
				}
			},
			"spec.protectedRoutes", "must have at most 32 items"),
		Entry("no protected route",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.ProtectedRoutes = []herdgatev1alpha1.ProtectedRoute{} },
			"spec.protectedRoutes", "should have at least 1 items"),
		Entry("a route with both path and pathPrefix",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.ProtectedRoutes[0].PathPrefix = ptr.To(herdgatev1alpha1.RoutePath("/api"))
			},
			"spec.protectedRoutes[0]", "exactly one of path or pathPrefix must be set"),
		Entry("a route path that is not normalised",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.ProtectedRoutes[1].Path = ptr.To(herdgatev1alpha1.RoutePath("/api/v1/../orders"))
			},
			"spec.protectedRoutes[1].path", "path must be absolute and normalised"),
		Entry("two routes for the same path and method",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.ProtectedRoutes = append(wq.Spec.ProtectedRoutes, *wq.Spec.ProtectedRoutes[0].DeepCopy())
			},
			"spec.protectedRoutes", "two protectedRoutes name the same host, path (or pathPrefix) and method"),
		Entry("two routes for the same host, path and a method in common",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				r := herdgatev1alpha1.ProtectedRoute{Host: ptr.To(herdgatev1alpha1.Hostname("shop.example")), PathPrefix: ptr.To(herdgatev1alpha1.RoutePath("/tickets")),
					Methods: []herdgatev1alpha1.HTTPMethod{"GET", "POST"}}
				other := *r.DeepCopy()
				other.Methods = []herdgatev1alpha1.HTTPMethod{"POST", "DELETE"}
				wq.Spec.ProtectedRoutes = append(wq.Spec.ProtectedRoutes, r, other)
			},
			"spec.protectedRoutes", "merge their methods into one route"),
		Entry("a route host with a port",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.ProtectedRoutes[0].Host = ptr.To(herdgatev1alpha1.Hostname("shop.example:443"))
			},
			"spec.protectedRoutes[0].host", "should match"),
		Entry("a route host in capitals",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.ProtectedRoutes[0].Host = ptr.To(herdgatev1alpha1.Hostname("Shop.example"))
			},
			"spec.protectedRoutes[0].host", "should match"),
		Entry("a route with a lower-case method",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.ProtectedRoutes[0].Methods = []herdgatev1alpha1.HTTPMethod{"post"}
			},
			"spec.protectedRoutes[0].methods[0]", "supported values"),
		Entry("maxActive 0",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Capacity.MaxActive = ptr.To[int32](0) },
			"spec.capacity.maxActive", "greater than or equal to 1"),
		Entry("a schedule that closes before it opens",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Schedule = &herdgatev1alpha1.ScheduleSpec{OpensAt: at(10 * time.Hour), ClosesAt: ptr.To(at(9 * time.Hour))}
			},
			"spec.schedule.closesAt", "schedule.opensAt must be before schedule.closesAt"),
		Entry("a schedule that closes as it opens",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Schedule = &herdgatev1alpha1.ScheduleSpec{OpensAt: at(10 * time.Hour), ClosesAt: ptr.To(at(10 * time.Hour))}
			},
			"spec.schedule.closesAt", "schedule.opensAt must be before schedule.closesAt"),
		Entry("a pre-queue that opens after the room",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Schedule = &herdgatev1alpha1.ScheduleSpec{OpensAt: at(10 * time.Hour), PreQueueFrom: ptr.To(at(11 * time.Hour))}
			},
			"spec.schedule.preQueueFrom", "schedule.preQueueFrom must be before schedule.opensAt"),
		Entry("a pre-queue more than 24 hours long",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Schedule = &herdgatev1alpha1.ScheduleSpec{OpensAt: at(30 * time.Hour), PreQueueFrom: ptr.To(at(5*time.Hour + time.Second))}
			},
			"spec.schedule.preQueueFrom", "schedule.preQueueFrom must be at most 24h before schedule.opensAt"),
		Entry("an unknown pass renewal",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Pass = &herdgatev1alpha1.PassSpec{Renewal: "Forever"}
			},
			"spec.pass.renewal", `supported values: "Fixed", "Sliding"`),
		Entry("a maxSession shorter than the pass's ttl",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Pass = &herdgatev1alpha1.PassSpec{TTL: duration(10 * time.Minute), MaxSession: duration(5 * time.Minute)}
			},
			"spec.pass.maxSession", "pass.maxSession must not be shorter than pass.ttl"),
		Entry("a maxSession shorter than the default ttl",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Pass = &herdgatev1alpha1.PassSpec{MaxSession: duration(time.Minute)}
			},
			"spec.pass.maxSession", "pass.maxSession must not be shorter than pass.ttl"),
		Entry("a maxSession above 24 hours",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Pass = &herdgatev1alpha1.PassSpec{MaxSession: duration(25 * time.Hour)}
			},
			"spec.pass.maxSession", "pass.maxSession must be at most 24h"),
		Entry("a completion route that is not normalised",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Pass = &herdgatev1alpha1.PassSpec{CompletionRoutes: []herdgatev1alpha1.ProtectedRoute{{Path: ptr.To(herdgatev1alpha1.RoutePath("/checkout/done/"))}}}
			},
			"spec.pass.completionRoutes[0].path", "path must be absolute and normalised"),
		Entry("nine completion routes",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				routes := []herdgatev1alpha1.ProtectedRoute{}
				for i := range 9 {
					routes = append(routes, herdgatev1alpha1.ProtectedRoute{Path: ptr.To(herdgatev1alpha1.RoutePath(fmt.Sprintf("/done%d", i)))})
				}
				wq.Spec.Pass = &herdgatev1alpha1.PassSpec{CompletionRoutes: routes}
			},
			"spec.pass.completionRoutes", "must have at most 8 items"),
		Entry("an unknown enforcement",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Enforcement = "Sidecar" },
			"spec.enforcement", `supported values: "Proxy", "Gateway"`),
		Entry("Adaptive capacity enforced by a gateway without a release key",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Enforcement = herdgatev1alpha1.EnforcementGateway
				wq.Spec.Capacity.Mode = herdgatev1alpha1.CapacityAdaptive
			},
			"spec.capacity.mode", "Adaptive with enforcement Gateway needs pass.releaseKeySecretRef"),
		Entry("an unknown pass format",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Pass = &herdgatev1alpha1.PassSpec{Format: "PASETO"}
			},
			"spec.pass.format", `supported values: "HMAC", "JWT"`),
		Entry("an unknown pass algorithm",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Pass = &herdgatev1alpha1.PassSpec{Format: herdgatev1alpha1.PassFormatJWT, Algorithm: "RS256"}
			},
			"spec.pass.algorithm", `supported values: "ES256", "HS256"`),
		Entry("an algorithm for an HMAC pass",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Pass = &herdgatev1alpha1.PassSpec{Algorithm: herdgatev1alpha1.PassAlgorithmES256}
			},
			"spec.pass.algorithm", "pass.algorithm applies to format JWT only"),
		Entry("a key rotation for an HMAC pass",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Pass = &herdgatev1alpha1.PassSpec{Format: herdgatev1alpha1.PassFormatHMAC, KeyRotation: duration(24 * time.Hour)}
			},
			"spec.pass.keyRotation", "pass.keyRotation applies to format JWT only"),
		Entry("a key rotation of 59 minutes",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Pass = &herdgatev1alpha1.PassSpec{Format: herdgatev1alpha1.PassFormatJWT, KeyRotation: duration(59 * time.Minute)}
			},
			"spec.pass.keyRotation", "pass.keyRotation must be between 1h and 2160h"),
		Entry("a key rotation of 91 days",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Pass = &herdgatev1alpha1.PassSpec{Format: herdgatev1alpha1.PassFormatJWT, KeyRotation: duration(91 * 24 * time.Hour)}
			},
			"spec.pass.keyRotation", "pass.keyRotation must be between 1h and 2160h"),
		Entry("a sliding JWT pass",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Pass = &herdgatev1alpha1.PassSpec{Format: herdgatev1alpha1.PassFormatJWT, Renewal: herdgatev1alpha1.RenewalSliding}
			},
			"spec.pass.renewal", "pass.renewal Sliding needs format HMAC"),
		Entry("an unknown mode",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Mode = "Maintenance" },
			"spec.mode", `supported values: "Queue", "Passthrough", "Closed"`),
		Entry("an unknown failure policy",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{FailurePolicy: "FailSometimes"}
			},
			"spec.proxy.failurePolicy", `supported values: "FailClosed", "FailOpen"`),
		Entry("a shared proxy set without hosts",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{Shared: "pool"} },
			"spec.proxy", "proxy.hosts is required with proxy.shared, and only with it"),
		Entry("hosts without a shared proxy set",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{Hosts: []herdgatev1alpha1.Hostname{"shop.example"}}
			},
			"spec.proxy", "proxy.hosts is required with proxy.shared, and only with it"),
		Entry("a shared proxy set with gateway enforcement",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Enforcement = herdgatev1alpha1.EnforcementGateway
				wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{Shared: "pool", Hosts: []herdgatev1alpha1.Hostname{"shop.example"}}
			},
			"spec.proxy.shared", "proxy.shared needs enforcement Proxy"),
		Entry("a shared proxy set's name that is no DNS label",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{Shared: "Pool_1", Hosts: []herdgatev1alpha1.Hostname{"shop.example"}}
			},
			"spec.proxy.shared", "should match"),
		Entry("a host with a port",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{Shared: "pool", Hosts: []herdgatev1alpha1.Hostname{"shop.example:443"}}
			},
			"spec.proxy.hosts[0]", "should match"),
		Entry("a host in upper case",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{Shared: "pool", Hosts: []herdgatev1alpha1.Hostname{"Shop.example"}}
			},
			"spec.proxy.hosts[0]", "should match"),
		Entry("a name too long for the proxy's Service",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Name = strings.Repeat("q", 51) },
			"metadata.name", "at most 50 characters"),
		Entry("a name that is not a DNS-1035 label",
			func(wq *herdgatev1alpha1.WaitingQueue) { wq.Name = "1st.queue" },
			"metadata.name", "must be a DNS-1035 label"),
		Entry("a route path with a trailing slash",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.ProtectedRoutes[0].Path = ptr.To(herdgatev1alpha1.RoutePath("/api/v1/orders/"))
			},
			"spec.protectedRoutes[0].path", "trailing '/'"),
		Entry("a route path with a backslash",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.ProtectedRoutes[0].Path = ptr.To(herdgatev1alpha1.RoutePath(`/api\v1`))
			},
			"spec.protectedRoutes[0].path", "backslash"),
		Entry("a route path ending in a newline, as a YAML block scalar makes it",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.ProtectedRoutes[0].Path = ptr.To(herdgatev1alpha1.RoutePath("/api/v1/orders\n"))
			},
			"spec.protectedRoutes[0].path", "control character"),
		Entry("a route prefix with a control character",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.ProtectedRoutes[0] = herdgatev1alpha1.ProtectedRoute{PathPrefix: ptr.To(herdgatev1alpha1.RoutePath("/api\tv1"))}
			},
			"spec.protectedRoutes[0].pathPrefix", "control character"),
		Entry("Host as the identity header",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Identity = &herdgatev1alpha1.IdentitySpec{Header: "Host"}
			},
			"spec.identity.header", "cannot identify a visitor"),
		Entry("the pass header as the identity header",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Identity = &herdgatev1alpha1.IdentitySpec{Header: "x-herdgate-pass"}
			},
			"spec.identity.header", "cannot identify a visitor"),
		Entry("a hop-by-hop identity header",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Identity = &herdgatev1alpha1.IdentitySpec{Header: "Transfer-Encoding"}
			},
			"spec.identity.header", "cannot identify a visitor"),
		Entry("an upstream URL with credentials",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Upstream = herdgatev1alpha1.UpstreamSpec{URL: ptr.To("http://admin:secret@orders:8080")}
			},
			"spec.upstream.url", "must not hold credentials"),
		Entry("an upstream URL with port 0",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Upstream = herdgatev1alpha1.UpstreamSpec{URL: ptr.To("http://orders:0")}
			},
			"spec.upstream.url", "must be between 1 and 65535"),
		Entry("an upstream URL with port 70000",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Upstream = herdgatev1alpha1.UpstreamSpec{URL: ptr.To("http://orders:70000/x")}
			},
			"spec.upstream.url", "must be between 1 and 65535"),
		Entry("an upstream URL with a query",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Upstream = herdgatev1alpha1.UpstreamSpec{URL: ptr.To("http://orders:8080/?tenant=a")}
			},
			"spec.upstream.url", "must not hold a query or fragment"),
		Entry("a Redis Secret name that no Secret can have",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Redis = &herdgatev1alpha1.RedisSpec{SecretRef: &herdgatev1alpha1.SecretKeyRef{Name: "Redis_URL"}}
			},
			"spec.redis.secretRef.name", "should match"),
		Entry("a durability that is neither Async nor Replicated",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Redis = &herdgatev1alpha1.RedisSpec{Durability: "replicated"}
			},
			"spec.redis.durability", "Unsupported value"),
		Entry("a negative proxy CPU request",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{Resources: &herdgatev1alpha1.ProxyResources{
					Requests: herdgatev1alpha1.ResourceQuantities{corev1.ResourceCPU: "-100m"}}}
			},
			"spec.proxy.resources.requests", "must not be negative"),
		Entry("a negative proxy memory limit",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{Resources: &herdgatev1alpha1.ProxyResources{
					Limits: herdgatev1alpha1.ResourceQuantities{corev1.ResourceMemory: "-1Gi"}}}
			},
			"spec.proxy.resources.limits", "must not be negative"),
		Entry("a proxy memory request above its limit",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{Resources: &herdgatev1alpha1.ProxyResources{
					Requests: herdgatev1alpha1.ResourceQuantities{corev1.ResourceMemory: "512Mi"},
					Limits:   herdgatev1alpha1.ResourceQuantities{corev1.ResourceMemory: "256Mi"}}}
			},
			"spec.proxy.resources.requests", "must not exceed their limits"),
		Entry("a proxy resource with an unknown name",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{Resources: &herdgatev1alpha1.ProxyResources{
					Requests: herdgatev1alpha1.ResourceQuantities{"gpu": "1"}}}
			},
			"spec.proxy.resources.requests", "names must be cpu, memory"),
		Entry("nine proxy resource limits",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				limits := herdgatev1alpha1.ResourceQuantities{}
				for i := range 9 {
					limits[corev1.ResourceName(fmt.Sprintf("example.com/r%d", i))] = "1"
				}
				wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{Resources: &herdgatev1alpha1.ProxyResources{Limits: limits}}
			},
			"spec.proxy.resources.limits", "must have at most 8 items"),
		Entry("an identity header that is not a header name",
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Identity = &herdgatev1alpha1.IdentitySpec{Header: "X User"}
			},
			"spec.identity.header", "should match"),
	)

	It("accepts proxy resources as a container takes them, integers included, and drops claims", func() {
		wq := sampleQueue()
		body, err := yaml.Marshal(wq)
		Expect(err).NotTo(HaveOccurred())
		u := map[string]any{}
		Expect(yaml.Unmarshal(body, &u)).To(Succeed())
		u["spec"].(map[string]any)["proxy"] = map[string]any{"resources": map[string]any{
			"requests": map[string]any{"cpu": 1, "memory": "128Mi", "example.com/device": 2},
			"limits":   map[string]any{"cpu": "1500m", "memory": 268435456, "hugepages-2Mi": "4Mi"},
			"claims":   []any{map[string]any{"name": "gpu"}},
		}}
		Expect(createRaw(u)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, wq)).To(Succeed()) })
		got := &herdgatev1alpha1.WaitingQueue{}
		Expect(k8sClient.Get(ctx, keyOf(wq), got)).To(Succeed())
		requests, err := got.Spec.Proxy.Resources.Requests.ResourceList()
		Expect(err).NotTo(HaveOccurred())
		limits, err := got.Spec.Proxy.Resources.Limits.ResourceList()
		Expect(err).NotTo(HaveOccurred())
		Expect(requests.Cpu().String()).To(Equal("1"))
		Expect(limits.Memory().Value()).To(BeEquivalentTo(256 << 20))
	})

	It("rejects a duration that does not parse, naming the field", func() {
		wq := sampleQueue()
		body, err := yaml.Marshal(wq)
		Expect(err).NotTo(HaveOccurred())
		body = []byte(strings.Replace(string(body), "tick: 100ms", "tick: soon", 1))
		u := map[string]any{}
		Expect(yaml.Unmarshal(body, &u)).To(Succeed())
		err = createRaw(u)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.tick"))
		Expect(err.Error()).To(ContainSubstring("should match"))
	})

	It("keeps an accepted queue unchanged when an invalid update is rejected", func() {
		wq := sampleQueue()
		Expect(k8sClient.Create(ctx, wq)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, wq)).To(Succeed()) })

		bad := wq.DeepCopy()
		bad.Spec.Capacity.PoolSize = 0
		Expect(k8sClient.Update(ctx, bad)).NotTo(Succeed())

		got := &herdgatev1alpha1.WaitingQueue{}
		Expect(k8sClient.Get(ctx, keyOf(wq), got)).To(Succeed())
		Expect(got.Spec.Capacity.PoolSize).To(BeEquivalentTo(40))
		Expect(got.Generation).To(Equal(wq.Generation))
	})
})

var _ = Describe("WaitingQueue documentation", func() {
	It("prints a description for every field of spec.capacity in kubectl explain", func() {
		user, err := testEnv.AddUser(envtest.User{Name: "reader", Groups: []string{"system:masters"}}, nil)
		Expect(err).NotTo(HaveOccurred())
		kubectl, err := user.Kubectl()
		Expect(err).NotTo(HaveOccurred())
		kubectl.Path = kubectlPath()
		var out string
		// The API server publishes a new CRD's OpenAPI schema a moment after it is established.
		Eventually(func(g Gomega) {
			stdout, stderr, err := kubectl.Run("explain", "waitingqueue.spec.capacity")
			errText, _ := io.ReadAll(stderr)
			g.Expect(err).NotTo(HaveOccurred(), string(errText))
			raw, _ := io.ReadAll(stdout)
			out = string(raw)
		}, eventuallyTimeout, pollInterval).Should(Succeed())

		GinkgoWriter.Println(out)
		Expect(out).To(ContainSubstring("GROUP:      herdgate.io"))
		descriptions := explainedFields(out)
		for _, field := range []string{"poolSize", "requestLatency", "utilizationPercent", "batchSizeOverride", "maxActive", "mode", "minAdmissionsPerSecond"} {
			Expect(descriptions).To(HaveKey(field), "kubectl explain does not list %s", field)
			Expect(descriptions[field]).To(ContainSubstring(field), "the description of %s does not start with its name", field)
		}
		Expect(descriptions).To(HaveLen(7), "spec.capacity has a field this test does not know: %v", descriptions)
	})

	It("documents every field of the schema", func() {
		raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "crd", "bases", "herdgate.io_waitingqueues.yaml"))
		Expect(err).NotTo(HaveOccurred())
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(yaml.Unmarshal(raw, crd)).To(Succeed())
		root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
		var undocumented []string
		walkSchema("", *root, func(path string, s apiextensionsv1.JSONSchemaProps) {
			// metadata is ObjectMeta: the API server documents it, controller-gen leaves it bare.
			if path != "" && path != ".metadata" && strings.TrimSpace(s.Description) == "" {
				undocumented = append(undocumented, path)
			}
		})
		Expect(undocumented).To(BeEmpty(), "fields without a description")
	})
})

func keyOf(wq *herdgatev1alpha1.WaitingQueue) client.ObjectKey { return client.ObjectKeyFromObject(wq) }

// createRaw creates an object from its JSON form, for values the typed API cannot even hold.
func createRaw(obj map[string]any) error {
	return k8sClient.Create(ctx, &unstructured.Unstructured{Object: obj})
}

// explainedFields parses the FIELDS section of kubectl explain into field name → description.
func explainedFields(out string) map[string]string {
	fields := map[string]string{}
	_, section, found := strings.Cut(out, "FIELDS:\n")
	if !found {
		return fields
	}
	var current string
	for _, line := range strings.Split(section, "\n") {
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "enum:"):
			// An enum's values, printed under its name.
		case strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "    ") && strings.TrimSpace(line) != "":
			current = strings.Fields(line)[0]
			fields[current] = ""
		case current != "" && strings.TrimSpace(line) != "":
			fields[current] += strings.TrimSpace(line) + " "
		}
	}
	return fields
}

// walkSchema visits every property below s, the embedded Kubernetes types (resources) included.
func walkSchema(path string, s apiextensionsv1.JSONSchemaProps, visit func(string, apiextensionsv1.JSONSchemaProps)) {
	visit(path, s)
	for name, p := range s.Properties {
		walkSchema(path+"."+name, p, visit)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walkSchema(path+"[]", *s.Items.Schema, func(p string, ps apiextensionsv1.JSONSchemaProps) {
			if p == path+"[]" {
				return // an item of a documented list needs no description of its own
			}
			visit(p, ps)
		})
	}
}

// runtimeToUnstructured is the queue as a config file's decoder reads it: a map of JSON values.
func runtimeToUnstructured(wq *herdgatev1alpha1.WaitingQueue) (map[string]any, error) {
	raw, err := json.Marshal(wq)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	return out, utiljson.Unmarshal(raw, &out)
}
