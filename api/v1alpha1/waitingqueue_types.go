package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of the optional fields. The +kubebuilder:default markers below must say the same; the
// API test suite checks that a WaitingQueue created without them reads back with these values.
const (
	DefaultUtilizationPercent = 70
	DefaultTick               = 100 * time.Millisecond
	DefaultPassTTL            = 5 * time.Minute
	DefaultPollMinInterval    = 500 * time.Millisecond
	DefaultPollMaxInterval    = 5 * time.Second
	DefaultAbandonAfter       = 5 * time.Minute
	// DefaultPollBudget is spec.polling.budget's default, in status polls per second.
	DefaultPollBudget = 20000
	// DefaultExactPositions is spec.polling.exactPositions' default.
	DefaultExactPositions = 10000
	DefaultProxyReplicas  = 2
	// The defaults of spec.proxy.autoscaling.
	DefaultProxyMinReplicas      = 2
	DefaultProxyTargetCPUPercent = 70
	DefaultRedisSecretKey        = "url"
)

// WaitingQueueSpec declares the bottleneck of a workload and how the waiting room in front of it behaves.
//
// +kubebuilder:validation:XValidation:rule="!has(self.jitter) || !has(self.jitter.window) || duration(self.jitter.window) <= duration(has(self.tick) ? self.tick : '100ms')",message="jitter.window must not be longer than tick",fieldPath=".jitter.window"
// +kubebuilder:validation:XValidation:rule="!has(self.abandonAfter) || !has(self.polling) || !has(self.polling.maxInterval) || duration(self.abandonAfter) >= duration(self.polling.maxInterval) + duration(self.polling.maxInterval)",message="abandonAfter must be at least twice polling.maxInterval, or visitors who poll as told would lose their place",fieldPath=".abandonAfter"
// +kubebuilder:validation:XValidation:rule="!has(self.abandonAtTurnAfter) || !has(self.abandonAfter) || duration(self.abandonAtTurnAfter) <= duration(self.abandonAfter)",message="abandonAtTurnAfter must not be longer than abandonAfter",fieldPath=".abandonAtTurnAfter"
// +kubebuilder:validation:XValidation:rule="!has(self.abandonAtTurnAfter) || !has(self.polling) || !has(self.polling.maxInterval) || duration(self.abandonAtTurnAfter) >= duration(self.polling.maxInterval) + duration(self.polling.maxInterval)",message="abandonAtTurnAfter must be at least twice polling.maxInterval, or visitors who poll as told would lose their place at their turn",fieldPath=".abandonAtTurnAfter"
// +kubebuilder:validation:XValidation:rule="!(has(self.enforcement) && self.enforcement == 'Gateway' && has(self.capacity.mode) && self.capacity.mode == 'Adaptive' && !(has(self.pass) && has(self.pass.releaseKeySecretRef)))",message="capacity.mode Adaptive with enforcement Gateway needs pass.releaseKeySecretRef: the workload tells how long it held each request when it releases the session",fieldPath=".capacity.mode"
// +kubebuilder:validation:XValidation:rule="!(has(self.enforcement) && self.enforcement == 'Gateway' && has(self.proxy) && has(self.proxy.shared))",message="proxy.shared needs enforcement Proxy: a gateway asks the check of one room",fieldPath=".proxy.shared"
// +kubebuilder:validation:XValidation:rule="!has(self.lanes) || !self.lanes.exists(l, has(l.join.invitation) && l.join.invitation) || (has(self.entry) && has(self.entry.invitation))",message="a lane joined by invitation needs entry.invitation, whose key signs the invitations",fieldPath=".lanes"
// +kubebuilder:validation:XValidation:rule="!has(self.entry) || !has(self.entry.shadowQueue) || !has(self.entry.shadowQueue.challengeFailed) || !self.entry.shadowQueue.challengeFailed || has(self.entry.challenge)",message="entry.shadowQueue.challengeFailed needs entry.challenge",fieldPath=".entry.shadowQueue.challengeFailed"
// +kubebuilder:validation:XValidation:rule="!has(self.entry) || !has(self.entry.shadowQueue) || !has(self.entry.shadowQueue.overEntryLimitFactor) || has(self.entry.perClient)",message="entry.shadowQueue.overEntryLimitFactor needs entry.perClient",fieldPath=".entry.shadowQueue.overEntryLimitFactor"
// +kubebuilder:validation:XValidation:rule="!(has(self.events) && size(self.events) > 0 && has(self.schedule))",message="a room has either events or a schedule: an event with preQueueFrom is a scheduled opening",fieldPath=".events"
// +kubebuilder:validation:XValidation:rule="!has(self.events) || self.events.all(e, !has(e.preQueueFrom) || timestamp(e.preQueueFrom) + duration(has(self.tick) ? self.tick : '100ms') <= timestamp(e.start))",message="an event's preQueueFrom must be at least one tick before its start",fieldPath=".events"
// +kubebuilder:validation:XValidation:rule="!has(self.events) || self.events.all(e, !has(e.session) || !(has(e.session.maxSession) || (has(self.pass) && has(self.pass.maxSession))) || duration(has(e.session.maxSession) ? e.session.maxSession : self.pass.maxSession) >= duration(has(e.session.ttl) ? e.session.ttl : (has(self.pass) && has(self.pass.ttl) ? self.pass.ttl : '5m')))",message="an event's maxSession (its own, or the room's pass.maxSession) must not be shorter than its pass ttl",fieldPath=".events"
type WaitingQueueSpec struct {
	// capacity describes the bottleneck of the protected workload. The operator derives from it how many
	// visitors to admit per tick: poolSize × utilizationPercent% × tick ÷ requestLatency.
	// +required
	Capacity CapacitySpec `json:"capacity"`

	// tick is how often the scheduler admits a batch of visitors, as a duration such as "100ms".
	// Between 10ms and 10s. Defaults to 100ms.
	// +optional
	// +kubebuilder:default="100ms"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10ms') && duration(self) <= duration('10s')",message="tick must be between 10ms and 10s"
	Tick *metav1.Duration `json:"tick,omitempty"`

	// jitter spreads the admissions of one tick over a window, so that the workload sees a steady
	// stream instead of a burst at every tick.
	// +optional
	// +kubebuilder:default={}
	Jitter *JitterSpec `json:"jitter,omitempty"`

	// pass configures the signed pass an admitted visitor presents on protected routes.
	// +optional
	// +kubebuilder:default={}
	Pass *PassSpec `json:"pass,omitempty"`

	// polling bounds the interval the proxy tells waiting visitors to wait before they ask again.
	// +optional
	// +kubebuilder:default={}
	Polling *PollingSpec `json:"polling,omitempty"`

	// abandonAfter is how long a waiting visitor may stay silent (no poll) before losing its place.
	// Abandoned visitors never take a batch slot. Between 10s and 24h and at least twice
	// polling.maxInterval. Defaults to 5m.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('24h')",message="abandonAfter must be between 10s and 24h"
	AbandonAfter *metav1.Duration `json:"abandonAfter,omitempty"`

	// abandonAtTurnAfter, when set, passes over a place whose visitor has been silent this long when
	// its turn comes, instead of admitting it: the silent places stop taking the slots of the visitors
	// behind them well before abandonAfter drops them. A visitor polling as told is silent for at most
	// about maxInterval near the front, so the trade is this: a visitor whose browser stopped polling
	// for a while (a phone losing its network, a tab in the background, which browsers may let run a
	// timer only once a minute) loses its place if its turn comes meanwhile, where with abandonAfter
	// alone it keeps it for abandonAfter. Between 1s and 24h, at least twice polling.maxInterval and
	// at most abandonAfter. Unset (the default): abandonAfter.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="abandonAtTurnAfter must be between 1s and 24h"
	AbandonAtTurnAfter *metav1.Duration `json:"abandonAtTurnAfter,omitempty"`

	// suspend stops admissions while true. The queue keeps accepting and ranking visitors, and
	// admitted visitors keep their passes. Defaults to false.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`

	// mode says whether the waiting room gates the protected routes: Queue (visitors queue and need a
	// pass), Passthrough (the room is switched off without being deleted: protected routes need no
	// pass) or Closed (maintenance: protected routes are closed to everyone, browsers see a closed
	// page and API clients get 503 with Retry-After; waiting visitors keep their places and nobody is
	// admitted). It can be switched live. Defaults to Queue.
	// +optional
	// +kubebuilder:default=Queue
	Mode Mode `json:"mode,omitempty"`

	// enforcement says what stops visitors without a pass on the protected routes. Proxy: the
	// admission proxy is the hop in front of the workload and forwards what it admits. Gateway: the
	// platform's gateway routes to the workload itself and asks the herdgate Service for each
	// protected request (Envoy ext_authz over gRPC, or forward-auth over HTTP), or verifies JWT passes
	// on its own; herdgate serves /.herdgate/* and the checks, and forwards nothing: any other request
	// reaching it gets 421. See docs/guides/gateways.md. Defaults to Proxy.
	// +optional
	// +kubebuilder:default=Proxy
	Enforcement Enforcement `json:"enforcement,omitempty"`

	// events are the room's calendar: time windows in which the room runs with other settings, such
	// as a ticket sale with a larger pool and its own notice. Each event overrides any of capacity,
	// maxActive, the page and its notice, and the session's duration; what it does not set comes from
	// the room. An event with preQueueFrom is a launch: from then until its start visitors take
	// pre-queue places, whose order is drawn at the start, as spec.schedule does for one opening. The
	// room switches at the events' edges, on its tick grid, without a restart. Events may not overlap
	// (from preQueueFrom, or start, to end), and a room has either events or a schedule. At most 16.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.all(b, a.name == b.name || timestamp(a.end) <= timestamp(has(b.preQueueFrom) ? b.preQueueFrom : b.start) || timestamp(b.end) <= timestamp(has(a.preQueueFrom) ? a.preQueueFrom : a.start)))",message="events must not overlap: each runs from preQueueFrom (or start) to end"
	Events []Event `json:"events,omitempty"`

	// schedule opens the room at a set time, for a launch: before opensAt the protected routes are
	// closed to visitors without a pass; from preQueueFrom, visitors who come hold a place in a
	// pre-queue, whose order is drawn at opening from a seed committed to in status beforehand (so
	// arriving early wins nothing, and anyone can check the draw); later visitors queue behind it in
	// arrival order; after closesAt no new visitor enters and the queue drains.
	// +optional
	Schedule *ScheduleSpec `json:"schedule,omitempty"`

	// draw says where the seed of a pre-queue's draw comes from: the schedule's, and that of each
	// event with preQueueFrom that sets no draw of its own. Unset, the seed is the room's secret,
	// committed to in status before the pre-queue opens (CommitReveal).
	// +optional
	Draw *DrawSpec `json:"draw,omitempty"`

	// entry bounds who takes places and how fast: a limit per client address, counted in Redis and
	// shared by every proxy replica, and the load balancers whose X-Forwarded-For the proxy believes.
	// +optional
	Entry *EntrySpec `json:"entry,omitempty"`

	// bypass lanes let trusted traffic through without a pass: a request that matches a rule (by
	// client address, by a header carrying a value from a Secret, or by path) reaches the upstream
	// at once, never queues and never counts against maxActive, whatever the mode. Each rule counts
	// its requests in the herdgate_proxy_bypass_requests_total metric. At most 16 rules.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Bypass []BypassRule `json:"bypass,omitempty"`

	// lanes are metered priority lanes: visitors who join a lane (with a signed code, an
	// invitation, or a header or cookie the site's gateway sets after login) wait in a FIFO queue of
	// their own, which takes weightPercent of every tick's batch; the main queue takes the rest. Unlike
	// bypass rules, lane visitors are admitted by the plan and count against maxActive. A lane with
	// nobody waiting leaves its share to the others. Before a scheduled opening, lane visitors take
	// part in the pre-queue's draw like everyone, and the draw places each in its lane. At most 8
	// lanes.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.map(l, l.weightPercent).sum() <= 99",message="the lanes' weightPercent add up to at most 99: the main queue keeps the rest"
	Lanes []Lane `json:"lanes,omitempty"`

	// page is the waiting page visitors see: a template of your own from a ConfigMap, and a message
	// shown live.
	// +optional
	Page *PageSpec `json:"page,omitempty"`

	// upstream is the workload: exactly one of service or url. With enforcement Proxy the admission
	// proxy forwards the requests it lets through there. With enforcement Gateway nothing is
	// forwarded (the gateway routes to the workload itself); the upstream then names the workload
	// for `herd gateway-config` (the Service the generated routes send to) and is otherwise unused.
	// +required
	Upstream UpstreamSpec `json:"upstream"`

	// protectedRoutes are the requests that require a valid pass; every other request passes through
	// unchanged. Paths are matched after normalisation, so encoded or dotted variants cannot bypass them.
	// At most 32 routes, no two of them for the same host, path (or pathPrefix) and method.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(r, self.exists_one(o, (has(o.host) ? o.host : '') == (has(r.host) ? r.host : '') && (has(o.path) ? 'path:' + o.path : has(o.pathPrefix) ? 'prefix:' + o.pathPrefix : '') == (has(r.path) ? 'path:' + r.path : has(r.pathPrefix) ? 'prefix:' + r.pathPrefix : '') && o.methods.exists(m, m in r.methods)))",message="two protectedRoutes name the same host, path (or pathPrefix) and method: merge their methods into one route"
	ProtectedRoutes []ProtectedRoute `json:"protectedRoutes"`

	// identity says how the proxy tells visitors apart. When unset, the proxy gives each visitor an
	// anonymous ID in a signed cookie.
	// +optional
	Identity *IdentitySpec `json:"identity,omitempty"`

	// redis selects the Redis that holds this queue. When unset, the operator's default Redis is used.
	// +optional
	Redis *RedisSpec `json:"redis,omitempty"`

	// proxy configures the admission proxy Deployment that the operator runs for this queue.
	// +optional
	// +kubebuilder:default={}
	Proxy *ProxySpec `json:"proxy,omitempty"`
}

