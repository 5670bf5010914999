// Package capacity turns the bottleneck of a workload into an admission plan, exactly.
//
// A pool of P slots, each held for L per request, serves P/L requests per second. Admitting at
// U% of that, every tick T admits P × U/100 × T/L visitors. The plan keeps that quota as a reduced
// fraction of integers, so 40 slots × 70 % × 100 ms / 200 ms is exactly 14 per tick (140/s) and a
// fractional quota such as 0.14 per tick is carried from tick to tick instead of being rounded.
package capacity

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strings"
	"time"
)

// Input is what a plan is derived from.
type Input struct {
	// PoolSize is the number of slots of the bottleneck (for example database connections).
	PoolSize int64
	// RequestLatency is how long one admitted request holds a slot.
	RequestLatency time.Duration
	// UtilizationPercent is the share of the pool admitted visitors may use, 1 to 100.
	UtilizationPercent int64
	// Tick is how often a batch is admitted.
	Tick time.Duration
	// BatchSizeOverride, when positive, is the batch per tick instead of the derived one.
	BatchSizeOverride int64
}

// Plan is an exact admission quota: a reduced fraction of visitors every Tick.
// The zero Plan admits nobody.
type Plan struct {
	tick     time.Duration
	num, den int64 // reduced; den > 0
	override bool
}

// New derives a plan. It fails on inputs that are out of range or whose quota does not fit in
// 64-bit integers; it never overflows silently.
func New(in Input) (Plan, error) {
	if in.Tick <= 0 {
		return Plan{}, fmt.Errorf("tick must be positive, got %s", in.Tick)
	}
	if in.BatchSizeOverride < 0 {
		return Plan{}, fmt.Errorf("batch size override must not be negative, got %d", in.BatchSizeOverride)
	}
	if in.BatchSizeOverride > 0 {
		return FromQuota(in.BatchSizeOverride, 1, in.Tick, true)
	}
	switch {
	case in.PoolSize <= 0:
		return Plan{}, fmt.Errorf("pool size must be positive, got %d", in.PoolSize)
	case in.RequestLatency <= 0:
		return Plan{}, fmt.Errorf("request latency must be positive, got %s", in.RequestLatency)
	case in.UtilizationPercent <= 0 || in.UtilizationPercent > 100:
		return Plan{}, fmt.Errorf("utilization percent must be between 1 and 100, got %d", in.UtilizationPercent)
	}
	// per tick = pool × util × tick / (100 × latency), computed wide and reduced before narrowing.
	num := new(big.Int).SetInt64(in.PoolSize)
	num.Mul(num, big.NewInt(in.UtilizationPercent))
	num.Mul(num, big.NewInt(int64(in.Tick)))
	den := big.NewInt(100)
	den.Mul(den, big.NewInt(int64(in.RequestLatency)))
	gcd := new(big.Int).GCD(nil, nil, num, den)
	num.Quo(num, gcd)
	den.Quo(den, gcd)
	if !num.IsInt64() || !den.IsInt64() {
		return Plan{}, errors.New("the admission quota per tick is out of the 64-bit range; check pool size, latency and tick")
	}
	return FromQuota(num.Int64(), den.Int64(), in.Tick, false)
}

// FromQuota builds a plan that admits num/den visitors per tick. It is how a plan read back from
// storage is rebuilt.
func FromQuota(num, den int64, tick time.Duration, override bool) (Plan, error) {
	if tick <= 0 {
		return Plan{}, fmt.Errorf("tick must be positive, got %s", tick)
	}
	if num < 0 || den <= 0 {
		return Plan{}, fmt.Errorf("quota %d/%d per tick is not a non-negative fraction", num, den)
	}
	if num > math.MaxInt64-den {
		// Carry adds a remainder below den to num; keep that sum representable.
		return Plan{}, errors.New("the admission quota per tick is out of the 64-bit range; check pool size, latency and tick")
	}
	if num == 0 {
		den = 1
	} else if g := gcd(num, den); g > 1 {
		num, den = num/g, den/g
	}
	return Plan{tick: tick, num: num, den: den, override: override}, nil
}

// MaxAdmitPerTick is the most visitors one tick admits, whatever the plan asks for. It bounds the
// time one tick holds Redis (each admission writes a pass record), and so how long one queue's tick
// can delay every other call on the same Redis: docs/performance.md gives the measured cost. A plan
// that asks for more per tick admits this many; the scheduler says so in the queue's status.
const MaxAdmitPerTick = 250

// Capped returns the plan that admits at most maxPerTick visitors per tick, and whether p asked for
// more. The capped plan keeps p's tick and source; its quota is min(p's quota, maxPerTick).
func (p Plan) Capped(maxPerTick int64) (Plan, bool) {
	if p.den == 0 || maxPerTick <= 0 {
		return p, false
	}
	if whole := p.num / p.den; whole < maxPerTick || (whole == maxPerTick && p.num%p.den == 0) {
		return p, false
	}
	return Plan{tick: p.tick, num: maxPerTick, den: 1, override: p.override}, true
}

