package capacity

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The reference workload: 40 connections at 70 %, 200 ms an order: 28 in flight, 140 a second.
var reference = AdaptiveLimits{Declared: 140, Ceiling: 200, Floor: 5, TargetInFlight: 28, Tick: 100 * time.Millisecond}

// steady is a tick of a workload that takes what it is given at latency.
func steady(rate float64, latency time.Duration) Measurement {
	perTick := rate * reference.Tick.Seconds()
	return Measurement{Reporting: 2, Requests: int64(math.Round(perTick)), InFlight: rate * latency.Seconds(), Latency: latency,
		Admitted: int64(math.Round(perTick)), Used: int64(math.Round(perTick))}
}

// plant is a workload of 40 connections: a request holds one for base, and beyond 40 in flight it
// waits for one as well, so latency grows with the excess (a pool's queue).
func plant(rate float64, base time.Duration) Measurement {
	const pool = 40
	inFlight := rate * base.Seconds()
	latency := base
	if inFlight > pool {
		latency = time.Duration(float64(base) * inFlight / pool)
		inFlight = rate * latency.Seconds()
	}
	return steady(rate, latency).withInFlight(inFlight)
}

func (m Measurement) withInFlight(f float64) Measurement { m.InFlight = f; return m }

func TestTheControllerKeepsTheDeclaredPlanWhenTheWorkloadIsAsDeclared(t *testing.T) {
	c := NewController(reference)
	for i := range 1000 {
		rate, reason := c.Step(steady(c.Rate(), 200*time.Millisecond))
		if rate != 140 || reason != ReasonDeclared {
			t.Fatalf("tick %d: %v (%s), want the declared 140", i, rate, reason)
		}
	}
}

func TestNobodyReportingFallsBackToTheDeclaredPlan(t *testing.T) {
	c := NewController(reference)
	for range 20 {
		c.Step(steady(c.Rate(), 800*time.Millisecond))
	}
	if c.Rate() >= 140 {
		t.Fatalf("rate %v after 20 slow ticks, want it trimmed", c.Rate())
	}
	if rate, reason := c.Step(Measurement{}); rate != 140 || reason != ReasonNoReports {
		t.Fatalf("no replica reports: %v (%s), want the declared plan", rate, reason)
	}
}

// TestTheRateFallsMonotonicallyWithLatency: the slower the workload, the fewer admitted, as Little's
// law says once the smoothing has settled.
func TestTheRateFallsMonotonicallyWithLatency(t *testing.T) {
	prev := math.Inf(1)
	for _, ms := range []int{100, 200, 250, 300, 400, 560, 800, 1600, 6000} {
		latency := time.Duration(ms) * time.Millisecond
		c := NewController(reference)
		for range 300 {
			c.Step(steady(c.Rate(), latency))
		}
		want := math.Max(reference.Floor, math.Min(140, 28/latency.Seconds()))
		if math.Abs(c.Rate()-want) > 0.01*want {
			t.Errorf("latency %s: settled at %.2f/s, want Little's %.2f", latency, c.Rate(), want)
		}
		if c.Rate() > prev {
			t.Errorf("latency %s: %.2f/s, more than %.2f/s at a lower latency", latency, c.Rate(), prev)
		}
		prev = c.Rate()
	}
}

// TestALatencyStepAndBack: the database slows from 200 to 400 ms for 10 s: the rate follows down
// without overshooting the pool, and is back at the declared rate within 5 s of the recovery.
func TestALatencyStepAndBack(t *testing.T) {
	c := NewController(reference)
	base := func(tick int) time.Duration {
		if tick >= 100 && tick < 200 {
			return 400 * time.Millisecond
		}
		return 200 * time.Millisecond
	}
	var peak float64
	back := -1
	for tick := range 400 {
		m := plant(c.Rate(), base(tick))
		if tick >= 150 && tick < 200 {
			peak = math.Max(peak, m.InFlight)
		}
		rate, _ := c.Step(m)
		if tick >= 200 && back < 0 && rate == 140 {
			back = tick
		}
	}
	if peak > 40 {
		t.Errorf("in flight peaked at %.1f in the slow phase's second half, more than the pool's 40", peak)
	}
	if back < 0 || back-200 > 50 {
		t.Errorf("back at the declared rate %d ticks after the recovery, want within 50 (5 s)", back-200)
	}
}

