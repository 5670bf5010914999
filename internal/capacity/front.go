package capacity

import (
	"slices"
	"time"
)

// FrontWindow is how far back a FrontMeter looks at its queue's front: long enough to hold the
// leavers of a wait in its figure, short enough to follow a crowd that changes.
const FrontWindow = 10 * time.Second

// frontMinAdmissions is the fewest admissions a FrontMeter's figure rests on: below it the front's
// advance is not known, and a visitor is told by its position.
const frontMinAdmissions = 20

// frontHistory bounds how far back a FrontMeter looks for frontMinAdmissions when its queue admits
// slowly, and so its memory: one bucket a second.
const frontHistory = 10 * time.Minute

// Advance is how a queue's front moves: the arrival numbers it passes for each visitor it admits.
// Every place leaves the front one way: its visitor is admitted, or left and is dropped; and
// between two places of one queue lie the arrivals of the room's other queues. So the front
// passes one number or more for each admission, and the places between a visitor and the front
// cost it the admissions they will really take, not their count.
type Advance struct {
	// SeqsPerAdmission is the arrival numbers the front passes for each admission; 0 while too few
	// admissions were seen to tell.
	SeqsPerAdmission float64
	// Quiet tells how the places that go quiet leave the front; zero when none were seen.
	Quiet Quiet
}

// Quiet is how a queue's places whose visitors stop polling leave its front. A place is dropped
// when its visitor has been silent for abandonAfter at its turn, so whether a quiet place ahead
// costs an admission depends on how old it will be then: nothing while the queue's waits are
// shorter than abandonAfter, and more as they grow past it. The front's advance alone tells what
// the places at the front now do, not what older ones will do; Quiet tells the rest.
type Quiet struct {
	// SeqsPerPlace is the arrival numbers the front passes for each place it takes off, admitted or
	// dropped: the other queues' arrivals, and places dropped before they reached the front.
	SeqsPerPlace float64
	// Share is the share of the places taken off the front whose visitors had gone quiet.
	Share float64
	// Silences are quantiles (QuietQuantiles) of how much of its age a quiet place's visitor had
	// been silent at the front: 1 for a visitor who never polled after entering, less for one who
	// left during its wait.
	Silences [len(QuietQuantiles)]float64
}

// QuietQuantiles are the quantiles Quiet.Silences holds.
var QuietQuantiles = [...]float64{0.1, 0.3, 0.5, 0.7, 0.9}

// Known says enough quiet places were seen to tell.
func (q Quiet) Known() bool { return q.SeqsPerPlace >= 1 && q.Share > 0 }

// silentBeyond is the share of quiet places silent for more than the share x of their age, read
// off the quantiles as a piecewise linear distribution from 0 to 1.
func (q Quiet) silentBeyond(x float64) float64 {
	if x >= 1 {
		return 0
	}
	if x <= 0 {
		return 1
	}
	prevX, prevP := 0.0, 0.0
	for i, p := range QuietQuantiles {
		qx := q.Silences[i]
		if x < qx {
			if qx <= prevX {
				return 1 - p
			}
			return 1 - (prevP + (p-prevP)*(x-prevX)/(qx-prevX))
		}
		prevX, prevP = qx, p
	}
	if prevX >= 1 {
		return 0
	}
	return (1 - prevP) * (1 - x) / (1 - prevX)
}

// Known says the front was seen to admit enough visitors to tell its advance.
func (a Advance) Known() bool { return a.SeqsPerAdmission >= 1 }

// FrontMeter measures a queue's Advance from its ticks: the arrival number at its front when each
// tick began, and how many the tick admitted. It is not safe for concurrent use.
type FrontMeter struct {
	// head is the arrival number at the front when it was last read; -1 when unknown (never read,
	// or the queue ran empty since).
	head int64
	// admitted and taken count the admissions and the places taken off since head was read.
	admitted, taken int64
	// buckets are the arrival numbers passed and the admissions and places that passed them, by
	// second, oldest first.
	buckets []frontBucket
	// quiet are the places gone quiet taken off, by second, and silences a sample of how much of
	// their age their visitors had been silent, oldest first.
	quiet    []quietBucket
	silences []silenceSample
}

type frontBucket struct {
	second                  int64
	passed, admitted, taken int64
}

type quietBucket struct {
	second, taken, quiet int64
}

type silenceSample struct {
	second int64
	share  float64
}

// maxSilenceSamples bounds the samples a FrontMeter keeps of quiet places' silences.
const maxSilenceSamples = 256

// NewFrontMeter is a meter that knows nothing yet.
func NewFrontMeter() *FrontMeter { return &FrontMeter{head: -1} }

// FrontTick is what one tick did at a queue's front: Head is the arrival number at the front before
// the tick took anyone (-1 when it took nobody, so did not read it), Admitted how many it admitted
// from the queue, Taken the places it took off the front, admitted or dropped, Quiet how many of
// those had gone quiet, Silences, for a sample of those, how much of its age each had been silent
// (0 to 1), and Emptied whether it took the queue's last place.
type FrontTick struct {
	Head, Admitted, Taken, Quiet int64
	Emptied                      bool
	Silences                     []float64
}

