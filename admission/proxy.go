package admission

import (
	"context"
	"errors"
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

// The Proxy: what it runs on, how it is made, and the state it keeps beside the config in force (the
// config's generation, Redis' health, draining). Its decisions are in gate.go.

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

// Options tune a Proxy.
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

// Proxy is the admission proxy's gate: it decides every request (a route, a visitor, a pass; enter,
// status and the proxy's other endpoints) and says how a request it lets through goes upstream. The
// fronts (package front) only carry bytes: they adapt a request to an Exchange, ask Decide, forward
// as the Decision says and report the upstream's answer through an UpstreamCall.
type Proxy struct {
	cfg     atomic.Pointer[Config]
	queue   string // namespace/name
	q       Engine
	plans   *queue.PlanCache
	metrics *metrics
	log     logr.Logger
	now     func() time.Time
	rand    capacity.Rand

	redisDown atomic.Bool
	draining  atomic.Bool
	// redisRetryAt is when, after a failed Redis call, visitor calls try Redis again (UnixNano).
	redisRetryAt atomic.Int64
	state        configState
	// What this replica keeps in memory between its calls to Redis (package replica).
	sessions *replica.Sessions
	workload *replica.WorkloadMeter
	polls    replica.PollStretches
	far      *replica.FarPositions
	// reclaim writes back the passes visitors hold after a failover of Redis.
	reclaim reclaimer
	// verifier calls an external challenge's provider.
	verifier *http.Client
	// roomID names the room in herdgate's links where rooms share a host (RoomParam); sharesHost
	// says the room shares one in a shared proxy set, so that its links carry it.
	roomID     string
	sharesHost atomic.Bool
}

// NewProxy serves cfg's queue, stored in store.
func NewProxy(cfg *Config, store *queue.Store, opts Options) (*Proxy, error) {
	p, err := NewUnconfiguredProxy(cfg.Namespace, cfg.Name, store, opts)
	if err != nil {
		return nil, err
	}
	p.SetConfig(cfg)
	return p, nil
}

// NewUnconfiguredProxy serves the queue namespace/name before it has a valid config: it answers
// healthz, fails readyz and answers everything else 503 until SetConfig, so that a proxy whose
// first config is refused stays up, reports why, and serves as soon as a valid one comes.
func NewUnconfiguredProxy(namespace, name string, store *queue.Store, opts Options) (*Proxy, error) {
	q, err := store.Queue(namespace, name)
	if err != nil {
		return nil, err
	}
	return NewProxyOn(namespace+"/"+name, q, opts), nil
}

// NewProxyOn is an unconfigured proxy of the queue named queueName (namespace/name) on engine.
func NewProxyOn(queueName string, engine Engine, opts Options) *Proxy {
	namespace, name, _ := strings.Cut(queueName, "/")
	p := &Proxy{queue: queueName, roomID: herdgatev1alpha1.RoomID(namespace, name), q: engine, plans: queue.NewPlanCache(engine, planTTL), metrics: newMetrics(), log: opts.Log, now: opts.Now, rand: opts.Rand,
		sessions: replica.NewSessions(), workload: replica.NewWorkloadMeter(), far: replica.NewFarPositions(), verifier: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute}}}
	p.state.init(opts.Replica)
	if d, ok := engine.(durableEngine); ok {
		p.metrics.roomRegistry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "herdgate_proxy_redis_unacknowledged_writes_total",
			Help: "Entries of a Replicated room (spec.redis.durability) that no replica acknowledged within the wait; they stand, and a failover may lose them.",
		}, func() float64 { return float64(d.Unacknowledged()) }))
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.rand == nil {
		p.rand = globalRand{}
	}
	return p
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

