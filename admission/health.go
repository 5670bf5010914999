package admission

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// redisRetryAfterError is how long, after a Redis call failed, enter and status answer 503 at once
// instead of calling: while Redis is away each call would wait out its bound, and the visitors with
// it. The first call after it tries Redis again (and the proxy's own check every second does too).
const redisRetryAfterError = 500 * time.Millisecond

// redisHealth is what a room knows of its Redis: whether the last call reached it and, after one
// that did not, until when visitor calls answer without trying. The gate lets requests through on
// it (FailOpen), the visitor API rests on it, the replica runtime checks it every second.
type redisHealth struct {
	down atomic.Bool
	// retryAt is when, after a failed call, visitor calls try Redis again (UnixNano).
	retryAt atomic.Int64
	now     func() time.Time
	log     logr.Logger
	up      prometheus.Gauge
}

// isDown says the last call failed.
func (h *redisHealth) isDown() bool { return h.down.Load() }

// resting says Redis failed a moment ago: enter and status answer 503 without calling it.
func (h *redisHealth) resting() bool {
	return h.down.Load() && h.now().UnixNano() < h.retryAt.Load()
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
