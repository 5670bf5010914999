package admission

import (
	"context"
	"sync"
	"time"
)

// Run keeps what the proxy does beside answering requests, until ctx ends: it pings Redis every
// redisCheckInterval (1 s when zero) for FailOpen, reports the config it serves to the manager,
// syncs sessions, reports the workload it measured and keeps far positions. A program that serves
// the Proxy through a front of its own runs it beside.
func (p *Proxy) Run(ctx context.Context, redisCheckInterval time.Duration) {
	if redisCheckInterval <= 0 {
		redisCheckInterval = time.Second
	}
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){
		func(ctx context.Context) { p.checkRedisEvery(ctx, redisCheckInterval) },
		p.reportConfig, p.keepSessions, p.reportWorkload, p.keepFarPositions,
	} {
		wg.Go(func() { loop(ctx) })
	}
	wg.Wait()
}

// checkRedisEvery pings Redis every interval until ctx ends.
func (p *Proxy) checkRedisEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pingCtx, cancel := context.WithTimeout(ctx, interval)
		_ = p.CheckRedis(pingCtx)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
