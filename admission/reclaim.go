package admission

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/queue"
)

// reclaimEngine is an engine that can lose writes in a failover, and write back the passes visitors
// hold (a queue on Redis; not the in-memory engine of the tests).
type reclaimEngine interface {
	Failovers() *queue.FailoverWatch
	Reclaim(ctx context.Context, passes []queue.HeldPass) (queue.ReclaimResult, error)
}

// reclaimer writes back, after a failover of the room's Redis, the passes this replica sees visitors
// hold: a failover can lose the admissions the old primary made last, and the new one would admit
// those visitors a second time, and count too few passes under maxActive (docs/guides/redis.md).
// For a pass's lifetime after the failover, each pass issued before it is written back once, on its
// first use; the passes used in the minute before it, which the replica remembers, at once.
type reclaimer struct {
	// open is set while a window is open: the hot path looks at nothing else otherwise.
	open atomic.Bool

	mu      sync.Mutex
	at      time.Time // the failover
	until   time.Time // end of the window
	done    map[reclaimKey]struct{}
	pending []queue.HeldPass
}

type reclaimKey struct {
	visitor   string
	notBefore int64
}

// saw takes in a valid pass a visitor showed.
func (r *reclaimer) saw(p pass.Pass, now time.Time) {
	if !r.open.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !p.NotBefore.Before(r.at) || now.After(r.until) {
		return
	}
	k := reclaimKey{p.Visitor, p.NotBefore.UnixMilli()}
	if _, ok := r.done[k]; ok {
		return
	}
	r.done[k] = struct{}{}
	r.pending = append(r.pending, queue.HeldPass{Visitor: p.Visitor, NotBefore: p.NotBefore, Expiry: p.Expiry})
}

// start opens the window of a failover at, for passes that live up to lifetime, with the passes
// used before it.
func (r *reclaimer) start(at time.Time, lifetime time.Duration, recent []queue.HeldPass) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at, r.until = at, at.Add(lifetime)
	r.done = map[reclaimKey]struct{}{}
	r.pending = r.pending[:0]
	for _, h := range recent {
		if h.NotBefore.Before(at) {
			r.done[reclaimKey{h.Visitor, h.NotBefore.UnixMilli()}] = struct{}{}
			r.pending = append(r.pending, h)
		}
	}
	r.open.Store(true)
}

// take returns the passes to write back, and closes a window that is over.
func (r *reclaimer) take(now time.Time) []queue.HeldPass {
	if !r.open.Load() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.pending
	r.pending = nil
	if now.After(r.until) {
		r.open.Store(false)
		r.done = nil
	}
	return out
}

// giveBack returns passes a write-back failed for, to be sent with the next.
func (r *reclaimer) giveBack(passes []queue.HeldPass) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = append(passes, r.pending...)
}

// reclaimInterval is how often the passes seen are written back while a window is open.
const reclaimInterval = time.Second

// keepReclaiming opens a window at each failover of the room's Redis and writes back the passes seen
// every reclaimInterval, until ctx ends.
func (p *Proxy) keepReclaiming(ctx context.Context) {
	engine, ok := p.q.(reclaimEngine)
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
				p.startReclaiming(f)
			}
		case <-t.C:
		}
		p.flushReclaims(ctx)
	}
}

// startReclaiming opens the window of failover f with the passes used in the minute before it.
func (p *Proxy) startReclaiming(f queue.Failover) {
	cfg := p.cfg.Load()
	if cfg == nil {
		return
	}
	lifetime := max(cfg.PassTTL, cfg.MaxSession)
	var recent []queue.HeldPass
	for _, u := range p.workload.Recent() {
		// A pass that expired before the failover left its place long enough ago for the visitor
		// to have taken a new one, which must stay. One alive then may have lost its admission.
		if u.NotBefore.Add(lifetime).After(f.At) {
			recent = append(recent, queue.HeldPass{Visitor: u.Visitor, NotBefore: u.NotBefore, Expiry: u.NotBefore.Add(cfg.PassTTL)})
		}
	}
	p.reclaim.start(f.At, lifetime, recent)
	p.sessions.Rewind()
	p.log.Info("Redis failed over; writing back the passes visitors hold", "waitingqueue", p.queue, "promoted", f.Promoted, "passes", len(recent))
}

// flushReclaims writes back the passes waiting to be; those a failed call could not write go with
// the next.
func (p *Proxy) flushReclaims(ctx context.Context) {
	engine, ok := p.q.(reclaimEngine)
	if !ok {
		return
	}
	passes := p.reclaim.take(p.now())
	if len(passes) == 0 {
		return
	}
	callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	res, err := engine.Reclaim(callCtx, passes)
	if err != nil {
		p.reclaim.giveBack(passes)
		p.log.V(1).Info("Writing back passes after a failover failed; will retry", "error", err.Error())
		return
	}
	p.metrics.reclaimed.Add(float64(len(passes)))
	p.metrics.reclaimedWaiting.Add(float64(res.LeftQueue))
}
