// Package settings derives, from a WaitingQueue, everything the scheduler and the admission proxy run
// it with: the plan and the plan ticks really run, the timings, the routes, the visitor identity, the
// upstream. It is the one place that maps spec fields. The manager checks every generation with
// Derive before it applies it, and the proxy builds its config with Derive, so both refuse the same
// specs; the API server's schema refuses them too (its CEL rules mirror the checks here, and the API
// tests hold the two together), so a spec the API accepts never stops a proxy.
package settings

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/route"
)

// Settings is one WaitingQueue generation, derived and checked.
type Settings struct {
	UID             types.UID
	Namespace, Name string
	Generation      int64

	// Plan is the admission plan the spec declares. Effective is the plan ticks run: Plan, capped at
	// the most one tick admits (capacity.MaxAdmitPerTick); Capped says whether the cap applies.
	Plan, Effective capacity.Plan
	Capped          bool
	// TargetInFlight is what the pool is sized for, poolSize × utilization; Adaptive, set with
	// spec.capacity.mode Adaptive, bounds the rate that follows the measured workload.
	TargetInFlight float64
	Adaptive       *capacity.AdaptiveLimits
	// JitterWindow spreads one tick's admissions; Lead puts every not-before time this far ahead of
	// the tick (see AdmissionLead).
	JitterWindow, Lead time.Duration
	PassTTL            time.Duration
	AbandonAfter       time.Duration
	// AbandonAtTurnAfter is how long a visitor may have been silent at its turn (at most AbandonAfter).
	AbandonAtTurnAfter time.Duration
	PollMin, PollMax   time.Duration
	// PollBudget bounds what the waiting visitors' polls cost (spec.polling.budget).
	PollBudget capacity.PollBudget
	// ExactPositions is how far from the front positions come from Redis at every poll
	// (spec.polling.exactPositions).
	ExactPositions int64
	// Replicated queues wait for a replica after the writes that take places and admit
	// (spec.redis.durability).
	Replicated bool
	Suspended  bool
	// Mode is Queue, Passthrough or Closed.
	Mode herdgatev1alpha1.Mode
	// MaxActive caps the active passes; 0 means no cap.
	MaxActive int64
	// Enforcement is Proxy or Gateway; PassFormat HMAC or JWT, signed with PassAlgorithm by keys
	// that rotate every KeyRotation.
	Enforcement   herdgatev1alpha1.Enforcement
	PassFormat    herdgatev1alpha1.PassFormat
	PassAlgorithm herdgatev1alpha1.PassAlgorithm
	KeyRotation   time.Duration
	// Sliding passes are extended by activity, up to MaxSession after their not-before time.
	Sliding    bool
	MaxSession time.Duration
	// CompletionRoutes release the pass once the workload answers them with a 2xx or 3xx.
	CompletionRoutes []route.Route
	// ReleaseKey, when set, authenticates the workload's POST /.herdgate/release.
	ReleaseKey *SecretRef
	// Schedule, when set, is when the room's pre-queue opens, when it opens and when it closes.
	Schedule *Schedule
	// Entry, when set, bounds the places one client takes.
	Entry *EntryLimit
	// TrustedProxies are the load balancers whose X-Forwarded-For names the client.
	TrustedProxies []netip.Prefix
	// Invitation, ProofOfWork and External, when set, are what an entry must bring (entry.go).
	Invitation  *Invitation
	ProofOfWork *ProofOfWork
	External    *ExternalChallenge
	// Shadow, when set, says which entries go to the queue that never admits.
	Shadow *Shadow
	// Bypass are the rules that let requests through without a pass.
	Bypass []BypassRule
	// Lanes are the metered priority lanes (spec.lanes), in order.
	Lanes []Lane
	// Events are the room's calendar (spec.events), by start; At picks the settings in force. Event
	// names the event the settings are of, "" for the room's own.
	Events []Event
	Event  string
	// Page, when set, is the waiting page's template and message.
	Page *Page

	// Routes are the protected routes; IdentityHeader, when set, the canonical name of the trusted
	// header that identifies visitors; Upstream where requests go.
	Routes         []route.Route
	IdentityHeader string
	Upstream       *url.URL
	FailurePolicy  herdgatev1alpha1.FailurePolicy
	// ProxySet, when set, is the shared proxy set that serves the room (spec.proxy.shared), on Hosts.
	ProxySet string
	Hosts    []string
}

