package controllers

import (
	"context"
	"errors"
	"math/big"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
)

const (
	// statsInterval is how often a queue's counters are read from Redis and, when they changed,
	// handed to the reconciler for the WaitingQueue's status.
	statsInterval = 2 * time.Second
	// rateWindow is the sliding window of the observed admission rate.
	rateWindow = 10 * time.Second
	// planRepublish is how often an unchanged plan is written again, so that proxies find it after
	// Redis lost its data.
	planRepublish = 10 * time.Second
	// proxyReportMaxAge is how long a proxy replica's report counts: replicas report every
	// admission.ReportInterval, so one that missed three reports is gone.
	proxyReportMaxAge = 30 * time.Second
	// maxCatchUpTicks bounds how many missed ticks a late tick makes up for; beyond that the missed
	// admissions are dropped rather than released as one burst.
	maxCatchUpTicks = 10
	// Backoff after a failed Redis call: the queue's ticks are skipped, other queues tick on.
	minRedisBackoff = 100 * time.Millisecond
	maxRedisBackoff = 5 * time.Second
)

// QueueConfig is what the scheduler needs to run one WaitingQueue.
type QueueConfig struct {
	UID          types.UID
	Key          types.NamespacedName
	Generation   int64
	RedisURL     string
	Plan         capacity.Plan
	JitterWindow time.Duration
	// Lead puts every not-before time this far ahead of the tick (see AdmissionLead).
	Lead         time.Duration
	PassTTL      time.Duration
	AbandonAfter time.Duration
	PollMin      time.Duration
	PollMax      time.Duration
	Suspended    bool
}

// QueueSnapshot is what the scheduler last observed of one queue.
type QueueSnapshot struct {
	// Generation is the WaitingQueue generation of the config in force.
	Generation int64
	// HaveStats is true once Depth, Active and AdmittedPerSecond were read from Redis.
	HaveStats bool
	Depth     int64
	Active    int64
	// AdmittedPerSecond is the admission rate over the last 10 s, as a decimal string.
	AdmittedPerSecond string
	// RedisError is the last Redis failure, empty after a success.
	RedisError string
	// RedisErrorSince is when Redis started failing.
	RedisErrorSince time.Time
	// LastTick is when the last tick reached Redis.
	LastTick time.Time
	// Proxies are the reports of the proxy replicas that reported lately, by replica; nil when none.
	Proxies []queue.ProxyReport
}

// TickReport describes one tick of one queue.
type TickReport struct {
	Key types.NamespacedName
	// Generation is the WaitingQueue generation of the config the tick ran with.
	Generation int64
	// Scheduled is the tick's place on the grid (its id is Scheduled in Unix milliseconds); Started
	// is when it ran.
	Scheduled, Started time.Time
	// Quota is how many visitors the plan gives the tick (ticks made up for included), and Limit how
	// many it asked Redis to admit at most: Quota, capped at queue.MaxAdmitPerTick.
	Quota, Limit int64
	// Window is the jitter window of the tick; Lead the constant ahead of it; Seed drew the offsets
	// (queue.JitterOffsets).
	Window, Lead time.Duration
	Seed         int64
	Result       queue.AdmitResult
	Err          error
}

// RandSource draws jitter offsets; *math/rand/v2.Rand satisfies it.
type RandSource interface {
	Int64N(n int64) int64
}

// Scheduler admits visitors of every WaitingQueue: one goroutine per queue, each ticking on the
// queue's plan. It runs only on the elected leader, so that a single scheduler admits at a time;
// tick ids in Redis make an overlap during a leader handover harmless anyway.
type Scheduler struct {
	// Pool provides the Redis clients.
	Pool *RedisPool
	// Clock is the time source; nil means the real clock.
	Clock clock.Clock
	// NewRand returns the jitter source of one queue; nil means a randomly seeded PCG.
	NewRand func() RandSource
	// OnTick, when set, is called after every tick that reached Redis (or failed to), from the
	// queue's goroutine. Tests and benchmarks watch the scheduler through it.
	OnTick func(TickReport)

	mu      sync.Mutex
	ctx     context.Context // from Start; nil before
	runners map[types.UID]*queueRunner
	events  chan event.GenericEvent
}

var _ interface {
	Start(context.Context) error
	NeedLeaderElection() bool
} = (*Scheduler)(nil)

