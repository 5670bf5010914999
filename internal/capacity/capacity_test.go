package capacity

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const ms = time.Millisecond

func mustPlan(t *testing.T, in Input) Plan {
	t.Helper()
	p, err := New(in)
	if err != nil {
		t.Fatalf("New(%+v): %v", in, err)
	}
	return p
}

// seed is the engineering post's example: 40 connections, 200 ms per order, 70 %, 100 ms tick.
var seed = Input{PoolSize: 40, RequestLatency: 200 * ms, UtilizationPercent: 70, Tick: 100 * ms}

func TestNew(t *testing.T) {
	type want struct {
		Batch    int64
		Num, Den int64
		Rate     string
		Front    int64
		Override bool
	}
	cases := []struct {
		name string
		in   Input
		want want
	}{
		{"seed: 14 per 100 ms tick, 140/s", seed, want{14, 14, 1, "140", 14, false}},
		{"seed with a 200 ms tick: 28 per tick", Input{40, 200 * ms, 70, 200 * ms, 0}, want{28, 28, 1, "140", 28, false}},
		{"fractional: 0.14 per tick, 1.4/s", Input{2, time.Second, 70, 100 * ms, 0}, want{0, 7, 50, "1.4", 1, false}},
		{"non-terminating rate is truncated to three decimals", Input{40, 300 * ms, 70, 100 * ms, 0}, want{9, 28, 3, "93.333", 10, false}},
		{"full utilisation", Input{10, 10 * ms, 100, 10 * ms, 0}, want{10, 10, 1, "1000", 10, false}},
		{"override ignores capacity", Input{40, 200 * ms, 70, 100 * ms, 500}, want{500, 500, 1, "5000", 500, true}},
		{"override without capacity", Input{Tick: 100 * ms, BatchSizeOverride: 3}, want{3, 3, 1, "30", 3, true}},
		{
			"largest API values: 1e6 slots of 1 ms at 100 %, 10 s tick",
			Input{1_000_000, ms, 100, 10 * time.Second, 0},
			want{10_000_000_000, 10_000_000_000, 1, "1000000000", 10_000_000_000, false},
		},
		{
			"smallest API values: 1 slot of 10 min at 1 %, 10 ms tick",
			Input{1, 10 * time.Minute, 1, 10 * ms, 0},
			want{0, 1, 6_000_000, "0.0000166", 1, false},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPlan(t, tc.in)
			num, den := p.PerTick()
			got := want{p.BatchSize(), num, den, p.RateString(), p.FrontBatch(), p.Override()}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if p.Tick() != tc.in.Tick {
				t.Errorf("Tick() = %s, want %s", p.Tick(), tc.in.Tick)
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	cases := []struct {
		name    string
		in      Input
		wantErr string
	}{
		{"zero tick", Input{40, 200 * ms, 70, 0, 0}, "tick must be positive"},
		{"zero pool", Input{0, 200 * ms, 70, 100 * ms, 0}, "pool size must be positive"},
		{"zero latency", Input{40, 0, 70, 100 * ms, 0}, "request latency must be positive"},
		{"utilization 0", Input{40, 200 * ms, 0, 100 * ms, 0}, "utilization percent must be between 1 and 100"},
		{"utilization 101", Input{40, 200 * ms, 101, 100 * ms, 0}, "utilization percent must be between 1 and 100"},
		{"negative override", Input{40, 200 * ms, 70, 100 * ms, -1}, "must not be negative"},
		{
			"quota beyond 64 bits",
			Input{math.MaxInt64, time.Nanosecond, 100, time.Duration(math.MaxInt64), 0},
			"out of the 64-bit range",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New(%+v) error = %v, want one containing %q", tc.in, err, tc.wantErr)
			}
		})
	}
}

func TestHugeInputsDoNotOverflow(t *testing.T) {
	// The intermediate product (pool × util × tick) exceeds int64, the reduced quota does not.
	in := Input{PoolSize: math.MaxInt64 / 2, RequestLatency: time.Duration(math.MaxInt64 / 2), UtilizationPercent: 100, Tick: time.Hour}
	p := mustPlan(t, in)
	num, den := p.PerTick()
	if diff := cmp.Diff([2]int64{int64(time.Hour), 1}, [2]int64{num, den}); diff != "" {
		t.Fatalf("quota (-want +got):\n%s", diff)
	}
	if got, want := p.RateString(), "1000000000"; got != want {
		t.Errorf("rate = %s, want %s", got, want)
	}
	wait, ok := p.EstimatedWait(math.MaxInt64)
	if !ok || wait <= 0 {
		t.Errorf("EstimatedWait(MaxInt64) = %s, %v; want a positive wait", wait, ok)
	}
	slow := mustPlan(t, Input{PoolSize: 1, RequestLatency: time.Duration(math.MaxInt64 / 100), UtilizationPercent: 1, Tick: 10 * ms})
	wait, ok = slow.EstimatedWait(math.MaxInt64)
	if !ok || wait != time.Duration(math.MaxInt64) {
		t.Errorf("EstimatedWait on a near-zero rate = %s, %v; want it saturated at the largest duration", wait, ok)
	}
}

func TestEstimatedWait(t *testing.T) {
	p := mustPlan(t, seed)
	fractional := mustPlan(t, Input{2, time.Second, 70, 100 * ms, 0})
	cases := []struct {
		name     string
		plan     Plan
		position int64
		want     time.Duration
	}{
		{"at the gate", p, 0, 0},
		{"first in line", p, 1, time.Second},
		{"exactly one second of admissions", p, 140, time.Second},
		{"one past a second", p, 141, 2 * time.Second},
		{"seed: position 700 waits 5 s", p, 700, 5 * time.Second},
		{"far back", p, 1_000_000, 7143 * time.Second},
		{"fractional rate 1.4/s, position 7", fractional, 7, 5 * time.Second},
		{"fractional rate 1.4/s, position 8", fractional, 8, 6 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.plan.EstimatedWait(tc.position)
			if !ok || got != tc.want {
				t.Errorf("EstimatedWait(%d) = %s, %v; want %s, true", tc.position, got, ok, tc.want)
			}
		})
	}
	if _, ok := (Plan{}).EstimatedWait(5); ok {
		t.Error("a plan that admits nobody must not estimate a wait")
	}
}

