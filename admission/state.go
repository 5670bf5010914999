package admission

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/herdgate/herdgate/admission/replica"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
)

// The state a room's roles share (roomState): the config in force, Redis' health, draining.

// roomState is what the roles of a room share: its config in force, its engine and clock, Redis'
// health, draining, its metrics, and what the replica keeps in memory between its calls to Redis.
type roomState struct {
	cfg     atomic.Pointer[Config]
	name    string // namespace/name
	engine  Engine
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
	sessions     *replica.Sessions
	workload     *replica.WorkloadMeter
	polls        replica.PollStretches
	farPositions *replica.FarPositions
	// reclaim writes back the passes visitors hold after a failover of Redis.
	reclaim reclaimer
	// verifier calls an external challenge's provider.
	verifier *http.Client
	// roomID names the room in herdgate's links where rooms share a host (RoomParam); sharesHost
	// says the room shares one in a shared proxy set, so that its links carry it.
	roomID     string
	sharesHost atomic.Bool
}

// SetConfig applies a changed config to the requests that start after it.
func (s *roomState) SetConfig(cfg *Config) {
	if cfg.PageProblem != nil {
		s.log.Error(cfg.PageProblem, "Serving the built-in waiting page in place of the queue's template")
	}
	if d, ok := s.engine.(durableEngine); ok {
		var wait time.Duration
		if cfg.Replicated {
			wait = queue.DefaultReplicaWait
		}
		d.SetReplicated(wait)
	}
	if l, ok := s.engine.(laneEngine); ok {
		// The derivation checked the names the engine checks.
		if err := l.SetLanes(cfg.LaneNames()); err != nil {
			s.log.Error(err, "Setting the room's lanes")
		}
	}
	s.cfg.Store(cfg)
	s.state.applied(cfg.Generation)
	s.metrics.configGeneration.Set(float64(cfg.Generation))
	s.metrics.configRefused.Set(0)
}

// RefuseConfig records that generation of the WaitingQueue could not be applied, and why; the
// config in force stays. The refusal is logged, counted, and reported to the manager (see Replica).
func (s *roomState) RefuseConfig(generation int64, err error) {
	if s.state.refused(generation, err.Error()) {
		s.log.Error(err, "Refusing a WaitingQueue generation that does not make a valid config; keeping the config in force",
			"generation", generation, "serving", s.state.serving())
		s.metrics.configRefusals.Inc()
	}
	s.metrics.configRefused.Set(1)
}

// Name names the room, as namespace/name of its WaitingQueue.
func (s *roomState) Name() string { return s.name }

// Config returns the config in force; nil before the first valid one.
func (s *roomState) Config() *Config { return s.cfg.Load() }

// configNow is the config in force: the event's running now (spec.events), or the room's own; nil
// before the first valid one.
func (s *roomState) configNow() *Config {
	cfg := s.cfg.Load()
	if cfg == nil || len(cfg.events) == 0 {
		return cfg
	}
	return cfg.At(s.now())
}

// redisRetryAfterError is how long, after a Redis call failed, enter and status answer 503 at once
// instead of calling: while Redis is away each call would wait out its bound, and the visitors with
// it. The first call after it tries Redis again (and the proxy's own check every second does too).
const redisRetryAfterError = 500 * time.Millisecond

// redisResting says Redis failed a moment ago: enter and status answer 503 without calling it.
func (s *roomState) redisResting() bool {
	return s.redisDown.Load() && s.now().UnixNano() < s.redisRetryAt.Load()
}

// Draining says StartDrain was called: fronts ask their clients to close their connections.
func (s *roomState) Draining() bool { return s.draining.Load() }

// Log is the proxy's logger, for the fronts' own errors.
func (s *roomState) Log() logr.Logger { return s.log }

// StartDrain makes readyz fail, so that load balancers stop sending new visitors before shutdown.
func (s *roomState) StartDrain() { s.draining.Store(true) }

// CheckRedis pings Redis and records whether it answered; FailOpen relies on it.
func (s *roomState) CheckRedis(ctx context.Context) error {
	return s.checkRedisFor(ctx, time.Time{})
}

// checkRedisFor is CheckRedis for the check due at moment, whose PING the rooms on the same Redis
// share (queue.Queue.PingFor).
func (s *roomState) checkRedisFor(ctx context.Context, moment time.Time) error {
	err := s.engine.PingFor(ctx, moment)
	s.redisResult(err)
	return err
}

func (s *roomState) redisResult(err error) {
	down := err != nil && !errors.Is(err, context.Canceled)
	if down {
		s.redisRetryAt.Store(s.now().Add(redisRetryAfterError).UnixNano())
	}
	if s.redisDown.Swap(down) != down {
		if down {
			s.log.Error(err, "Redis is unreachable")
		} else {
			s.log.Info("Redis is reachable again")
		}
	}
	if down {
		s.metrics.redisUp.Set(0)
	} else {
		s.metrics.redisUp.Set(1)
	}
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