// NewScheduler returns a scheduler drawing Redis clients from pool.
func NewScheduler(pool *RedisPool) *Scheduler {
	return &Scheduler{Pool: pool, events: make(chan event.GenericEvent, 1024)}
}

// Events carries a WaitingQueue whose observed state changed, at most every 2 s per queue, for the
// reconciler's channel source.
func (s *Scheduler) Events() <-chan event.GenericEvent { return s.events }

// NeedLeaderElection makes the manager run the scheduler only on the leader.
func (s *Scheduler) NeedLeaderElection() bool { return true }

// Start runs the queues' goroutines until ctx ends, then stops them and waits for them.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.ctx != nil {
		s.mu.Unlock()
		return errors.New("scheduler already started")
	}
	s.ctx = ctx
	for _, r := range s.runners {
		s.launch(r)
	}
	s.mu.Unlock()

	<-ctx.Done()

	s.mu.Lock()
	runners := make([]*queueRunner, 0, len(s.runners))
	for _, r := range s.runners {
		runners = append(runners, r)
	}
	s.mu.Unlock()
	for _, r := range runners {
		r.stop()
	}
	return nil
}

// Ensure runs cfg's queue, or hands a changed config to its goroutine, which applies it at the next tick.
func (s *Scheduler) Ensure(cfg QueueConfig) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runners == nil {
		s.runners = map[types.UID]*queueRunner{}
	}
	r := s.runners[cfg.UID]
	if r == nil {
		r = &queueRunner{s: s, key: cfg.Key}
		r.cfg.Store(&cfg)
		s.runners[cfg.UID] = r
		if s.ctx != nil {
			s.launch(r)
		}
		return
	}
	r.cfg.Store(&cfg)
}

// Remove stops the queue's goroutine and waits until it has returned.
func (s *Scheduler) Remove(uid types.UID) {
	s.mu.Lock()
	r := s.runners[uid]
	delete(s.runners, uid)
	s.mu.Unlock()
	if r != nil {
		r.stop()
		forgetQueueMetrics(r.key.Namespace, r.key.Name)
	}
}

// Snapshot returns what the scheduler last observed of the queue; false when it does not run it.
func (s *Scheduler) Snapshot(uid types.UID) (QueueSnapshot, bool) {
	s.mu.Lock()
	r := s.runners[uid]
	s.mu.Unlock()
	if r == nil {
		return QueueSnapshot{}, false
	}
	return r.snapshot(), true
}

// launch starts r's goroutine; s.mu is held.
func (s *Scheduler) launch(r *queueRunner) {
	ctx, cancel := context.WithCancel(s.ctx)
	r.cancel = cancel
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		r.run(ctx)
	}()
}

func (s *Scheduler) clock() clock.Clock {
	if s.Clock == nil {
		return clock.RealClock{}
	}
	return s.Clock
}

func (s *Scheduler) newRand() RandSource {
	if s.NewRand != nil {
		return s.NewRand()
	}
	return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
}

// queueRunner is the goroutine of one queue and what it observed.
type queueRunner struct {
	s   *Scheduler
	key types.NamespacedName
	cfg atomic.Pointer[QueueConfig]

	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	snap QueueSnapshot
}

func (r *queueRunner) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
}

func (r *queueRunner) snapshot() QueueSnapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snap
}

func (r *queueRunner) update(f func(*QueueSnapshot)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.snap)
}

// tickState is what the goroutine carries from tick to tick.
type tickState struct {
	carry     capacity.Carry
	tick      time.Duration
	next      time.Time // scheduled time of the next tick
	retryAt   time.Time // Redis backoff: no calls before this
	backoff   time.Duration
	published *queue.Plan
	publishAt time.Time
	statsAt   time.Time
	samples   []rateSample // admitted totals over the rate window
	notified  QueueSnapshot
	notifyAt  time.Time

	url     string
	store   *queue.Store
	q       *queue.Queue
	release func()
}

type rateSample struct {
	at    time.Time
	total int64
}