// Tick takes in one tick at at. The numbers the front passed since the last reading belong to the
// admissions made since then; a queue that ran empty starts over, since the numbers given out while
// nobody waited were nobody's to pass.
func (m *FrontMeter) Tick(at time.Time, t FrontTick) {
	if t.Head >= 0 {
		if m.head >= 0 && t.Head >= m.head && m.admitted > 0 {
			m.add(at, t.Head-m.head, m.admitted, m.taken)
		}
		if m.head < 0 || t.Head >= m.head {
			m.head, m.admitted, m.taken = t.Head, 0, 0
		}
	}
	m.admitted += t.Admitted
	m.taken += max(t.Taken, t.Admitted)
	if t.Emptied {
		m.head, m.admitted, m.taken = -1, 0, 0
	}
	if t.Taken > 0 {
		s := at.Unix()
		if n := len(m.quiet); n > 0 && m.quiet[n-1].second == s {
			m.quiet[n-1].taken += t.Taken
			m.quiet[n-1].quiet += t.Quiet
		} else {
			m.quiet = append(m.quiet, quietBucket{second: s, taken: t.Taken, quiet: t.Quiet})
		}
	}
	for _, share := range t.Silences {
		m.silences = append(m.silences, silenceSample{second: at.Unix(), share: min(1, max(0, share))})
	}
	if n := len(m.silences); n > maxSilenceSamples {
		m.silences = append(m.silences[:0], m.silences[n-maxSilenceSamples:]...)
	}
}

func (m *FrontMeter) add(at time.Time, passed, admitted, taken int64) {
	s := at.Unix()
	if n := len(m.buckets); n > 0 && m.buckets[n-1].second == s {
		m.buckets[n-1].passed += passed
		m.buckets[n-1].admitted += admitted
		m.buckets[n-1].taken += taken
		return
	}
	m.buckets = append(m.buckets, frontBucket{second: s, passed: passed, admitted: admitted, taken: taken})
	m.forget(at)
}

// forget drops the buckets older than frontHistory.
func (m *FrontMeter) forget(now time.Time) {
	oldest := now.Add(-frontHistory).Unix()
	m.buckets = since(m.buckets, oldest, func(b frontBucket) int64 { return b.second })
	m.quiet = since(m.quiet, oldest, func(b quietBucket) int64 { return b.second })
	m.silences = since(m.silences, oldest, func(s silenceSample) int64 { return s.second })
}

// since is xs, oldest first, without those of a second before oldest, in the same array.
func since[T any](xs []T, oldest int64, second func(T) int64) []T {
	i := 0
	for i < len(xs) && second(xs[i]) < oldest {
		i++
	}
	if i == 0 {
		return xs
	}
	return append(xs[:0], xs[i:]...)
}

// Advance is the front's advance at now: over the last FrontWindow, or further back until
// frontMinAdmissions admissions are counted.
func (m *FrontMeter) Advance(now time.Time) Advance {
	m.forget(now)
	recent := now.Add(-FrontWindow).Unix()
	var passed, admitted, taken int64
	for i := len(m.buckets) - 1; i >= 0; i-- {
		b := m.buckets[i]
		if b.second < recent && admitted >= frontMinAdmissions {
			break
		}
		passed += b.passed
		admitted += b.admitted
		taken += b.taken
	}
	if admitted < frontMinAdmissions || passed < admitted {
		return Advance{}
	}
	a := Advance{SeqsPerAdmission: float64(passed) / float64(admitted)}
	if taken >= admitted && passed >= taken {
		a.Quiet = m.quietAt(recent, float64(passed)/float64(taken))
	}
	return a
}

// quietMinSamples is the fewest silences Quiet's quantiles rest on.
const quietMinSamples = 10

// quietAt is the Quiet of the places taken off since recent, or further back until
// frontMinAdmissions were taken; zero when too few quiet places were seen to tell.
func (m *FrontMeter) quietAt(recent int64, seqsPerPlace float64) Quiet {
	var taken, quiet int64
	from := recent
	for i := len(m.quiet) - 1; i >= 0; i-- {
		b := m.quiet[i]
		if b.second < recent && taken >= frontMinAdmissions {
			break
		}
		taken += b.taken
		quiet += b.quiet
		from = b.second
	}
	var shares []float64
	for i := len(m.silences) - 1; i >= 0; i-- {
		s := m.silences[i]
		if s.second < from && len(shares) >= quietMinSamples {
			break
		}
		shares = append(shares, s.share)
	}
	if taken < frontMinAdmissions || quiet == 0 || len(shares) < quietMinSamples {
		return Quiet{}
	}
	slices.Sort(shares)
	q := Quiet{SeqsPerPlace: seqsPerPlace, Share: float64(quiet) / float64(taken)}
	for i, p := range QuietQuantiles {
		q.Silences[i] = shares[min(len(shares)-1, int(p*float64(len(shares))))]
	}
	return q
}
