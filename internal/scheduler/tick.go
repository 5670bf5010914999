package scheduler

import (
	"context"
	"errors"
	"math"
	"math/big"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/phase"
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
	// replica.ReportInterval (admission/replica), so one that missed three reports is gone.
	proxyReportMaxAge = 30 * time.Second
	// maxCatchUpTicks bounds how many missed ticks a late tick makes up for; beyond that the missed
	// admissions are dropped rather than released as one burst.
	maxCatchUpTicks = 10
	// Backoff after a failed Redis call: the queue's ticks are skipped, other queues tick on.
	minRedisBackoff = 100 * time.Millisecond
	maxRedisBackoff = 5 * time.Second
	// failoverPause is how long a room admits nobody after its Redis failed over: long enough for the
	// proxies, which learn of it at their first call to the new primary, to write back the passes
	// visitors hold (a replica's replica.Reclaims flush every second) before the scheduler counts the
	// active passes and the waiting queue again (docs/guides/redis.md).
	failoverPause = 3 * time.Second
	// defaultIdleSleep is how long a room nobody waits in sleeps between ticks. The tick at its end
	// also reads the counters, the proxies' reports and the workload, so a sleeping room costs Redis
	// and the manager one round of calls per sleep (docs/performance.md, "Idle rooms"). The figures
	// it reads reach the status at most every 10 s anyway (the controller's live-status interval), so
	// a shorter sleep would buy nothing a user sees; a wake-up lost with a reconnecting subscription
	// delays a waiting visitor by at most this.
	defaultIdleSleep = 10 * time.Second
	// adaptiveIdleSleep bounds the sleep of an Adaptive room: visitors it admits at once while it
	// sleeps take the budget of its adaptive rate, so the replicas' reports must keep steering that
	// rate at the cadence a Declared room reads them (workloadReadInterval).
	adaptiveIdleSleep = workloadReadInterval
	// defaultWakeSlot is the slot sleeping rooms wake together on (WithWakeSlot): a reference tick.
	// The rooms that wake in one slot share round trips, and their wake ticks run at once; a second
	// saved a few more round trips, but woke ten times as many rooms at once (docs/performance.md,
	// "A thousand rooms on one manager").
	defaultWakeSlot = 100 * time.Millisecond
)

// tickState is what a queue's goroutine carries from tick to tick.
type tickState struct {
	carry     capacity.Carry
	tick      time.Duration
	next      time.Time // scheduled time of the next tick
	retryAt   time.Time // Redis backoff: no calls before this
	backoff   time.Duration
	published *queue.PublishedPlan
	publishAt time.Time
	resumed   bool // the last tick in Redis was read, so that this runner carries on from it
	// failover is the last failover of the room's Redis this runner took in, pausedUntil the end of
	// the pause it brought.
	failover    int64
	pausedUntil time.Time
	// primary is the replication id of the server the last tick ran on: a tick that finds another
	// one admits nobody (queue.AdmitRequest.Primary).
	primary string
	// unacknowledged is how many of the queue's writes no replica acknowledged, as last counted.
	unacknowledged int64
	statsAt        time.Time
	samples        []rateSample // admitted totals over the rate window
	atOnce         int64        // the instant admissions total last read, -1 before the first read
	released       int64        // the released total last read, -1 before the first read
	notified       Snapshot
	notifyAt       time.Time // no notification before
	// notifiedAt is when the reconciler was told last: a change of live figures alone waits for
	// liveNotifyInterval after it.
	notifiedAt time.Time
	// drainedNow: the last tick put the room to sleep, and the reconciler is told at once, since the
	// room ticks next only when it wakes.
	drainedNow bool
	draw       *drawRun // the pre-queue's draw under way
	// beacon is the draw waiting for its beacon's round, when it does.
	beacon   *beaconWait
	drawnFor time.Time // the opening whose draw is done
	// forgotFor is the opening whose earlier passes this runner dropped (queue.ForgetPassesBefore).
	forgotFor time.Time
	workload  workloadState
	supported supportedDepth
	// arrivals times the waits of the visitors the ticks admit.
	arrivals arrivalClock
	// busy is the room's current or last busy spell.
	busy BusySpell
	// fronts measure the room's queues for the forecast the proxies estimate waits with, and slots,
	// of a room with a cap on its active passes, how long they hold their slots.
	fronts  queueFronts
	slots   capacity.SlotMeter
	metrics *queueMetrics
	// asleep: the last tick left nobody waiting, and the room sleeps until next unless woken.
	asleep bool
	// wakeAt, when set, is the end of the wake slot the sleep lasts to, where its timer fires; next
	// is then the room's last grid point before it (wakeTogether).
	wakeAt time.Time

	url     string
	q       *queue.Queue
	release func()
	// wakes receives the room's wake-ups (queue.Wakes).
	wakes <-chan struct{}
	// lanes are the lanes given to q and reconciled in Redis, once lanesApplied.
	lanes        []string
	lanesApplied bool
}