// Enforcement says what enforces the room on the protected routes.
// +kubebuilder:validation:Enum=Proxy;Gateway
type Enforcement string

const (
	// EnforcementProxy: the admission proxy is the hop in front of the workload.
	EnforcementProxy Enforcement = "Proxy"
	// EnforcementGateway: the platform's gateway asks herdgate's check, or verifies JWT passes.
	EnforcementGateway Enforcement = "Gateway"
)

// ScheduleSpec is when the room opens and closes.
//
// +kubebuilder:validation:XValidation:rule="!has(self.closesAt) || timestamp(self.opensAt) < timestamp(self.closesAt)",message="schedule.opensAt must be before schedule.closesAt",fieldPath=".closesAt"
// +kubebuilder:validation:XValidation:rule="!has(self.preQueueFrom) || timestamp(self.preQueueFrom) < timestamp(self.opensAt)",message="schedule.preQueueFrom must be before schedule.opensAt",fieldPath=".preQueueFrom"
// +kubebuilder:validation:XValidation:rule="!has(self.preQueueFrom) || timestamp(self.preQueueFrom) + duration('24h') >= timestamp(self.opensAt)",message="schedule.preQueueFrom must be at most 24h before schedule.opensAt",fieldPath=".preQueueFrom"
type ScheduleSpec struct {
	// opensAt is when the room opens, in RFC 3339, for example "2027-03-01T10:00:00Z": the pre-queue is
	// drawn and admissions begin. Times are RFC 3339 date-times in whole seconds, with an upper-case
	// "T" and "Z" or an offset of at most ±23:59, between the years 1970 and 9000.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	// +kubebuilder:validation:XValidation:rule="self >= timestamp('1970-01-01T00:00:00Z') && self < timestamp('9000-01-01T00:00:00Z')",message="must lie between the years 1970 and 9000"
	OpensAt metav1.Time `json:"opensAt"`

	// preQueueFrom is when visitors begin to take places in the pre-queue, in RFC 3339 like opensAt.
	// Before opensAt and at most 24h before it. Defaults to 15 minutes before opensAt. A pass issued
	// before it is of an earlier opening and opens nothing.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	// +kubebuilder:validation:XValidation:rule="self >= timestamp('1970-01-01T00:00:00Z') && self < timestamp('9000-01-01T00:00:00Z')",message="must lie between the years 1970 and 9000"
	PreQueueFrom *metav1.Time `json:"preQueueFrom,omitempty"`

	// closesAt, when set, is when the room stops taking new visitors, in RFC 3339 like opensAt; those
	// in the queue are still admitted. After opensAt.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	// +kubebuilder:validation:XValidation:rule="self >= timestamp('1970-01-01T00:00:00Z') && self < timestamp('9000-01-01T00:00:00Z')",message="must lie between the years 1970 and 9000"
	ClosesAt *metav1.Time `json:"closesAt,omitempty"`
}