// EntryLimit is spec.entry.perClient: a bucket of Burst places per client, refilled at PerMinute;
// a client is an IPv4 address cut to V4Bits leading bits, or an IPv6 one cut to V6Bits.
type EntryLimit struct {
	Burst, PerMinute, V4Bits, V6Bits int
	// PollsPerSecond bounds the status polls of a client that a replica sends on to Redis.
	PollsPerSecond int
}

// Schedule is when a launch happens; ClosesAt is zero when it does not close.
type Schedule struct {
	PreQueueFrom, OpensAt, ClosesAt time.Time
	// Beacon, when set, is the beacon whose round the opening's draw takes (spec.draw).
	Beacon *Beacon
}

// PhaseAt is the phase the schedule gives time t. The scheduler asks it on its tick grid, and
// replaces Open by Opening while it draws the pre-queue.
func (s *Settings) PhaseAt(t time.Time) phase.Phase { return s.Schedule.PhaseAt(t) }

// PhaseAt is the phase the schedule gives time t; Open for the nil schedule.
func (sc *Schedule) PhaseAt(t time.Time) phase.Phase {
	switch {
	case sc == nil:
		return phase.Open
	case t.Before(sc.PreQueueFrom):
		return phase.Scheduled
	case t.Before(sc.OpensAt):
		return phase.PreQueue
	case !sc.ClosesAt.IsZero() && !t.Before(sc.ClosesAt):
		return phase.Closed
	default:
		return phase.Open
	}
}

// PassesFrom is the earliest not-before time of a pass that counts under the schedule; zero without
// one. A pass issued before the schedule's pre-queue belongs to an opening that is over, or to the
// room before it had this schedule: honoured, it would let its holder in ahead of the draw.
func (sc *Schedule) PassesFrom() time.Time {
	if sc == nil {
		return time.Time{}
	}
	return sc.PreQueueFrom
}

// Admits reports whether ticks admit visitors: the queue is in Queue mode and not suspended.
func (s *Settings) Admits() bool {
	return !s.Suspended && s.Mode == herdgatev1alpha1.ModeQueue
}

// FieldError is a spec that cannot be run, naming the field as the API server would.
type FieldError struct {
	Field  string
	Detail string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Detail }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Detail: fmt.Sprintf(format, args...)}
}

// AdmissionLead is how far ahead of its tick an admission's not-before lies: the longest interval a
// visitor at the front of the queue may wait between polls (pollMin plus the hint's spread). A
// visitor admitted at a tick therefore learns its not-before before it comes, and the proxy sends it
// back exactly then: the tick's jitter reaches the workload instead of being lost to the random
// moments at which visitors happen to poll.
func AdmissionLead(pollMin time.Duration) time.Duration {
	return pollMin + time.Duration(capacity.PollSpread*float64(pollMin))
}

// PlanOf derives the declared plan of a spec: the only mapping of spec fields to a capacity input.
func PlanOf(spec *herdgatev1alpha1.WaitingQueueSpec) (capacity.Plan, error) {
	in := capacity.Input{
		PoolSize:           int64(spec.Capacity.PoolSize),
		RequestLatency:     spec.Capacity.RequestLatency.Duration,
		UtilizationPercent: int64(spec.EffectiveUtilizationPercent()),
		Tick:               spec.EffectiveTick(),
	}
	if spec.Capacity.BatchSizeOverride != nil {
		in.BatchSizeOverride = int64(*spec.Capacity.BatchSizeOverride)
	}
	p, err := capacity.New(in)
	if err != nil {
		return capacity.Plan{}, fieldErr("spec.capacity", "%v", err)
	}
	return p, nil
}

