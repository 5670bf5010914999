package capacity

import (
	"math"
	"time"
)

// Ahead is how many admissions of its queue a waiting visitor waits for, its own included. position
// is its 1-based place in the queue, seq its arrival number and front the arrival number at the
// queue's front. Before the front's advance is known it is position, as if every place ahead were
// admitted; once known, the arrival numbers from the front to the visitor count for the admissions
// they take at the front's advance, so that the places of visitors who will leave first, and the
// other queues' arrivals between, cost nothing. Never more than position: nobody joins ahead.
func Ahead(position, seq, front int64, a Advance) float64 {
	if position <= 0 {
		return 0
	}
	if !a.Known() || seq < front {
		return float64(position)
	}
	return math.Min(float64(position), 1+float64(seq-front)/a.SeqsPerAdmission)
}

// ArrivalLine tells when the arrival numbers between a queue's front and the last one given out
// were given: linearly between the front's (FrontSeq, entered at FrontAt) and the last (LastSeq at
// LastAt). Zero when unknown.
type ArrivalLine struct {
	FrontSeq, LastSeq int64
	FrontAt, LastAt   time.Time
}

// Known says the line can tell.
func (l ArrivalLine) Known() bool {
	return !l.FrontAt.IsZero() && !l.LastAt.IsZero() && l.LastSeq >= l.FrontSeq && !l.LastAt.Before(l.FrontAt)
}

// EnteredAt is when arrival seq entered, by the line.
func (l ArrivalLine) EnteredAt(seq int64) time.Time {
	switch {
	case seq <= l.FrontSeq:
		return l.FrontAt
	case seq >= l.LastSeq:
		return l.LastAt
	}
	share := float64(seq-l.FrontSeq) / float64(l.LastSeq-l.FrontSeq)
	return l.FrontAt.Add(time.Duration(share * float64(l.LastAt.Sub(l.FrontAt))))
}

// agingSteps is how many stretches AheadAging walks the places ahead in.
const agingSteps = 16

// AheadAging is Ahead for a queue whose visitors go quiet, as its front measured (Advance.Quiet):
// each place ahead is dropped, costing no admission, when its visitor will have been silent for
// abandonAfter at its turn. It walks the arrival numbers from the front to the visitor in
// stretches; each stretch's places leave the front at the rate perSecond, at an age that the line
// tells, and the quiet ones among them that will have been silent long enough by then are dropped.
// While the queue's waits stay under abandonAfter nobody is dropped; when they grow past it, the
// visitors who entered last are told of the drops ahead before the front shows them. Without what
// it needs it is Ahead.
func AheadAging(position, seq, front int64, a Advance, line ArrivalLine, abandonAfter time.Duration, perSecond float64, now time.Time) float64 {
	q := a.Quiet
	if position <= 0 || !a.Known() || !q.Known() || !line.Known() || abandonAfter <= 0 || perSecond <= 0 || seq < front {
		return Ahead(position, seq, front, a)
	}
	// Once the places at the front have been waiting abandonAfter, and the front's advance was
	// measured since, it holds the drops as they are; before, it shows none of those to come.
	if now.Sub(line.FrontAt) >= abandonAfter+FrontWindow {
		return Ahead(position, seq, front, a)
	}
	// In seconds before now: when the front's place and the last arrival entered.
	frontAgo, lastAgo := now.Sub(line.FrontAt).Seconds(), now.Sub(line.LastAt).Seconds()
	limit := abandonAfter.Seconds()
	places := float64(seq-front) / q.SeqsPerPlace
	if frontAgo+places/perSecond <= limit {
		// Nobody ahead will have waited abandonAfter at its turn, even were nobody dropped.
		return math.Min(float64(position), 1+places)
	}
	span := float64(line.LastSeq - line.FrontSeq)
	step := float64(seq-front) / agingSteps
	places /= agingSteps
	var admissions float64
	for i := range agingSteps {
		mid := float64(front-line.FrontSeq) + (float64(i)+0.5)*step
		enteredAgo := frontAgo
		if span > 0 {
			enteredAgo += min(1, max(0, mid/span)) * (lastAgo - frontAgo)
		}
		admissions += places * (1 - q.droppedAt((admissions+places/2)/perSecond+enteredAgo, limit))
	}
	return math.Min(float64(position), 1+admissions)
}

// droppedAt is the share of the places taken off at age seconds that are dropped: the quiet ones
// silent for abandonAfter seconds by then.
func (q Quiet) droppedAt(age, abandonAfter float64) float64 {
	if age <= abandonAfter {
		return 0
	}
	return q.Share * q.silentBeyond(abandonAfter/age)
}

// RateStep is a queue's admission rate, per second, from From on.
type RateStep struct {
	From      time.Time
	PerSecond float64
}

// Rates is a queue's admission rate over time: steps in the order of From, the first of which
// holds from now. A rate of 0 admits nobody (a room suspended, or closed, until the next step).
type Rates []RateStep