// The 128-bit path must answer exactly what arbitrary precision answers, up to where it saturates.
func TestEstimatedWaitAgreesWithWideArithmetic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	// Factors from small to the edge of int64, so that both the 128-bit products and the fallback run.
	factor := func() int64 {
		switch r.IntN(4) {
		case 0:
			return 1 + r.Int64N(1000)
		case 1:
			return 1 + r.Int64N(1<<32)
		case 2:
			return math.MaxInt64 - r.Int64N(1000)
		default:
			return 1 + r.Int64N(math.MaxInt64)
		}
	}
	checked := 0
	for range 20_000 {
		p, err := FromQuota(factor(), factor(), time.Duration(factor()), true)
		if err != nil {
			continue // a quota that does not fit; FromQuota's own tests cover it
		}
		checked++
		position := factor()
		got, ok := p.EstimatedWait(position)
		if want := p.estimatedWaitWide(position); !ok || got != want {
			num, den := p.PerTick()
			t.Fatalf("plan %d/%d per %d ns, position %d: EstimatedWait = %d, %v; arbitrary precision %d", num, den, p.Tick(), position, got, ok, want)
		}
	}
	if checked < 10_000 {
		t.Fatalf("only %d of 20000 random plans were valid; the generator no longer covers the range", checked)
	}
}

func TestEstimatedWaitDoesNotAllocate(t *testing.T) {
	p := mustPlan(t, seed)
	if allocs := testing.AllocsPerRun(100, func() { _, _ = p.EstimatedWait(123_456) }); allocs != 0 {
		t.Errorf("EstimatedWait allocates %.0f times per call; the proxy calls it on every poll", allocs)
	}
}

// fixedRand returns the same number every time.
type fixedRand float64

func (f fixedRand) Float64() float64 { return float64(f) }

func TestPollHint(t *testing.T) {
	p := mustPlan(t, seed)
	const minI, maxI = 500 * ms, 5 * time.Second
	mid := fixedRand(0.5)                   // no spread
	low := fixedRand(0)                     // -20 %
	high := fixedRand(math.Nextafter(1, 0)) // just under +20 %
	cases := []struct {
		name     string
		plan     Plan
		position int64
		r        Rand
		want     time.Duration
	}{
		{"first in line polls at minInterval", p, 1, mid, 500 * ms},
		{"position 14 is within one batch of the front", p, 14, mid, 500 * ms},
		{"position 15 waits 1 s: 500 ms", p, 15, mid, 500 * ms},
		{"position 300 waits 3 s: 1.5 s", p, 300, mid, 1500 * ms},
		{"seed: position 700 waits 5 s: 2.5 s", p, 700, mid, 2500 * ms},
		{"position 1400 waits 10 s: capped at 5 s", p, 1400, mid, 5 * time.Second},
		{"far positions are capped at maxInterval", p, 1_000_000, mid, 5 * time.Second},
		{"spread -20 % never goes below minInterval", p, 1, low, 500 * ms},
		{"spread -20 % on a long wait", p, 700, low, 2000 * ms},
		{"spread +20 % at the cap", p, 1_000_000, high, 6 * time.Second},
		{"spread +20 % at the front", p, 1, high, 600 * ms},
		{"unknown wait polls at maxInterval", Plan{}, 50, mid, 5 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := PollHint(tc.plan, tc.position, minI, maxI, tc.r)
			// Float rounding of the spread may shift the result by a nanosecond.
			if d := got - tc.want; d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("PollHint(position %d) = %s, want %s", tc.position, got, tc.want)
			}
		})
	}
}