// Derive checks every field the scheduler and the proxy use and derives their settings. An error is
// a *FieldError naming the first field that cannot be run.
func Derive(wq *herdgatev1alpha1.WaitingQueue) (*Settings, error) {
	if wq.Name == "" || wq.Namespace == "" {
		return nil, fieldErr("metadata", "namespace and name are required")
	}
	if err := checkSchema(wq); err != nil {
		return nil, err
	}
	spec := &wq.Spec
	s := &Settings{
		UID: wq.UID, Namespace: wq.Namespace, Name: wq.Name, Generation: wq.Generation,
		JitterWindow: spec.EffectiveJitterWindow(), PassTTL: spec.EffectivePassTTL(),
		AbandonAfter: spec.EffectiveAbandonAfter(), AbandonAtTurnAfter: spec.EffectiveAbandonAtTurnAfter(), Suspended: spec.IsSuspended(),
		FailurePolicy: spec.EffectiveFailurePolicy(), Mode: spec.EffectiveMode(),
		MaxActive: spec.EffectiveMaxActive(), Sliding: spec.EffectivePassRenewal() == herdgatev1alpha1.RenewalSliding,
		MaxSession: spec.EffectiveMaxSession(), Enforcement: spec.EffectiveEnforcement(),
		PassFormat: spec.EffectivePassFormat(), PassAlgorithm: spec.EffectivePassAlgorithm(), KeyRotation: spec.EffectiveKeyRotation(),
	}
	var err error
	if s.Plan, err = PlanOf(spec); err != nil {
		return nil, err
	}
	s.Effective, s.Capped = s.Plan.Capped(capacity.MaxAdmitPerTick)
	if err := s.deriveAdaptive(spec); err != nil {
		return nil, err
	}
	s.PollMin, s.PollMax = spec.EffectivePolling()
	s.Lead = AdmissionLead(s.PollMin)
	s.PollBudget = capacity.PollBudget{PerSecond: float64(spec.EffectivePollBudget()), MinInterval: s.PollMin, MaxInterval: s.PollMax, AbandonAfter: s.AbandonAfter}
	s.ExactPositions = int64(spec.EffectiveExactPositions())
	durability := spec.EffectiveRedisDurability()
	s.Replicated = durability == herdgatev1alpha1.RedisDurabilityReplicated
	switch {
	case s.PollMin <= 0 || s.PollMax < s.PollMin:
		return nil, fieldErr("spec.polling", "minInterval %s must be positive and at most maxInterval %s", s.PollMin, s.PollMax)
	case s.AbandonAfter <= 0:
		return nil, fieldErr("spec.abandonAfter", "must be positive")
	case s.AbandonAtTurnAfter <= 0 || s.AbandonAtTurnAfter > s.AbandonAfter:
		return nil, fieldErr("spec.abandonAtTurnAfter", "%s must be positive and at most abandonAfter %s", s.AbandonAtTurnAfter, s.AbandonAfter)
	case s.PassTTL <= 0:
		return nil, fieldErr("spec.pass.ttl", "must be positive")
	case s.JitterWindow < 0 || s.JitterWindow > s.Plan.Tick():
		return nil, fieldErr("spec.jitter.window", "must be between 0 and tick (%s)", s.Plan.Tick())
	case s.FailurePolicy != herdgatev1alpha1.FailClosed && s.FailurePolicy != herdgatev1alpha1.FailOpen:
		return nil, fieldErr("spec.proxy.failurePolicy", "%q is neither FailClosed nor FailOpen", s.FailurePolicy)
	case s.Mode != herdgatev1alpha1.ModeQueue && s.Mode != herdgatev1alpha1.ModePassthrough && s.Mode != herdgatev1alpha1.ModeClosed:
		return nil, fieldErr("spec.mode", "%q is not one of Queue, Passthrough, Closed", s.Mode)
	case durability != herdgatev1alpha1.RedisDurabilityAsync && durability != herdgatev1alpha1.RedisDurabilityReplicated:
		return nil, fieldErr("spec.redis.durability", "%q is neither Async nor Replicated", durability)
	}
	if s.Routes, err = Routes(spec.ProtectedRoutes); err != nil {
		return nil, err
	}
	if spec.Pass != nil && len(spec.Pass.CompletionRoutes) > 0 {
		if s.CompletionRoutes, err = compileRoutes("spec.pass.completionRoutes", spec.Pass.CompletionRoutes); err != nil {
			return nil, err
		}
	}
	if spec.Pass != nil && spec.Pass.ReleaseKeySecretRef != nil {
		ref, err := secretRef("spec.pass.releaseKeySecretRef", *spec.Pass.ReleaseKeySecretRef, MinReleaseKey)
		if err != nil {
			return nil, err
		}
		s.ReleaseKey = &ref
	}
	if err := s.deriveSchedule(spec); err != nil {
		return nil, err
	}
	if err := s.deriveDraw(spec); err != nil {
		return nil, err
	}
	if err := s.deriveClients(spec); err != nil {
		return nil, err
	}
	if err := s.deriveEntry(spec); err != nil {
		return nil, err
	}
	if err := s.deriveLanes(spec); err != nil {
		return nil, err
	}
	if r := spec.EffectivePassRenewal(); r != herdgatev1alpha1.RenewalFixed && r != herdgatev1alpha1.RenewalSliding {
		return nil, fieldErr("spec.pass.renewal", "%q is neither Fixed nor Sliding", r)
	}
	if err := s.checkEnforcement(spec); err != nil {
		return nil, err
	}
	if err := s.deriveProxySet(spec); err != nil {
		return nil, err
	}
	if spec.Identity != nil && spec.Identity.Header != "" {
		if err := CheckIdentityHeader(spec.Identity.Header); err != nil {
			return nil, fieldErr("spec.identity.header", "%v", err)
		}
		s.IdentityHeader = http.CanonicalHeaderKey(spec.Identity.Header)
	}
	if s.Upstream, err = Upstream(wq.Namespace, spec.Upstream); err != nil {
		return nil, err
	}
	if err := s.deriveEvents(wq); err != nil {
		return nil, err
	}
	return s, nil
}

