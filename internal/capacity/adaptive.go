package capacity

import (
	"math"
	"time"
)

// Measurement is one tick's view of the workload, merged over the proxy replicas that reported: what
// the gate saw of the protected requests it forwarded.
type Measurement struct {
	// Reporting is how many replicas' aggregates are merged; 0 means nobody reported this tick.
	Reporting int
	// Requests finished upstream, and how many of them failed (5xx, timeouts, refused connections).
	Requests, Errors int64
	// InFlight is the mean number of protected requests in flight upstream over the tick.
	InFlight float64
	// Latency is the median upstream latency of the tick's requests; zero when there were none.
	Latency time.Duration
	// Admitted is how many visitors were admitted over the window the proxies judge use in, and Used
	// how many of them sent a protected request with their pass.
	Admitted, Used int64
}

// AdaptiveLimits bound the controller. The declared plan's rate is the most admitted while every
// admitted visitor comes; Ceiling, the pool's full rate, is the most ever admitted, making up for
// visitors who never come (so that even if they all came at once, the pool would not be overrun);
// Floor keeps the queue moving; the pool and its utilization say how many requests in flight the
// workload takes.
type AdaptiveLimits struct {
	// Declared, Ceiling and Floor are admissions per second; 0 <= Floor <= Declared <= Ceiling
	// (NewController enforces it).
	Declared, Ceiling, Floor float64
	// TargetInFlight is the pool × utilization: the requests in flight the workload is sized for.
	TargetInFlight float64
	// Tick is the scheduler's tick.
	Tick time.Duration
}

// The controller's constants. See docs/architecture.md ("Admission that follows the workload") for
// why these and this algorithm.
const (
	// latencySmoothing is the weight of a tick's latency in the smoothed latency (an EWMA): a step is
	// followed within about ten ticks, and one slow tick moves the rate by a fraction.
	latencySmoothing = 0.3
	// maxRiseShare bounds a tick's rise to this share of the declared rate: back from any brake to
	// the declared rate within 1/maxRiseShare ticks once the workload is well again.
	maxRiseShare = 0.1
	// maxFallShare bounds a tick's fall without errors to this share of the current rate.
	maxFallShare = 0.25
	// errorShare is the share of failed requests that brakes; errorBrake the factor it brakes by.
	errorShare = 0.05
	errorBrake = 0.5
	// minUse bounds the no-show compensation: admissions grow by at most 1/minUse over the rate the
	// workload takes when few admitted visitors come (and never above the ceiling).
	minUse = 0.5
	// inFlightBand: the trim starts when the smoothed in-flight exceeds the target by this share.
	// At the plan the workload runs at the target on average, and a tick's in-flight swings around
	// it; the target itself is the pool less its safety margin.
	inFlightBand = 0.05
	// noShowBand: a use share within this of 1 is taken for 1; the count of uses is an estimate
	// (a HyperLogLog, within a few per cent) and a few late visitors are no reason to admit more.
	noShowBand = 0.05
	// minSample is the fewest requests a tick's error share and use are believed from, and the
	// requests a tick's latency needs to weigh fully.
	minSample = 5
	// ceilingBand: a rate Little's law puts within this share of the ceiling is the ceiling.
	ceilingBand = 0.02
)

// Reasons the controller gives for the rate it chose.
const (
	ReasonDeclared       = "Declared"             // the declared plan
	ReasonNoReports      = "NoReports"            // nobody measured: the declared plan
	ReasonLatencyAbove   = "LatencyAboveDeclared" // the measured latency takes the pool at a lower rate
	ReasonInFlightAbove  = "InFlightAboveTarget"  // more requests in flight than the pool is sized for
	ReasonUpstreamErrors = "UpstreamErrors"       // the error brake
	ReasonNoShows        = "NoShows"              // admitting more than declared: admitted visitors who never come
	ReasonRecovering     = "Recovering"           // rising back towards the ceiling, step by step
	ReasonFloor          = "Floor"                // held at the floor
)

// Controller is the adaptive plan's controller: pure and deterministic, one Step per tick. It
// admits at the rate Little's law gives for the measured latency and the pool's target in flight,
// or for the latency the requests in flight imply while they exceed the target, braked multiplicatively on upstream
// errors, raised for no-shows, never above Declared but for no-shows, never outside [Floor,
// Ceiling]; each tick's rise and fall are bounded.
type Controller struct {
	limits AdaptiveLimits
	rate   float64
	// latency is the smoothed latency in seconds; 0 before the first sample. inFlight is the
	// smoothed requests in flight and throughput the smoothed requests finished per second, with
	// the same weight.
	latency, inFlight, throughput float64
}

