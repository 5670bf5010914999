package replica

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
)

// The replica runtime: the loops a replica keeps beside the requests for one room, each until its
// context ends.

const (
	// declaredReportInterval is how often a replica reports what it measured while the rate does
	// not follow it (capacity mode Declared): for the status only. Adaptive rooms report every tick.
	declaredReportInterval = time.Second
	// FarSnapshotPerCall bounds the boundaries one call counts, and so how long it holds Redis.
	FarSnapshotPerCall = 200
	// farBatchMost bounds the signs of life one call records, for the same reason.
	farBatchMost = 1000
)

// Engine is what the runtime needs of the queue engine; a *queue.Queue is the one it runs on.
type Engine interface {
	PingFor(ctx context.Context, moment time.Time) error
	ReportProxy(ctx context.Context, r queue.ProxyReport) error
	ReportWorkload(ctx context.Context, r queue.WorkloadReport, uses []queue.PassUse) error
	Sessions(ctx context.Context, releases []queue.Release, renewals []queue.Renewal, after int64, most int) (queue.SessionsResult, error)
}

// PositionEngine is what an engine offers for far positions; the queue on Redis does.
type PositionEngine interface {
	RankSnapshot(ctx context.Context, perCall int) (queue.RankSnapshot, error)
	SeenBatch(ctx context.Context, visitors []queue.SeenVisitor, abandonAfter time.Duration) (queue.SeenResult, error)
}

// Settings is what the loops read of the room's config in force.
type Settings struct {
	// Tick paces the sessions' sync, the far positions and an Adaptive room's workload reports.
	Tick     time.Duration
	Adaptive bool
	// PassTTL and MaxSession bound how long a pass issued before a failover may still be shown.
	PassTTL, MaxSession time.Duration
	// ExactPositions is the zone near the front that far positions never answer.
	ExactPositions int64
}

// Room is what the runtime reads of the room it runs for.
type Room interface {
	// Settings is the config in force; false before the first valid one.
	Settings() (Settings, bool)
	// FarPath reads the room's standing: how long a place lives unpolled, and whether polls may be
	// answered far from the front now.
	FarPath(ctx context.Context) (abandonAfter time.Duration, open bool)
	// RedisAnswered records a health check of Redis: err is nil when it answered.
	RedisAnswered(err error)
}

// Metrics are the counters the runtime moves.
type Metrics struct {
	// Releases counts the sessions this replica ended and told Redis of.
	Releases prometheus.Counter
	// FarSigns counts far visitors' signs of life recorded, FarSnapshots the counts of the queue.
	FarSigns, FarSnapshots prometheus.Counter
	// Reclaimed counts the passes written back after a failover, ReclaimedWaiting those of visitors
	// the new primary still had waiting.
	Reclaimed, ReclaimedWaiting prometheus.Counter
}

// Runtime is a replica's loops for one room beside the requests (Run): it checks Redis, reports the
// config it serves and what it measured, syncs the sessions, keeps far positions and, after a
// failover, writes back the passes visitors hold. It owns the replica's memories the loops keep;
// the room's roles share them, each through the methods it uses.
type Runtime struct {
	// Name names the room, as namespace/name, in the runtime's logs.
	Name     string
	Room     Room
	Engine   Engine
	Report   *ConfigReport
	Sessions *Sessions
	Workload *WorkloadMeter
	Far      *FarPositions
	Reclaims *Reclaims
	Metrics  Metrics
	Log      logr.Logger
	Now      func() time.Time
}

// CheckRedis pings Redis for the check due at moment, whose PING the rooms on the same Redis share
// (queue.Queue.PingFor), and records whether it answered.
func (rt *Runtime) CheckRedis(ctx context.Context, moment time.Time) error {
	err := rt.Engine.PingFor(ctx, moment)
	rt.Room.RedisAnswered(err)
	return err
}