// checkEnforcement repeats the API server's rules on enforcement and the pass format, for specs
// that did not come through it (herdgate-proxy --config).
func (s *Settings) checkEnforcement(spec *herdgatev1alpha1.WaitingQueueSpec) error {
	jwt := s.PassFormat == herdgatev1alpha1.PassFormatJWT
	switch {
	case spec.Pass != nil && spec.Pass.Algorithm != "" && !jwt:
		return fieldErr("spec.pass.algorithm", "applies to format JWT only")
	case spec.Pass != nil && spec.Pass.KeyRotation != nil && !jwt:
		return fieldErr("spec.pass.keyRotation", "applies to format JWT only")
	case s.Enforcement != herdgatev1alpha1.EnforcementProxy && s.Enforcement != herdgatev1alpha1.EnforcementGateway:
		return fieldErr("spec.enforcement", "%q is neither Proxy nor Gateway", s.Enforcement)
	case s.Enforcement == herdgatev1alpha1.EnforcementGateway && s.Adaptive != nil && s.ReleaseKey == nil:
		return fieldErr("spec.capacity.mode", "Adaptive with enforcement Gateway needs pass.releaseKeySecretRef: the workload tells how long it held each request when it releases the session")
	case s.PassFormat != herdgatev1alpha1.PassFormatHMAC && s.PassFormat != herdgatev1alpha1.PassFormatJWT:
		return fieldErr("spec.pass.format", "%q is neither HMAC nor JWT", s.PassFormat)
	case s.PassFormat == herdgatev1alpha1.PassFormatJWT && s.Sliding:
		return fieldErr("spec.pass.renewal", "Sliding needs format HMAC: a gateway verifying a JWT pass cannot see it renewed")
	case s.PassFormat == herdgatev1alpha1.PassFormatJWT && s.PassAlgorithm != herdgatev1alpha1.PassAlgorithmES256 && s.PassAlgorithm != herdgatev1alpha1.PassAlgorithmHS256:
		return fieldErr("spec.pass.algorithm", "%q is neither ES256 nor HS256", s.PassAlgorithm)
	case s.PassFormat == herdgatev1alpha1.PassFormatJWT && (s.KeyRotation < time.Hour || s.KeyRotation > 2160*time.Hour):
		return fieldErr("spec.pass.keyRotation", "must be between 1h and 2160h")
	}
	return nil
}