// Share is the part percent/100 of p (a metered lane's), exactly: the same tick, percent hundredths
// of the quota.
func (p Plan) Share(percent int64) Plan {
	if percent >= 100 || p.den == 0 {
		return p
	}
	percent = max(0, percent)
	num, den := p.num, p.den
	if num > math.MaxInt64/100 || den > math.MaxInt64/100 {
		// Too large to scale exactly: a hundredth first, which such a quota does not miss.
		return Plan{tick: p.tick, num: num / 100 * percent, den: den, override: p.override}
	}
	num, den = num*percent, den*100
	if num == 0 {
		den = 1
	} else if g := gcd(num, den); g > 1 {
		num, den = num/g, den/g
	}
	return Plan{tick: p.tick, num: num, den: den, override: p.override}
}

// Tick is the admission interval.
func (p Plan) Tick() time.Duration { return p.tick }

// PerTick returns the exact quota per tick as a reduced fraction.
func (p Plan) PerTick() (num, den int64) { return p.num, p.den }

// Override reports whether the quota came from a batch size override.
func (p Plan) Override() bool { return p.override }

// BatchSize is the whole part of the quota per tick: what most ticks admit. When the quota is
// fractional some ticks admit one more, through Carry.
func (p Plan) BatchSize() int64 {
	if p.den == 0 {
		return 0
	}
	return p.num / p.den
}

// FrontBatch is the number of visitors at the front of the queue that the next tick may admit:
// the quota per tick rounded up, at least 1.
func (p Plan) FrontBatch() int64 {
	if p.den == 0 {
		return 1
	}
	return max(1, p.num/p.den+boolToInt(p.num%p.den != 0))
}

// Rate is the exact long-run admissions per second.
func (p Plan) Rate() *big.Rat {
	if p.den == 0 || p.tick <= 0 {
		return new(big.Rat)
	}
	// (num / den) per tick × (1e9 / tick ns) ticks per second.
	n := new(big.Int).Mul(big.NewInt(p.num), big.NewInt(int64(time.Second)))
	d := new(big.Int).Mul(big.NewInt(p.den), big.NewInt(int64(p.tick)))
	return new(big.Rat).SetFrac(n, d)
}

// RateString is Rate as a decimal (see DecimalString): "140", "1.4", "93.333", "0.0000166".
func (p Plan) RateString() string {
	return DecimalString(p.Rate())
}

// PerSecond is the plan's rate, visitors a second, as a float; 0 for the zero plan.
func (p Plan) PerSecond() float64 {
	if p.den == 0 || p.tick <= 0 {
		return 0
	}
	return float64(p.num) / float64(p.den) / p.tick.Seconds()
}

// EstimatedWait is how long a visitor at the given 1-based position waits before admission:
// ⌈position ÷ rate⌉ seconds. Position 0 (already at the gate) waits 0. When the plan admits nobody
// the wait is unknown and ok is false. A wait beyond the largest Duration is that Duration.
func (p Plan) EstimatedWait(position int64) (wait time.Duration, ok bool) {
	if position <= 0 {
		return 0, true
	}
	if p.num == 0 || p.den == 0 || p.tick <= 0 {
		return 0, false
	}
	// The proxy asks this on every poll, so the common case stays in 128-bit integers:
	// position / rate = position × den × tick / (num × 1s).
	pdHi, pd := bits.Mul64(uint64(position), uint64(p.den))
	dHi, d := bits.Mul64(uint64(p.num), uint64(time.Second))
	if pdHi != 0 || dHi != 0 {
		return p.estimatedWaitWide(position), true
	}
	nHi, nLo := bits.Mul64(pd, uint64(p.tick))
	if nHi >= d { // the quotient needs more than 64 bits
		return time.Duration(math.MaxInt64), true
	}
	seconds, rem := bits.Div64(nHi, nLo, d)
	return ceilSeconds(seconds, rem != 0), true
}

// estimatedWaitWide is EstimatedWait in arbitrary precision, for factors beyond 64 bits.
func (p Plan) estimatedWaitWide(position int64) time.Duration {
	n := new(big.Int).Mul(big.NewInt(position), big.NewInt(p.den))
	n.Mul(n, big.NewInt(int64(p.tick)))
	d := new(big.Int).Mul(big.NewInt(p.num), big.NewInt(int64(time.Second)))
	seconds, rem := new(big.Int).QuoRem(n, d, new(big.Int))
	if !seconds.IsUint64() {
		return time.Duration(math.MaxInt64)
	}
	return ceilSeconds(seconds.Uint64(), rem.Sign() != 0)
}