// Mode says whether the waiting room gates the protected routes.
// +kubebuilder:validation:Enum=Queue;Passthrough;Closed
type Mode string

const (
	// ModeQueue queues visitors and lets only those holding a valid pass reach the protected routes.
	ModeQueue Mode = "Queue"
	// ModePassthrough lets every request through, as if the room were not there; places are kept.
	ModePassthrough Mode = "Passthrough"
	// ModeClosed closes the protected routes to everyone; places are kept and nobody is admitted.
	ModeClosed Mode = "Closed"
)

// CapacitySpec describes the bottleneck of the protected workload.
type CapacitySpec struct {
	// poolSize is the number of slots of the workload's bottleneck, for example database connections
	// across all replicas. Between 1 and 1,000,000.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	PoolSize int32 `json:"poolSize"`

	// requestLatency is how long one admitted request holds a slot, for example "200ms".
	// Between 1ms and 10m.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1ms') && duration(self) <= duration('10m')",message="requestLatency must be between 1ms and 10m"
	RequestLatency metav1.Duration `json:"requestLatency"`

	// utilizationPercent is the share of the pool that admitted visitors may use; the rest is the
	// safety margin for other traffic and latency spikes. Between 1 and 100. Defaults to 70.
	// +optional
	// +kubebuilder:default=70
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	UtilizationPercent *int32 `json:"utilizationPercent,omitempty"`

	// batchSizeOverride, when set, admits exactly this many visitors per tick instead of the number
	// derived from the pool. Between 1 and 1,000,000.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	BatchSizeOverride *int32 `json:"batchSizeOverride,omitempty"`

	// maxActive, when set, caps the visitors holding an active pass (admitted, not expired, not
	// released): each tick admits at most maxActive minus the active ones, so capacity is a rate and
	// a concurrency. The workload frees a slot by ending the session (see pass). Between 1 and
	// 10,000,000; unset means no cap.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000000
	MaxActive *int32 `json:"maxActive,omitempty"`

	// mode is Declared (admit at the plan derived from this spec) or Adaptive (the plan is the
	// ceiling: the proxies measure (behind a gateway, the workload tells on its releases: Herdgate-Held-Ms)
	// the protected requests' latency, requests in flight, errors and
	// the visitors who never use their pass, and the rate follows what the workload takes, between
	// minAdmissionsPerSecond and the plan; to make up for no-shows it may rise to the pool's full
	// rate, poolSize ÷ requestLatency, and no further). Defaults to Declared.
	// +optional
	// +kubebuilder:default=Declared
	Mode CapacityMode `json:"mode,omitempty"`

	// minAdmissionsPerSecond is the floor of an Adaptive rate: however slow or failing the workload,
	// the queue keeps moving at this rate. A floor above the plan's rate is the plan's rate (the plan is
	// the most an Adaptive rate admits while everyone comes). Between 0 and 1,000,000. Unset means a
	// tenth of the plan's rate.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	MinAdmissionsPerSecond *int32 `json:"minAdmissionsPerSecond,omitempty"`
}

// CapacityMode says whether the admission rate follows the workload.
// +kubebuilder:validation:Enum=Declared;Adaptive
type CapacityMode string

const (
	// CapacityDeclared admits at the plan derived from the declared capacity.
	CapacityDeclared CapacityMode = "Declared"
	// CapacityAdaptive admits at what the measured workload takes, the declared plan its ceiling.
	CapacityAdaptive CapacityMode = "Adaptive"
)

// JitterMode says how the admissions of one tick are spread in time.
// +kubebuilder:validation:Enum=Uniform;None
type JitterMode string

const (
	// JitterUniform spreads each admission's not-before time uniformly over the jitter window.
	JitterUniform JitterMode = "Uniform"
	// JitterNone makes every admission of a tick valid at once.
	JitterNone JitterMode = "None"
)

// JitterSpec spreads the admissions of one tick over a window.
type JitterSpec struct {
	// mode is Uniform (spread each tick's admissions uniformly over window) or None (all at once).
	// Defaults to Uniform.
	// +optional
	// +kubebuilder:default=Uniform
	Mode JitterMode `json:"mode,omitempty"`

	// window is the time over which one tick's admissions are spread. At most tick. Defaults to tick.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	Window *metav1.Duration `json:"window,omitempty"`
}

// PassSpec configures the pass of an admitted visitor.
//
// +kubebuilder:validation:XValidation:rule="!has(self.maxSession) || duration(self.maxSession) >= duration(has(self.ttl) ? self.ttl : '5m')",message="pass.maxSession must not be shorter than pass.ttl",fieldPath=".maxSession"
// +kubebuilder:validation:XValidation:rule="!has(self.algorithm) || (has(self.format) && self.format == 'JWT')",message="pass.algorithm applies to format JWT only",fieldPath=".algorithm"
// +kubebuilder:validation:XValidation:rule="!has(self.keyRotation) || (has(self.format) && self.format == 'JWT')",message="pass.keyRotation applies to format JWT only",fieldPath=".keyRotation"
// +kubebuilder:validation:XValidation:rule="!(has(self.format) && self.format == 'JWT' && has(self.renewal) && self.renewal == 'Sliding')",message="pass.renewal Sliding needs format HMAC: a gateway verifying a JWT pass cannot see it renewed",fieldPath=".renewal"
type PassSpec struct {
	// format is HMAC (herdgate's compact pass, which only herdgate verifies: the fastest) or JWT (a
	// JSON Web Token signed with the queue's rotating keys, which gateways verify on their own with
	// the keys published at /.herdgate/jwks.json and in the ConfigMap <name>-herdgate-pass-keys).
	// Defaults to HMAC.
	// +optional
	// +kubebuilder:default=HMAC
	Format PassFormat `json:"format,omitempty"`

	// algorithm signs JWT passes: ES256 (gateways verify with a public key; the default) or HS256
	// (faster, but whatever verifies holds the signing key: it is published in the Secret
	// <name>-herdgate-pass-keys, never in the ConfigMap).
	// +optional
	Algorithm PassAlgorithm `json:"algorithm,omitempty"`

	// keyRotation is how long one key signs JWT passes. The next key is published this long before
	// its turn, and a retired key is published until every pass it signed has expired. Between 1h and
	// 2160h (90 days). Defaults to 168h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h') && duration(self) <= duration('2160h')",message="pass.keyRotation must be between 1h and 2160h"
	KeyRotation *metav1.Duration `json:"keyRotation,omitempty"`

	// ttl is how long a pass stays valid after its not-before time. Between 10s and 24h. Defaults to 5m.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('24h')",message="pass.ttl must be between 10s and 24h"
	TTL *metav1.Duration `json:"ttl,omitempty"`

	// renewal is Fixed (a pass lasts ttl from its not-before time) or Sliding (each request with the
	// pass extends it to ttl from then, up to maxSession after its not-before time). Defaults to Fixed.
	// +optional
	// +kubebuilder:default=Fixed
	Renewal PassRenewal `json:"renewal,omitempty"`

	// maxSession bounds a Sliding pass: it never lasts longer than this after its not-before time.
	// At least ttl and at most 24h. Defaults to 1h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('24h')",message="pass.maxSession must be at most 24h"
	MaxSession *metav1.Duration `json:"maxSession,omitempty"`

	// completionRoutes end the visitor's session: once the workload answers a request with a valid
	// pass to one of them with a 2xx or 3xx status, the pass is released, as the Herdgate-Release
	// response header releases it. At most 8 routes, written like protectedRoutes.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	CompletionRoutes []ProtectedRoute `json:"completionRoutes,omitempty"`

	// releaseKeySecretRef names a key, at least 16 bytes, with which the workload ends sessions from
	// its own servers: POST /.herdgate/release with "Authorization: Bearer <key>" and the
	// Herdgate-Session handle its requests carried (see docs/reference/http-contract.md). It is the
	// Herdgate-Release response header for a gateway, which never shows the workload's answers to
	// herdgate. Unset, no request carries a handle and the endpoint answers 404.
	// +optional
	ReleaseKeySecretRef *SecretValueRef `json:"releaseKeySecretRef,omitempty"`
}

// PassFormat is the form of a pass.
// +kubebuilder:validation:Enum=HMAC;JWT
type PassFormat string

const (
	// PassFormatHMAC is herdgate's compact pass, verified by herdgate only.
	PassFormatHMAC PassFormat = "HMAC"
	// PassFormatJWT is a JWT pass gateways verify on their own.
	PassFormatJWT PassFormat = "JWT"
)

// PassAlgorithm signs JWT passes.
// +kubebuilder:validation:Enum=ES256;HS256
type PassAlgorithm string