// deriveProxySet repeats the API server's rules on a shared proxy set, for specs that did not come
// through it.
func (s *Settings) deriveProxySet(spec *herdgatev1alpha1.WaitingQueueSpec) error {
	if spec.Proxy == nil {
		return nil
	}
	s.ProxySet = spec.Proxy.Shared
	switch {
	case (s.ProxySet == "") != (len(spec.Proxy.Hosts) == 0):
		return fieldErr("spec.proxy.hosts", "is required with proxy.shared, and only with it: a shared proxy set picks a request's room by its host")
	case s.ProxySet != "" && s.Enforcement != herdgatev1alpha1.EnforcementProxy:
		return fieldErr("spec.proxy.shared", "needs enforcement Proxy: a gateway asks the check of one room")
	case s.ProxySet != "" && spec.Proxy.Autoscaling != nil:
		return fieldErr("spec.proxy.autoscaling", "is for a room's own proxy Deployment: a shared proxy set runs the replicas its rooms ask for")
	}
	if a := spec.EffectiveProxyAutoscaling(); a != nil && *a.MinReplicas > a.MaxReplicas {
		return fieldErr("spec.proxy.autoscaling.minReplicas", "must not exceed maxReplicas")
	}
	for _, h := range spec.Proxy.Hosts {
		s.Hosts = append(s.Hosts, strings.ToLower(string(h)))
	}
	return nil
}

// deriveSchedule sets the schedule, when the spec has one.
func (s *Settings) deriveSchedule(spec *herdgatev1alpha1.WaitingQueueSpec) error {
	sc := spec.Schedule
	if sc == nil {
		return nil
	}
	s.Schedule = &Schedule{PreQueueFrom: spec.EffectivePreQueueFrom(), OpensAt: sc.OpensAt.Time}
	if sc.ClosesAt != nil {
		s.Schedule.ClosesAt = sc.ClosesAt.Time
	}
	switch {
	case sc.OpensAt.IsZero():
		return fieldErr("spec.schedule.opensAt", "is required")
	case !s.Schedule.PreQueueFrom.Before(s.Schedule.OpensAt) || s.Schedule.OpensAt.Sub(s.Schedule.PreQueueFrom) > 24*time.Hour:
		return fieldErr("spec.schedule.preQueueFrom", "must be before opensAt and at most 24h before it")
	case !s.Schedule.ClosesAt.IsZero() && !s.Schedule.OpensAt.Before(s.Schedule.ClosesAt):
		return fieldErr("spec.schedule.closesAt", "must be after opensAt")
	}
	return nil
}

// deriveClients sets the limit of places per client and the proxies trusted to name clients.
func (s *Settings) deriveClients(spec *herdgatev1alpha1.WaitingQueueSpec) error {
	if burst, perMinute, v4, v6, ok := spec.EffectivePerClient(); ok {
		switch {
		case burst < 1 || burst > 100000:
			return fieldErr("spec.entry.perClient.burst", "%d is outside 1 … 100000", burst)
		case perMinute < 1 || perMinute > 600000:
			return fieldErr("spec.entry.perClient.perMinute", "%d is outside 1 … 600000", perMinute)
		case v4 < 8 || v4 > 32:
			return fieldErr("spec.entry.perClient.ipv4PrefixLength", "%d is outside 8 … 32", v4)
		case v6 < 16 || v6 > 128:
			return fieldErr("spec.entry.perClient.ipv6PrefixLength", "%d is outside 16 … 128", v6)
		}
		polls, _ := spec.EffectivePollsPerClient()
		if polls < 1 || polls > 100000 {
			return fieldErr("spec.entry.perClient.pollsPerSecond", "%d is outside 1 … 100000", polls)
		}
		s.Entry = &EntryLimit{Burst: burst, PerMinute: perMinute, V4Bits: v4, V6Bits: v6, PollsPerSecond: polls}
	}
	if spec.Entry == nil {
		return nil
	}
	for i, c := range spec.Entry.TrustedProxies {
		p, err := netip.ParsePrefix(string(c))
		if err != nil {
			return fieldErr(fmt.Sprintf("spec.entry.trustedProxies[%d]", i), "%q is not a CIDR such as 10.0.0.0/8", c)
		}
		s.TrustedProxies = append(s.TrustedProxies, p.Masked())
	}
	return nil
}