type rateSample struct {
	at                 time.Time
	admitted, released int64
	// lanes are the lanes' admission totals, by lane.
	lanes map[string]int64
}

// run ticks until ctx ends: wait for the grid point, work out which ticks it covers, admit, then
// publish the plan and read the counters.
func (r *runner) run(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("scheduler").WithValues("waitingqueue", r.key.String())
	rng := r.s.newRand()
	st := &tickState{atOnce: -1, released: -1, metrics: newQueueMetrics(r.key.Namespace, r.key.Name)}
	defer func() {
		if st.release != nil {
			st.release()
		}
	}()
	st.tick = r.cfg.Load().Effective.Tick()
	st.next = r.nextGridPoint(r.s.clock.Now(), st.tick)
	log.Info("Scheduler started", "tick", st.tick, "gridPhase", r.s.gridPhase(r.key, st.tick))
	for {
		if !r.waitForGridPoint(ctx, st) {
			log.Info("Scheduler stopped")
			return
		}
		t := r.onGrid(st)
		if t.now.Before(st.retryAt) {
			continue
		}
		if err := r.connect(st, t.cfg); err != nil {
			r.fail(ctx, st, t.now, err)
			continue
		}
		st.applyDurability(t.cfg)
		r.applyLanes(ctx, st, t.cfg)
		if !st.resumed {
			// A failed read leaves it for the next tick; this one's admit meets the same Redis and
			// reports what failed.
			_ = r.resume(ctx, st, &t)
		}
		if scheduled := t.cfg.PhaseAt(t.latest); st.drawing(t.cfg, scheduled) {
			// The draw takes up to half a tick, so the tick's admission still runs on time.
			err := r.drawStep(ctx, st, t.cfg, scheduled, st.tick/2)
			drawErr := ""
			if errors.Is(err, errNoSeed) {
				drawErr, err = err.Error(), nil
			}
			r.update(func(s *Snapshot) { s.DrawError = drawErr })
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				r.fail(ctx, st, t.now, err)
				continue
			}
		}
		// What the proxies measured steers an Adaptive room's very tick: an error burst brakes within
		// two ticks (one for the replicas' report, one for this read). A failed read keeps the last
		// rate; the admission that follows meets the same Redis and reports what failed. A Declared
		// room reads the reports for its status only, with its counters after the tick.
		if adaptive(t.cfg) {
			if err := r.readWorkload(ctx, st, t.cfg, t.now); err != nil && ctx.Err() == nil {
				log.V(1).Info("Reading the workload reports failed; keeping the last rate", "error", err.Error())
			}
		}
		current := r.roomPhase(st, t)
		after := r.dueAfterTick(st, t.cfg, current, t.now)
		replies, err := r.admit(ctx, st, t, rng, current, after)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			continue // admit recorded the failure
		}
		if err := r.takeAfterTick(st, t.cfg, t.now, after, replies); err != nil {
			r.fail(ctx, st, t.now, err)
			continue
		}
		if after.observe == nil && !adaptive(t.cfg) {
			if err := r.readWorkload(ctx, st, t.cfg, t.now); err != nil && ctx.Err() == nil {
				log.V(1).Info("Reading the workload reports failed", "error", err.Error())
			}
		}
		r.notify(st, t.now)
	}
}