func TestPollHintSpreadStaysInBounds(t *testing.T) {
	p := mustPlan(t, seed)
	r := rand.New(rand.NewPCG(1, 2))
	const minI, maxI = 500 * ms, 5 * time.Second
	var lowest, highest time.Duration = math.MaxInt64, 0
	for range 10_000 {
		h := PollHint(p, 700, minI, maxI, r)
		lowest, highest = min(lowest, h), max(highest, h)
	}
	if lowest < 2000*ms || highest >= 3000*ms {
		t.Fatalf("hints for position 700 ranged over [%s, %s], want within [2s, 3s)", lowest, highest)
	}
	// The spread must actually spread: a run of 10,000 draws covers most of the ±20 % band.
	if highest-lowest < 900*ms {
		t.Fatalf("hints for position 700 ranged over [%s, %s]: the spread is too narrow", lowest, highest)
	}
}

func TestCarryIsExactOverTime(t *testing.T) {
	cases := []struct {
		name   string
		in     Input
		ticks  int
		window int   // every window of this many consecutive ticks ...
		inWin  int64 // ... admits exactly this many
	}{
		{"1.4/s: 14 in any 100 ticks", Input{2, time.Second, 70, 100 * ms, 0}, 1000, 100, 14},
		{"0.14 per tick: 7 in any 50 ticks", Input{2, time.Second, 70, 100 * ms, 0}, 1000, 50, 7},
		{"93.333/s: 28 in any 3 ticks", Input{40, 300 * ms, 70, 100 * ms, 0}, 1000, 3, 28},
		{"whole quota: 14 every tick", seed, 1000, 1, 14},
		{"slowest API plan: 1 in any 6,000,000 ticks", Input{1, 10 * time.Minute, 1, 10 * ms, 0}, 12_000_000, 6_000_000, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPlan(t, tc.in)
			var c Carry
			per := make([]int64, tc.ticks)
			var total int64
			for i := range per {
				per[i] = c.Next(p)
				total += per[i]
			}
			num, den := p.PerTick()
			if want := int64(tc.ticks) * num / den; total != want {
				t.Fatalf("%d ticks admitted %d, want exactly %d", tc.ticks, total, want)
			}
			var inWin int64
			for i := range per {
				inWin += per[i]
				if i >= tc.window {
					inWin -= per[i-tc.window]
				}
				if i >= tc.window-1 && inWin != tc.inWin {
					t.Fatalf("ticks %d..%d admitted %d, want %d", i-tc.window+1, i, inWin, tc.inWin)
				}
			}
		})
	}
}

func TestCarryKeepsFractionAcrossPlanChange(t *testing.T) {
	slow := mustPlan(t, Input{2, time.Second, 70, 100 * ms, 0}) // 7/50 per tick
	var c Carry
	var total int64
	for range 40 { // 40 × 0.14 = 5.6: five admitted, 0.6 carried
		total += c.Next(slow)
	}
	if total != 5 {
		t.Fatalf("40 ticks at 0.14 admitted %d, want 5", total)
	}
	// Same rate, tick doubled: 0.28 per tick (7/25). The carried 0.6 stays 0.6 (15/25), so two more
	// ticks reach 0.6 + 0.56 = 1.16 and admit one.
	doubled := mustPlan(t, Input{2, time.Second, 70, 200 * ms, 0})
	if got := c.Next(doubled); got != 0 {
		t.Fatalf("first tick after the change admitted %d, want 0 (0.6 + 0.28 < 1)", got)
	}
	if got := c.Next(doubled); got != 1 {
		t.Fatalf("second tick after the change admitted %d, want 1 (0.6 + 0.56 ≥ 1)", got)
	}
	c.Reset()
	if got := c.Next(slow); got != 0 {
		t.Fatalf("after Reset the first tick admitted %d, want 0", got)
	}
}