// NewController starts at the declared plan, until measurements say otherwise.
func NewController(l AdaptiveLimits) *Controller {
	l.Declared = math.Max(0, l.Declared)
	l.Ceiling = math.Max(l.Ceiling, l.Declared)
	l.Floor = math.Max(0, math.Min(l.Floor, l.Declared))
	return &Controller{limits: l, rate: l.Declared}
}

// Limits are the controller's bounds, as NewController made them consistent.
func (c *Controller) Limits() AdaptiveLimits { return c.limits }

// Rate is the admissions per second the controller last chose.
func (c *Controller) Rate() float64 { return c.rate }

// SmoothedLatency is the latency the controller believes.
func (c *Controller) SmoothedLatency() time.Duration {
	return time.Duration(c.latency * float64(time.Second))
}

// Step takes one tick's measurement and returns the admissions per second for the next tick and why.
func (c *Controller) Step(m Measurement) (rate float64, reason string) {
	l := c.limits
	if m.Reporting == 0 {
		// Nobody measures: the declared plan, as if the loop were not there.
		c.rate, c.inFlight, c.throughput = l.Declared, 0, 0
		return c.rate, ReasonNoReports
	}
	if m.Requests > 0 && m.Latency > 0 {
		// A tick of few requests moves the smoothed latency less: it says less.
		s, weight := m.Latency.Seconds(), latencySmoothing*math.Min(1, float64(m.Requests)/minSample)
		if c.latency == 0 {
			c.latency = s
		} else {
			c.latency += weight * (s - c.latency)
		}
	}
	c.inFlight += latencySmoothing * (m.InFlight - c.inFlight)
	if l.Tick > 0 {
		c.throughput += latencySmoothing * (float64(m.Requests)/l.Tick.Seconds() - c.throughput)
	}
	// Of the visitors admitted, only the share that comes loads the workload: what the workload
	// takes is a rate of arrivals, and admissions are arrivals ÷ use.
	use := 1.0
	if m.Admitted >= minSample && float64(m.Used) < (1-noShowBand)*float64(m.Admitted) {
		use = math.Max(minUse, float64(m.Used)/float64(m.Admitted))
	}

	// What the workload takes: Little's law, in-flight = arrivals × latency.
	arrivals, reason := l.Declared, ReasonDeclared
	if c.latency > 0 && l.TargetInFlight > 0 {
		// Within a hair of the declared rate is the declared rate: a smoothed latency only nears the
		// declared one.
		if little := l.TargetInFlight / c.latency; little < arrivals*(1-ceilingBand) {
			arrivals, reason = little, ReasonLatencyAbove
		}
	}
	if l.TargetInFlight > 0 && c.inFlight > (1+inFlightBand)*l.TargetInFlight {
		// Over the target, the requests still in flight say more than those that finished: Little's
		// law once more, with the latency the in-flight implies at the rate requests finish. It
		// names a rate, not a step from the current one, so that the admissions already on their
		// way do not make it trim again and again; a workload that finishes nothing goes to the floor.
		little := 0.0
		if c.throughput > 0 {
			little = l.TargetInFlight * c.throughput / c.inFlight
		}
		if little < arrivals {
			arrivals, reason = little, ReasonInFlightAbove
		}
	}
	want := math.Min(arrivals/use, l.Ceiling)
	if want > l.Declared && reason == ReasonDeclared {
		reason = ReasonNoShows
	} else if reason == ReasonDeclared {
		// Every admitted visitor comes (or too few were admitted to tell): the declared plan holds.
		want = math.Min(want, l.Declared)
	}

	next := want
	braked := m.Requests >= minSample && float64(m.Errors) >= errorShare*float64(m.Requests)
	switch {
	case braked:
		// The brake: halve from where we are, at once (and no further in one tick).
		next = c.rate * errorBrake
	case next > c.rate:
		next = math.Min(next, c.rate+maxRiseShare*l.Declared)
	case next < c.rate:
		next = math.Max(next, c.rate*(1-maxFallShare))
	}
	next = math.Min(next, l.Ceiling)
	switch {
	case braked:
		reason = ReasonUpstreamErrors
	case next <= l.Floor:
		next, reason = l.Floor, ReasonFloor
	case next < want && next <= l.Declared:
		// Rising back (to the plan, or beyond it for no-shows); above the plan it is the no-shows.
		reason = ReasonRecovering
	}
	if next < l.Floor {
		next = l.Floor
	}
	c.rate = next
	return next, reason
}
