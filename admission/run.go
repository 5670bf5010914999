package admission

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/herdgate/herdgate/admission/replica"
)

// The room as the replica runtime (replica.Runtime) reads it: the config in force, the standing of
// the far path, and Redis' health, which its checks record.

// runtimeView is what a replica.Runtime reads of the room (replica.Room).
type runtimeView struct {
	cfg      *atomic.Pointer[Config]
	engine   Engine
	standing *standings
	redis    *redisHealth
}

// Settings is the config in force, as the loops read it.
func (v runtimeView) Settings() (replica.Settings, bool) {
	cfg := v.cfg.Load()
	if cfg == nil {
		return replica.Settings{}, false
	}
	return replica.Settings{Tick: cfg.Tick(), Adaptive: cfg.Adaptive != nil, PassTTL: cfg.PassTTL,
		MaxSession: cfg.MaxSession, ExactPositions: cfg.ExactPositions}, true
}

// FarPath reads the room's standing for the far positions' tick.
func (v runtimeView) FarPath(ctx context.Context) (abandonAfter time.Duration, open bool) {
	cfg := v.cfg.Load()
	if cfg == nil {
		return 0, false
	}
	r := v.standing.of(ctx, cfg)
	return r.abandonAfter, farPathOpen(v.engine, cfg, r)
}

// RedisAnswered records a health check of Redis.
func (v runtimeView) RedisAnswered(err error) { v.redis.result(err) }
