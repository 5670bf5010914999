package capacity

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// referencePlan admits 14 per 100 ms tick: 140 a second.
func referencePlan(t *testing.T) Plan {
	t.Helper()
	p, err := FromQuota(14, 1, 100*time.Millisecond, false)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func budget(perSecond float64, abandonAfter time.Duration) PollBudget {
	return PollBudget{PerSecond: perSecond, MinInterval: 500 * time.Millisecond, MaxInterval: 5 * time.Second, AbandonAfter: abandonAfter}
}

// exactRate sums, position by position, the expected polls per second of a queue of depth told by
// BudgetedPollHint: each visitor polls every max(base × u, minInterval), u uniform over the spread.
func exactRate(p Plan, b PollBudget, depth int64, stretch time.Duration) float64 {
	m := b.MinInterval.Seconds()
	expect := func(base float64) float64 {
		lo, hi := base*(1-PollSpread), base*(1+PollSpread)
		switch {
		case base <= 0 || hi <= m:
			return 1 / m
		case lo >= m:
			return spreadRate / base
		}
		// Below m/base the hint is m, above it base × u.
		cut := m / base
		return ((cut-(1-PollSpread))/m + math.Log((1+PollSpread)/cut)/base) / (2 * PollSpread)
	}
	total := 0.0
	for k := int64(1); k <= depth; k++ {
		base := b.MinInterval
		if k > p.FrontBatch() {
			wait, _ := p.EstimatedWait(k)
			base = budgetedBase(b.MaxInterval, stretch, wait)
		}
		total += expect(base.Seconds())
	}
	return total
}

// TestTheBudgetHoldsAtAnyDepth: at every depth the stretch keeps the queue's expected polls within
// the budget, as long as the stretch fits under half of abandonAfter, and the model's bound is
// close to the exact sum.
func TestTheBudgetHoldsAtAnyDepth(t *testing.T) {
	p := referencePlan(t)
	for _, c := range []struct {
		depth        int64
		perSecond    float64
		abandonAfter time.Duration
		fits         bool
		stretched    bool
	}{
		{0, 20000, 5 * time.Minute, true, false},
		{1, 20000, 5 * time.Minute, true, false},
		{1_000, 20000, 5 * time.Minute, true, false},
		{50_000, 20000, 5 * time.Minute, true, false},
		{100_000, 20000, 5 * time.Minute, true, true},
		{1_000_000, 20000, 5 * time.Minute, true, true},
		{3_000_000, 20000, 5 * time.Minute, false, true},
		{10_000_000, 20000, 5 * time.Minute, false, true},
		{10_000_000, 20000, 30 * time.Minute, true, true},
		{100_000_000, 20000, 30 * time.Minute, false, true},
		{100_000_000, 100000, 24 * time.Hour, true, true},
		{100_000, 100, 5 * time.Minute, false, true},
	} {
		b := budget(c.perSecond, c.abandonAfter)
		stretch, fits := b.Stretch(p, c.depth)
		if fits != c.fits || (stretch > b.MaxInterval) != c.stretched {
			t.Errorf("depth %d, budget %v/s, abandonAfter %s: stretch %s, fits %v; want fits %v, stretched %v",
				c.depth, c.perSecond, c.abandonAfter, stretch, fits, c.fits, c.stretched)
			continue
		}
		rate := b.Rate(p, c.depth, stretch)
		if fits && rate > c.perSecond {
			t.Errorf("depth %d: %.0f polls/s under a budget of %v", c.depth, rate, c.perSecond)
		}
		if stretch > b.LongestBase() || time.Duration(float64(stretch)*(1+PollSpread)) > c.abandonAfter/2 {
			t.Errorf("depth %d: stretch %s beyond half of abandonAfter %s", c.depth, stretch, c.abandonAfter)
		}
		if fits && stretch > b.MaxInterval && stretch-time.Millisecond > b.MaxInterval && b.Rate(p, c.depth, stretch-2*time.Millisecond) <= c.perSecond {
			t.Errorf("depth %d: stretch %s is not the shortest that fits", c.depth, stretch)
		}
	}
	// The bound against the exact sum, at depths that can be summed.
	for _, depth := range []int64{10, 1_000, 50_000, 400_000, 1_000_000} {
		b := budget(20000, 5*time.Minute)
		for _, stretch := range []time.Duration{5 * time.Second, 30 * time.Second, b.LongestBase()} {
			exact, bound := exactRate(p, b, depth, stretch), b.Rate(p, depth, stretch)
			if bound < exact*(1-1e-9) || bound > exact*1.05 {
				t.Errorf("depth %d, stretch %s: bound %.2f polls/s, exact %.2f", depth, stretch, bound, exact)
			}
		}
	}
}

// TestBudgetedHints: the front keeps minInterval, nobody is told to wait longer than half its wait
// (it would miss its turn) or than half of abandonAfter (it would be dropped), the spread stays, and
// without a stretch the hints are PollHint's.
func TestBudgetedHints(t *testing.T) {
	p := referencePlan(t)
	b := budget(20000, 5*time.Minute)
	stretch := 100 * time.Second
	r := rand.New(rand.NewPCG(3, 4))
	for _, pos := range []int64{1, 14, 15, 100, 1_000, 10_000, 100_000, 1_000_000, 100_000_000} {
		lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
		for range 200 {
			h := BudgetedPollHint(p, pos, b.MinInterval, b.MaxInterval, stretch, r)
			lo, hi = min(lo, h), max(hi, h)
			if h < b.MinInterval || h > b.AbandonAfter/2 {
				t.Fatalf("position %d: hint %s outside [minInterval, abandonAfter/2]", pos, h)
			}
			if wait, _ := p.EstimatedWait(pos); pos > p.FrontBatch() && wait/2 >= b.MaxInterval && h > time.Duration(float64(wait/2)*(1+PollSpread)) {
				t.Fatalf("position %d: hint %s beyond half its wait %s", pos, h, wait)
			}
			if pos <= p.FrontBatch() && h > time.Duration(float64(b.MinInterval)*(1+PollSpread)) {
				t.Fatalf("position %d at the front: hint %s", pos, h)
			}
		}
		if pos > 100 && float64(hi-lo) < 0.2*float64(lo) {
			t.Errorf("position %d: hints %s … %s, the spread is gone", pos, lo, hi)
		}
		if got, want := BudgetedPollHint(p, pos, b.MinInterval, b.MaxInterval, b.MaxInterval, fixedRand(0.3)), PollHint(p, pos, b.MinInterval, b.MaxInterval, fixedRand(0.3)); got != want {
			t.Errorf("position %d without a stretch: %s, PollHint says %s", pos, got, want)
		}
	}
	// Far back, the hint is the stretch.
	if h := BudgetedPollHint(p, 100_000_000, b.MinInterval, b.MaxInterval, stretch, fixedRand(0.5)); h != stretch {
		t.Errorf("far back: %s, want the stretch %s", h, stretch)
	}
}

// TestSupportedDepth: the deepest queue the budget holds is where Stretch stops fitting.
func TestSupportedDepth(t *testing.T) {
	p := referencePlan(t)
	for _, b := range []PollBudget{budget(20000, 5*time.Minute), budget(20000, 30*time.Minute), budget(1000, 10*time.Second)} {
		d := b.SupportedDepth(p)
		t.Logf("budget %v/s, abandonAfter %s: supported depth %d", b.PerSecond, b.AbandonAfter, d)
		if _, fits := b.Stretch(p, d); !fits {
			t.Errorf("%+v: supported depth %d does not fit", b, d)
		}
		if _, fits := b.Stretch(p, d+d/100+1); fits {
			t.Errorf("%+v: %d, beyond the supported depth %d, fits", b, d+d/100+1, d)
		}
	}
	if d := budget(0, time.Minute).SupportedDepth(p); d != 0 {
		t.Errorf("no budget: supported depth %d, want 0 (any)", d)
	}
}
