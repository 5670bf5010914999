package scheduler

import (
	"time"

	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
)

// forecastInterval is how often a room with visitors waiting publishes its forecast: as often as a
// proxy reads the plan (its plan cache's TTL), so that no proxy estimates from figures older than
// that and a tick.
const forecastInterval = time.Second

// arrivalWindow is the window of a queue's arrival rate: long enough to smooth a few seconds of
// chance, short enough to see a lane stop filling.
const arrivalWindow = 10 * time.Second

// queueFronts measures each of a room's queues from its ticks, for the forecast the proxies
// estimate waits with (queue.Forecast): how the front advances (capacity.FrontMeter), how many
// places it holds and how many enter it a second.
type queueFronts struct {
	queues map[string]*queueFront
	// publishedAt is when the last forecast was published, and tookAt when the last tick was taken in.
	publishedAt, tookAt time.Time
}

// countGap is the longest gap between two ticks over which arrivals are still counted: a room that
// slept skipped its ticks, and whoever entered meanwhile was admitted at once, so its queues'
// arrivals are counted anew when it wakes.
const countGap = time.Second

type queueFront struct {
	meter *capacity.FrontMeter
	// frontSeq is the arrival at the front as the last tick that took from the queue found it, and
	// frontAge how long it had been waiting then (0: unknown); lastSeq is the tick's last arrival
	// given out: between them the forecast's arrival line (capacity.ArrivalLine).
	frontSeq, lastSeq int64
	frontAge          time.Duration
	// depth is the places left after the last tick.
	depth int64
	// arrivals are the visitors who entered, by second, over arrivalWindow, oldest first.
	arrivals []arrivalBucket
	// seen says depth was read, since when the queue's arrivals are counted.
	seen  bool
	since time.Time
}

type arrivalBucket struct {
	second, entered int64
}

// take takes in the fronts of the tick at now: the main queue's first, then lanes' in the order of
// lanes. A
// visitor who entered between two ticks is in the depth the second reads, or was admitted or
// dropped by it: the arrivals are the depth's growth and the admissions (the dropped are not
// counted per queue, so a queue whose visitors leave is seen filling a little slower than it does).
func (f *queueFronts) take(lanes []string, now time.Time, res queue.AdmitResult, clock *arrivalClock) {
	if len(res.Fronts) != len(lanes)+1 {
		return
	}
	if f.queues == nil {
		f.queues = map[string]*queueFront{}
	}
	kept := make(map[string]*queueFront, len(res.Fronts))
	recount := !f.tookAt.IsZero() && now.Sub(f.tookAt) > countGap
	f.tookAt = now
	for i, move := range res.Fronts {
		name := queue.MainLane
		if i > 0 {
			name = lanes[i-1]
		}
		q := f.queues[name]
		if q == nil {
			q = &queueFront{meter: capacity.NewFrontMeter()}
		}
		kept[name] = q
		q.meter.Tick(now, capacity.FrontTick{Head: move.Head, Admitted: move.Admitted, Taken: move.Taken, Quiet: move.Quiet,
			Emptied: move.Emptied, Silences: silences(move.QuietPlaces, res.Now, clock)})
		q.lastSeq = res.Sequence
		if move.Head >= 0 {
			q.frontSeq, q.frontAge = move.Head, 0
			if at, ok := clock.entered(move.Head); ok {
				q.frontAge = max(0, res.Now.Sub(at))
			}
		}
		if move.Emptied || move.Depth == 0 {
			q.frontSeq, q.frontAge = 0, 0
		}
		if recount {
			q.seen, q.arrivals = false, nil
		}
		if q.seen {
			q.entered(now, max(0, move.Depth-q.depth+move.Admitted))
		} else {
			q.since = now
		}
		q.depth, q.seen = move.Depth, true
	}
	f.queues = kept
}

// silences is, for each quiet place the clock can time, the share of its age at now (Redis' clock)
// that its visitor had been silent.
func silences(places []queue.QuietPlace, now time.Time, clock *arrivalClock) []float64 {
	var out []float64
	for _, p := range places {
		at, ok := clock.entered(p.Arrival)
		if age := now.Sub(at); ok && age > 0 {
			out = append(out, min(1, p.Silence.Seconds()/age.Seconds()))
		}
	}
	return out
}

func (q *queueFront) entered(at time.Time, n int64) {
	s := at.Unix()
	if k := len(q.arrivals); k > 0 && q.arrivals[k-1].second == s {
		q.arrivals[k-1].entered += n
	} else {
		q.arrivals = append(q.arrivals, arrivalBucket{second: s, entered: n})
	}
	oldest := at.Add(-arrivalWindow).Unix()
	i := 0
	for i < len(q.arrivals) && q.arrivals[i].second <= oldest {
		i++
	}
	q.arrivals = q.arrivals[i:]
}

// arrivalsPerSecond is the queue's arrival rate at now over the last arrivalWindow, or over the
// time since its arrivals are counted when that is shorter: a room that just started is not read
// as one that nobody enters.
func (q *queueFront) arrivalsPerSecond(now time.Time) float64 {
	var n int64
	for _, b := range q.arrivals {
		n += b.entered
	}
	span := min(arrivalWindow, now.Sub(q.since))
	if span <= 0 {
		return 0
	}
	return float64(n) / span.Seconds()
}

// due is the forecast to publish with the tick at now: nil when one was published less than
// forecastInterval ago, or nobody waits.
func (f *queueFronts) due(now time.Time) *queue.Forecast {
	if now.Sub(f.publishedAt) < forecastInterval {
		return nil
	}
	out := &queue.Forecast{At: now, Queues: make(map[string]queue.LaneForecast, len(f.queues))}
	waiting := false
	for name, q := range f.queues {
		lf := queue.LaneForecast{Advance: q.meter.Advance(now), Waiting: q.depth, ArrivalsPerSecond: q.arrivalsPerSecond(now),
			Counted: min(arrivalWindow, now.Sub(q.since))}
		if q.frontAge > 0 && q.lastSeq >= q.frontSeq {
			lf.Line = queue.ForecastLine{FrontSeq: q.frontSeq, FrontAge: q.frontAge, LastSeq: q.lastSeq}
		}
		out.Queues[name] = lf
		waiting = waiting || q.depth > 0
	}
	if !waiting {
		return nil
	}
	return out
}

// quietAfter is how long a visitor is silent before the admit script counts its place as gone
// quiet (queue.AdmitRequest.QuietAfter): longer than a visitor polling as told is silent near the
// front, where it polls about every minInterval, and well under abandonAfter, so that the places
// that will be dropped are seen before they are.
func quietAfter(minInterval, abandonAfter time.Duration) time.Duration {
	return min(abandonAfter/2, max(2*time.Second, 3*minInterval))
}