// connect makes sure st talks to cfg's Redis, switching clients when the URL changed.
func (r *runner) connect(st *tickState, cfg *Room) error {
	if st.q != nil && st.url == cfg.RedisURL {
		return nil
	}
	if st.release != nil {
		st.release()
		st.q, st.release, st.published, st.wakes = nil, nil, nil, nil
	}
	st.resumed = false // another Redis keeps its own last tick
	store, release, err := r.s.pool.Acquire(cfg.RedisURL)
	if err != nil {
		return err
	}
	q, err := store.Queue(r.key.Namespace, r.key.Name)
	if err != nil {
		release()
		return err
	}
	wakes, stopListening := store.Wakes().Listen(q)
	st.url, st.q, st.wakes, st.unacknowledged = cfg.RedisURL, q, wakes, 0
	st.release = func() {
		stopListening()
		release()
	}
	return nil
}

// roomPhase is the room's phase at the tick's grid point: the schedule's, with Opening while the draw of
// the pre-queue runs.
func (r *runner) roomPhase(st *tickState, t gridTick) phase.Phase {
	current := t.cfg.PhaseAt(t.latest)
	if st.drawing(t.cfg, current) {
		current = phase.Opening
	}
	r.update(func(s *Snapshot) { s.Phase, s.Event = current, t.cfg.Event })
	st.metrics.setPhase(current)
	return current
}

// admit runs the tick in Redis. Its work follows whom it can admit, never the plan's size: Redis
// gets a limit and draws the offsets for the admitted alone, and the limit is capped
// (docs/performance.md). Its steps: reach Redis again after a failure, share out the tick's quota,
// decide whether the room may sleep, make the call, and take in its answer.
func (r *runner) admit(ctx context.Context, st *tickState, t gridTick, rng RandSource, current phase.Phase, after afterTick) (queue.TickReplies, error) {
	cfg := t.cfg
	plan := st.quota(cfg)
	r.reachAfterFailure(ctx, st)
	paused := r.pausedAfterFailover(ctx, st, t.now)
	quota, share := r.share(st, cfg, plan, t.missed, current, paused)
	limit := min(quota, queue.MaxAdmitPerTick)
	// What the queue does not take of this tick's own share, new visitors may take at once until the
	// next tick; ticks made up for give no instant budget, so a late tick never opens a burst.
	instant := min(share, limit)
	if current != phase.Open {
		instant = 0
	}
	// While the draw runs, only the part of the pre-queue already placed can be admitted.
	holding, through := current == phase.Opening, int64(0)
	if st.draw != nil {
		through = st.draw.state.Settled()
	}
	seed := rng.Int64N(1 << 62)
	sleep := r.sleepAfter(st, t, current, plan, limit)
	callCtx, cancel := context.WithTimeout(ctx, max(st.tick, time.Second))
	start := r.s.clock.Now()
	tick := st.q.Tick
	if t.together {
		tick = st.q.TickTogether
	}
	replies := tick(callCtx, queue.TickCalls{
		Admit: queue.AdmitRequest{
			TickID: t.latest.UnixMilli(), Limit: int(limit), Window: cfg.JitterWindow, Lead: cfg.Lead, Seed: seed,
			InstantBudget: int(instant), Tick: st.tick, MaxActive: cfg.MaxActive, PassTTL: cfg.PassTTL,
			AbandonAfter: cfg.AbandonAfter, AbandonAtTurnAfter: cfg.AbandonAtTurnAfter,
			Holding: holding, Through: through, SleepFor: sleep.budget, SleepShare: int(sleep.share), Primary: st.primary,
			Lanes: laneShares(cfg), QuietAfter: quietAfter(cfg.PollMin, cfg.AbandonAtTurnAfter),
		},
		Plan: after.plan, Observe: after.observe,
	})
	cancel()
	res, err := replies.Admit, replies.AdmitErr
	st.metrics.tickDuration.Observe(r.s.clock.Since(start).Seconds())
	r.takeAdmission(ctx, st, t, sleep, res, err)
	if r.s.observe != nil {
		r.s.observe(TickReport{Key: r.key, Generation: cfg.Generation, Scheduled: t.latest, Started: t.now,
			Quota: quota, Limit: limit, Rate: rateOf(plan), Window: cfg.JitterWindow, Lead: cfg.Lead, Seed: seed, Phase: current, Result: res, Err: err})
	}
	return replies, err
}