// ConstantRate is perSecond from now on.
func ConstantRate(now time.Time, perSecond float64) Rates {
	return Rates{{From: now, PerSecond: perSecond}}
}

// TimeFor is how long the queue takes, from now, to admit n visitors at r; ok is false when it
// never does (the last step admits nobody).
func (r Rates) TimeFor(n float64, now time.Time) (d time.Duration, ok bool) {
	if n <= 0 {
		return 0, true
	}
	t := now
	for i, s := range r {
		end := time.Time{}
		if i+1 < len(r) {
			end = r[i+1].From
		}
		if !end.IsZero() && !end.After(t) {
			continue
		}
		if s.PerSecond > 0 {
			need := time.Duration(n / s.PerSecond * float64(time.Second))
			if end.IsZero() || t.Add(need).Before(end) || t.Add(need).Equal(end) {
				return t.Add(need).Sub(now), true
			}
			n -= end.Sub(t).Seconds() * s.PerSecond
		}
		if end.IsZero() {
			return 0, false
		}
		t = end
	}
	return 0, false
}

// QueueLoad is what one queue of a room holds for the forecast of its share: its weight (a lane's
// percentage, the main queue the rest), the visitors waiting in it, and how many enter it a second.
type QueueLoad struct {
	Weight            float64
	Waiting           float64
	ArrivalsPerSecond float64
}

// maxForecastSteps bounds ShareRates' work: each step is a queue running empty or an edge of the
// room's rate.
const maxForecastSteps = 64

// ShareRates forecasts the admission rate of queue i of a room whose rate over time is room, at now:
// the queues with visitors waiting share each tick by their weights, and a queue with nobody waiting
// takes only its arrivals, as they come, and gives the rest to the others (the admit script's
// lanes). So the queues ahead of i's visitor in the forecast run empty one by one, at the moment
// their waiting visitors are all admitted, and i's rate rises then. Queue i is taken as busy
// throughout: a visitor in it waits behind those ahead of it.
func ShareRates(room Rates, queues []QueueLoad, i int, now time.Time) Rates {
	if i < 0 || i >= len(queues) {
		return nil
	}
	waiting := make([]float64, len(queues))
	for j, q := range queues {
		waiting[j] = max(0, q.Waiting)
	}
	waiting[i] = math.Inf(1)
	var out Rates
	t := now
	for range maxForecastSteps {
		total, next := rateAt(room, t)
		shares := shareOf(total, queues, waiting)
		if n := len(out); n == 0 || out[n-1].PerSecond != shares[i] {
			out = append(out, RateStep{From: t, PerSecond: shares[i]})
		}
		// The next change: a queue running empty, or the room's next step.
		soonest := next
		for j := range queues {
			if j == i || waiting[j] == 0 {
				continue
			}
			if drain := shares[j] - queues[j].ArrivalsPerSecond; drain > 0 {
				at := t.Add(time.Duration(waiting[j] / drain * float64(time.Second)))
				if soonest.IsZero() || at.Before(soonest) {
					soonest = at
				}
			}
		}
		if soonest.IsZero() {
			return out
		}
		// No step shorter than a millisecond: the forecast ends in a bounded number of steps.
		soonest = maxTime(soonest, t.Add(time.Millisecond))
		for j := range queues {
			if j == i || waiting[j] == 0 {
				continue
			}
			waiting[j] = max(0, waiting[j]-(shares[j]-queues[j].ArrivalsPerSecond)*soonest.Sub(t).Seconds())
			if waiting[j] < 0.5 {
				waiting[j] = 0
			}
		}
		t = soonest
	}
	return out
}

// rateAt is room's rate at t and when it next changes (zero when never).
func rateAt(room Rates, t time.Time) (perSecond float64, next time.Time) {
	for k, s := range room {
		if s.From.After(t) {
			return perSecond, s.From
		}
		perSecond = s.PerSecond
		if k+1 == len(room) {
			return perSecond, time.Time{}
		}
	}
	return perSecond, time.Time{}
}

// shareOf splits total among the queues: a queue with nobody waiting takes its arrivals, up to
// what its weight would give it, and the queues with visitors share the rest by their weights
// (equally when all their weights are 0).
func shareOf(total float64, queues []QueueLoad, waiting []float64) []float64 {
	shares := make([]float64, len(queues))
	var weightSum, busyWeight float64
	busy := 0
	for j, q := range queues {
		weightSum += q.Weight
		if waiting[j] > 0 {
			busyWeight += q.Weight
			busy++
		}
	}
	left := total
	for j, q := range queues {
		if waiting[j] == 0 {
			own := q.ArrivalsPerSecond
			if weightSum > 0 {
				own = min(own, total*q.Weight/weightSum)
			}
			shares[j] = min(own, left)
			left -= shares[j]
		}
	}
	for j, q := range queues {
		if waiting[j] > 0 {
			if busyWeight > 0 {
				shares[j] = left * q.Weight / busyWeight
			} else {
				shares[j] = left / float64(busy)
			}
		}
	}
	return shares
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
