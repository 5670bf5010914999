package replica

import (
	"sync"
	"time"

	"github.com/herdgate/herdgate/internal/capacity"
)

// maxStretches bounds the stretches a proxy remembers; the cache starts over beyond it.
const maxStretches = 1024

// PollStretches remembers the far visitors' poll interval per plan, budget and depth, so that a poll
// costs a map lookup, not the budget's arithmetic.
type PollStretches struct {
	mu   sync.Mutex
	seen map[stretchKey]time.Duration
}

type stretchKey struct {
	plan   capacity.Plan
	budget capacity.PollBudget
	depth  int64
}

// Stretch is the poll interval of visitors far from the front of a queue of depth under budget b
// and plan (capacity.PollBudget.Stretch). The depth is rounded up to two significant digits, so that
// the interval errs on the side of the budget and few depths are worked out.
func (s *PollStretches) Stretch(b capacity.PollBudget, plan capacity.Plan, depth int64) time.Duration {
	if b.PerSecond <= 0 || depth <= 0 {
		return b.MaxInterval
	}
	k := stretchKey{plan: plan, budget: b, depth: roundUp2(depth)}
	s.mu.Lock()
	d, ok := s.seen[k]
	s.mu.Unlock()
	if ok {
		return d
	}
	d, _ = b.Stretch(plan, k.depth)
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