// reachAfterFailure reaches Redis first when the last call failed, so that a failover is known
// before this tick admits anyone on the new primary.
func (r *runner) reachAfterFailure(ctx context.Context, st *tickState) {
	if st.backoff == 0 {
		return
	}
	reachCtx, cancel := context.WithTimeout(ctx, max(st.tick, time.Second))
	_ = st.q.Reach(reachCtx)
	cancel()
}

// share is the tick's quota, with the ticks missed before it made up for (up to maxCatchUpTicks),
// and share, its own part. Before opening nobody is admitted, and no quota piles up for the
// opening; after a failover nobody is admitted for a while, and what the pause held back is not
// made up for.
func (r *runner) share(st *tickState, cfg *Room, plan capacity.Plan, missed int64, current phase.Phase, paused bool) (quota, share int64) {
	if !cfg.Admits() || current.Before() || paused {
		return 0, 0
	}
	madeUp := min(missed, maxCatchUpTicks)
	for range madeUp + 1 {
		share = st.carry.Next(plan)
		quota += share
	}
	st.metrics.ticksMadeUp.Add(float64(madeUp))
	st.metrics.ticksDropped.Add(float64(missed - madeUp))
	return quota, share
}

// sleep is how a room that the tick leaves with nobody waiting sleeps: its budget for visitors let
// in at once lasts budget (0: it may not sleep), refilled to share each tick it sleeps through, and
// it wakes as wake says.
type sleep struct {
	budget time.Duration
	share  int64
	wake   wakeUp
}

// sleepAfter is how the room may sleep after this tick: only an open room that is not drawing.
func (r *runner) sleepAfter(st *tickState, t gridTick, current phase.Phase, plan capacity.Plan, limit int64) sleep {
	cfg := t.cfg
	if current != phase.Open || st.draw != nil || !cfg.Admits() {
		return sleep{}
	}
	sleepFor := r.sleepFor(cfg, st.tick, t.latest)
	// Each tick the room sleeps through lets in what no tick's share falls below.
	num, den := plan.PerTick()
	out := sleep{budget: sleepFor, share: min(num/den, limit)}
	if sleepFor > 0 {
		out.wake = r.wakeTogether(cfg, st.tick, t.latest, sleepFor)
		out.budget = out.wake.budget
	}
	return out
}

