package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/phase"
)

// phaseCodes are the phases as the plan hash and the scripts hold them (PHASE_* in common.lua). A
// plan without a phase, as an older scheduler wrote, is Open.
var phaseCodes = map[phase.Phase]int64{phase.Open: 0, phase.Scheduled: 1, phase.PreQueue: 2, phase.Opening: 3, phase.Closed: 4}

func phaseOfCode(c int64) phase.Phase {
	for p, code := range phaseCodes {
		if code == c {
			return p
		}
	}
	return phase.Open
}

// PublishedPlan is what the scheduler publishes for the proxies: what it decides, the plan ticks run
// (which they estimate waits and poll hints from) and the room's phase, with the schedule it is of. It is
// read back ready to use. (capacity.Plan is the admission plan itself, which it carries as Quota.)
type PublishedPlan struct {
	// Quota is the admission plan ticks run. ReadPlan returns the zero PublishedPlan, which admits
	// nobody, while Suspended.
	Quota capacity.Plan
	// PollMin, PollMax and AbandonAfter are the spec's timings, written for proxies of the previous
	// version, which read them here during a rolling upgrade. A proxy takes its timings from its own
	// settings; these are not read, and go once no proxy of that version can remain.
	PollMin, PollMax time.Duration
	AbandonAfter     time.Duration
	// Suspended is true while admissions are stopped.
	Suspended bool
	// Phase is the room's phase; the empty phase publishes Open. While a draw runs, the published
	// phase is Opening whatever the scheduler sends.
	Phase phase.Phase
	// PreQueueFrom, OpensAt and ClosesAt are the room's schedule, zero without one (ClosesAt also
	// when it does not close), to the millisecond.
	PreQueueFrom, OpensAt, ClosesAt time.Time
	// Forecast is the scheduler's latest measure of the room's queues, for wait estimates; nil when
	// it has none (a publication without one keeps the last one written).
	Forecast *Forecast
}

// SameDecision says p and o decide the same, whatever their forecasts.
func (p PublishedPlan) SameDecision(o PublishedPlan) bool {
	p.Forecast, o.Forecast = nil, nil
	return p == o
}

var planFields = []string{"num", "den", "tick", "pollMin", "pollMax", "abandonAfter", "suspended"}

// scheduleFields may be missing, in a plan an older scheduler wrote.
var scheduleFields = []string{"phase", "preQueueFrom", "opensAt", "closesAt"}

func unixMilliOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func timeOrZero(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// PublishPlan stores p for the proxies.
func (q *Queue) PublishPlan(ctx context.Context, p PublishedPlan) error {
	args, err := q.planArgs(p)
	if err != nil {
		return err
	}
	if err := planScript.Run(ctx, q.rdb, q.planKeys(), args...).Err(); err != nil {
		return fmt.Errorf("publishing plan of queue %s: %w", q.prefix, err)
	}
	return nil
}

// planKeys are the plan script's keys.
func (q *Queue) planKeys() []string { return []string{q.keys.plan, q.keys.draw} }

// planArgs checks p and turns it into the plan script's arguments.
func (q *Queue) planArgs(p PublishedPlan) ([]any, error) {
	num, den := p.Quota.PerTick()
	if den <= 0 || p.Quota.Tick() <= 0 {
		return nil, fmt.Errorf("publishing plan of queue %s: quota %d/%d per %s is not valid", q.prefix, num, den, p.Quota.Tick())
	}
	phase, ok := phaseCodes[cmp.Or(p.Phase, phase.Open)]
	if !ok {
		return nil, fmt.Errorf("publishing plan of queue %s: unknown phase %q", q.prefix, p.Phase)
	}
	suspended := 0
	if p.Suspended {
		suspended = 1
	}
	args := []any{
		phase, "num", num, "den", den, "tick", int64(p.Quota.Tick()),
		"pollMin", int64(p.PollMin), "pollMax", int64(p.PollMax), "abandonAfter", int64(p.AbandonAfter),
		"suspended", suspended, "preQueueFrom", unixMilliOrZero(p.PreQueueFrom), "opensAt", unixMilliOrZero(p.OpensAt),
		"closesAt", unixMilliOrZero(p.ClosesAt),
	}
	if p.Forecast != nil {
		args = append(args, forecastField, p.Forecast.encode(), slotsField, encodeSlots(p.Forecast))
	}
	return args, nil
}

// ErrNoPlan means no scheduler has published a plan for the queue yet.
var ErrNoPlan = errors.New("no plan published yet")

// ReadPlan reads the published plan, or ErrNoPlan.
func (q *Queue) ReadPlan(ctx context.Context) (PublishedPlan, error) {
	vals, err := q.rdb.HMGet(ctx, q.keys.plan, append(append(slices.Clone(planFields), scheduleFields...), forecastField, slotsField)...).Result()
	if err != nil {
		return PublishedPlan{}, fmt.Errorf("reading plan of queue %s: %w", q.prefix, err)
	}
	// A forecast that cannot be read estimates nothing: waits are told by position, as without one.
	var forecast *Forecast
	if s, ok := vals[len(vals)-2].(string); ok {
		forecast, _ = decodeForecast(s)
	}
	if s, ok := vals[len(vals)-1].(string); ok && forecast != nil {
		forecast.Slots = decodeSlots(s, forecast.At)
	}
	vals = vals[:len(vals)-2]
	ints := make([]int64, len(vals))
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			if i < len(planFields) {
				return PublishedPlan{}, ErrNoPlan
			}
			continue
		}
		if ints[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			field := append(slices.Clone(planFields), scheduleFields...)[i]
			return PublishedPlan{}, fmt.Errorf("plan of queue %s: field %s is %q: %w", q.prefix, field, s, err)
		}
	}
	p := PublishedPlan{PollMin: time.Duration(ints[3]), PollMax: time.Duration(ints[4]), AbandonAfter: time.Duration(ints[5]), Suspended: ints[6] != 0,
		Phase: phaseOfCode(ints[7]), PreQueueFrom: timeOrZero(ints[8]), OpensAt: timeOrZero(ints[9]), ClosesAt: timeOrZero(ints[10]),
		Forecast: forecast}
	if !p.Suspended {
		if p.Quota, err = capacity.FromQuota(ints[0], ints[1], time.Duration(ints[2]), false); err != nil {
			return PublishedPlan{}, fmt.Errorf("plan of queue %s: %w", q.prefix, err)
		}
	}
	return p, nil
}

