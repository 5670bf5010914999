package admission

import (
	"sync"
	"time"

	"github.com/herdgate/herdgate/internal/capacity"
)

// maxStretches bounds the stretches a proxy remembers; the cache starts over beyond it.
const maxStretches = 1024

// pollStretches remembers the far visitors' poll interval per plan, budget and depth, so that a poll
// costs a map lookup, not the budget's arithmetic.
type pollStretches struct {
	mu   sync.Mutex
	seen map[stretchKey]time.Duration
}

type stretchKey struct {
	plan   capacity.Plan
	budget capacity.PollBudget
	depth  int64
}

// stretch is the poll interval of visitors far from the front of a queue of depth under cfg's
// budget (capacity.PollBudget.Stretch). The depth is rounded up to two significant digits, so that
// the interval errs on the side of the budget and few depths are worked out.
func (s *pollStretches) stretch(cfg *Config, r room, depth int64) time.Duration {
	b := capacity.PollBudget{PerSecond: cfg.PollBudget, MinInterval: r.pollMin, MaxInterval: r.pollMax, AbandonAfter: r.abandonAfter}
	if b.PerSecond <= 0 || depth <= 0 {
		return r.pollMax
	}
	k := stretchKey{plan: r.plan, budget: b, depth: roundUp2(depth)}
	s.mu.Lock()
	d, ok := s.seen[k]
	s.mu.Unlock()
	if ok {
		return d
	}
	d, _ = b.Stretch(r.plan, k.depth)
	s.mu.Lock()
	if s.seen == nil || len(s.seen) >= maxStretches {
		s.seen = map[stretchKey]time.Duration{}
	}
	s.seen[k] = d
	s.mu.Unlock()
	return d
}

// roundUp2 rounds n up to two significant digits: 1234 → 1300.
func roundUp2(n int64) int64 {
	unit := int64(1)
	for n/unit >= 100 {
		unit *= 10
	}
	return (n + unit - 1) / unit * unit
}