const (
	// PassAlgorithmES256 is ECDSA on P-256 with SHA-256.
	PassAlgorithmES256 PassAlgorithm = "ES256"
	// PassAlgorithmHS256 is HMAC with SHA-256.
	PassAlgorithmHS256 PassAlgorithm = "HS256"
)

// PassRenewal says whether activity extends a pass.
// +kubebuilder:validation:Enum=Fixed;Sliding
type PassRenewal string

const (
	// RenewalFixed: a pass lasts ttl from its not-before time, whatever the visitor does.
	RenewalFixed PassRenewal = "Fixed"
	// RenewalSliding: each request with the pass extends it to ttl from then, up to maxSession.
	RenewalSliding PassRenewal = "Sliding"
)

// PollingSpec bounds the poll interval the proxy hands to waiting visitors. Visitors near the front
// poll every minInterval; the others in proportion to their estimated wait, up to maxInterval.
// A poll sooner than the proxy allowed is answered 429 and keeps the visitor's place.
//
// +kubebuilder:validation:XValidation:rule="!has(self.minInterval) || !has(self.maxInterval) || duration(self.minInterval) <= duration(self.maxInterval)",message="polling.minInterval must not be longer than polling.maxInterval",fieldPath=".minInterval"
type PollingSpec struct {
	// minInterval is the shortest poll interval, used near the front of the queue.
	// Between 100ms and 10m. Defaults to 500ms.
	// +optional
	// +kubebuilder:default="500ms"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('10m')",message="polling.minInterval must be between 100ms and 10m"
	MinInterval *metav1.Duration `json:"minInterval,omitempty"`

	// maxInterval is the longest poll interval, used far back in the queue.
	// Between 100ms and 10m. Defaults to 5s.
	// +optional
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('10m')",message="polling.maxInterval must be between 100ms and 10m"
	MaxInterval *metav1.Duration `json:"maxInterval,omitempty"`

	// budget is the most status polls per second the queue's waiting visitors may cost together, on
	// average, whatever the depth: beyond the depth where polling every maxInterval would cost more,
	// visitors far from the front are told to poll less often (every half of their estimated wait at
	// most, so that nobody misses a turn, and within half of abandonAfter), while the front keeps
	// minInterval. status.polling shows the interval in force and the deepest queue the budget holds
	// with this abandonAfter. Between 1 and 10,000,000. Defaults to 20000, which a status call's cost
	// in Redis (docs/performance.md) keeps under half of one core.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000000
	Budget *int32 `json:"budget,omitempty"`

	// exactPositions is how far from the front positions are exact: a proxy asks Redis where such a
	// visitor stands at every poll. Further back it answers from its own snapshot of the queue (its
	// visitors bring their arrival number, signed, in the herdgate_place cookie or the
	// Herdgate-Place header) and records their signs of life in one call per tick, so that the
	// deepest queues cost Redis little; such a position is never below the exact one and, the
	// snapshot being at most a few seconds old, within a few percent of it. Between 5000 (twenty
	// ticks at the most a tick admits) and 100,000,000. Defaults to 10000.
	// +optional
	// +kubebuilder:validation:Minimum=5000
	// +kubebuilder:validation:Maximum=100000000
	ExactPositions *int32 `json:"exactPositions,omitempty"`
}

// UpstreamSpec names the workload: where the admission proxy forwards requests with enforcement
// Proxy, and the Service `herd gateway-config` routes to with enforcement Gateway, where herdgate
// forwards nothing. Exactly one of service or url is set.
//
// +kubebuilder:validation:XValidation:rule="has(self.service) != has(self.url)",message="exactly one of upstream.service or upstream.url must be set"
type UpstreamSpec struct {
	// service is a Service in the WaitingQueue's namespace.
	// +optional
	Service *ServiceUpstream `json:"service,omitempty"`

	// url is an absolute http or https URL, for a workload outside the namespace or the cluster, for
	// example "https://orders.example:8443" or "http://10.0.0.7:8080/base" (the request path is
	// appended to the URL's). It holds no credentials, query or fragment; its host is an IP address
	// or a DNS name (RFC 1123), and its port, when it names one, is between 1 and 65535, without
	// leading zeros.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHost() != ''",message="upstream.url must be an absolute http or https URL"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[^:/?#]*://[^/?#]*@')",message="upstream.url must not hold credentials (user:password@): they would sit in the resource in plain text"
	// +kubebuilder:validation:XValidation:rule="!self.contains('?') && !self.contains('#')",message="upstream.url must not hold a query or fragment: the visitor's own query is what goes upstream"
	// +kubebuilder:validation:XValidation:rule=`self.matches('^[^:/?#]*://(\\[[^\\]/?#@]*\\]|[^:/?#@\\[\\]]*)(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?([/?#]|$)')`,message="upstream.url port, when it names one, must be between 1 and 65535, without leading zeros"
	// +kubebuilder:validation:XValidation:rule=`self.matches('^[^:/?#]*://(\\[[0-9a-fA-F:.]+\\]|[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?(\\.[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)*)(:[0-9]*)?([/?#]|$)') && !self.matches('^[^:/?#]*://[^:/?#\\[]{254}')`,message="upstream.url host must be an IP address or a DNS name: labels of 1 to 63 letters, digits and '-', neither first nor last a '-', 253 characters in all"
	URL *string `json:"url,omitempty"`
}