// takeAdmission takes in the tick's answer: whether the room sleeps, its primary, what it admitted
// and abandoned, or the failure. The snapshot is current before the tick is reported, so an
// observer reads what the tick did.
func (r *runner) takeAdmission(ctx context.Context, st *tickState, t gridTick, sl sleep, res queue.AdmitResult, err error) {
	if err == nil && res.FailedOver {
		r.failedOverWithin(ctx, st, t.now)
	}
	if err == nil && res.Primary != "" {
		st.primary = res.Primary
	}
	// Nobody waits: the room sleeps to the grid point its budget lasts to, unless a visitor who has
	// to wait, or a new spec, wakes it first.
	st.asleep = err == nil && res.Asleep
	if st.asleep {
		st.next, st.wakeAt = t.latest.Add(sl.budget), sl.wake.at
		if !sl.wake.at.IsZero() {
			st.next = sl.wake.next
		}
		r.drained(st)
	}
	if err != nil {
		if ctx.Err() == nil {
			r.fail(ctx, st, t.now, err)
		}
		return
	}
	st.backoff = 0
	var busy *BusySpell
	if st.busy.take(t.now, st.tick, int64(len(res.Admitted)), waitingAfter(res)) {
		spell := st.busy
		busy = &spell
	}
	st.metrics.admitted.Add(float64(len(res.Admitted)))
	st.fronts.take(t.cfg.LaneNames(), t.now, res, &st.arrivals)
	st.observeWaits(res)
	st.workload.recordAdmitted(res)
	st.metrics.abandoned.Add(float64(res.Abandoned))
	r.update(func(s *Snapshot) {
		s.Generation, s.RedisError, s.RedisErrorSince, s.LastTick = t.cfg.Generation, "", time.Time{}, t.now
		if busy != nil {
			s.LastBusy = busy
		}
	})
}

// pausedAfterFailover says whether the room's admissions are paused after a failover of its Redis
// (failoverPause), taking in a failover it has not seen yet.
func (r *runner) pausedAfterFailover(ctx context.Context, st *tickState, now time.Time) bool {
	if f := st.q.Failovers().Last(); f.Epoch != st.failover {
		st.failover = f.Epoch
		// The next tick runs on the new primary: it is the one to know.
		st.primary = ""
		if until := f.At.Add(failoverPause); until.After(now) {
			st.pausedUntil = until
			st.metrics.failovers.Inc()
			ctrl.LoggerFrom(ctx).Info("Redis failed over; admissions pause while the proxies write back the passes visitors hold",
				"waitingqueue", r.key.String(), "promoted", f.Promoted, "pause", failoverPause)
		}
	}
	return now.Before(st.pausedUntil)
}

// failedOverWithin takes in a failover the tick's own call followed (its retries reached a promoted
// replica, and the admit script found another primary and admitted nobody): the room pauses as for
// one the client saw first, and counts it once.
func (r *runner) failedOverWithin(ctx context.Context, st *tickState, now time.Time) {
	st.failover = st.q.Failovers().Last().Epoch
	st.pausedUntil = now.Add(failoverPause)
	st.metrics.failovers.Inc()
	ctrl.LoggerFrom(ctx).Info("Redis failed over during a tick, which admitted nobody; admissions pause while the proxies write back the passes visitors hold",
		"waitingqueue", r.key.String(), "pause", failoverPause)
}