// SetConfig applies a changed config to the requests that start after it.
func (p *Proxy) SetConfig(cfg *Config) {
	if cfg.PageProblem != nil {
		p.log.Error(cfg.PageProblem, "Serving the built-in waiting page in place of the queue's template")
	}
	if d, ok := p.q.(durableEngine); ok {
		var wait time.Duration
		if cfg.Replicated {
			wait = queue.DefaultReplicaWait
		}
		d.SetReplicated(wait)
	}
	if l, ok := p.q.(laneEngine); ok {
		// The derivation checked the names the engine checks.
		if err := l.SetLanes(cfg.LaneNames()); err != nil {
			p.log.Error(err, "Setting the room's lanes")
		}
	}
	p.cfg.Store(cfg)
	p.state.applied(cfg.Generation)
	p.metrics.configGeneration.Set(float64(cfg.Generation))
	p.metrics.configRefused.Set(0)
}

// RefuseConfig records that generation of the WaitingQueue could not be applied, and why; the
// config in force stays. The refusal is logged, counted, and reported to the manager (see Replica).
func (p *Proxy) RefuseConfig(generation int64, err error) {
	if p.state.refused(generation, err.Error()) {
		p.log.Error(err, "Refusing a WaitingQueue generation that does not make a valid config; keeping the config in force",
			"generation", generation, "serving", p.state.serving())
		p.metrics.configRefusals.Inc()
	}
	p.metrics.configRefused.Set(1)
}

// Queue names the queue the proxy serves, as namespace/name.
func (p *Proxy) Queue() string { return p.queue }

// Config returns the config in force; nil before the first valid one.
func (p *Proxy) Config() *Config { return p.cfg.Load() }

// configNow is the config in force: the event's running now (spec.events), or the room's own; nil
// before the first valid one.
func (p *Proxy) configNow() *Config {
	cfg := p.cfg.Load()
	if cfg == nil || len(cfg.events) == 0 {
		return cfg
	}
	return cfg.At(p.now())
}

// MetricsHandler serves the proxy's Prometheus metrics: the room's labelled waitingqueue="namespace/name"
// as a shared proxy set's are, so that one query finds a room's series whichever kind of proxy serves
// it, and the process's own.
func (p *Proxy) MetricsHandler() http.Handler {
	room := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return gatherLabelled([]*Proxy{p}) })
	return promhttp.HandlerFor(prometheus.Gatherers{p.metrics.process, room}, promhttp.HandlerOpts{})
}

// redisRetryAfterError is how long, after a Redis call failed, enter and status answer 503 at once
// instead of calling: while Redis is away each call would wait out its bound, and the visitors with
// it. The first call after it tries Redis again (and the proxy's own check every second does too).
const redisRetryAfterError = 500 * time.Millisecond

// redisResting says Redis failed a moment ago: enter and status answer 503 without calling it.
func (p *Proxy) redisResting() bool {
	return p.redisDown.Load() && p.now().UnixNano() < p.redisRetryAt.Load()
}

// Draining says StartDrain was called: fronts ask their clients to close their connections.
func (p *Proxy) Draining() bool { return p.draining.Load() }

// Log is the proxy's logger, for the fronts' own errors.
func (p *Proxy) Log() logr.Logger { return p.log }

// StartDrain makes readyz fail, so that load balancers stop sending new visitors before shutdown.
func (p *Proxy) StartDrain() { p.draining.Store(true) }

// CheckRedis pings Redis and records whether it answered; FailOpen relies on it.
func (p *Proxy) CheckRedis(ctx context.Context) error {
	return p.checkRedisFor(ctx, time.Time{})
}

// checkRedisFor is CheckRedis for the check due at moment, whose PING the rooms on the same Redis
// share (queue.Queue.PingFor).
func (p *Proxy) checkRedisFor(ctx context.Context, moment time.Time) error {
	err := p.q.PingFor(ctx, moment)
	p.redisResult(err)
	return err
}

func (p *Proxy) redisResult(err error) {
	down := err != nil && !errors.Is(err, context.Canceled)
	if down {
		p.redisRetryAt.Store(p.now().Add(redisRetryAfterError).UnixNano())
	}
	if p.redisDown.Swap(down) != down {
		if down {
			p.log.Error(err, "Redis is unreachable")
		} else {
			p.log.Info("Redis is reachable again")
		}
	}
	if down {
		p.metrics.redisUp.Set(0)
	} else {
		p.metrics.redisUp.Set(1)
	}
}
