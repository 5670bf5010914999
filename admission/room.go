package admission

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/herdgate/herdgate/admission/replica"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
)

// The Room: what it runs on, how it is made, and its roles composed into what fronts and hosts call.

// Engine is what the gate needs of the queue engine. A *queue.Queue is the one it runs on; unit tests
// give it one in memory.
type Engine interface {
	queue.PlanReader
	EnterFrom(ctx context.Context, visitor string, abandonAfter time.Duration, limit queue.EntryLimit) (queue.Position, error)
	Status(ctx context.Context, visitor string, abandonAfter time.Duration) (queue.Position, error)
	PingFor(ctx context.Context, moment time.Time) error
	ReportProxy(ctx context.Context, r queue.ProxyReport) error
	ReportWorkload(ctx context.Context, r queue.WorkloadReport, uses []queue.PassUse) error
	Sessions(ctx context.Context, releases []queue.Release, renewals []queue.Renewal, after int64, most int) (queue.SessionsResult, error)
}

// Options tune a Room.
type Options struct {
	Log logr.Logger
	// Now is the proxy's clock; nil means time.Now.
	Now func() time.Time
	// Rand spreads poll hints; nil means math/rand/v2.
	Rand capacity.Rand
	// Replica, when set, names this proxy replica (its pod) in the reports Serve writes to Redis of
	// the config it serves or refuses, from which the manager sets the Programmed condition.
	Replica string
}

// Room is one room as a proxy replica serves it (docs/glossary.md), made of three roles:
//   - the gate (gate.go, upstream.go) decides every request to the room's routes and says how one it
//     lets through goes upstream;
//   - the visitor API (endpoints.go and the files it serves from) answers herdgate's own paths,
//     /.herdgate/*: enter, status, the waiting page;
//   - the replica runtime (replica.Runtime, which reads the room through run.go) keeps the loops
//     beside the requests: Redis' health, the reports, the sessions' sync, far positions, the
//     write-back after a failover.
//
// Each role holds what it uses, and nothing else: the engine, the room's Redis health (health.go),
// its standing (phase.go), its links (identity.go), and the replica's memory between its calls to
// Redis (package replica), each a type with its own state. The roles reach each other only through
// Room, whose methods are what fronts and hosts call (the host, which feeds a room its config from
// Kubernetes, is package host). The fronts (package front) only carry bytes: they adapt a request to
// an Exchange, ask Decide, forward as the Decision says and report the upstream's answer through an
// UpstreamCall.
type Room struct {
	name string // namespace/name
	cfg  atomic.Pointer[Config]
	// report is what this replica serves and refused, reported to the manager.
	report   *replica.ConfigReport
	engine   Engine
	standing *standings
	redis    *redisHealth
	links    *links
	metrics  *metrics
	log      logr.Logger
	now      func() time.Time
	draining atomic.Bool

	gate     *gate
	visitors *visitorAPI
	runtime  *replica.Runtime
}

// NewRoom serves cfg's room, its queue stored in store.
func NewRoom(cfg *Config, store *queue.Store, opts Options) (*Room, error) {
	r, err := NewUnconfiguredRoom(cfg.Namespace, cfg.Name, store, opts)
	if err != nil {
		return nil, err
	}
	r.SetConfig(cfg)
	return r, nil
}

// NewUnconfiguredRoom serves the room namespace/name before it has a valid config: it answers
// healthz, fails readyz and answers everything else 503 until SetConfig, so that a proxy whose
// first config is refused stays up, reports why, and serves as soon as a valid one comes.
func NewUnconfiguredRoom(namespace, name string, store *queue.Store, opts Options) (*Room, error) {
	q, err := store.Queue(namespace, name)
	if err != nil {
		return nil, err
	}
	return NewRoomOn(namespace+"/"+name, q, opts), nil
}

