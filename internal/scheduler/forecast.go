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
	// publishedAt is when the last forecast was published.
	publishedAt time.Time
}

type queueFront struct {
	meter *capacity.FrontMeter
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
func (f *queueFronts) take(lanes []string, now time.Time, res queue.AdmitResult) {
	if len(res.Fronts) != len(lanes)+1 {
		return
	}
	if f.queues == nil {
		f.queues = map[string]*queueFront{}
	}
	kept := make(map[string]*queueFront, len(res.Fronts))
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
		q.meter.Tick(now, move.Head, move.Admitted, move.Emptied)
		if q.seen {
			q.entered(now, max(0, move.Depth-q.depth+move.Admitted))
		} else {
			q.since = now
		}
		q.depth, q.seen = move.Depth, true
	}
	f.queues = kept
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
		out.Queues[name] = queue.LaneForecast{Advance: q.meter.Advance(now), Waiting: q.depth, ArrivalsPerSecond: q.arrivalsPerSecond(now)}
		waiting = waiting || q.depth > 0
	}
	if !waiting {
		return nil
	}
	return out
}
