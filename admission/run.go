package admission

import (
	"context"
	"sync"
	"time"
)

// Run keeps what the proxy does beside answering requests, until ctx ends: it pings Redis every
// redisCheckInterval (1 s when zero) for FailOpen, reports the config it serves to the manager,
// syncs sessions, reports the workload it measured, keeps far positions and, after a failover of
// Redis, writes back the passes visitors hold. A program that serves
// the Proxy through a front of its own runs it beside.
func (p *Proxy) Run(ctx context.Context, redisCheckInterval time.Duration) {
	if redisCheckInterval <= 0 {
		redisCheckInterval = time.Second
	}
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){
		func(ctx context.Context) { p.checkRedisEvery(ctx, redisCheckInterval) },
		p.reportConfig, p.keepSessions, p.reportWorkload, p.keepFarPositions, p.keepReclaiming,
	} {
		wg.Go(func() { loop(ctx) })
	}
	wg.Wait()
}

// checkRedisEvery pings Redis at once, then each time the clock reaches a multiple of interval
// (whole seconds for 1 s) until ctx ends: the rooms of a shared proxy set check at the same moments,
// and those on one Redis share a PING (queue.Queue.PingFor).
func (p *Proxy) checkRedisEvery(ctx context.Context, interval time.Duration) {
	var moment time.Time
	for {
		pingCtx, cancel := context.WithTimeout(ctx, interval)
		_ = p.checkRedisFor(pingCtx, moment)
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
