package capacity

import (
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
}

// Known says the front was seen to admit enough visitors to tell its advance.
func (a Advance) Known() bool { return a.SeqsPerAdmission >= 1 }

// FrontMeter measures a queue's Advance from its ticks: the arrival number at its front when each
// tick began, and how many the tick admitted. It is not safe for concurrent use.
type FrontMeter struct {
	// head is the arrival number at the front when it was last read; -1 when unknown (never read,
	// or the queue ran empty since).
	head int64
	// admitted counts the admissions since head was read.
	admitted int64
	// buckets are the arrival numbers passed and the admissions that passed them, by second, oldest
	// first.
	buckets []frontBucket
}

type frontBucket struct {
	second           int64
	passed, admitted int64
}

// NewFrontMeter is a meter that knows nothing yet.
func NewFrontMeter() *FrontMeter { return &FrontMeter{head: -1} }

// Tick takes in one tick at at: head is the arrival number at the queue's front before the tick
// took anyone (-1 when it took nobody, so did not read it), admitted how many it admitted from the
// queue, and emptied whether it took the queue's last place. The numbers the front passed since
// the last reading belong to the admissions made since then; a queue that ran empty starts over,
// since the numbers given out while nobody waited were nobody's to pass.
func (m *FrontMeter) Tick(at time.Time, head, admitted int64, emptied bool) {
	if head >= 0 {
		if m.head >= 0 && head >= m.head && m.admitted > 0 {
			m.add(at, head-m.head, m.admitted)
		}
		if m.head < 0 || head >= m.head {
			m.head, m.admitted = head, 0
		}
	}
	m.admitted += admitted
	if emptied {
		m.head, m.admitted = -1, 0
	}
}

func (m *FrontMeter) add(at time.Time, passed, admitted int64) {
	s := at.Unix()
	if n := len(m.buckets); n > 0 && m.buckets[n-1].second == s {
		m.buckets[n-1].passed += passed
		m.buckets[n-1].admitted += admitted
		return
	}
	m.buckets = append(m.buckets, frontBucket{second: s, passed: passed, admitted: admitted})
	m.forget(at)
}

// forget drops the buckets older than frontHistory.
func (m *FrontMeter) forget(now time.Time) {
	oldest := now.Add(-frontHistory).Unix()
	i := 0
	for i < len(m.buckets) && m.buckets[i].second < oldest {
		i++
	}
	if i > 0 {
		m.buckets = append(m.buckets[:0], m.buckets[i:]...)
	}
}

// Advance is the front's advance at now: over the last FrontWindow, or further back until
// frontMinAdmissions admissions are counted.
func (m *FrontMeter) Advance(now time.Time) Advance {
	m.forget(now)
	recent := now.Add(-FrontWindow).Unix()
	var passed, admitted int64
	for i := len(m.buckets) - 1; i >= 0; i-- {
		b := m.buckets[i]
		if b.second < recent && admitted >= frontMinAdmissions {
			break
		}
		passed += b.passed
		admitted += b.admitted
	}
	if admitted < frontMinAdmissions || passed < admitted {
		return Advance{}
	}
	return Advance{SeqsPerAdmission: float64(passed) / float64(admitted)}
}
