package admission

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"

	"github.com/herdgate/herdgate/admission/replica"
	"github.com/herdgate/herdgate/internal/queue"
)

// declaredReportInterval is how often a replica reports what it measured while the rate does not
// follow it (capacity mode Declared): for the status only. Adaptive queues report every tick.
const declaredReportInterval = time.Second

// The replica runtime: the loops Run keeps beside the requests, each until its context ends.

// replicaRuntime is the room's loops beside the requests (Run): it reports the config it serves and
// what it measured, syncs the sessions, keeps far positions, checks Redis and, after a failover,
// writes back the passes visitors hold.
type replicaRuntime struct {
	name         string
	cfg          *atomic.Pointer[Config]
	state        *configState
	engine       Engine
	standing     *standings
	redis        *redisHealth
	sessions     *replica.Sessions
	workload     *replica.WorkloadMeter
	farPositions *replica.FarPositions
	reclaim      *reclaimer
	metrics      *metrics
	log          logr.Logger
	now          func() time.Time
}

// checkRedisFor pings Redis for the check due at moment, whose PING the rooms on the same Redis
// share (queue.Queue.PingFor), and records whether it answered.
func (rt *replicaRuntime) checkRedisFor(ctx context.Context, moment time.Time) error {
	err := rt.engine.PingFor(ctx, moment)
	rt.redis.result(err)
	return err
}

// run keeps every loop of the runtime until ctx ends (Room.Run).
func (rt *replicaRuntime) run(ctx context.Context, redisCheckInterval time.Duration) {
	if redisCheckInterval <= 0 {
		redisCheckInterval = time.Second
	}
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){
		func(ctx context.Context) { rt.checkRedisEvery(ctx, redisCheckInterval) },
		rt.reportConfig, rt.keepSessions, rt.reportWorkload, rt.keepFarPositions, rt.keepReclaiming,
	} {
		wg.Go(func() { loop(ctx) })
	}
	wg.Wait()
}

