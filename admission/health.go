package admission

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/herdgate/herdgate/internal/queue"
)

// redisRetryAfterError is how long, after a Redis call failed, enter and status answer 503 at once
// instead of calling: while Redis is away each call would wait out its bound, and the visitors with
// it. After it one call tries Redis again (and the proxy's own check every second does too).
const redisRetryAfterError = 500 * time.Millisecond

// redisHealth is what a room knows of its Redis: whether the last call reached it and, after one
// that did not, until when visitor calls answer without trying. The gate lets requests through on
// it (FailOpen), the visitor API rests on it, the replica runtime checks it every second.
type redisHealth struct {
	down atomic.Bool
	// retryAt is when, after a failed call, a visitor call tries Redis again (UnixNano); while that
	// call is on its way, it is when the next may, should this one never tell how it went.
	retryAt atomic.Int64
	now     func() time.Time
	log     logr.Logger
	up      prometheus.Gauge
}

// isDown says the last call failed.
func (h *redisHealth) isDown() bool { return h.down.Load() }

// resting says Redis failed a moment ago: enter and status answer 503 without calling it. Once the
// rest is over, the first call to ask tries Redis, and the others keep resting until it has its
// answer (result), or its round trip's bound: a Redis that does not answer holds one visitor at a
// time, not everyone who comes meanwhile. A caller told false makes its call, and tells result how it
// went.
func (h *redisHealth) resting() bool {
	if !h.down.Load() {
		return false
	}
	now := h.now().UnixNano()
	at := h.retryAt.Load()
	if now < at {
		return true
	}
	return !h.retryAt.CompareAndSwap(at, now+int64(queue.DefaultRoundTripTimeout))
}

// result records how a call went: err nil for one that reached Redis.
func (h *redisHealth) result(err error) {
	down := err != nil && !errors.Is(err, context.Canceled)
	if down {
		h.retryAt.Store(h.now().Add(redisRetryAfterError).UnixNano())
	}
	if h.down.Swap(down) != down {
		if down {
			h.log.Error(err, "Redis is unreachable")
		} else {
			h.log.Info("Redis is reachable again")
		}
	}
	if down {
		h.up.Set(0)
	} else {
		h.up.Set(1)
	}
}

// errRedisResting is a read of the plan not made: Redis failed a moment ago (redisHealth.resting).
var errRedisResting = errors.New("not called: the room's Redis failed a moment ago")

// plansThroughHealth reads a room's published plan by the room's Redis health, as any call of a
// visitor: not while Redis rests, and each read tells the health how it went. A read of the plan is
// often the first call a Redis that stopped answering holds, and then the one that finds it so.
type plansThroughHealth struct {
	engine queue.PlanReader
	redis  *redisHealth
}

func (p plansThroughHealth) ReadPlan(ctx context.Context) (queue.PublishedPlan, error) {
	if p.redis.resting() {
		return queue.PublishedPlan{}, errRedisResting
	}
	plan, err := p.engine.ReadPlan(ctx)
	switch {
	case errors.Is(err, context.Canceled):
	case errors.Is(err, queue.ErrNoPlan):
		// Redis answered: no scheduler has published one yet.
		p.redis.result(nil)
	default:
		p.redis.result(err)
	}
	return plan, err
}