func TestUpstreamErrorsBrakeAtLeastByHalfWithinTwoTicks(t *testing.T) {
	c := NewController(reference)
	for range 10 {
		c.Step(steady(c.Rate(), 200*time.Millisecond))
	}
	before := c.Rate()
	for tick := range 2 {
		m := steady(c.Rate(), 200*time.Millisecond)
		m.Errors = m.Requests / 2
		rate, reason := c.Step(m)
		if reason != ReasonUpstreamErrors {
			t.Fatalf("tick %d of errors: reason %s", tick, reason)
		}
		if tick == 1 && rate > before/2 {
			t.Fatalf("after two ticks of errors %v/s, want at most half of %v", rate, before)
		}
	}
	// 5 s of errors, then none: it recovers, step by step, to the declared rate.
	for range 48 {
		m := steady(c.Rate(), 200*time.Millisecond)
		m.Errors = max(m.Requests, minSample)
		m.Requests = max(m.Requests, minSample)
		c.Step(m)
	}
	if c.Rate() != reference.Floor {
		t.Fatalf("after 5 s of errors %v/s, want the floor %v", c.Rate(), reference.Floor)
	}
	ticks := 0
	for c.Rate() < 140 && ticks < 100 {
		c.Step(steady(c.Rate(), 200*time.Millisecond))
		ticks++
	}
	if c.Rate() != 140 || ticks > 1/maxRiseShare+1 {
		t.Fatalf("after the errors stopped: %v/s in %d ticks, want the declared 140 within %v ticks", c.Rate(), ticks, 1/maxRiseShare+1)
	}
}

func TestNoShowsAreCompensatedUpToTheCeiling(t *testing.T) {
	// 30 % of the admitted never come.
	c := NewController(reference)
	for range 200 {
		rate := c.Rate()
		m := steady(rate*0.7, 200*time.Millisecond)
		m.Admitted, m.Used = int64(math.Round(rate*0.1)), int64(math.Round(rate*0.07))
		if rate, reason := c.Step(m); rate > reference.Ceiling || (rate > 140 && reason != ReasonNoShows) {
			t.Fatalf("rate %v (%s): above the ceiling, or above the plan for another reason than no-shows", rate, reason)
		}
	}
	// Those who come keep the pool at its target: 28 in flight at 200 ms is 140 a second of them.
	if served := c.Rate() * 0.7; math.Abs(served-140) > 14 {
		t.Fatalf("served %.1f/s of the admitted %.1f/s, want the workload's 140 ± 10 %%", served, c.Rate())
	}
	// Half never come: the compensation stops at the ceiling, the pool's full rate.
	c = NewController(reference)
	for range 200 {
		m := steady(c.Rate()*0.4, 200*time.Millisecond)
		m.Admitted, m.Used = 20, 8
		if rate, _ := c.Step(m); rate > reference.Ceiling {
			t.Fatalf("rate %v above the ceiling", rate)
		}
	}
	if c.Rate() != reference.Ceiling {
		t.Fatalf("rate %v with 60 %% no-shows, want the ceiling %v", c.Rate(), reference.Ceiling)
	}
	// Without a ceiling above the plan, the plan is the most admitted.
	l := reference
	l.Ceiling = 0
	c = NewController(l)
	for range 200 {
		m := steady(c.Rate()*0.7, 200*time.Millisecond)
		m.Admitted, m.Used = 14, 10
		if rate, _ := c.Step(m); rate > 140 {
			t.Fatalf("rate %v above the declared plan, which is the ceiling here", rate)
		}
	}
}