// deriveAdaptive sets the target in flight and, for an Adaptive capacity, the controller's bounds: the
// effective plan, the pool's full rate as the ceiling of the no-show compensation (never below the
// plan, never beyond what a tick admits) and the floor.
func (s *Settings) deriveAdaptive(spec *herdgatev1alpha1.WaitingQueueSpec) error {
	c := spec.Capacity
	s.TargetInFlight = float64(c.PoolSize) * float64(spec.EffectiveUtilizationPercent()) / 100
	switch mode := spec.EffectiveCapacityMode(); mode {
	case herdgatev1alpha1.CapacityDeclared:
		return nil
	case herdgatev1alpha1.CapacityAdaptive:
	default:
		return fieldErr("spec.capacity.mode", "%q is neither Declared nor Adaptive", mode)
	}
	declared, _ := s.Effective.Rate().Float64()
	tick := s.Effective.Tick()
	ceiling := declared
	if c.RequestLatency.Duration > 0 {
		ceiling = max(declared, float64(c.PoolSize)/c.RequestLatency.Seconds())
	}
	ceiling = min(ceiling, float64(capacity.MaxAdmitPerTick)/tick.Seconds())
	l := &capacity.AdaptiveLimits{Declared: declared, Ceiling: max(ceiling, declared), Floor: declared / 10,
		TargetInFlight: s.TargetInFlight, Tick: tick}
	if c.MinAdmissionsPerSecond != nil {
		// Above the plan it is the plan: the API server cannot compare the two (the plan is a
		// fraction of four fields), so neither refuses it.
		l.Floor = min(float64(*c.MinAdmissionsPerSecond), declared)
	}
	s.Adaptive = l
	return nil
}

// Routes compiles spec's protected routes; an error names the route's field.
func Routes(spec []herdgatev1alpha1.ProtectedRoute) ([]route.Route, error) {
	if len(spec) == 0 {
		return nil, fieldErr("spec.protectedRoutes", "at least one route is required")
	}
	if err := duplicateRoutes("spec.protectedRoutes", spec); err != nil {
		return nil, err
	}
	return compileRoutes("spec.protectedRoutes", spec)
}

// duplicateRoutes refuses two routes of one list for the same host, path (or pathPrefix) and a
// method, compared as written, as the CEL rule on the list does.
func duplicateRoutes(list string, spec []herdgatev1alpha1.ProtectedRoute) error {
	key := func(r herdgatev1alpha1.ProtectedRoute) string {
		k := ""
		if r.Host != nil {
			k = string(*r.Host)
		}
		switch {
		case r.Path != nil:
			k += " path:" + string(*r.Path)
		case r.PathPrefix != nil:
			k += " prefix:" + string(*r.PathPrefix)
		}
		return k
	}
	for i, r := range spec {
		for j := range i {
			if key(spec[j]) == key(r) && slices.ContainsFunc(spec[j].EffectiveMethods(), func(m herdgatev1alpha1.HTTPMethod) bool {
				return slices.Contains(r.EffectiveMethods(), m)
			}) {
				return fieldErr(list, "two protectedRoutes name the same host, path (or pathPrefix) and method: merge their methods into one route ([%d] and [%d])", j, i)
			}
		}
	}
	return nil
}

// compileRoutes compiles the routes of the list at field.
func compileRoutes(list string, spec []herdgatev1alpha1.ProtectedRoute) ([]route.Route, error) {
	out := make([]route.Route, 0, len(spec))
	for i, r := range spec {
		field := fmt.Sprintf("%s[%d]", list, i)
		var p string
		prefix := false
		switch {
		case r.Path != nil && r.PathPrefix == nil:
			p, field = string(*r.Path), field+".path"
		case r.PathPrefix != nil && r.Path == nil:
			p, prefix, field = string(*r.PathPrefix), true, field+".pathPrefix"
		default:
			return nil, fieldErr(field, "exactly one of path or pathPrefix must be set")
		}
		methods := make([]string, 0, len(r.EffectiveMethods()))
		for _, m := range r.EffectiveMethods() {
			methods = append(methods, string(m))
		}
		compiled, err := route.New(p, prefix, methods)
		if err != nil {
			return nil, fieldErr(field, "%q %v", p, err)
		}
		compiled.ExactCase = r.ExactCase
		if r.Host != nil {
			if err := route.CheckHost(string(*r.Host)); err != nil {
				return nil, fieldErr(fmt.Sprintf("%s[%d].host", list, i), "%q %v", *r.Host, err)
			}
			compiled.Host = string(*r.Host)
		}
		out = append(out, compiled)
	}
	return out, nil
}

