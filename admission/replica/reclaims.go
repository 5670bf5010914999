package replica

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/queue"
)

// ReclaimEngine is an engine that can lose writes in a failover, and write back the passes visitors
// hold (a queue on Redis; not the in-memory engine of the tests).
type ReclaimEngine interface {
	Failovers() *queue.FailoverWatch
	Reclaim(ctx context.Context, passes []queue.HeldPass) (queue.ReclaimResult, error)
}

// Reclaims writes back, after a failover of the room's Redis, the passes this replica sees visitors
// hold: a failover can lose the admissions the old primary made last, and the new one would admit
// those visitors a second time, and count too few passes under maxActive (docs/guides/redis.md).
// For a pass's lifetime after the failover, each pass issued before it is written back once, on its
// first use; the passes used in the minute before it, which the replica remembers, at once.
type Reclaims struct {
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

// Saw takes in a valid pass a visitor showed.
func (r *Reclaims) Saw(p pass.Pass, now time.Time) {
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

// Start opens the window of a failover at, for passes that live up to lifetime, with the passes
// used before it.
func (r *Reclaims) Start(at time.Time, lifetime time.Duration, recent []queue.HeldPass) {
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

// Take returns the passes to write back, and closes a window that is over.
func (r *Reclaims) Take(now time.Time) []queue.HeldPass {
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

// GiveBack returns passes a write-back failed for, to be sent with the next.
func (r *Reclaims) GiveBack(passes []queue.HeldPass) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = append(passes, r.pending...)
}

// ReclaimInterval is how often the passes seen are written back while a window is open.
const ReclaimInterval = time.Second