// TestEveryStepIsBoundedAndTheBoundsHold drives the controller with random measurements: no tick
// rises by more than maxRiseShare of the declared rate, none falls by more than the brake, and the
// rate stays within [floor, ceiling], above the declared rate only for no-shows.
func TestEveryStepIsBoundedAndTheBoundsHold(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	c := NewController(reference)
	prev := c.Rate()
	for tick := range 20000 {
		m := Measurement{Reporting: r.IntN(3), Requests: r.Int64N(40), InFlight: r.Float64() * 80,
			Latency: time.Duration(r.Int64N(int64(2 * time.Second))), Admitted: r.Int64N(30)}
		m.Errors, m.Used = r.Int64N(m.Requests+1)/4, r.Int64N(m.Admitted+1)
		rate, reason := c.Step(m)
		if rate < reference.Floor || rate > reference.Ceiling {
			t.Fatalf("tick %d: %v outside [%v, %v]", tick, rate, reference.Floor, reference.Ceiling)
		}
		if rate > reference.Declared && m.Used >= m.Admitted {
			t.Fatalf("tick %d: %v above the declared plan though every admitted visitor came", tick, rate)
		}
		if reason != ReasonNoReports {
			if rate > prev+maxRiseShare*reference.Declared+1e-9 {
				t.Fatalf("tick %d: rose from %v to %v", tick, prev, rate)
			}
			if rate < math.Min(prev*errorBrake, prev*(1-maxFallShare))-1e-9 && rate != reference.Floor {
				t.Fatalf("tick %d: fell from %v to %v (%s)", tick, prev, rate, reason)
			}
		}
		prev = rate
	}
}

// TestNoOscillationGrowsUnderConstantInput closes the loop over the pool model for 1,000 ticks at a
// latency the declared plan overloads: the rate settles, and its swing only shrinks.
func TestNoOscillationGrowsUnderConstantInput(t *testing.T) {
	for _, base := range []time.Duration{200 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond, time.Second} {
		c := NewController(reference)
		var rates []float64
		for range 1000 {
			rate, _ := c.Step(plant(c.Rate(), base))
			rates = append(rates, rate)
		}
		swing := func(from, to int) float64 {
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, x := range rates[from:to] {
				lo, hi = math.Min(lo, x), math.Max(hi, x)
			}
			return hi - lo
		}
		early, late := swing(100, 200), swing(900, 1000)
		if late > early+1e-9 || late > 0.01*rates[999] {
			t.Errorf("base latency %s: swing %.3f over ticks 100-200, %.3f over 900-1000 (rate %.2f): it must settle", base, early, late, rates[999])
		}
		want := math.Min(140, 28/base.Seconds())
		if math.Abs(rates[999]-want) > 0.02*want {
			t.Errorf("base latency %s: settled at %.2f/s, want %.2f", base, rates[999], want)
		}
	}
}

// TestTheInFlightNamesARateAndDoesNotCompound: while more is in flight than the target, the rate
// goes to what Little's law gives for the in-flight's own latency, however many ticks the in-flight
// stays high (as it does while admissions already on their way arrive), and a workload that
// finishes nothing goes to the floor.
func TestTheInFlightNamesARateAndDoesNotCompound(t *testing.T) {
	c := NewController(reference)
	// 56 in flight while 140 a second finish: the in-flight says 400 ms, Little's law 70 a second.
	for range 100 {
		m := steady(140, 200*time.Millisecond).withInFlight(56)
		if rate, reason := c.Step(m); rate < 70-1e-9 {
			t.Fatalf("rate %v (%s): trimmed below what the in-flight names", rate, reason)
		}
	}
	if rate := c.Rate(); math.Abs(rate-70) > 0.5 {
		t.Fatalf("settled at %v, want 70", rate)
	}
	// Nothing finishes: to the floor.
	c = NewController(reference)
	for range 100 {
		c.Step(Measurement{Reporting: 1, InFlight: 40})
	}
	if rate := c.Rate(); rate != reference.Floor {
		t.Fatalf("a stuck workload left the rate at %v, want the floor %v", rate, reference.Floor)
	}
}