// PlanCache reads the published plan at most once per TTL, so that a proxy serving thousands of
// polls per second reads it a few times per second. It is safe for concurrent use. One read of Redis
// is on its way at a time, and it holds nobody else: while it is, the others are answered what the
// cache last read (docs/guides/operations.md, "Conditions, failures and modes").
type PlanCache struct {
	q   PlanReader
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	plan    PublishedPlan
	err     error
	fetched time.Time
	valid   bool
	// failed and retryAt: the last read failed, and the next one waits until retryAt.
	failed  error
	retryAt time.Time
	// change is the last change of the plan's quota this cache saw.
	change PlanChange
	// reading is closed when the read on its way ends; nil when none is.
	reading chan struct{}
}

// PlanChange is a change of the published quota as a PlanCache saw it: the quota before, and when
// the cache read the new one (zero when it saw none).
type PlanChange struct {
	Before capacity.Plan
	At     time.Time
}

// PlanRetryAfterError is how long a failed read of the plan is not tried again: a Redis that is away
// would otherwise be read again by every request that needs the plan.
const PlanRetryAfterError = time.Second

// PlanReader reads a queue's published plan; *Queue is one.
type PlanReader interface {
	ReadPlan(ctx context.Context) (PublishedPlan, error)
}

// NewPlanCache caches q's plan for ttl.
func NewPlanCache(q PlanReader, ttl time.Duration) *PlanCache {
	return &PlanCache{q: q, ttl: ttl, now: time.Now}
}

// Get returns the plan. When Redis fails after a plan was read, it returns the last plan read with
// the error, so the caller can keep serving on slightly stale timings.
func (c *PlanCache) Get(ctx context.Context) (PublishedPlan, error) {
	p, _, err := c.Read(ctx)
	return p, err
}

// Read is Get with the last change of the quota the cache saw: a proxy holds a poll timed under
// the quota before to the intervals it gave then.
//
// When the plan is due, the caller that finds it so reads it; others that come meanwhile get what
// the cache last read at once, or, before the first read has ended, wait for it (or their context).
func (c *PlanCache) Read(ctx context.Context) (PublishedPlan, PlanChange, error) {
	c.mu.Lock()
	now := c.now()
	switch {
	case c.valid && now.Sub(c.fetched) < c.ttl:
		defer c.mu.Unlock()
		return c.plan, c.change, c.err
	case c.failed != nil && (now.Before(c.retryAt) || c.reading != nil):
		defer c.mu.Unlock()
		return c.plan, c.change, c.failed
	case c.reading != nil && c.valid:
		defer c.mu.Unlock()
		return c.plan, c.change, c.err
	case c.reading != nil:
		reading := c.reading
		c.mu.Unlock()
		select {
		case <-reading:
		case <-ctx.Done():
			return PublishedPlan{}, PlanChange{}, ctx.Err()
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.last()
	}
	reading := make(chan struct{})
	c.reading = reading
	c.mu.Unlock()
	// Bounded like a store's round trip, and the cache's, not the caller's: a caller that goes away
	// does not make the plan's read a failure for everyone else.
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultRoundTripTimeout)
	p, err := c.q.ReadPlan(callCtx)
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reading = nil
	close(reading)
	c.store(p, err, now)
	return c.last()
}

// store keeps what a read of the plan that began at began answered, under mu.
func (c *PlanCache) store(p PublishedPlan, err error, began time.Time) {
	now := c.now()
	switch {
	case err == nil:
		if c.valid && c.err == nil && p.Quota != c.plan.Quota {
			c.change = PlanChange{Before: c.plan.Quota, At: began}
		}
		c.plan, c.err = p, nil
	case errors.Is(err, ErrNoPlan) || errors.Is(err, redis.Nil):
		c.plan, c.err = PublishedPlan{}, ErrNoPlan
	default:
		// Keep the last good plan, and retry after a short pause rather than after a full TTL.
		c.failed, c.retryAt = err, now.Add(PlanRetryAfterError)
		return
	}
	c.failed = nil
	c.fetched, c.valid = now, true
}

// last is what the cache answers after its last read, under mu.
func (c *PlanCache) last() (PublishedPlan, PlanChange, error) {
	if c.failed != nil {
		return c.plan, c.change, c.failed
	}
	return c.plan, c.change, c.err
}