// NewRoomOn is the room roomName (namespace/name) on engine, unconfigured.
func NewRoomOn(roomName string, engine Engine, opts Options) *Room {
	namespace, name, _ := strings.Cut(roomName, "/")
	now, rnd := opts.Now, opts.Rand
	if now == nil {
		now = time.Now
	}
	if rnd == nil {
		rnd = globalRand{}
	}
	m := newMetrics()
	r := &Room{name: roomName, engine: engine, metrics: m, log: opts.Log, now: now,
		redis: &redisHealth{now: now, log: opts.Log, up: m.redisUp},
		links: &links{roomID: herdgatev1alpha1.RoomID(namespace, name)},
	}
	r.standing = &standings{plans: queue.NewPlanCache(plansThroughHealth{engine: engine, redis: r.redis}, planTTL), now: now}
	sessions, workload, farPositions, reclaims := replica.NewSessions(), replica.NewWorkloadMeter(), replica.NewFarPositions(), &replica.Reclaims{}
	r.report = replica.NewConfigReport(opts.Replica)
	r.gate = &gate{engine: engine, standing: r.standing, redis: r.redis, links: r.links, sessions: sessions, workload: workload,
		reclaims: reclaims, metrics: m, log: opts.Log, now: now, rand: rnd}
	r.visitors = &visitorAPI{engine: engine, standing: r.standing, redis: r.redis, links: r.links, sessions: sessions,
		workload: workload, farPositions: farPositions, polls: &replica.PollStretches{}, nextPolls: &replica.NextPolls{}, clientPolls: &replica.ClientPolls{}, draining: &r.draining, metrics: m, log: opts.Log, now: now, rand: rnd}
	r.runtime = &replica.Runtime{Name: roomName, Engine: engine, Report: r.report,
		Room:     runtimeView{cfg: &r.cfg, engine: engine, standing: r.standing, redis: r.redis},
		Sessions: sessions, Workload: workload, Far: farPositions, Reclaims: reclaims,
		Metrics: replica.Metrics{Releases: m.releases, FarSigns: m.farSigns, FarSnapshots: m.farSnapshots,
			Reclaimed: m.reclaimed, ReclaimedWaiting: m.reclaimedWaiting},
		Log: opts.Log, Now: now}
	if d, ok := engine.(durableEngine); ok {
		r.metrics.roomRegistry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "herdgate_proxy_redis_unacknowledged_writes_total",
			Help: "Entries of a Replicated room (spec.redis.durability) that no replica acknowledged within the wait; they stand, and a failover may lose them.",
		}, func() float64 { return float64(d.Unacknowledged()) }))
	}
	return r
}

// SetConfig applies a changed config to the requests that start after it.
func (r *Room) SetConfig(cfg *Config) {
	if cfg.PageProblem != nil {
		r.log.Error(cfg.PageProblem, "Serving the built-in waiting page in place of the queue's template")
	}
	if d, ok := r.engine.(durableEngine); ok {
		var wait time.Duration
		if cfg.Replicated {
			wait = queue.DefaultReplicaWait
		}
		d.SetReplicated(wait)
	}
	if l, ok := r.engine.(laneEngine); ok {
		// The derivation checked the names the engine checks.
		if err := l.SetLanes(cfg.LaneNames()); err != nil {
			r.log.Error(err, "Setting the room's lanes")
		}
	}
	r.cfg.Store(cfg)
	r.report.Applied(cfg.Generation)
	r.metrics.configGeneration.Set(float64(cfg.Generation))
	r.metrics.configRefused.Set(0)
}

// RefuseConfig records that generation of the WaitingQueue could not be applied, and why; the
// config in force stays. The refusal is logged, counted, and reported to the manager (see Replica).
func (r *Room) RefuseConfig(generation int64, err error) {
	if r.report.Refused(generation, err.Error()) {
		r.log.Error(err, "Refusing a WaitingQueue generation that does not make a valid config; keeping the config in force",
			"generation", generation, "serving", r.report.Serving())
		r.metrics.configRefusals.Inc()
	}
	r.metrics.configRefused.Set(1)
}

// Name names the room, as namespace/name of its WaitingQueue.
func (r *Room) Name() string { return r.name }

// Config returns the config in force; nil before the first valid one.
func (r *Room) Config() *Config { return r.cfg.Load() }

// configNow is the config in force: the event's running now (spec.events), or the room's own; nil
// before the first valid one.
func (r *Room) configNow() *Config {
	cfg := r.cfg.Load()
	if cfg == nil || len(cfg.events) == 0 {
		return cfg
	}
	return cfg.At(r.now())
}

// Draining says StartDrain was called: fronts ask their clients to close their connections.
func (r *Room) Draining() bool { return r.draining.Load() }

// Log is the proxy's logger, for the fronts' own errors.
func (r *Room) Log() logr.Logger { return r.log }

// StartDrain makes readyz fail, so that load balancers stop sending new visitors before shutdown.
func (r *Room) StartDrain() { r.draining.Store(true) }

// CheckRedis pings Redis and records whether it answered; FailOpen relies on it.
func (r *Room) CheckRedis(ctx context.Context) error {
	return r.runtime.CheckRedis(ctx, time.Time{})
}

// unconfigured answers a request to the normalised path canonical ("" for any other) while the
// proxy has no valid config: alive, not ready, and nothing reaches the upstream or the queue.
func unconfigured(canonical string) answer {
	switch canonical {
	case reservedPrefix + "/healthz":
		return jsonAnswer(http.StatusOK, map[string]string{"status": "ok"})
	case reservedPrefix + "/readyz":
		return jsonAnswer(http.StatusServiceUnavailable, map[string]string{"status": "not_configured"})
	}
	return errorAnswer(http.StatusServiceUnavailable, errorBody{Error: "not_configured",
		Message: "the waiting room has no valid configuration yet; try again shortly"}).retry(5*time.Second).counted("internal", "not_configured")
}