func (r *queueRunner) run(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("scheduler").WithValues("waitingqueue", r.key.String())
	clk := r.s.clock()
	rng := r.s.newRand()
	st := &tickState{}
	defer func() {
		if st.release != nil {
			st.release()
		}
	}()
	cfg := r.cfg.Load()
	st.tick = cfg.Plan.Tick()
	st.next = nextGridPoint(clk.Now(), st.tick)
	labels := []string{r.key.Namespace, r.key.Name}
	log.Info("Scheduler started", "tick", st.tick)

	for {
		timer := clk.NewTimer(st.next.Sub(clk.Now()))
		select {
		case <-ctx.Done():
			timer.Stop()
			log.Info("Scheduler stopped")
			return
		case <-timer.C():
		}
		scheduled := st.next
		now := clk.Now()
		cfg = r.cfg.Load()

		// Ticks missed while this goroutine was late are made up for in this call (up to a bound), so
		// a late tick shifts none of the ones after it and the long-run rate stays exact.
		lag := max(0, now.Sub(scheduled))
		missed := int64(lag / st.tick)
		latest := scheduled.Add(time.Duration(missed) * st.tick)
		tickLagHistogram.WithLabelValues(labels...).Observe(now.Sub(latest).Seconds())

		// A new tick applies from this tick on: its quota now, its cadence from the next grid point.
		// Ticks missed on the old cadence are not made up with the new quota.
		if cfg.Plan.Tick() != st.tick {
			st.tick = cfg.Plan.Tick()
			st.next = nextGridPoint(latest, st.tick)
			missed = 0
		} else {
			st.next = latest.Add(st.tick)
		}

		if now.Before(st.retryAt) {
			continue
		}
		if err := r.connect(st, cfg); err != nil {
			r.fail(ctx, st, now, err)
			continue
		}

		// The tick's work follows whom it can admit, never the plan's size: Redis gets a limit and
		// draws the offsets for the admitted alone, and the limit is capped (docs/performance.md).
		plan := effectivePlan(cfg.Plan)
		quota := int64(0)
		if !cfg.Suspended {
			for range min(missed, maxCatchUpTicks) + 1 {
				quota += st.carry.Next(plan)
			}
		}
		limit := min(quota, queue.MaxAdmitPerTick)
		seed := rng.Int64N(1 << 62)
		callCtx, cancel := context.WithTimeout(ctx, max(st.tick, time.Second))
		start := clk.Now()
		res, err := st.q.Admit(callCtx, queue.AdmitRequest{
			TickID: latest.UnixMilli(), Limit: int(limit), Window: cfg.JitterWindow, Lead: cfg.Lead, Seed: seed,
			PassTTL: cfg.PassTTL, AbandonAfter: cfg.AbandonAfter,
		})
		cancel()
		tickDurationHistogram.WithLabelValues(labels...).Observe(clk.Since(start).Seconds())
		if r.s.OnTick != nil {
			r.s.OnTick(TickReport{Key: r.key, Generation: cfg.Generation, Scheduled: latest, Started: now,
				Quota: quota, Limit: limit, Window: cfg.JitterWindow, Lead: cfg.Lead, Seed: seed, Result: res, Err: err})
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.fail(ctx, st, now, err)
			continue
		}
		st.backoff = 0
		admittedCounter.WithLabelValues(labels...).Add(float64(len(res.Admitted)))
		abandonedCounter.WithLabelValues(labels...).Add(float64(res.Abandoned))
		r.update(func(s *QueueSnapshot) {
			s.Generation, s.RedisError, s.RedisErrorSince, s.LastTick = cfg.Generation, "", time.Time{}, now
		})

		if err := r.publishPlan(ctx, st, cfg, now); err != nil {
			r.fail(ctx, st, now, err)
			continue
		}
		if !now.Before(st.statsAt) {
			if err := r.readStats(ctx, st, now); err != nil {
				r.fail(ctx, st, now, err)
				continue
			}
		}
		r.notify(st, now)
	}
}

// connect makes sure st talks to cfg's Redis, switching clients when the URL changed.
func (r *queueRunner) connect(st *tickState, cfg *QueueConfig) error {
	if st.q != nil && st.url == cfg.RedisURL {
		return nil
	}
	if st.release != nil {
		st.release()
		st.q, st.store, st.release, st.published = nil, nil, nil, nil
	}
	store, release, err := r.s.Pool.Acquire(cfg.RedisURL)
	if err != nil {
		return err
	}
	q, err := store.Queue(r.key.Namespace, r.key.Name)
	if err != nil {
		release()
		return err
	}
	st.url, st.store, st.q, st.release = cfg.RedisURL, store, q, release
	return nil
}

