package admission

import (
	"context"
	"time"
)

const (
	// declaredReportInterval is how often a replica reports what it measured while the rate does
	// not follow it (capacity mode Declared): for the status only. Adaptive queues report every tick.
	declaredReportInterval = time.Second
)

// reportWorkload writes this replica's workload report to Redis every tick of an Adaptive queue and
// every second otherwise, until ctx ends. Without a replica name it does nothing.
func (p *Proxy) reportWorkload(ctx context.Context) {
	replica := p.state.current.Replica
	if replica == "" {
		return
	}
	for {
		interval := declaredReportInterval
		if cfg := p.cfg.Load(); cfg != nil && cfg.Adaptive != nil && cfg.Tick() > 0 {
			interval = cfg.Tick()
		}
		if !sleepFor(ctx, interval) {
			return
		}
		if p.cfg.Load() == nil {
			continue
		}
		r, uses := p.workload.Take(time.Now())
		r.Replica = replica
		callCtx, cancel := context.WithTimeout(ctx, max(interval, time.Second))
		if err := p.q.ReportWorkload(callCtx, r, uses); err != nil && ctx.Err() == nil {
			p.workload.GiveBack(uses)
			p.log.V(1).Info("Reporting the workload to Redis failed; will retry", "error", err.Error())
		}
		cancel()
	}
}