// laneEngine is an engine that keeps the room's metered lanes (spec.lanes).
type laneEngine interface {
	SetLanes(names []string) error
}

// durableEngine is an engine that can wait for a replica after the entries it writes
// (spec.redis.durability).
type durableEngine interface {
	SetReplicated(wait time.Duration)
	Unacknowledged() int64
}

type globalRand struct{}

func (globalRand) Float64() float64 { return rand.Float64() }

// MetricsHandler serves the proxy's Prometheus metrics: the room's labelled waitingqueue="namespace/name"
// as a shared proxy set's are, so that one query finds a room's series whichever kind of proxy serves
// it, and the process's own.
func (r *Room) MetricsHandler() http.Handler {
	room := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return gatherLabelled([]*Room{r}) })
	return promhttp.HandlerFor(prometheus.Gatherers{r.metrics.process, room}, promhttp.HandlerOpts{})
}

// What fronts and hosts call: the roles, composed.

// Decide is the gate, for a front: it returns whether the request goes upstream (and how), the
// answer the gate gives it instead, or that the path is herdgate's own. escapedPath is the request
// target's path as it came; fragment says the target carried a '#'. The decision carries the config
// it was made under. The gate reads the request through x and writes nothing to it.
func (r *Room) Decide(x Exchange, escapedPath string, fragment bool) Decision {
	return r.decide(x, escapedPath, fragment, false)
}

// DecideForGateway is Decide for a gateway that asks whether a request may pass (forward auth,
// ext_authz) and forwards it itself. Nothing is handed out on the allow path, since not every
// gateway can set a cookie on an allowed request: a browser without a pass is never admitted at once
// (it goes to the waiting page, which enters it and hands it its pass on /.herdgate/), and a Sliding
// pass is not extended. An allowed request is reported with Allowed.
func (r *Room) DecideForGateway(x Exchange, escapedPath string, fragment bool) Decision {
	d := r.decide(x, escapedPath, fragment, true)
	if d.verdict != Reserved {
		r.report.CountCheck() // the gateway asks: GatewayChecking
	}
	return d
}

// decide reads the request's path once and sends it to the role that serves it: herdgate's own
// paths to the visitor API (AnswerReserved), beside the gate and never through it, and the room's
// routes to the gate.
func (r *Room) decide(x Exchange, escapedPath string, fragment, checking bool) Decision {
	cfg := r.configNow()
	canonical, a, ok := pathOf(x, cfg, escapedPath, fragment)
	if ok && isReserved(canonical) {
		return Decision{verdict: Reserved, cfg: cfg, canonical: canonical}
	}
	d := Decision{verdict: Answer}
	if ok {
		d, a = r.gate.decide(x, cfg, canonical, checking)
	}
	r.keepReply(&d, a)
	return d
}

// keepReply puts the answer a into d as the Reply its front writes: the gate's, or the room's to a
// request no role takes. A forward the gate adds nothing to has none.
func (r *Room) keepReply(d *Decision, a answer) {
	if d.verdict == Answer || a.status != 0 || a.cookies != nil || a.header != nil {
		d.reply = replyOf(a, d.verdict == Answer, r.metrics)
	}
}

// AnswerReserved is the room's answer to a request to herdgate's own path (a Reserved decision):
// enter, status, the waiting page and the room's other endpoints, under the config it was decided
// with. The visitor API reads the request through x and writes nothing to it: its answer comes back
// as a value, which the front writes (RoomAnswer.WriteTo).
func (r *Room) AnswerReserved(x Exchange, d Decision) RoomAnswer {
	if d.cfg == nil {
		return RoomAnswer{unconfigured(d.canonical), r.metrics}
	}
	return RoomAnswer{r.visitors.serveReserved(x, d.cfg, d.canonical), r.metrics}
}

// Allowed records a request a gateway was told it may pass: it is counted, and on a completion route
// it ends the session, since no answer of the workload reaches the gate.
func (r *Room) Allowed(d Decision) {
	r.metrics.requests.WithLabelValues(d.class, "allowed").Inc()
	if d.completion {
		r.gate.afterUpstream(d, http.StatusOK, "")
	}
}

// BeginUpstream counts a request going upstream as d decided it.
func (r *Room) BeginUpstream(d Decision) *UpstreamCall { return r.gate.beginUpstream(d) }

// Run keeps what the proxy does beside answering requests, until ctx ends: it pings Redis every
// redisCheckInterval (1 s when zero) for FailOpen, reports the config it serves to the manager,
// syncs sessions, reports the workload it measured, keeps far positions and, after a failover of
// Redis, writes back the passes visitors hold. A program that serves
// the Room through a front of its own runs it beside.
func (r *Room) Run(ctx context.Context, redisCheckInterval time.Duration) {
	r.runtime.Run(ctx, redisCheckInterval)
}
