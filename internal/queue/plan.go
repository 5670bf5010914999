package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdgate/herdgate/internal/capacity"
)

// Plan is what the scheduler publishes for the proxies: the plan ticks run, which they estimate waits
// and poll hints from, and the timings they hand to visitors. It is read back ready to use.
type Plan struct {
	// Quota is the admission plan ticks run. ReadPlan returns the zero Plan, which admits nobody,
	// while Suspended.
	Quota capacity.Plan
	// PollMin and PollMax bound the poll interval handed to waiting visitors.
	PollMin, PollMax time.Duration
	// AbandonAfter is the silence after which a visitor loses its place.
	AbandonAfter time.Duration
	// Suspended is true while admissions are stopped.
	Suspended bool
}

var planFields = []string{"num", "den", "tick", "pollMin", "pollMax", "abandonAfter", "suspended"}

// PublishPlan stores p for the proxies.
func (q *Queue) PublishPlan(ctx context.Context, p Plan) error {
	num, den := p.Quota.PerTick()
	if den <= 0 || p.Quota.Tick() <= 0 {
		return fmt.Errorf("publishing plan of queue %s: quota %d/%d per %s is not valid", q.prefix, num, den, p.Quota.Tick())
	}
	suspended := 0
	if p.Suspended {
		suspended = 1
	}
	values := []any{
		"num", num, "den", den, "tick", int64(p.Quota.Tick()),
		"pollMin", int64(p.PollMin), "pollMax", int64(p.PollMax), "abandonAfter", int64(p.AbandonAfter),
		"suspended", suspended,
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
	p := Plan{PollMin: time.Duration(ints[3]), PollMax: time.Duration(ints[4]), AbandonAfter: time.Duration(ints[5]), Suspended: ints[6] != 0}
	if !p.Suspended {
		if p.Quota, err = capacity.FromQuota(ints[0], ints[1], time.Duration(ints[2]), false); err != nil {
			return Plan{}, fmt.Errorf("plan of queue %s: %w", q.prefix, err)
		}
	}
	return p, nil
}

// PlanCache reads the published plan at most once per TTL, so that a proxy serving thousands of
// polls per second reads it a few times per second. It is safe for concurrent use.
type PlanCache struct {
	q   PlanReader
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	plan    Plan
	err     error
	fetched time.Time
	valid   bool
}

// PlanReader reads a queue's published plan; *Queue is one.
type PlanReader interface {
	ReadPlan(ctx context.Context) (Plan, error)
}

// NewPlanCache caches q's plan for ttl.
func NewPlanCache(q PlanReader, ttl time.Duration) *PlanCache {
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