// Run keeps every loop until ctx ends; Redis is checked every redisCheckInterval (1 s when zero).
func (rt *Runtime) Run(ctx context.Context, redisCheckInterval time.Duration) {
	if redisCheckInterval <= 0 {
		redisCheckInterval = time.Second
	}
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){
		func(ctx context.Context) { rt.checkRedisEvery(ctx, redisCheckInterval) },
		rt.ReportConfig, rt.KeepSessions, rt.ReportWorkload, rt.KeepFarPositions, rt.keepReclaiming,
	} {
		wg.Go(func() { loop(ctx) })
	}
	wg.Wait()
}

// tick is the room's tick, or the default one before it has a config.
func (rt *Runtime) tick() time.Duration {
	if s, ok := rt.Room.Settings(); ok && s.Tick > 0 {
		return s.Tick
	}
	return herdgatev1alpha1.DefaultTick
}

// checkRedisEvery pings Redis at once, then each time the clock reaches a multiple of interval
// (whole seconds for 1 s) until ctx ends: the rooms of a shared proxy set check at the same moments,
// and those on one Redis share a PING (queue.Queue.PingFor).
func (rt *Runtime) checkRedisEvery(ctx context.Context, interval time.Duration) {
	var moment time.Time
	for {
		pingCtx, cancel := context.WithTimeout(ctx, interval)
		_ = rt.CheckRedis(pingCtx, moment)
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

// ReportConfig writes this replica's report to Redis at once on every change and every
// ReportInterval, until ctx ends. Without a replica name it does nothing.
func (rt *Runtime) ReportConfig(ctx context.Context) {
	if rt.Report.Replica() == "" {
		return
	}
	t := time.NewTicker(ReportInterval)
	defer t.Stop()
	for {
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if err := rt.Engine.ReportProxy(callCtx, rt.Report.At(time.Now())); err != nil && ctx.Err() == nil {
			rt.Log.V(1).Info("Reporting the config to Redis failed; will retry", "error", err.Error())
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-rt.Report.Changed():
		}
	}
}

// ReportWorkload writes this replica's workload report to Redis every tick of an Adaptive room and
// every second otherwise, until ctx ends. Without a replica name it does nothing.
func (rt *Runtime) ReportWorkload(ctx context.Context) {
	replica := rt.Report.Replica()
	if replica == "" {
		return
	}
	for {
		interval := declaredReportInterval
		if s, ok := rt.Room.Settings(); ok && s.Adaptive && s.Tick > 0 {
			interval = s.Tick
		}
		if !sleepFor(ctx, interval) {
			return
		}
		if _, ok := rt.Room.Settings(); !ok {
			continue
		}
		r, uses := rt.Workload.Take(time.Now())
		r.Replica = replica
		callCtx, cancel := context.WithTimeout(ctx, max(interval, time.Second))
		if err := rt.Engine.ReportWorkload(callCtx, r, uses); err != nil && ctx.Err() == nil {
			rt.Workload.GiveBack(uses)
			rt.Log.V(1).Info("Reporting the workload to Redis failed; will retry", "error", err.Error())
		}
		cancel()
	}
}

// SyncSessions runs one exchange with Redis: what this replica owes, and the revocations it lacks.
func (rt *Runtime) SyncSessions(ctx context.Context) error {
	// A pass written back after a failover is in Redis before its release, which would otherwise
	// find no pass to end.
	rt.flushReclaims(ctx)
	releases, renewals, seq := rt.Sessions.Take()
	callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	res, err := rt.Engine.Sessions(callCtx, releases, renewals, seq, SessionsBatch)
	if err != nil {
		rt.Sessions.GiveBack(releases, renewals)
		return err
	}
	rt.Sessions.Learn(res, rt.Now())
	rt.Metrics.Releases.Add(float64(len(releases)))
	return nil
}

// KeepSessions syncs every tick, and at once when a session ended here, until ctx ends.
func (rt *Runtime) KeepSessions(ctx context.Context) {
	for {
		timer := time.NewTimer(rt.tick())
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-rt.Sessions.Due():
			timer.Stop()
		}
		if err := rt.SyncSessions(ctx); err != nil && ctx.Err() == nil {
			rt.Log.V(1).Info("Syncing sessions with Redis failed; will retry", "error", err.Error())
		}
	}
}

// KeepFarPositions records the signs of life of visitors answered far from the front every tick,
// and counts the queue every FarSnapshotEvery while it is deeper than the exact zone, until ctx
// ends.
func (rt *Runtime) KeepFarPositions(ctx context.Context) {
	if _, ok := rt.Engine.(PositionEngine); !ok {
		return
	}
	for {
		if !sleepFor(ctx, rt.tick()) {
			// The last tick's signs of life still go to Redis, so that a replica shutting down
			// costs its far visitors nothing.
			flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			rt.RefreshFar(flushCtx)
			cancel()
			return
		}
		rt.RefreshFar(ctx)
	}
}

// RefreshFar runs one tick of KeepFarPositions.
func (rt *Runtime) RefreshFar(ctx context.Context) {
	engine, ok := rt.Engine.(PositionEngine)
	settings, configured := rt.Room.Settings()
	if !ok || !configured {
		return
	}
	abandonAfter, farOpen := rt.Room.FarPath(ctx)
	callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	pending := rt.Far.TakePending()
	for start := 0; start < len(pending); start += farBatchMost {
		batch := pending[start:min(len(pending), start+farBatchMost)]
		res, err := engine.SeenBatch(callCtx, batch, abandonAfter)
		if err != nil {
			rt.Far.GiveBack(pending[start:])
			if ctx.Err() == nil {
				rt.Log.V(1).Info("Recording far visitors' signs of life failed; will retry", "visitors", len(pending)-start, "error", err.Error())
			}
			return
		}
		rt.Far.Recorded(batch, res, rt.Now())
		rt.Metrics.FarSigns.Add(float64(len(batch)))
	}
	if now := rt.Now(); farOpen && rt.Far.SnapshotDue(settings.ExactPositions, now) {
		snap, err := engine.RankSnapshot(callCtx, FarSnapshotPerCall)
		if err != nil {
			if ctx.Err() == nil {
				rt.Log.V(1).Info("Counting the queue for far positions failed; will retry", "error", err.Error())
			}
			return
		}
		rt.Far.SetSnapshot(snap, now)
		rt.Metrics.FarSnapshots.Inc()
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
// every ReclaimInterval, until ctx ends.
func (rt *Runtime) keepReclaiming(ctx context.Context) {
	engine, ok := rt.Engine.(ReclaimEngine)
	if !ok || engine.Failovers() == nil {
		return
	}
	watch := engine.Failovers()
	changed := watch.Changed()
	seen := watch.Last().Epoch
	t := time.NewTicker(ReclaimInterval)
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
func (rt *Runtime) startReclaiming(f queue.Failover) {
	s, ok := rt.Room.Settings()
	if !ok {
		return
	}
	lifetime := max(s.PassTTL, s.MaxSession)
	var recent []queue.HeldPass
	for _, u := range rt.Workload.Recent() {
		// A pass that expired before the failover left its place long enough ago for the visitor
		// to have taken a new one, which must stay. One alive then may have lost its admission.
		if u.NotBefore.Add(lifetime).After(f.At) {
			recent = append(recent, queue.HeldPass{Visitor: u.Visitor, NotBefore: u.NotBefore, Expiry: u.NotBefore.Add(s.PassTTL)})
		}
	}
	rt.Reclaims.Start(f.At, lifetime, recent)
	rt.Sessions.Rewind()
	rt.Log.Info("Redis failed over; writing back the passes visitors hold", "waitingqueue", rt.Name, "promoted", f.Promoted, "passes", len(recent))
}

// flushReclaims writes back the passes waiting to be; those a failed call could not write go with
// the next.
func (rt *Runtime) flushReclaims(ctx context.Context) {
	engine, ok := rt.Engine.(ReclaimEngine)
	if !ok {
		return
	}
	passes := rt.Reclaims.Take(rt.Now())
	if len(passes) == 0 {
		return
	}
	callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	res, err := engine.Reclaim(callCtx, passes)
	if err != nil {
		rt.Reclaims.GiveBack(passes)
		rt.Log.V(1).Info("Writing back passes after a failover failed; will retry", "error", err.Error())
		return
	}
	rt.Metrics.Reclaimed.Add(float64(len(passes)))
	rt.Metrics.ReclaimedWaiting.Add(float64(res.LeftQueue))
}
