// Package builder makes the WaitingQueues that tests, benchmarks and the herd experiment run: one
// reference queue, changed by small methods, instead of literals copied from file to file.
package builder

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/settings"
)

// QueueBuilder builds one WaitingQueue; every method changes it and returns the builder.
type QueueBuilder struct {
	wq herdgatev1alpha1.WaitingQueue
}

// Queue starts from the reference queue, as config/samples holds it: an orders service whose pool
// has 40 connections, each held 200 ms per order, admitted at 70 % with a 100 ms tick (14 per tick,
// 140 per second), upstream the Service orders:8080, and POST /api/v1/orders and
// /api/v1/orders/direct protected.
func Queue(namespace, name string) *QueueBuilder {
	return &QueueBuilder{wq: herdgatev1alpha1.WaitingQueue{
		TypeMeta:   metav1.TypeMeta{APIVersion: herdgatev1alpha1.GroupVersion.String(), Kind: "WaitingQueue"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: herdgatev1alpha1.WaitingQueueSpec{
			Capacity: herdgatev1alpha1.CapacitySpec{
				PoolSize: 40, RequestLatency: metav1.Duration{Duration: 200 * time.Millisecond}, UtilizationPercent: ptr.To[int32](70),
			},
			Tick:     &metav1.Duration{Duration: 100 * time.Millisecond},
			Upstream: herdgatev1alpha1.UpstreamSpec{Service: &herdgatev1alpha1.ServiceUpstream{Name: "orders", Port: 8080}},
			ProtectedRoutes: []herdgatev1alpha1.ProtectedRoute{
				{Methods: []herdgatev1alpha1.HTTPMethod{"POST"}, Path: ptr.To(herdgatev1alpha1.RoutePath("/api/v1/orders"))},
				{Methods: []herdgatev1alpha1.HTTPMethod{"POST"}, Path: ptr.To(herdgatev1alpha1.RoutePath("/api/v1/orders/direct"))},
			},
		},
	}}
}

// From continues building from a copy of wq.
func From(wq *herdgatev1alpha1.WaitingQueue) *QueueBuilder { return &QueueBuilder{wq: *wq.DeepCopy()} }

// Obj returns a copy of the queue built so far.
func (b *QueueBuilder) Obj() *herdgatev1alpha1.WaitingQueue { return b.wq.DeepCopy() }

// Settings derives the queue's settings, as the manager and the proxy do; it panics on a queue they
// would refuse, which a test builds only by mistake.
func (b *QueueBuilder) Settings() *settings.Settings {
	s, err := settings.Derive(b.Obj())
	if err != nil {
		panic(fmt.Sprintf("builder: the queue does not derive: %v", err))
	}
	return s
}

// UID sets metadata.uid; Generation metadata.generation.
func (b *QueueBuilder) UID(uid types.UID) *QueueBuilder { b.wq.UID = uid; return b }

// Generation sets metadata.generation, as the API server would count it.
func (b *QueueBuilder) Generation(g int64) *QueueBuilder { b.wq.Generation = g; return b }

// Capacity sets the bottleneck: pool slots, each held latency, admitted at utilization percent.
func (b *QueueBuilder) Capacity(pool int32, latency time.Duration, utilization int32) *QueueBuilder {
	b.wq.Spec.Capacity.PoolSize, b.wq.Spec.Capacity.RequestLatency = pool, metav1.Duration{Duration: latency}
	b.wq.Spec.Capacity.UtilizationPercent = ptr.To(utilization)
	return b
}

// BatchSizeOverride admits n per tick instead of the derived batch.
func (b *QueueBuilder) BatchSizeOverride(n int32) *QueueBuilder {
	b.wq.Spec.Capacity.BatchSizeOverride = ptr.To(n)
	return b
}

// Tick sets spec.tick.
func (b *QueueBuilder) Tick(d time.Duration) *QueueBuilder {
	b.wq.Spec.Tick = &metav1.Duration{Duration: d}
	return b
}

// Jitter sets spec.jitter: the mode, and the window when it is not zero.
func (b *QueueBuilder) Jitter(mode herdgatev1alpha1.JitterMode, window time.Duration) *QueueBuilder {
	b.wq.Spec.Jitter = &herdgatev1alpha1.JitterSpec{Mode: mode}
	if window > 0 {
		b.wq.Spec.Jitter.Window = &metav1.Duration{Duration: window}
	}
	return b
}

// Polling sets spec.polling.
func (b *QueueBuilder) Polling(minInterval, maxInterval time.Duration) *QueueBuilder {
	b.wq.Spec.Polling = &herdgatev1alpha1.PollingSpec{MinInterval: &metav1.Duration{Duration: minInterval}, MaxInterval: &metav1.Duration{Duration: maxInterval}}
	return b
}

// AbandonAtTurnAfter sets spec.abandonAtTurnAfter.
func (b *QueueBuilder) AbandonAtTurnAfter(d time.Duration) *QueueBuilder {
	b.wq.Spec.AbandonAtTurnAfter = &metav1.Duration{Duration: d}
	return b
}

// AbandonAfter sets spec.abandonAfter.
func (b *QueueBuilder) AbandonAfter(d time.Duration) *QueueBuilder {
	b.wq.Spec.AbandonAfter = &metav1.Duration{Duration: d}
	return b
}

// PassTTL sets spec.pass.ttl.
func (b *QueueBuilder) PassTTL(d time.Duration) *QueueBuilder {
	b.wq.Spec.Pass = &herdgatev1alpha1.PassSpec{TTL: &metav1.Duration{Duration: d}}
	return b
}

// JWTPasses sets spec.pass.format to JWT with the algorithm (empty for the default) and, when not
// zero, spec.pass.keyRotation; the pass's other fields stay.
func (b *QueueBuilder) JWTPasses(alg herdgatev1alpha1.PassAlgorithm, keyRotation time.Duration) *QueueBuilder {
	if b.wq.Spec.Pass == nil {
		b.wq.Spec.Pass = &herdgatev1alpha1.PassSpec{}
	}
	b.wq.Spec.Pass.Format, b.wq.Spec.Pass.Algorithm = herdgatev1alpha1.PassFormatJWT, alg
	if keyRotation > 0 {
		b.wq.Spec.Pass.KeyRotation = &metav1.Duration{Duration: keyRotation}
	}
	return b
}

// ReleaseKey sets spec.pass.releaseKeySecretRef; the pass's other fields stay.
func (b *QueueBuilder) ReleaseKey(secret, key string) *QueueBuilder {
	if b.wq.Spec.Pass == nil {
		b.wq.Spec.Pass = &herdgatev1alpha1.PassSpec{}
	}
	b.wq.Spec.Pass.ReleaseKeySecretRef = &herdgatev1alpha1.SecretValueRef{Name: secret, Key: key}
	return b
}

// PassSpec replaces spec.pass.
func (b *QueueBuilder) PassSpec(p *herdgatev1alpha1.PassSpec) *QueueBuilder {
	b.wq.Spec.Pass = p.DeepCopy()
	return b
}

// Suspend sets spec.suspend.
func (b *QueueBuilder) Suspend(suspended bool) *QueueBuilder {
	b.wq.Spec.Suspend = ptr.To(suspended)
	return b
}

// Schedule sets spec.schedule; a zero preQueueFrom or closesAt leaves it unset.
func (b *QueueBuilder) Schedule(preQueueFrom, opensAt, closesAt time.Time) *QueueBuilder {
	sc := &herdgatev1alpha1.ScheduleSpec{OpensAt: metav1.NewTime(opensAt)}
	if !preQueueFrom.IsZero() {
		sc.PreQueueFrom = ptr.To(metav1.NewTime(preQueueFrom))
	}
	if !closesAt.IsZero() {
		sc.ClosesAt = ptr.To(metav1.NewTime(closesAt))
	}
	b.wq.Spec.Schedule = sc
	return b
}

// Beacon draws the room's pre-queues with a round of the beacon at url whose chain hash is
// chainHash (spec.draw), waiting maxWait for it (0: the default).
func (b *QueueBuilder) Beacon(url, chainHash string, maxWait time.Duration) *QueueBuilder {
	bs := &herdgatev1alpha1.BeaconSpec{URL: url, ChainHash: chainHash}
	if maxWait > 0 {
		bs.MaxWait = &metav1.Duration{Duration: maxWait}
	}
	b.wq.Spec.Draw = &herdgatev1alpha1.DrawSpec{SeedSource: herdgatev1alpha1.DrawSeedBeacon, Beacon: bs}
	return b
}

// UpstreamURL sends requests to url instead of the orders Service.
func (b *QueueBuilder) UpstreamURL(url string) *QueueBuilder {
	b.wq.Spec.Upstream = herdgatev1alpha1.UpstreamSpec{URL: ptr.To(url)}
	return b
}

// Routes replaces the protected routes.
func (b *QueueBuilder) Routes(routes ...herdgatev1alpha1.ProtectedRoute) *QueueBuilder {
	b.wq.Spec.ProtectedRoutes = routes
	return b
}

// Identity identifies visitors by a header a trusted gateway sets; "" leaves them to the visitor
// cookie.
func (b *QueueBuilder) Identity(header string) *QueueBuilder {
	if header == "" {
		b.wq.Spec.Identity = nil
		return b
	}
	b.wq.Spec.Identity = &herdgatev1alpha1.IdentitySpec{Header: header}
	return b
}

// Mode sets spec.mode.
func (b *QueueBuilder) Mode(m herdgatev1alpha1.Mode) *QueueBuilder {
	b.wq.Spec.Mode = m
	return b
}

// Enforcement sets spec.enforcement.
func (b *QueueBuilder) Enforcement(e herdgatev1alpha1.Enforcement) *QueueBuilder {
	b.wq.Spec.Enforcement = e
	return b
}

// Bypass replaces spec.bypass.
func (b *QueueBuilder) Bypass(rules ...herdgatev1alpha1.BypassRule) *QueueBuilder {
	b.wq.Spec.Bypass = rules
	return b
}

// Redis takes the queue's Redis URL from key of the Secret name.
func (b *QueueBuilder) Redis(secret, key string) *QueueBuilder {
	b.redis().SecretRef = &herdgatev1alpha1.SecretKeyRef{Name: secret, Key: key}
	return b
}

// Durability sets whether the queue's writes wait for a replica (spec.redis.durability).
func (b *QueueBuilder) Durability(d herdgatev1alpha1.RedisDurability) *QueueBuilder {
	b.redis().Durability = d
	return b
}

func (b *QueueBuilder) redis() *herdgatev1alpha1.RedisSpec {
	if b.wq.Spec.Redis == nil {
		b.wq.Spec.Redis = &herdgatev1alpha1.RedisSpec{}
	}
	return b.wq.Spec.Redis
}

// MaxActive caps the passes active at once (spec.capacity.maxActive).
func (b *QueueBuilder) MaxActive(n int32) *QueueBuilder {
	b.wq.Spec.Capacity.MaxActive = ptr.To(n)
	return b
}

// Adaptive makes the rate follow the measured workload (spec.capacity.mode Adaptive), never below
// minPerSecond admissions a second (0 leaves the default floor).
func (b *QueueBuilder) Adaptive(minPerSecond int32) *QueueBuilder {
	b.wq.Spec.Capacity.Mode = herdgatev1alpha1.CapacityAdaptive
	if minPerSecond > 0 {
		b.wq.Spec.Capacity.MinAdmissionsPerSecond = ptr.To(minPerSecond)
	}
	return b
}

// PollBudget bounds the polls a second the waiting visitors cost (spec.polling.budget), keeping the
// intervals set.
func (b *QueueBuilder) PollBudget(perSecond int32) *QueueBuilder {
	b.polling().Budget = ptr.To(perSecond)
	return b
}

// ExactPositions sets how far from the front positions come from Redis at every poll
// (spec.polling.exactPositions), keeping the intervals set.
func (b *QueueBuilder) ExactPositions(n int32) *QueueBuilder {
	b.polling().ExactPositions = ptr.To(n)
	return b
}

func (b *QueueBuilder) polling() *herdgatev1alpha1.PollingSpec {
	if b.wq.Spec.Polling == nil {
		b.wq.Spec.Polling = &herdgatev1alpha1.PollingSpec{}
	}
	return b.wq.Spec.Polling
}

// Entry replaces spec.entry: what an entry must bring, and the places one client takes.
func (b *QueueBuilder) Entry(e *herdgatev1alpha1.EntrySpec) *QueueBuilder {
	b.wq.Spec.Entry = e.DeepCopy()
	return b
}

// ShadowQueue sets spec.entry.shadowQueue, keeping the rest of spec.entry: entries whose challenge
// fails go to the shadow queue when challengeFailed, and a client's asks past overLimitFactor times
// its burst when overLimitFactor is positive.
func (b *QueueBuilder) ShadowQueue(challengeFailed bool, overLimitFactor int32) *QueueBuilder {
	if b.wq.Spec.Entry == nil {
		b.wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{}
	}
	sq := &herdgatev1alpha1.ShadowQueueSpec{ChallengeFailed: challengeFailed}
	if overLimitFactor > 0 {
		sq.OverEntryLimitFactor = &overLimitFactor
	}
	b.wq.Spec.Entry.ShadowQueue = sq
	return b
}

// Page replaces spec.page: the waiting page's template and notice.
func (b *QueueBuilder) Page(p *herdgatev1alpha1.PageSpec) *QueueBuilder {
	b.wq.Spec.Page = p.DeepCopy()
	return b
}

// PageMessage sets the notice on the waiting page (spec.page.message), keeping any template.
func (b *QueueBuilder) PageMessage(message string) *QueueBuilder {
	if b.wq.Spec.Page == nil {
		b.wq.Spec.Page = &herdgatev1alpha1.PageSpec{}
	}
	b.wq.Spec.Page.Message = message
	return b
}

// Events replaces spec.events, the room's calendar.
func (b *QueueBuilder) Events(events ...herdgatev1alpha1.Event) *QueueBuilder {
	b.wq.Spec.Events = nil
	for _, e := range events {
		b.wq.Spec.Events = append(b.wq.Spec.Events, *e.DeepCopy())
	}
	return b
}

// Event is an event named name from start to end that overrides nothing yet.
func Event(name string, start, end time.Time) herdgatev1alpha1.Event {
	return herdgatev1alpha1.Event{Name: name, Start: metav1.NewTime(start), End: metav1.NewTime(end)}
}

// Lanes replaces spec.lanes.
func (b *QueueBuilder) Lanes(lanes ...herdgatev1alpha1.Lane) *QueueBuilder {
	b.wq.Spec.Lanes = nil
	for _, l := range lanes {
		b.wq.Spec.Lanes = append(b.wq.Spec.Lanes, *l.DeepCopy())
	}
	return b
}

// LaneByCode is a lane of percent of every batch, joined by codes signed with the key in Secret
// secret, key key.
func LaneByCode(name string, percent int32, secret, key string) herdgatev1alpha1.Lane {
	return herdgatev1alpha1.Lane{Name: name, WeightPercent: percent,
		Join: herdgatev1alpha1.LaneJoin{Code: &herdgatev1alpha1.LaneCode{KeySecretRef: herdgatev1alpha1.SecretValueRef{Name: secret, Key: key}}}}
}

// LaneByHeader is a lane of percent of every batch, joined by header with the value in Secret
// secret, key key.
func LaneByHeader(name string, percent int32, header, secret, key string) herdgatev1alpha1.Lane {
	return herdgatev1alpha1.Lane{Name: name, WeightPercent: percent,
		Join: herdgatev1alpha1.LaneJoin{Header: &herdgatev1alpha1.LaneHeader{Name: header, ValueSecretRef: herdgatev1alpha1.SecretValueRef{Name: secret, Key: key}}}}
}

// LaneByCookie is a lane of percent of every batch, joined by cookie with the value in Secret
// secret, key key.
func LaneByCookie(name string, percent int32, cookie, secret, key string) herdgatev1alpha1.Lane {
	return herdgatev1alpha1.Lane{Name: name, WeightPercent: percent,
		Join: herdgatev1alpha1.LaneJoin{Cookie: &herdgatev1alpha1.LaneCookie{Name: cookie, ValueSecretRef: herdgatev1alpha1.SecretValueRef{Name: secret, Key: key}}}}
}

// QueueingStatusCode sets the status of a waiting visitor's answers (spec.page.queueingStatusCode),
// keeping the rest of the page.
func (b *QueueBuilder) QueueingStatusCode(code int32) *QueueBuilder {
	if b.wq.Spec.Page == nil {
		b.wq.Spec.Page = &herdgatev1alpha1.PageSpec{}
	}
	b.wq.Spec.Page.QueueingStatusCode = &code
	return b
}

// UpstreamService sends requests to port of the Service name in the queue's namespace.
func (b *QueueBuilder) UpstreamService(name string, port int32) *QueueBuilder {
	b.wq.Spec.Upstream = herdgatev1alpha1.UpstreamSpec{Service: &herdgatev1alpha1.ServiceUpstream{Name: name, Port: port}}
	return b
}

// Proxy replaces spec.proxy: the admission proxy's replicas, resources and placement.
func (b *QueueBuilder) Proxy(p *herdgatev1alpha1.ProxySpec) *QueueBuilder {
	b.wq.Spec.Proxy = p.DeepCopy()
	return b
}

// ProxyReplicas sets the replicas of the room's own proxy (spec.proxy.replicas), keeping the rest of
// spec.proxy.
func (b *QueueBuilder) ProxyReplicas(n int32) *QueueBuilder {
	if b.wq.Spec.Proxy == nil {
		b.wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{}
	}
	b.wq.Spec.Proxy.Replicas = ptr.To(n)
	return b
}

// ProxyResources sets the proxy container's requests and limits (spec.proxy.resources), keeping the
// rest of spec.proxy.
func (b *QueueBuilder) ProxyResources(r *herdgatev1alpha1.ProxyResources) *QueueBuilder {
	if b.wq.Spec.Proxy == nil {
		b.wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{}
	}
	b.wq.Spec.Proxy.Resources = r.DeepCopy()
	return b
}

// Shared puts the room in the shared proxy set set (spec.proxy.shared), served on hosts.
func (b *QueueBuilder) Shared(set string, hosts ...string) *QueueBuilder {
	if b.wq.Spec.Proxy == nil {
		b.wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{}
	}
	b.wq.Spec.Proxy.Shared = set
	b.wq.Spec.Proxy.Hosts = nil
	for _, h := range hosts {
		b.wq.Spec.Proxy.Hosts = append(b.wq.Spec.Proxy.Hosts, herdgatev1alpha1.Hostname(h))
	}
	return b
}

// Autoscaling scales the room's own proxy Deployment between minReplicas and maxReplicas on its CPU
// (spec.proxy.autoscaling), keeping the default CPU target.
func (b *QueueBuilder) Autoscaling(minReplicas, maxReplicas int32) *QueueBuilder {
	if b.wq.Spec.Proxy == nil {
		b.wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{}
	}
	b.wq.Spec.Proxy.Autoscaling = &herdgatev1alpha1.ProxyAutoscaling{MinReplicas: ptr.To(minReplicas), MaxReplicas: maxReplicas}
	return b
}

// WithoutAutoscaling removes spec.proxy.autoscaling: the proxy runs the replicas spec.proxy says.
func (b *QueueBuilder) WithoutAutoscaling() *QueueBuilder {
	if b.wq.Spec.Proxy != nil {
		b.wq.Spec.Proxy.Autoscaling = nil
	}
	return b
}

// Route is a protected route of path (a prefix when prefix is set) for methods.
func Route(path string, prefix bool, methods ...herdgatev1alpha1.HTTPMethod) herdgatev1alpha1.ProtectedRoute {
	r := herdgatev1alpha1.ProtectedRoute{Methods: methods}
	if prefix {
		r.PathPrefix = ptr.To(herdgatev1alpha1.RoutePath(path))
	} else {
		r.Path = ptr.To(herdgatev1alpha1.RoutePath(path))
	}
	return r
}

// RouteOn is Route for requests to host alone (protectedRoutes[].host).
func RouteOn(host, path string, prefix bool, methods ...herdgatev1alpha1.HTTPMethod) herdgatev1alpha1.ProtectedRoute {
	r := Route(path, prefix, methods...)
	r.Host = ptr.To(herdgatev1alpha1.Hostname(host))
	return r
}