func (r *runner) fail(ctx context.Context, st *tickState, now time.Time, err error) {
	st.backoff = min(max(2*st.backoff, minRedisBackoff), maxRedisBackoff)
	st.retryAt = now.Add(st.backoff)
	first := false
	r.update(func(s *Snapshot) {
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

// takeObservation takes in the queue's counters, the proxy replicas' reports and, when they were
// read, a Declared queue's workload reports.
func (r *runner) takeObservation(st *tickState, cfg *Room, now time.Time, read workloadReadArgs, seen queue.Observation) {
	if seen.Workload != nil {
		r.applyWorkload(st, cfg, now, read.seconds, *seen.Workload)
	}
	stats, proxies := seen.Stats, seen.Proxies
	if len(proxies) == 0 {
		proxies = nil
	}
	st.statsAt = now.Add(statsInterval)
	if cfg.MaxActive > 0 {
		st.slots.Take(now, stats.AdmittedTotal, stats.ReleasedTotal, stats.Active)
	} else {
		st.slots = capacity.SlotMeter{}
	}
	st.samples = append(st.samples, rateSample{at: now, admitted: stats.AdmittedTotal, released: stats.ReleasedTotal, lanes: laneTotals(stats)})
	// Keep one sample at least rateWindow old as the window's start.
	for len(st.samples) > 2 && now.Sub(st.samples[1].at) >= rateWindow {
		st.samples = st.samples[1:]
	}
	admittedRate, releasedRate := "0", "0"
	lanes := st.laneSnapshots(stats, st.samples[0], now)
	if first := st.samples[0]; now.Sub(first.at) > 0 {
		perSecond := func(delta int64) string {
			return capacity.DecimalString(new(big.Rat).SetFrac64(delta*int64(time.Second), int64(now.Sub(first.at))))
		}
		admittedRate, releasedRate = perSecond(stats.AdmittedTotal-first.admitted), perSecond(stats.ReleasedTotal-first.released)
	}
	if st.atOnce >= 0 && stats.InstantAdmittedTotal > st.atOnce {
		st.metrics.admittedAtOnce.Add(float64(stats.InstantAdmittedTotal - st.atOnce))
		st.metrics.observeWaitsAtOnce(stats.InstantAdmittedTotal - st.atOnce)
	}
	if st.released >= 0 && stats.ReleasedTotal > st.released {
		st.metrics.released.Add(float64(stats.ReleasedTotal - st.released))
	}
	st.atOnce, st.released = stats.InstantAdmittedTotal, stats.ReleasedTotal
	st.metrics.depth.Set(float64(stats.Depth))
	st.metrics.preQueueDepth.Set(float64(stats.PreQueued))
	st.metrics.shadow(cfg.Shadow != nil, stats.Shadowed, stats.ShadowedChallengeFailed, stats.ShadowedOverLimit)
	st.metrics.active.Set(float64(stats.Active))
	polling := st.pollingAt(cfg, stats.Depth)
	st.metrics.pollBudgetHolds.Set(boolGauge(polling.Fits))
	st.metrics.proxiesReporting.Set(float64(len(proxies)))
	st.metrics.gatewayChecks(cfg.Enforcement == herdgatev1alpha1.EnforcementGateway && cfg.PassFormat != herdgatev1alpha1.PassFormatJWT, proxies)
	r.update(func(s *Snapshot) {
		s.Polling = polling
		s.HaveStats, s.StatsAt, s.Depth, s.Active, s.PreQueued, s.Proxies = true, now, stats.Depth, stats.Active, stats.PreQueued, proxies
		s.AdmittedPerSecond, s.ReleasedPerSecond = admittedRate, releasedRate
		s.Lanes = lanes
	})
}

// drained records what a tick that put the room to sleep knows without a read: nobody waits, in
// the main queue or a lane. The room reads its counters again only when it wakes, and a depth
// read before the last admissions would otherwise stand for a sleep.
func (r *runner) drained(st *tickState) {
	st.metrics.depth.Set(0)
	st.drainedNow = true
	r.update(func(s *Snapshot) {
		if !s.HaveStats {
			return
		}
		s.Depth = 0
		if len(s.Lanes) > 0 {
			// A new slice: the snapshot last notified shares the old one.
			lanes := make([]LaneSnapshot, len(s.Lanes))
			for i, l := range s.Lanes {
				lanes[i] = l
				lanes[i].Depth = 0
			}
			s.Lanes = lanes
		}
	})
}

// supportedDepth remembers the deepest queue a budget holds under a plan, which takes a while to
// work out.
type supportedDepth struct {
	plan   capacity.Plan
	budget capacity.PollBudget
	depth  int64
	known  bool
}

// pollingAt says what the queue's polls cost at depth under its budget.
func (st *tickState) pollingAt(cfg *Room, depth int64) Polling {
	plan, b := st.estimatePlan(cfg), cfg.PollBudget
	if !st.supported.known || st.supported.plan != plan || st.supported.budget != b {
		st.supported = supportedDepth{plan: plan, budget: b, depth: b.SupportedDepth(plan), known: true}
	}
	stretch, fits := b.Stretch(plan, depth)
	return Polling{FarInterval: stretch, Fits: fits, SupportedDepth: st.supported.depth, Budget: b.PerSecond,
		Expected: math.Round(b.Rate(plan, depth, stretch))}
}
