package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Plan is what the scheduler publishes for the proxies: the quota they estimate waits from, and the
// timings they hand to visitors.
type Plan struct {
	// PerTickNum/PerTickDen visitors are admitted per Tick.
	PerTickNum, PerTickDen int64
	Tick                   time.Duration
	// PollMin and PollMax bound the poll interval handed to waiting visitors.
	PollMin, PollMax time.Duration
	// PassTTL is the validity of a pass; AbandonAfter the silence after which a visitor loses its place.
	PassTTL, AbandonAfter time.Duration
	// Suspended is true while admissions are stopped.
	Suspended bool
	// Generation is the WaitingQueue generation the plan was derived from.
	Generation int64
}

var planFields = []string{"num", "den", "tick", "pollMin", "pollMax", "passTTL", "abandonAfter", "suspended", "generation"}

// PublishPlan stores p for the proxies.
func (q *Queue) PublishPlan(ctx context.Context, p Plan) error {
	if p.PerTickDen <= 0 || p.PerTickNum < 0 || p.Tick <= 0 {
		return fmt.Errorf("publishing plan of queue %s: quota %d/%d per %s is not valid", q.prefix, p.PerTickNum, p.PerTickDen, p.Tick)
	}
	suspended := 0
	if p.Suspended {
		suspended = 1
	}
	values := []any{
		"num", p.PerTickNum, "den", p.PerTickDen, "tick", int64(p.Tick),
		"pollMin", int64(p.PollMin), "pollMax", int64(p.PollMax),
		"passTTL", int64(p.PassTTL), "abandonAfter", int64(p.AbandonAfter),
		"suspended", suspended, "generation", p.Generation,
	}
	if err := q.rdb.HSet(ctx, q.keys.plan, values...).Err(); err != nil {
		return fmt.Errorf("publishing plan of queue %s: %w", q.prefix, err)
	}
	return nil
}

// ErrNoPlan means no scheduler has published a plan for the queue yet.
var ErrNoPlan = errors.New("no plan published yet")

// ReadPlan reads the published plan, or ErrNoPlan.
func (q *Queue) ReadPlan(ctx context.Context) (Plan, error) {
	vals, err := q.rdb.HMGet(ctx, q.keys.plan, planFields...).Result()
	if err != nil {
		return Plan{}, fmt.Errorf("reading plan of queue %s: %w", q.prefix, err)
	}
	ints := make([]int64, len(planFields))
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			return Plan{}, ErrNoPlan
		}
		if ints[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return Plan{}, fmt.Errorf("plan of queue %s: field %s is %q: %w", q.prefix, planFields[i], s, err)
		}
	}
	return Plan{
		PerTickNum: ints[0], PerTickDen: ints[1], Tick: time.Duration(ints[2]),
		PollMin: time.Duration(ints[3]), PollMax: time.Duration(ints[4]),
		PassTTL: time.Duration(ints[5]), AbandonAfter: time.Duration(ints[6]),
		Suspended: ints[7] != 0, Generation: ints[8],
	}, nil
}

// PlanCache reads the published plan at most once per TTL, so that a proxy serving thousands of
// polls per second reads it a few times per second. It is safe for concurrent use.
type PlanCache struct {
	q   *Queue
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	plan    Plan
	err     error
	fetched time.Time
	valid   bool
}

// NewPlanCache caches q's plan for ttl.
func NewPlanCache(q *Queue, ttl time.Duration) *PlanCache {
	return &PlanCache{q: q, ttl: ttl, now: time.Now}
}

// Get returns the plan. When Redis fails after a plan was read, it returns the last plan read with
// the error, so the caller can keep serving on slightly stale timings.
func (c *PlanCache) Get(ctx context.Context) (Plan, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.valid && c.now().Sub(c.fetched) < c.ttl {
		return c.plan, c.err
	}
	p, err := c.q.ReadPlan(ctx)
	switch {
	case err == nil:
		c.plan, c.err = p, nil
	case errors.Is(err, ErrNoPlan) || errors.Is(err, redis.Nil):
		c.plan, c.err = Plan{}, ErrNoPlan
	default:
		// Keep the last good plan, and retry at the next call rather than after a full TTL.
		return c.plan, err
	}
	c.fetched, c.valid = c.now(), true
	return c.plan, c.err
}