func (r *queueRunner) fail(ctx context.Context, st *tickState, now time.Time, err error) {
	st.backoff = min(max(2*st.backoff, minRedisBackoff), maxRedisBackoff)
	st.retryAt = now.Add(st.backoff)
	first := false
	r.update(func(s *QueueSnapshot) {
		first = s.RedisError == ""
		if first {
			s.RedisErrorSince = now
		}
		s.RedisError = err.Error()
	})
	if first {
		ctrl.LoggerFrom(ctx).Error(err, "Redis call failed; retrying with backoff", "waitingqueue", r.key.String())
	}
	r.notify(st, now)
}

// effectivePlan is the plan ticks run: cfg's, capped at what one tick may admit.
func effectivePlan(p capacity.Plan) capacity.Plan {
	capped, _ := p.Capped(queue.MaxAdmitPerTick)
	return capped
}

// publishPlan writes the plan ticks run, so that proxies estimate waits from the rate visitors get.
func (r *queueRunner) publishPlan(ctx context.Context, st *tickState, cfg *QueueConfig, now time.Time) error {
	num, den := effectivePlan(cfg.Plan).PerTick()
	p := queue.Plan{
		PerTickNum: num, PerTickDen: den, Tick: cfg.Plan.Tick(),
		PollMin: cfg.PollMin, PollMax: cfg.PollMax, PassTTL: cfg.PassTTL, AbandonAfter: cfg.AbandonAfter,
		Suspended: cfg.Suspended, Generation: cfg.Generation,
	}
	if st.published != nil && *st.published == p && now.Before(st.publishAt) {
		return nil
	}
	callCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := st.q.PublishPlan(callCtx, p); err != nil {
		return err
	}
	st.published, st.publishAt = &p, now.Add(planRepublish)
	return nil
}

func (r *queueRunner) readStats(ctx context.Context, st *tickState, now time.Time) error {
	callCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	stats, err := st.q.Stats(callCtx)
	if err != nil {
		return err
	}
	proxies, err := st.q.ProxyReports(callCtx, proxyReportMaxAge)
	if err != nil {
		return err
	}
	if len(proxies) == 0 {
		proxies = nil
	}
	st.statsAt = now.Add(statsInterval)
	st.samples = append(st.samples, rateSample{at: now, total: stats.AdmittedTotal})
	// Keep one sample at least rateWindow old as the window's start.
	for len(st.samples) > 2 && now.Sub(st.samples[1].at) >= rateWindow {
		st.samples = st.samples[1:]
	}
	rate := "0"
	if first := st.samples[0]; now.Sub(first.at) > 0 {
		r := new(big.Rat).SetFrac64((stats.AdmittedTotal-first.total)*int64(time.Second), int64(now.Sub(first.at)))
		rate = capacity.DecimalString(r)
	}
	labels := []string{r.key.Namespace, r.key.Name}
	queueDepthGauge.WithLabelValues(labels...).Set(float64(stats.Depth))
	activeVisitorsGauge.WithLabelValues(labels...).Set(float64(stats.Active))
	r.update(func(s *QueueSnapshot) {
		s.HaveStats, s.Depth, s.Active, s.AdmittedPerSecond, s.Proxies = true, stats.Depth, stats.Active, rate, proxies
	})
	return nil
}

// notify tells the reconciler that the snapshot changed, at most once per statsInterval.
func (r *queueRunner) notify(st *tickState, now time.Time) {
	snap := r.snapshot()
	snap.LastTick = time.Time{} // moves every tick; not worth a status write
	if reflect.DeepEqual(snap, st.notified) || now.Before(st.notifyAt) {
		return
	}
	wq := &herdgatev1alpha1.WaitingQueue{ObjectMeta: metav1.ObjectMeta{Namespace: r.key.Namespace, Name: r.key.Name}}
	select {
	case r.s.events <- event.GenericEvent{Object: wq}:
		st.notified, st.notifyAt = snap, now.Add(statsInterval)
	default: // the reconciler is behind; the next change will try again
	}
}

// nextGridPoint is the first multiple of tick (counted from the Unix epoch) after t. Every manager
// computes the same grid, so ticks of two schedulers carry the same tick id.
func nextGridPoint(t time.Time, tick time.Duration) time.Time {
	ns := t.UnixNano()
	return time.Unix(0, (ns/int64(tick)+1)*int64(tick))
}