// ceilSeconds is whole seconds, plus one when a remainder was left, as a Duration that saturates.
func ceilSeconds(seconds uint64, remainder bool) time.Duration {
	const most = uint64(math.MaxInt64 / int64(time.Second))
	if remainder {
		if seconds >= most {
			return time.Duration(math.MaxInt64)
		}
		seconds++
	}
	if seconds > most {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(seconds) * time.Second
}

// DecimalString formats a non-negative r truncated toward zero, without trailing zeros: with three
// decimals from 1 up ("140", "93.333"), and with three significant digits below 1 ("0.14",
// "0.0000166"), so that a slow but moving rate never reads as 0. Below 10^-12 it is "0".
func DecimalString(r *big.Rat) string {
	const maxDecimals = 12
	decimals := 3
	if r.Sign() > 0 && r.Cmp(big.NewRat(1, 1)) < 0 {
		// The first significant digit is at decimal k when r × 10^k ≥ 1; keep two more.
		scaled, ten := new(big.Rat).Set(r), big.NewRat(10, 1)
		k := 0
		for scaled.Cmp(big.NewRat(1, 1)) < 0 && k < maxDecimals {
			scaled.Mul(scaled, ten)
			k++
		}
		decimals = min(k+2, maxDecimals)
	}
	unit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(decimals)), nil)
	scaled := new(big.Int).Mul(r.Num(), unit)
	scaled.Quo(scaled, r.Denom())
	whole, frac := new(big.Int).QuoRem(scaled, unit, new(big.Int))
	if frac.Sign() == 0 {
		return whole.String()
	}
	digits := frac.Abs(frac).String()
	s := whole.String() + "." + strings.Repeat("0", decimals-len(digits)) + digits
	return strings.TrimRight(s, "0")
}

// Carry turns a fractional quota per tick into whole admissions without losing the remainder:
// over any k consecutive ticks it admits ⌊k × quota⌋ or ⌈k × quota⌉ visitors, so the long-run rate
// is exact. The zero Carry is ready to use; it is not safe for concurrent use.
type Carry struct {
	rem int64 // numerator of the carried fraction, in units of 1/den
	den int64 // denominator rem is expressed in
}

// Next returns how many visitors the next tick of plan p admits.
func (c *Carry) Next(p Plan) int64 {
	if p.den == 0 {
		return 0
	}
	if c.den != p.den {
		c.rescale(p.den)
	}
	acc := c.rem + p.num // cannot overflow: rem < den and FromQuota keeps num + den representable
	c.rem = acc % p.den
	return acc / p.den
}

// Reset forgets the carried fraction.
func (c *Carry) Reset() { *c = Carry{} }

// rescale keeps the carried fraction when the plan's denominator changes (a new tick or capacity),
// rounding down to the new denominator.
func (c *Carry) rescale(den int64) {
	if c.den == 0 || c.rem == 0 {
		c.rem, c.den = 0, den
		return
	}
	r := new(big.Int).Mul(big.NewInt(c.rem), big.NewInt(den))
	r.Quo(r, big.NewInt(c.den))
	c.rem, c.den = r.Int64(), den // r < den because rem < old den
}

// Rand is the randomness the poll hint uses; *math/rand/v2.Rand satisfies it.
type Rand interface {
	// Float64 returns a number in [0, 1).
	Float64() float64
}

// PollSpread is the relative random spread of a poll hint, so that pollers never synchronise.
const PollSpread = 0.2

// PollHint tells a waiting visitor at the given 1-based position when to poll again. Visitors within
// one batch of the front poll every minInterval; the others every 500 ms per second of estimated
// wait, at most maxInterval. The result is spread by ±20 % with r, and never below minInterval.
func PollHint(p Plan, position int64, minInterval, maxInterval time.Duration, r Rand) time.Duration {
	return SpreadPollHint(pollBase(p, position, minInterval, maxInterval), minInterval, r)
}

// pollBase is PollHint before its spread.
func pollBase(p Plan, position int64, minInterval, maxInterval time.Duration) time.Duration {
	base := maxInterval
	if position <= p.FrontBatch() {
		base = minInterval
	} else if wait, ok := p.EstimatedWait(position); ok {
		seconds := int64(wait / time.Second)
		if seconds < int64(maxInterval/(500*time.Millisecond)) {
			base = time.Duration(seconds) * 500 * time.Millisecond
		}
	}
	return base
}

// SpreadPollHint spreads a hint's base by ±PollSpread with r, never below minInterval: r at 0 gives
// the shortest hint the base gives.
func SpreadPollHint(base, minInterval time.Duration, r Rand) time.Duration {
	spread := 1 - PollSpread + 2*PollSpread*r.Float64()
	return max(time.Duration(float64(base)*spread), minInterval)
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func boolToInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
