package capacity

import (
	"math"
	"time"
)

// PollBudget bounds what the status polls of one queue cost: its waiting visitors poll, together,
// at most PerSecond times a second on average, whatever the depth. Visitors within a batch of the
// front keep MinInterval; the others poll as PollHint says, stretched with the depth when the
// budget needs it, but never so far apart that they would miss their turn (half their estimated
// wait) and never beyond what abandonment allows (half of AbandonAfter, spread included).
type PollBudget struct {
	// PerSecond is the most polls per second the queue may cost; 0 means no budget.
	PerSecond float64
	// MinInterval and MaxInterval are spec.polling's; AbandonAfter the silence that drops a visitor.
	MinInterval, MaxInterval, AbandonAfter time.Duration
}

// spreadRate is the mean of 1/s for s uniform over [1-PollSpread, 1+PollSpread]: the spread of the
// hints raises the mean poll rate by this factor.
var spreadRate = math.Log((1+PollSpread)/(1-PollSpread)) / (2 * PollSpread)

// LongestBase is the longest base interval a hint may have: spread, it stays within half of
// AbandonAfter, so that a visitor who polls as told is never taken for gone.
func (b PollBudget) LongestBase() time.Duration {
	return time.Duration(float64(b.AbandonAfter/2) / (1 + PollSpread))
}

// Stretch is the base interval of the visitors far from the front of a queue of depth under plan p:
// the shortest between MaxInterval and LongestBase at which the expected poll rate of the whole queue
// stays within the budget. fits is false when even LongestBase costs more; the stretch is then
// LongestBase. Without a budget, or with nobody beyond MaxInterval, it is MaxInterval.
func (b PollBudget) Stretch(p Plan, depth int64) (stretch time.Duration, fits bool) {
	lo, hi := b.MaxInterval, max(b.MaxInterval, b.LongestBase())
	if b.PerSecond <= 0 || depth <= 0 {
		return lo, true
	}
	if b.Rate(p, depth, lo) <= b.PerSecond {
		return lo, true
	}
	if b.Rate(p, depth, hi) > b.PerSecond {
		return hi, false
	}
	// The rate falls as the stretch grows: bisect to a millisecond.
	for hi-lo > time.Millisecond {
		mid := lo + (hi-lo)/2
		if b.Rate(p, depth, mid) <= b.PerSecond {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, true
}

// SupportedDepth is the deepest queue the budget keeps within PerSecond, under plan p: beyond it
// the hints would have to be longer than LongestBase. 0 means any depth (no budget).
func (b PollBudget) SupportedDepth(p Plan) int64 {
	if b.PerSecond <= 0 {
		return 0
	}
	longest := max(b.MaxInterval, b.LongestBase())
	lo, hi := int64(0), int64(1)
	for b.Rate(p, hi, longest) <= b.PerSecond {
		if hi > math.MaxInt64/4 {
			return hi
		}
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if b.Rate(p, mid, longest) <= b.PerSecond {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// Rate is an upper bound of the expected polls per second of a queue of depth whose far visitors
// poll every stretch (before spread), as BudgetedPollHint tells them. It walks the waits second by
// second (a hint follows the estimated wait, ⌈position ÷ rate⌉ seconds), so its cost follows the
// stretch in seconds, not the depth.
func (b PollBudget) Rate(p Plan, depth int64, stretch time.Duration) float64 {
	if depth <= 0 {
		return 0
	}
	minI := b.MinInterval.Seconds()
	s := math.Max(stretch.Seconds(), b.MaxInterval.Seconds())
	// One visitor polling every base (spread, and never under minInterval) polls this often.
	each := func(base float64) float64 {
		if base <= 0 {
			return 1 / minI
		}
		return math.Min(spreadRate/base, 1/minI)
	}
	front := min(depth, p.FrontBatch())
	total := float64(front) / minI
	perSecond, _ := p.Rate().Float64()
	if perSecond <= 0 {
		// No estimate of the wait: everyone beyond the front polls every stretch.
		return total + float64(depth-front)*each(s)
	}
	hint := func(wait int64) float64 {
		return budgetedBase(b.MaxInterval, time.Duration(s*float64(time.Second)), time.Duration(wait)*time.Second).Seconds()
	}
	counted := front
	for wait := int64(1); counted < depth; wait++ {
		// Positions waiting wait seconds: ((wait-1)·rate, wait·rate].
		last := min(depth, int64(math.Floor(float64(wait)*perSecond)))
		base := hint(wait)
		if base >= s || float64(wait) > 2*s+2 {
			// From here on, everyone polls every stretch.
			return total + float64(depth-counted)*each(s)
		}
		if last > counted {
			total += float64(last-counted) * each(base)
			counted = last
		}
	}
	return total
}

// BudgetedPollHint is PollHint under a budget: visitors whose hint would be maxInterval poll every
// half of their estimated wait instead, up to stretch (Stretch's), so that the queue's polls fit the
// budget and nobody misses a turn. The hint keeps its spread and never goes below minInterval.
func BudgetedPollHint(p Plan, position int64, minInterval, maxInterval, stretch time.Duration, r Rand) time.Duration {
	return SpreadPollHint(BudgetedPollBase(p, position, minInterval, maxInterval, stretch), minInterval, r)
}

// BudgetedPollBase is BudgetedPollHint before its spread: a caller that needs both the hint and the
// shortest hint it could have given (SpreadPollHint at 0) works it out once.
func BudgetedPollBase(p Plan, position int64, minInterval, maxInterval, stretch time.Duration) time.Duration {
	if stretch <= maxInterval {
		return pollBase(p, position, minInterval, maxInterval)
	}
	if position <= p.FrontBatch() {
		return minInterval
	}
	wait, ok := p.EstimatedWait(position)
	if !ok {
		wait = -1
	}
	return budgetedBase(maxInterval, stretch, wait)
}

// budgetedBase is the hint before spread of a visitor beyond the front whose estimated wait is wait
// (negative: unknown).
func budgetedBase(maxInterval, stretch, wait time.Duration) time.Duration {
	switch half := wait / 2; {
	case wait < 0:
		return stretch
	case half < maxInterval:
		// As without a budget: 500 ms per second of wait (and minInterval at least, after spread).
		return time.Duration(int64(wait/time.Second)) * 500 * time.Millisecond
	case half < stretch:
		return half
	}
	return stretch
}