// checkRedisEvery pings Redis at once, then each time the clock reaches a multiple of interval
// (whole seconds for 1 s) until ctx ends: the rooms of a shared proxy set check at the same moments,
// and those on one Redis share a PING (queue.Queue.PingFor).
func (rt *replicaRuntime) checkRedisEvery(ctx context.Context, interval time.Duration) {
	var moment time.Time
	for {
		pingCtx, cancel := context.WithTimeout(ctx, interval)
		_ = rt.checkRedisFor(pingCtx, moment)
		cancel()
		now := time.Now()
		moment = now.Truncate(interval).Add(interval)
		t := time.NewTimer(moment.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// reportConfig writes this replica's report to Redis at once on every change and every
// ReportInterval, until ctx ends. Without a replica name it does nothing.
func (rt *replicaRuntime) reportConfig(ctx context.Context) {
	if rt.state.current.Replica == "" {
		return
	}
	t := time.NewTicker(ReportInterval)
	defer t.Stop()
	for {
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if err := rt.engine.ReportProxy(callCtx, rt.state.report(time.Now())); err != nil && ctx.Err() == nil {
			rt.log.V(1).Info("Reporting the config to Redis failed; will retry", "error", err.Error())
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-rt.state.changed:
		}
	}
}

// reportWorkload writes this replica's workload report to Redis every tick of an Adaptive room and
// every second otherwise, until ctx ends. Without a replica name it does nothing.
func (rt *replicaRuntime) reportWorkload(ctx context.Context) {
	replica := rt.state.current.Replica
	if replica == "" {
		return
	}
	for {
		interval := declaredReportInterval
		if cfg := rt.cfg.Load(); cfg != nil && cfg.Adaptive != nil && cfg.Tick() > 0 {
			interval = cfg.Tick()
		}
		if !sleepFor(ctx, interval) {
			return
		}
		if rt.cfg.Load() == nil {
			continue
		}
		r, uses := rt.workload.Take(time.Now())
		r.Replica = replica
		callCtx, cancel := context.WithTimeout(ctx, max(interval, time.Second))
		if err := rt.engine.ReportWorkload(callCtx, r, uses); err != nil && ctx.Err() == nil {
			rt.workload.GiveBack(uses)
			rt.log.V(1).Info("Reporting the workload to Redis failed; will retry", "error", err.Error())
		}
		cancel()
	}
}

// syncSessions runs one exchange with Redis: what this replica owes, and the revocations it lacks.
func (rt *replicaRuntime) syncSessions(ctx context.Context) error {
	// A pass written back after a failover is in Redis before its release, which would otherwise
	// find no pass to end.
	rt.flushReclaims(ctx)
	releases, renewals, seq := rt.sessions.Take()
	callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	res, err := rt.engine.Sessions(callCtx, releases, renewals, seq, replica.SessionsBatch)
	if err != nil {
		rt.sessions.GiveBack(releases, renewals)
		return err
	}
	rt.sessions.Learn(res, rt.now())
	rt.metrics.releases.Add(float64(len(releases)))
	return nil
}

// keepSessions syncs every tick, and at once when a session ended here, until ctx ends.
func (rt *replicaRuntime) keepSessions(ctx context.Context) {
	for {
		tick := 100 * time.Millisecond
		if cfg := rt.cfg.Load(); cfg != nil && cfg.Tick() > 0 {
			tick = cfg.Tick()
		}
		timer := time.NewTimer(tick)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-rt.sessions.Due():
			timer.Stop()
		}
		if err := rt.syncSessions(ctx); err != nil && ctx.Err() == nil {
			rt.log.V(1).Info("Syncing sessions with Redis failed; will retry", "error", err.Error())
		}
	}
}

// keepFarPositions records the signs of life of visitors answered far from the front every tick,
// and counts the queue every replica.FarSnapshotEvery while it is deeper than the exact zone, until
// ctx ends (Run).
func (rt *replicaRuntime) keepFarPositions(ctx context.Context) {
	if _, ok := rt.engine.(positionEngine); !ok {
		return
	}
	for {
		interval := herdgatev1alpha1.DefaultTick
		if cfg := rt.cfg.Load(); cfg != nil && cfg.Tick() > 0 {
			interval = cfg.Tick()
		}
		if !sleepFor(ctx, interval) {
			// The last tick's signs of life still go to Redis, so that a replica shutting down
			// costs its far visitors nothing.
			flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			rt.refreshFar(flushCtx)
			cancel()
			return
		}
		rt.refreshFar(ctx)
	}
}

// refreshFar runs one tick of keepFarPositions.
func (rt *replicaRuntime) refreshFar(ctx context.Context) {
	engine, ok := rt.engine.(positionEngine)
	cfg := rt.cfg.Load()
	if !ok || cfg == nil {
		return
	}
	r := rt.standing.of(ctx, cfg)
	callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	pending := rt.farPositions.TakePending()
	for start := 0; start < len(pending); start += farBatchMost {
		batch := pending[start:min(len(pending), start+farBatchMost)]
		res, err := engine.SeenBatch(callCtx, batch, r.abandonAfter)
		if err != nil {
			rt.farPositions.GiveBack(pending[start:])
			if ctx.Err() == nil {
				rt.log.V(1).Info("Recording far visitors' signs of life failed; will retry", "visitors", len(pending)-start, "error", err.Error())
			}
			return
		}
		rt.farPositions.Recorded(batch, res, rt.now())
		rt.metrics.farSigns.Add(float64(len(batch)))
	}
	if now := rt.now(); farPathOpen(rt.engine, cfg, r) && rt.farPositions.SnapshotDue(cfg.ExactPositions, now) {
		snap, err := engine.RankSnapshot(callCtx, farSnapshotPerCall)
		if err != nil {
			if ctx.Err() == nil {
				rt.log.V(1).Info("Counting the queue for far positions failed; will retry", "error", err.Error())
			}
			return
		}
		rt.farPositions.SetSnapshot(snap, now)
		rt.metrics.farSnapshots.Inc()
	}
}

// sleepFor waits d, or until ctx ends; false when ctx ended.
func sleepFor(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// keepReclaiming opens a window at each failover of the room's Redis and writes back the passes seen
// every reclaimInterval, until ctx ends.
func (rt *replicaRuntime) keepReclaiming(ctx context.Context) {
	engine, ok := rt.engine.(reclaimEngine)
	if !ok || engine.Failovers() == nil {
		return
	}
	watch := engine.Failovers()
	changed := watch.Changed()
	seen := watch.Last().Epoch
	t := time.NewTicker(reclaimInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			changed = watch.Changed()
			if f := watch.Last(); f.Epoch != seen {
				seen = f.Epoch
				rt.startReclaiming(f)
			}
		case <-t.C:
		}
		rt.flushReclaims(ctx)
	}
}

// startReclaiming opens the window of failover f with the passes used in the minute before it.
func (rt *replicaRuntime) startReclaiming(f queue.Failover) {
	cfg := rt.cfg.Load()
	if cfg == nil {
		return
	}
	lifetime := max(cfg.PassTTL, cfg.MaxSession)
	var recent []queue.HeldPass
	for _, u := range rt.workload.Recent() {
		// A pass that expired before the failover left its place long enough ago for the visitor
		// to have taken a new one, which must stay. One alive then may have lost its admission.
		if u.NotBefore.Add(lifetime).After(f.At) {
			recent = append(recent, queue.HeldPass{Visitor: u.Visitor, NotBefore: u.NotBefore, Expiry: u.NotBefore.Add(cfg.PassTTL)})
		}
	}
	rt.reclaim.start(f.At, lifetime, recent)
	rt.sessions.Rewind()
	rt.log.Info("Redis failed over; writing back the passes visitors hold", "waitingqueue", rt.name, "promoted", f.Promoted, "passes", len(recent))
}

// flushReclaims writes back the passes waiting to be; those a failed call could not write go with
// the next.
func (rt *replicaRuntime) flushReclaims(ctx context.Context) {
	engine, ok := rt.engine.(reclaimEngine)
	if !ok {
		return
	}
	passes := rt.reclaim.take(rt.now())
	if len(passes) == 0 {
		return
	}
	callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	res, err := engine.Reclaim(callCtx, passes)
	if err != nil {
		rt.reclaim.giveBack(passes)
		rt.log.V(1).Info("Writing back passes after a failover failed; will retry", "error", err.Error())
		return
	}
	rt.metrics.reclaimed.Add(float64(len(passes)))
	rt.metrics.reclaimedWaiting.Add(float64(res.LeftQueue))
}