var headerName = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9]*$`)

// Identity headers that cannot tell visitors apart, or that the proxy or the HTTP layer itself owns:
// a visitor identified by one would share one place and one pass with everybody else, or choose its
// own identity. Names are lower case; the CEL rule on spec.identity.header lists the same.
var (
	RefusedIdentityHeaders = []string{
		"host", "cookie", "set-cookie", "authorization", "proxy-authorization", "www-authenticate",
		"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "expect",
		"forwarded", "via", "x-real-ip", "x-http-method-override", "x-http-method", "x-method-override",
		"user-agent", "referer", "origin", "range", "date", "pragma", "cache-control", "max-forwards",
		"dnt", "priority", "early-data",
	}
	RefusedIdentityHeaderPrefixes = []string{
		"content-", "x-forwarded-", "proxy-", "x-herdgate-", "herdgate-", "sec-", "accept", "if-",
	}
)

// MaxIdentityHeaderLength is the longest identity header name, as the API's schema allows.
const MaxIdentityHeaderLength = 128

// CheckIdentityHeader tells why name cannot identify visitors, or returns nil.
func CheckIdentityHeader(name string) error {
	if len(name) > MaxIdentityHeaderLength || !headerName.MatchString(name) {
		return fmt.Errorf("%q is not a header name of at most %d letters, digits and '-'", name, MaxIdentityHeaderLength)
	}
	lower := strings.ToLower(name)
	for _, h := range RefusedIdentityHeaders {
		if lower == h {
			return fmt.Errorf("%s cannot identify a visitor: it is set by the client or the HTTP layer, or shared by many visitors", name)
		}
	}
	for _, p := range RefusedIdentityHeaderPrefixes {
		if strings.HasPrefix(lower, p) {
			return fmt.Errorf("%s cannot identify a visitor: headers starting with %q are set by the client, the HTTP layer or herdgate", name, p)
		}
	}
	return nil
}

// MaxUpstreamURLLength is the longest upstream URL, as the API's schema allows.
const MaxUpstreamURLLength = 2048

// Upstream returns where the proxy forwards: the Service in the queue's namespace, or the URL. A URL
// is absolute http or https, with a host, a port in 1 … 65535 (no leading zeros) when it names one, and neither
// credentials (they would sit in the resource in plain text and the proxy never sends them), nor a
// query or fragment (the visitor's query is what goes upstream).
func Upstream(namespace string, up herdgatev1alpha1.UpstreamSpec) (*url.URL, error) {
	switch {
	case up.Service != nil && up.URL == nil:
		if up.Service.Name == "" || up.Service.Port < 1 || up.Service.Port > 65535 {
			return nil, fieldErr("spec.upstream.service", "name and a port between 1 and 65535 are required")
		}
		return &url.URL{Scheme: "http", Host: up.Service.Name + "." + namespace + ".svc:" + strconv.Itoa(int(up.Service.Port))}, nil
	case up.URL != nil && up.Service == nil:
		u, err := CheckUpstreamURL(*up.URL)
		if err != nil {
			return nil, fieldErr("spec.upstream.url", "%q %v", *up.URL, err)
		}
		return u, nil
	default:
		return nil, fieldErr("spec.upstream", "exactly one of service or url must be set")
	}
}

// CheckUpstreamURL parses and checks an upstream URL (see Upstream).
func CheckUpstreamURL(raw string) (*url.URL, error) {
	if len(raw) > MaxUpstreamURLLength {
		return nil, fmt.Errorf("is %d bytes long, at most %d allowed", len(raw), MaxUpstreamURLLength)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("is not a URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("must be an absolute http or https URL")
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return nil, errors.New("must be an absolute http or https URL with a host")
	case u.User != nil:
		return nil, errors.New("must not hold credentials (user:password@): they would sit in the resource in plain text")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(raw, "?#"):
		return nil, errors.New("must not hold a query or fragment: the visitor's own query is what goes upstream")
	}
	if port := u.Port(); port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || len(port) > 5 || port[0] == '0' || n < 1 || n > 65535 {
			return nil, fmt.Errorf("has port %q, not one of 1 … 65535 without leading zeros", port)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return nil, errors.New("has an empty port")
	}
	return u, nil
}