func TestFromQuota(t *testing.T) {
	p, err := FromQuota(28, 2, 100*ms, false)
	if err != nil {
		t.Fatal(err)
	}
	if num, den := p.PerTick(); num != 14 || den != 1 {
		t.Errorf("FromQuota(28, 2) reduced to %d/%d, want 14/1", num, den)
	}
	for _, bad := range [][2]int64{{-1, 1}, {1, 0}, {1, -5}, {math.MaxInt64, 2}} {
		if _, err := FromQuota(bad[0], bad[1], 100*ms, false); err == nil {
			t.Errorf("FromQuota(%d, %d) accepted", bad[0], bad[1])
		}
	}
	if _, err := FromQuota(1, 1, 0, false); err == nil {
		t.Error("FromQuota with a zero tick accepted")
	}
}

func TestDecimalString(t *testing.T) {
	for _, tc := range []struct {
		num, den int64
		want     string
	}{
		{0, 1, "0"},
		{140, 1, "140"},
		{7, 5, "1.4"},
		{280, 3, "93.333"},
		{1, 1, "1"},
		{999, 1000, "0.999"},
		{7, 50, "0.14"},
		{1, 3, "0.333"},
		{1, 60_000, "0.0000166"},
		{1, 100_000, "0.00001"},
		{1, 1_000_000_000_000, "0.000000000001"},
		{1, 10_000_000_000_000, "0"},
		{10_000_000_001, 10_000_000, "1000"},
	} {
		if got := DecimalString(big.NewRat(tc.num, tc.den)); got != tc.want {
			t.Errorf("DecimalString(%d/%d) = %q, want %q", tc.num, tc.den, got, tc.want)
		}
	}
}

func TestCapped(t *testing.T) {
	mustPlan := func(in Input) Plan {
		t.Helper()
		p, err := New(in)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	reference := mustPlan(Input{PoolSize: 40, RequestLatency: 200 * time.Millisecond, UtilizationPercent: 70, Tick: 100 * time.Millisecond})
	largest := mustPlan(Input{PoolSize: 1_000_000, RequestLatency: time.Millisecond, UtilizationPercent: 100, Tick: 10 * time.Second})
	fractionalAbove := mustPlan(Input{BatchSizeOverride: 0, PoolSize: 2501, RequestLatency: time.Second, UtilizationPercent: 1, Tick: 10 * time.Second}) // 250.1 per tick
	for _, tc := range []struct {
		name       string
		plan       Plan
		max        int64
		wantNum    int64
		wantDen    int64
		wantCapped bool
	}{
		{"the reference plan is far below the cap", reference, 250, 14, 1, false},
		{"exactly at the cap", mustPlan(Input{BatchSizeOverride: 250, Tick: time.Second}), 250, 250, 1, false},
		{"one above the cap", mustPlan(Input{BatchSizeOverride: 251, Tick: time.Second}), 250, 250, 1, true},
		{"a fraction above the cap", fractionalAbove, 250, 250, 1, true},
		{"the largest plan the API accepts", largest, 250, 250, 1, true},
		{"fractional below the cap", mustPlan(Input{PoolSize: 2, RequestLatency: time.Second, UtilizationPercent: 70, Tick: 100 * time.Millisecond}), 250, 7, 50, false},
		{"the zero plan", Plan{}, 250, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, capped := tc.plan.Capped(tc.max)
			num, den := got.PerTick()
			if num != tc.wantNum || den != tc.wantDen || capped != tc.wantCapped {
				t.Fatalf("Capped(%d) = %d/%d, capped %v; want %d/%d, %v", tc.max, num, den, capped, tc.wantNum, tc.wantDen, tc.wantCapped)
			}
			if got.Tick() != tc.plan.Tick() || got.Override() != tc.plan.Override() {
				t.Fatalf("Capped changed the tick or the source: %+v", got)
			}
		})
	}
}

func TestPlanShare(t *testing.T) {
	p, err := FromQuota(14, 1, 100*time.Millisecond, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		percent, num, den int64
	}{{20, 14, 5}, {50, 7, 1}, {100, 14, 1}, {0, 0, 1}, {1, 7, 50}} {
		num, den := p.Share(c.percent).PerTick()
		if num != c.num || den != c.den {
			t.Errorf("%d %% of 14 a tick: %d/%d, want %d/%d", c.percent, num, den, c.num, c.den)
		}
	}
	if got := p.Share(20).Tick(); got != p.Tick() {
		t.Errorf("a share ticks every %s, want %s", got, p.Tick())
	}
}