// ServiceUpstream names a Service port in the WaitingQueue's namespace.
type ServiceUpstream struct {
	// name is the name of the Service.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// port is the Service port to forward to. Between 1 and 65535.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// HTTPMethod is an HTTP request method, in upper case.
// +kubebuilder:validation:Enum=GET;HEAD;POST;PUT;PATCH;DELETE;OPTIONS
type HTTPMethod string

// RoutePath is a path a route or a bypass lane matches: absolute and already normalised, as the proxy
// matches requests, with no "//", "." or ".." segments, no trailing "/", no backslash, ";", "%", "?",
// "#" or control character. One rule for every field of this type; the proxy's own check mirrors it
// (internal/route).
// +kubebuilder:validation:MaxLength=1024
// +kubebuilder:validation:XValidation:rule=`self.startsWith('/') && !self.matches('[[:cntrl:]]') && !self.contains('\x5c') && !self.contains('//') && !self.matches('(^|/)[.][.]?(/|$)') && (self == '/' || !self.endsWith('/')) && !self.contains(';') && !self.contains('%') && !self.contains('?') && !self.contains('#')`,message="path must be absolute and normalised: it starts with '/' and has no control character, '//', '.' or '..' segment, trailing '/', backslash, ';', '%', '?' or '#'"
type RoutePath string

// ProtectedRoute selects requests that need a valid pass: one of the methods and a path that is
// either exactly path or starts with pathPrefix. Exactly one of path or pathPrefix is set.
//
// +kubebuilder:validation:XValidation:rule="has(self.path) != has(self.pathPrefix)",message="exactly one of path or pathPrefix must be set"
type ProtectedRoute struct {
	// methods are the request methods this route covers, in upper case. Defaults to [POST].
	// +optional
	// +listType=set
	// +kubebuilder:default={POST}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=7
	Methods []HTTPMethod `json:"methods,omitempty"`

	// path matches a request whose normalised path equals it, for example "/api/v1/orders".
	// It must be absolute and already normalised, as the proxy matches requests: no "//", "." or ".."
	// segments, no trailing "/", no backslash, ";", "%", "?", "#" or control character.
	// +optional
	Path *RoutePath `json:"path,omitempty"`

	// pathPrefix matches a request whose normalised path is pathPrefix or lies below it: "/api/orders"
	// matches "/api/orders" and "/api/orders/42" but not "/api/orders-archive". It must be absolute
	// and already normalised, like path.
	// +optional
	PathPrefix *RoutePath `json:"pathPrefix,omitempty"`

	// host limits the route to requests for this host (the Host header, or the host the gateway names
	// in its check), compared without a port, a final dot or regard to letter case: one room may
	// protect routes on several hosts. A route without host matches whatever the host. A lower-case
	// DNS name without a port, for example "shop.example".
	// +optional
	Host *Hostname `json:"host,omitempty"`

	// exactCase matches path or pathPrefix letter for letter. By default a route matches whatever the
	// letter case of the request ("/API/V1/Orders" is "/api/v1/orders"), because many servers route
	// without regard to it and a gate that did not would let such spellings through without a pass.
	// Set it only for an upstream known to route by exact case.
	// +optional
	ExactCase bool `json:"exactCase,omitempty"`
}

// IdentitySpec says how the proxy tells visitors apart.
type IdentitySpec struct {
	// header names a request header, set by a trusted gateway in front of the proxy, whose value
	// identifies the visitor (for example a user ID). Requests without it get 401. When unset, the
	// proxy issues each visitor an anonymous ID in a signed cookie. Only set this when every request
	// reaches the proxy through a gateway that overwrites the header. Headers that cannot identify a
	// visitor are refused: Host, Cookie, Authorization, hop-by-hop and forwarding headers, request
	// metadata (User-Agent, Accept*, If-*, Content-*, Sec-*, ...) and herdgate's own.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][-A-Za-z0-9]*$`
	// +kubebuilder:validation:XValidation:rule="!(self.lowerAscii() in ['host', 'cookie', 'set-cookie', 'authorization', 'proxy-authorization', 'www-authenticate', 'connection', 'keep-alive', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'expect', 'forwarded', 'via', 'x-real-ip', 'x-http-method-override', 'x-http-method', 'x-method-override', 'user-agent', 'referer', 'origin', 'range', 'date', 'pragma', 'cache-control', 'max-forwards', 'dnt', 'priority', 'early-data']) && !['content-', 'x-forwarded-', 'proxy-', 'x-herdgate-', 'herdgate-', 'sec-', 'accept', 'if-'].exists(p, self.lowerAscii().startsWith(p))",message="identity.header cannot identify a visitor: Host, Cookie, Authorization, hop-by-hop and forwarding headers, request metadata (User-Agent, Referer, Origin, Range, Accept*, If-*, Content-*, Sec-*) and herdgate's own headers are refused"
	Header string `json:"header,omitempty"`
}

// RedisSpec selects the Redis that holds a queue.
type RedisSpec struct {
	// secretRef points at a key of a Secret in the WaitingQueue's namespace whose value is a Redis
	// URL: redis://[user:password@]host:port[/db] for one server, rediss:// for TLS,
	// redis+cluster://host:port?addr=host2:port (or rediss+cluster://) for a Redis Cluster, and
	// redis+sentinel://[user:password@]host:26379,host2:26379/master (or rediss+sentinel://) for a
	// primary that Sentinels watch. When unset, the manager's Redis (its --redis-url) holds the queue.
	// +optional
	SecretRef *SecretKeyRef `json:"secretRef,omitempty"`

	// durability says whether the queue's writes wait for a replica. Async (the default) answers as
	// soon as the primary has a write; a failover can lose the last writes, which the proxies give
	// back (docs/guides/redis.md). Replicated waits, after the calls that take places and admit,
	// until a replica holds them (WAIT 1), for at most 100ms; a write no replica acknowledged in time
	// stands and is counted in herdgate_redis_unacknowledged_writes_total. It narrows what a
	// failover loses at a measured cost (docs/performance.md); with no replica it only adds the wait.
	// +optional
	// +kubebuilder:default=Async
	Durability RedisDurability `json:"durability,omitempty"`
}

// RedisDurability says whether a queue's writes wait for a replica.
// +kubebuilder:validation:Enum=Async;Replicated
type RedisDurability string

const (
	// RedisDurabilityAsync answers once the primary has a write.
	RedisDurabilityAsync RedisDurability = "Async"
	// RedisDurabilityReplicated waits, for a bounded time, until a replica has the write.
	RedisDurabilityReplicated RedisDurability = "Replicated"
)

// SecretKeyRef names one key of a Secret in the same namespace.
type SecretKeyRef struct {
	// name is the name of the Secret: a DNS subdomain (lower-case letters, digits, '-' and '.').
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// key is the key within the Secret. Defaults to "url".
	// +optional
	// +kubebuilder:default=url
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// WaitingQueue puts a virtual waiting room in front of a workload: visitors join a FIFO queue, a
// scheduler admits them at the rate the workload's bottleneck can take, and an admission proxy lets
// only admitted visitors reach the protected routes.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wq,categories=herdgate
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 50 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label (lower-case letters, digits and '-', starting with a letter) of at most 50 characters, because the waiting room's Service is named after it"
// +kubebuilder:printcolumn:name="Batch",type=integer,JSONPath=`.status.plan.batchSize`,description="Visitors admitted per tick"
// +kubebuilder:printcolumn:name="Rate",type=string,JSONPath=`.status.plan.admissionsPerSecond`,description="Planned admissions per second"
// +kubebuilder:printcolumn:name="Depth",type=integer,JSONPath=`.status.queueDepth`,description="Visitors waiting"
// +kubebuilder:printcolumn:name="Admitted/s",type=string,JSONPath=`.status.admittedPerSecond`,description="Observed admissions per second over the last 10s"
// +kubebuilder:printcolumn:name="Last Busy/s",type=string,JSONPath=`.status.lastBusy.admittedPerSecond`,description="Admissions per second over the room's last busy spell",priority=1
// +kubebuilder:printcolumn:name="Active",type=integer,JSONPath=`.status.activeVisitors`,description="Visitors holding an active pass",priority=1
// +kubebuilder:printcolumn:name="Max Active",type=integer,JSONPath=`.status.maxActive`,description="The cap on active visitors",priority=1
// +kubebuilder:printcolumn:name="Released/s",type=string,JSONPath=`.status.releasedPerSecond`,description="Passes released per second before they expired",priority=1
// +kubebuilder:printcolumn:name="Enforcement",type=string,JSONPath=`.spec.enforcement`,description="Proxy, or Gateway: the platform's gateway enforces the room",priority=1
// +kubebuilder:printcolumn:name="Checks/s",type=string,JSONPath=`.status.gatewayChecksPerSecond`,description="Gateway rooms: checks per second the gateways asked",priority=1
// +kubebuilder:printcolumn:name="Adapted",type=string,JSONPath=`.status.workload.reason`,description="Why an Adaptive rate differs from the plan",priority=1
// +kubebuilder:printcolumn:name="Latency p95",type=string,JSONPath=`.status.workload.latencyP95`,description="Upstream latency of protected requests, as the proxies measure it",priority=1
// +kubebuilder:printcolumn:name="Estimate p90",type=string,JSONPath=`.status.workload.waitEstimateErrorP90Percent`,description="How far off the first waits told were, in percent, at the 90th percentile over 5 minutes",priority=1
// +kubebuilder:printcolumn:name="Figures",type=date,JSONPath=`.status.liveFiguresTime`,description="When the live figures (depth, active, rates) last changed",priority=1
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.conditions[?(@.type=="Open")].reason`,description="Open, Passthrough or Closed"
// +kubebuilder:printcolumn:name="Event",type=string,JSONPath=`.status.event`,description="The event of the room's calendar in force (spec.events)",priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WaitingQueue struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the protected workload's bottleneck and the waiting room's behaviour.
	// +required
	Spec WaitingQueueSpec `json:"spec"`

	// status is the observed state of the queue.
	// +optional
	Status WaitingQueueStatus `json:"status,omitempty"`
}

// WaitingQueueList is a list of WaitingQueues.
//
// +kubebuilder:object:root=true
type WaitingQueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WaitingQueue `json:"items"`
}

// EntrySpec bounds the places visitors take.
type EntrySpec struct {
	// perClient limits the places one client address takes: a token bucket of burst places that
	// refills at perMinute. Over it, enter answers 429 with Retry-After; places already held are kept.
	// Unset: no limit.
	// +optional
	PerClient *PerClientLimit `json:"perClient,omitempty"`

	// trustedProxies are the CIDRs of the load balancers in front of the proxy, such as
	// "10.0.0.0/8". When a request comes from one, the client is the last X-Forwarded-For hop that
	// is not itself trusted; otherwise the client is the connection's peer and X-Forwarded-For is
	// ignored. At most 32.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	TrustedProxies []CIDR `json:"trustedProxies,omitempty"`

	// invitation, when set, lets only visitors who bring an invitation enter: a token the site signs
	// for a user it has verified (a JWT signed with HMAC-SHA256; see docs/guides/entry-control.md).
	// Enter without one answers 401, with a bad, expired or another queue's one 403.
	// +optional
	Invitation *InvitationSpec `json:"invitation,omitempty"`

	// challenge, when set, asks every entry to solve a challenge first: a proof of work the waiting
	// page solves in the browser, or an external challenge (a CAPTCHA-style provider verified
	// server-side). Status polls and passes are not challenged.
	// +optional
	Challenge *ChallengeSpec `json:"challenge,omitempty"`

	// shadowQueue puts entries that look like bots in a queue that never admits, instead of refusing
	// them: they see an ordinary waiting page and positions, and keep polling a place that never
	// comes up, rather than retrying at once with what a refusal taught them. Off by default; at
	// least one of its triggers must be set. A malformed or missing proof never sends anyone there.
	// Shadowed visitors are counted in metrics, never in the room's depth, rates or positions.
	// +optional
	ShadowQueue *ShadowQueueSpec `json:"shadowQueue,omitempty"`
}

// ShadowQueueSpec says which entries go to the shadow queue.
// +kubebuilder:validation:XValidation:rule="(has(self.challengeFailed) && self.challengeFailed) || has(self.overEntryLimitFactor)",message="shadowQueue needs challengeFailed or overEntryLimitFactor"
type ShadowQueueSpec struct {
	// challengeFailed: an entry whose challenge verdict is an explicit failure (a proof of work whose
	// nonce does not solve a challenge this room issued, or an external provider's answer that the
	// response failed) goes to the shadow queue. A missing, malformed or expired proof, and a
	// provider that could not be asked, are refused as before. Needs entry.challenge.
	// +optional
	ChallengeFailed bool `json:"challengeFailed,omitempty"`

	// overEntryLimitFactor: a client that asks for this many times the places entry.perClient lets
	// it take (its burst) before the bucket refills sends its further entries to the shadow queue;
	// below that they are refused with 429 as before. Between 2 and 100. Needs entry.perClient.
	// +optional
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=100
	OverEntryLimitFactor *int32 `json:"overEntryLimitFactor,omitempty"`
}

// SecretValueRef names one key of a Secret in the WaitingQueue's namespace. The operator copies the
// value into the queue's own Secret, which the proxy pods mount (they have no access to Secrets
// through the API); a change reaches the proxies within about two minutes (the operator's resync and
// the kubelet's refresh of the mount). While the Secret or key is missing the queue keeps the value
// it copied last, and its Programmed condition says what is missing.
type SecretValueRef struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="name must be a Secret name: lower-case letters, digits, '-' and '.'"
	Name string `json:"name"`

	// key of the value in the Secret's data.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$') && self != '.' && self != '..'",message="key must be a Secret data key: letters, digits, '-', '_' and '.'"
	Key string `json:"key"`
}

// InvitationSpec says how invitations are checked.
type InvitationSpec struct {
	// keySecretRef names the HMAC-SHA256 key, at least 32 bytes, the site signs invitations with.
	// +required
	KeySecretRef SecretValueRef `json:"keySecretRef"`

	// singleUse lets an invitation enter one visitor only: the first that enters with it (that
	// visitor may present it again); any other gets 409. Defaults to false.
	// +optional
	SingleUse bool `json:"singleUse,omitempty"`
}

// ChallengeSpec is the challenge an entry solves first: exactly one of proofOfWork or external.
// +kubebuilder:validation:XValidation:rule="has(self.proofOfWork) != has(self.external)",message="challenge needs exactly one of proofOfWork or external"
type ChallengeSpec struct {
	// proofOfWork asks the client for a nonce that makes a SHA-256 hash start with difficulty zero
	// bits (see docs/guides/entry-control.md); the waiting page solves it with WebCrypto.
	// +optional
	ProofOfWork *ProofOfWorkSpec `json:"proofOfWork,omitempty"`

	// external verifies a token that a CAPTCHA-style widget gave the client, by a server-side call in
	// the style of Turnstile's or hCaptcha's siteverify. The built-in waiting page cannot show a
	// widget: use it with a page of your own (spec.page) or an API client.
	// +optional
	External *ExternalChallengeSpec `json:"external,omitempty"`
}

// ProofOfWorkSpec is the built-in challenge.
// +kubebuilder:validation:XValidation:rule="!has(self.maxDifficulty) || self.maxDifficulty >= self.difficulty",message="proofOfWork.maxDifficulty must be at least proofOfWork.difficulty"
// +kubebuilder:validation:XValidation:rule="has(self.raiseAbove) || !has(self.maxDifficulty)",message="proofOfWork.maxDifficulty needs proofOfWork.raiseAbove"
type ProofOfWorkSpec struct {
	// difficulty is how many leading zero bits the hash needs: each one doubles the work, about
	// 2^difficulty hashes on average. Between 1 and 24; defaults to 16.
	// +optional
	// +kubebuilder:default=16
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=24
	Difficulty int32 `json:"difficulty,omitempty"`

	// raiseAbove raises the difficulty while this proxy replica takes more entries per second than
	// this: one bit more for each doubling above it, up to maxDifficulty. Unset: never raised.
	// Between 1 and 1000000.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	RaiseAbove *int32 `json:"raiseAbove,omitempty"`

	// maxDifficulty bounds the raised difficulty. At most 24; defaults to difficulty + 4.
	// +optional
	// +kubebuilder:validation:Maximum=24
	MaxDifficulty *int32 `json:"maxDifficulty,omitempty"`
}

// ExternalChallengeSpec is a challenge verified by a provider.
type ExternalChallengeSpec struct {
	// verifyURL is the provider's verification endpoint, such as
	// https://challenges.cloudflare.com/turnstile/v0/siteverify. The proxy POSTs it a form with
	// secret, response and remoteip and admits the entry when the JSON answer has "success": true.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="verifyURL must be an absolute http or https URL"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[^:/?#]*://[^/?#]*@')",message="verifyURL must not hold credentials (user:password@): they would sit in the resource in plain text; the secret goes in secretKeyRef"
	// +kubebuilder:validation:XValidation:rule="!self.contains('?') && !self.contains('#')",message="verifyURL must not hold a query or fragment"
	// +kubebuilder:validation:XValidation:rule=`self.matches('^[^:/?#]*://(\\[[^\\]/?#@]*\\]|[^:/?#@\\[\\]]*)(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?([/?#]|$)')`,message="verifyURL port, when it names one, must be between 1 and 65535, without leading zeros"
	// +kubebuilder:validation:XValidation:rule=`self.matches('^[^:/?#]*://(\\[[0-9a-fA-F:.]+\\]|[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?(\\.[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)*)(:[0-9]*)?([/?#]|$)') && !self.matches('^[^:/?#]*://[^:/?#\\[]{254}')`,message="verifyURL host must be an IP address or a DNS name: labels of 1 to 63 letters, digits and '-', neither first nor last a '-', 253 characters in all"
	VerifyURL string `json:"verifyURL"`

	// secretKeyRef names the secret key the provider gave the site.
	// +required
	SecretKeyRef SecretValueRef `json:"secretKeyRef"`

	// timeout bounds one verification call; an entry whose verification does not answer in time
	// gets 503. Between 100ms and 30s; defaults to 3s.
	// +optional
	// +kubebuilder:default="3s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('30s')",message="external.timeout must be between 100ms and 30s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// PageSpec is the waiting page.
type PageSpec struct {
	// template names a ConfigMap key holding the page as a Go html/template;
	// docs/guides/waiting-page.md lists its variables. The operator checks it by rendering it for every phase: a
	// template that fails keeps the page in force (the built-in one at first) and sets Programmed to
	// False with reason PageTemplateInvalid, naming the error. Unset: the built-in page, in English or
	// Korean as the browser's Accept-Language asks.
	// +optional
	Template *ConfigMapValueRef `json:"template,omitempty"`

	// message is shown on the waiting page and returned as "notice" by enter and status: edit it
	// live, and visitors see it at their next poll. At most 500 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=500
	Message string `json:"message,omitempty"`

	// queueingStatusCode is the HTTP status of the answers a visitor gets while it waits: enter and
	// status with a position (or a pre-queue place), and the waiting page without JavaScript. 202
	// (accepted, not done yet) or 429 (too many requests) make API clients, crawlers and monitors see
	// that the request did not go through; the body is the same. Set to any of 200, 202 or 429, every
	// such answer also carries Retry-After: the seconds until the visitor may ask again (nextPollMs,
	// rounded up). Unset: 200, without Retry-After.
	// +optional
	// +kubebuilder:validation:Enum=200;202;429
	QueueingStatusCode *int32 `json:"queueingStatusCode,omitempty"`
}

// ConfigMapValueRef names one key of a ConfigMap in the WaitingQueue's namespace. The operator copies
// the value into the queue's Secret, which the proxy pods mount; a change reaches the proxies within
// about two minutes.
type ConfigMapValueRef struct {
	// name of the ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="name must be a ConfigMap name: lower-case letters, digits, '-' and '.'"
	Name string `json:"name"`

	// key of the value in the ConfigMap's data.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$') && self != '.' && self != '..'",message="key must be a ConfigMap data key: letters, digits, '-', '_' and '.'"
	Key string `json:"key"`
}

// BypassRule is one bypass lane: exactly one of sourceCIDRs, header, path or pathPrefix.
// +kubebuilder:validation:XValidation:rule="[has(self.sourceCIDRs), has(self.header), has(self.path), has(self.pathPrefix)].filter(x, x).size() == 1",message="a bypass rule needs exactly one of sourceCIDRs, header, path or pathPrefix"
type BypassRule struct {
	// name names the rule in the metrics.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="bypass name must be lower-case letters, digits and '-'"
	Name string `json:"name"`

	// sourceCIDRs match requests whose client (the connection's peer, or behind
	// entry.trustedProxies the client they name) lies in one of them. At most 32.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	SourceCIDRs []CIDR `json:"sourceCIDRs,omitempty"`

	// header matches requests that carry the header with the value a Secret holds. The header is
	// removed before the request goes upstream.
	// +optional
	Header *BypassHeader `json:"header,omitempty"`

	// path matches requests whose normalised path equals it, whatever the letter case, like a
	// protected route's path.
	// +optional
	Path *RoutePath `json:"path,omitempty"`

	// pathPrefix matches requests whose normalised path is it or lies below it, whatever the letter
	// case, like a protected route's pathPrefix.
	// +optional
	PathPrefix *RoutePath `json:"pathPrefix,omitempty"`
}

// Event is a time window of the room's calendar, with the settings it overrides.
// +kubebuilder:validation:XValidation:rule="timestamp(self.start) < timestamp(self.end)",message="an event's start must be before its end",fieldPath=".end"
// +kubebuilder:validation:XValidation:rule="!has(self.preQueueFrom) || timestamp(self.preQueueFrom) < timestamp(self.start)",message="an event's preQueueFrom must be before its start",fieldPath=".preQueueFrom"
// +kubebuilder:validation:XValidation:rule="!has(self.preQueueFrom) || timestamp(self.preQueueFrom) + duration('24h') >= timestamp(self.start)",message="an event's preQueueFrom must be at most 24h before its start",fieldPath=".preQueueFrom"
type Event struct {
	// name names the event in status, Events and kubectl herdgate events: lower-case letters, digits
	// and '-', at most 63.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="event name must be lower-case letters, digits and '-'"
	Name string `json:"name"`

	// start is when the event's settings take over, in RFC 3339 like schedule.opensAt; with
	// preQueueFrom, when its pre-queue is drawn and admissions begin.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	// +kubebuilder:validation:XValidation:rule="self >= timestamp('1970-01-01T00:00:00Z') && self < timestamp('9000-01-01T00:00:00Z')",message="must lie between the years 1970 and 9000"
	Start metav1.Time `json:"start"`

	// end is when the room goes back to its own settings, in RFC 3339; after start. Visitors still in
	// the queue then are admitted at the room's own rate.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	// +kubebuilder:validation:XValidation:rule="self >= timestamp('1970-01-01T00:00:00Z') && self < timestamp('9000-01-01T00:00:00Z')",message="must lie between the years 1970 and 9000"
	End metav1.Time `json:"end"`

	// preQueueFrom, when set, makes the event a launch: from it until start visitors take pre-queue
	// places, drawn at start. At least one tick and at most 24h before start. A pass issued before it
	// opens nothing during the event.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	// +kubebuilder:validation:XValidation:rule="self >= timestamp('1970-01-01T00:00:00Z') && self < timestamp('9000-01-01T00:00:00Z')",message="must lie between the years 1970 and 9000"
	PreQueueFrom *metav1.Time `json:"preQueueFrom,omitempty"`

	// capacity overrides the room's capacity fields during the event: any of poolSize,
	// requestLatency, utilizationPercent and batchSizeOverride; the others come from the room.
	// +optional
	Capacity *EventCapacity `json:"capacity,omitempty"`

	// maxActive overrides spec.capacity.maxActive during the event; 0 lifts the room's cap.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000000
	MaxActive *int32 `json:"maxActive,omitempty"`

	// page overrides the waiting page's template and notice during the event.
	// +optional
	Page *EventPage `json:"page,omitempty"`

	// session overrides how long a pass lasts during the event (spec.pass.ttl and maxSession).
	// +optional
	Session *EventSession `json:"session,omitempty"`

	// draw overrides spec.draw for the event's launch (with preQueueFrom).
	// +optional
	Draw *DrawSpec `json:"draw,omitempty"`
}

// DrawSeedSource says where the seed of a pre-queue's draw comes from.
// +kubebuilder:validation:Enum=CommitReveal;Beacon
type DrawSeedSource string

const (
	// DrawSeedCommitReveal draws with the room's secret seed, whose SHA-256 status publishes before
	// the pre-queue opens and which status reveals at the draw. Whoever reads the room's Secret
	// knows the order before the pre-queue freezes.
	DrawSeedCommitReveal DrawSeedSource = "CommitReveal"
	// DrawSeedBeacon draws with a seed made of that secret and a round of a public randomness
	// beacon published after the pre-queue froze: nobody knows the order before the freeze.
	DrawSeedBeacon DrawSeedSource = "Beacon"
)

// DrawSpec is where the seed of a pre-queue's draw comes from.
// +kubebuilder:validation:XValidation:rule="(has(self.seedSource) && self.seedSource == 'Beacon') == has(self.beacon)",message="beacon is set with seedSource Beacon, and only then",fieldPath=".beacon"
type DrawSpec struct {
	// seedSource is CommitReveal (the default) or Beacon: with Beacon, the room commits to the
	// first round of the beacon's chain published after the pre-queue freezes at opening, waits for
	// it, checks its BLS signature with the chain's public key, and draws with HMAC-SHA256 of the
	// room's committed secret over the round's randomness. If the round does not come, or does not
	// verify, within beacon.maxWait, the draw falls back to the committed secret alone, and status,
	// an Event and kubectl herdgate draw verify say so.
	// +optional
	SeedSource DrawSeedSource `json:"seedSource,omitempty"`

	// beacon is the randomness beacon, with seedSource Beacon.
	// +optional
	Beacon *BeaconSpec `json:"beacon,omitempty"`
}

// BeaconSpec names a public randomness beacon in the drand format and how long a draw waits for it.
type BeaconSpec struct {
	// url is the base address of the beacon's HTTP API, which serves <url>/<chainHash>/info and
	// <url>/<chainHash>/public/<round>: a drand relay, or a mirror of one the cluster can reach.
	// The chain hash makes a mirror safe: it can serve the chain, or nothing, never another one.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="url must be an absolute http or https URL"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[^:/?#]*://[^/?#]*@')",message="url must not hold credentials (user:password@)"
	// +kubebuilder:validation:XValidation:rule="!self.contains('?') && !self.contains('#')",message="url must not hold a query or fragment"
	// +kubebuilder:validation:XValidation:rule=`self.matches('^[^:/?#]*://(\\[[^\\]/?#@]*\\]|[^:/?#@\\[\\]]*)(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?([/?#]|$)')`,message="url port, when it names one, must be between 1 and 65535, without leading zeros"
	// +kubebuilder:validation:XValidation:rule=`self.matches('^[^:/?#]*://(\\[[0-9a-fA-F:.]+\\]|[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?(\\.[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)*)(:[0-9]*)?([/?#]|$)') && !self.matches('^[^:/?#]*://[^:/?#\\[]{254}')`,message="url host must be an IP address or a DNS name: labels of 1 to 63 letters, digits and '-', neither first nor last a '-', 253 characters in all"
	URL string `json:"url"`

	// chainHash names the chain: 64 lower-case hex digits, as the chain's info answer gives it (for
	// drand's quicknet, 52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971). It is
	// the SHA-256 of the chain's period, genesis, public key and seed, so it pins the public key
	// every round is checked with.
	// +required
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	ChainHash string `json:"chainHash"`

	// maxWait is how long the draw waits, past the committed round's time, for a round that
	// verifies, before it falls back to the committed secret. Between 1s and 1h; 1m by default.
	// Meanwhile the room is Opening and admits nobody.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="maxWait must be between 1s and 1h"
	MaxWait *metav1.Duration `json:"maxWait,omitempty"`
}

// EventCapacity is the capacity an event runs at; unset fields come from spec.capacity.
type EventCapacity struct {
	// poolSize, as spec.capacity.poolSize.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	PoolSize *int32 `json:"poolSize,omitempty"`

	// requestLatency, as spec.capacity.requestLatency.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1ms') && duration(self) <= duration('10m')",message="requestLatency must be between 1ms and 10m"
	RequestLatency *metav1.Duration `json:"requestLatency,omitempty"`

	// utilizationPercent, as spec.capacity.utilizationPercent.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	UtilizationPercent *int32 `json:"utilizationPercent,omitempty"`

	// batchSizeOverride, as spec.capacity.batchSizeOverride.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	BatchSizeOverride *int32 `json:"batchSizeOverride,omitempty"`
}

// EventPage is the waiting page during an event; unset fields come from spec.page.
type EventPage struct {
	// template, as spec.page.template.
	// +optional
	Template *ConfigMapValueRef `json:"template,omitempty"`

	// message, as spec.page.message: shown on the waiting page and returned as "notice". At most 500
	// characters.
	// +optional
	// +kubebuilder:validation:MaxLength=500
	Message *string `json:"message,omitempty"`
}

// EventSession is how long a pass lasts during an event; unset fields come from spec.pass.
type EventSession struct {
	// ttl, as spec.pass.ttl.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('24h')",message="session.ttl must be between 10s and 24h"
	TTL *metav1.Duration `json:"ttl,omitempty"`

	// maxSession, as spec.pass.maxSession (Sliding passes).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('24h')",message="session.maxSession must be at most 24h"
	MaxSession *metav1.Duration `json:"maxSession,omitempty"`
}

// Lane is a metered priority lane.
type Lane struct {
	// name names the lane in status, metrics and the codes that join it: lower-case letters, digits
	// and '-', at most 63, and not "main" (the main queue).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && self != 'main'",message="lane name must be lower-case letters, digits and '-', and not main"
	Name string `json:"name"`

	// weightPercent is the lane's share of every tick's batch, 1 to 99 percent; the lanes together
	// take at most 99, and the main queue the rest. Over the ticks each busy lane is admitted exactly
	// its share; a lane with nobody waiting leaves it to the others.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	WeightPercent int32 `json:"weightPercent"`

	// join says how a visitor joins the lane: any of code, invitation, header or cookie, at least one.
	// A visitor joins when it takes its place, and keeps the lane it took it in.
	// +required
	Join LaneJoin `json:"join"`
}

// LaneJoin is how a visitor joins a lane.
// +kubebuilder:validation:XValidation:rule="has(self.code) || (has(self.invitation) && self.invitation) || has(self.header) || has(self.cookie)",message="join needs at least one of code, invitation, header or cookie"
type LaneJoin struct {
	// code: a signed lane code, sent on enter in X-Herdgate-Lane-Code (the waiting page passes on a
	// ?code= of its address). A code is a JWT signed with HS256 and the key keySecretRef names, whose
	// aud is the queue (namespace/name), lane the lane's name, exp its expiry, and uses, when set, how
	// many visitors it may enter (1: single use); without uses it enters any number until it expires.
	// Each use is counted in Redis, once per visitor, across every proxy replica.
	// +optional
	Code *LaneCode `json:"code,omitempty"`

	// invitation: a visitor whose invitation (spec.entry.invitation, which it needs) carries the lane's
	// name in its lane claim joins the lane.
	// +optional
	Invitation bool `json:"invitation,omitempty"`

	// header: a request that carries this header with the value a Secret holds joins the lane, such
	// as a header the site's gateway sets after login (and strips from what visitors send).
	// +optional
	Header *LaneHeader `json:"header,omitempty"`

	// cookie: a request that carries this cookie with the value a Secret holds joins the lane.
	// +optional
	Cookie *LaneCookie `json:"cookie,omitempty"`
}

// LaneCode is the key that signs a lane's codes.
type LaneCode struct {
	// keySecretRef names the HMAC-SHA256 key, at least 32 bytes, the site signs the lane's codes with.
	// +required
	KeySecretRef SecretValueRef `json:"keySecretRef"`
}

// LaneHeader is a header whose value, held in a Secret, joins a lane.
type LaneHeader struct {
	// name of the header, such as X-Member-Tier. Herdgate's own, hop-by-hop and forwarding headers are
	// refused.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9][-A-Za-z0-9]*$') && !(self.lowerAscii() in ['host', 'cookie', 'connection', 'keep-alive', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'expect', 'forwarded', 'via']) && !['x-forwarded-', 'x-herdgate-', 'herdgate-', 'proxy-'].exists(p, self.lowerAscii().startsWith(p))",message="header.name must be a header name (letters, digits, '-') other than herdgate's own, hop-by-hop and forwarding headers"
	Name string `json:"name"`

	// valueSecretRef names the value the header must carry, at least 16 bytes.
	// +required
	ValueSecretRef SecretValueRef `json:"valueSecretRef"`
}

// LaneCookie is a cookie whose value, held in a Secret, joins a lane.
type LaneCookie struct {
	// name of the cookie, such as member. Herdgate's own cookies are refused.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-A-Za-z0-9!#$%&*+.^_|~]+$') && !self.lowerAscii().startsWith('herdgate_')",message="cookie.name must be a cookie name (letters, digits and !#$%&*+-.^_|~) other than herdgate's own"
	Name string `json:"name"`

	// valueSecretRef names the value the cookie must carry, at least 16 bytes.
	// +required
	ValueSecretRef SecretValueRef `json:"valueSecretRef"`
}

// BypassHeader is a header whose value, held in a Secret, lets a request bypass the queue.
type BypassHeader struct {
	// name of the header, such as X-Bypass-Token. Herdgate's own, hop-by-hop and forwarding headers
	// are refused.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9][-A-Za-z0-9]*$') && !(self.lowerAscii() in ['host', 'cookie', 'connection', 'keep-alive', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'expect', 'forwarded', 'via']) && !['x-forwarded-', 'x-herdgate-', 'herdgate-', 'proxy-'].exists(p, self.lowerAscii().startsWith(p))",message="header.name must be a header name (letters, digits, '-') other than herdgate's own, hop-by-hop and forwarding headers"
	Name string `json:"name"`

	// valueSecretRef names the value the header must carry, at least 16 bytes.
	// +required
	ValueSecretRef SecretValueRef `json:"valueSecretRef"`
}

// CIDR is an IPv4 or IPv6 network in CIDR notation, such as "10.0.0.0/8" or "fd00::/8", at most as wide
// as a /8: a wider one (0.0.0.0/0, ::/0, 2000::/3) holds more of the internet than any load balancer
// or office, and would let whoever is in it name any client, or skip the room.
// +kubebuilder:validation:MaxLength=49
// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="must be a CIDR such as 10.0.0.0/8 or fd00::/8"
// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || cidr(self).prefixLength() >= 8",message="must be a network of at most a /8 (such as 10.0.0.0/8): a wider one, up to 0.0.0.0/0 or ::/0, holds clients from anywhere, which could then name any client or skip the room"
type CIDR string

// PerClientLimit is a token bucket per client address.
type PerClientLimit struct {
	// burst is how many places one client takes at once. Between 1 and 100000; defaults to 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	Burst *int32 `json:"burst,omitempty"`

	// perMinute is how many places a client earns back each minute. Between 1 and 600000; defaults
	// to 30.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=600000
	PerMinute *int32 `json:"perMinute,omitempty"`

	// ipv4PrefixLength: IPv4 addresses that share this many leading bits are one client. Between 8
	// and 32; defaults to 32 (each address).
	// +optional
	// +kubebuilder:default=32
	// +kubebuilder:validation:Minimum=8
	// +kubebuilder:validation:Maximum=32
	IPv4PrefixLength *int32 `json:"ipv4PrefixLength,omitempty"`

	// ipv6PrefixLength: IPv6 addresses that share this many leading bits are one client. Between 16
	// and 128; defaults to 64 (one subscriber's network).
	// +optional
	// +kubebuilder:default=64
	// +kubebuilder:validation:Minimum=16
	// +kubebuilder:validation:Maximum=128
	IPv6PrefixLength *int32 `json:"ipv6PrefixLength,omitempty"`

	// pollsPerSecond is how many status polls a second one client may send each proxy replica that go
	// on to Redis, with bursts of twice as many: a poll past it is refused with 429 too_many_polls in
	// the replica's memory, and the visitor's place is kept. Polls the replica answers or refuses
	// without Redis (far from the front, or sooner than the visitor was told) do not count. A visitor
	// polls at most twice a second, so the default leaves room for a hundred visitors behind one
	// address near the front of the queue. Between 1 and 100000; defaults to 50.
	// +optional
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	PollsPerSecond *int32 `json:"pollsPerSecond,omitempty"`
}
