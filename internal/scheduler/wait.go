package scheduler

import (
	"time"

	"github.com/herdgate/herdgate/internal/queue"
)

// maxArrivalMarks bounds the marks an arrivalClock keeps: 16 KiB a room. When it is full, it keeps
// marks at least 1/512 of their span apart, so a wait is timed to within about 1/256 of the span its
// waiting visitors entered in (some 15 s for an hour), or a tick when that is longer.
const maxArrivalMarks = 1024

// arrivalMark: by at, the arrival sequence had reached seq.
type arrivalMark struct {
	seq int64
	at  time.Time
}

// arrivalClock tells when a visitor entered from its arrival: every tick reads the arrival sequence
// with Redis' clock, so a visitor whose arrival lies between two ticks' readings entered between their
// times. Redis keeps no entry time per visitor: the ticks' readings cost nothing extra and time a wait
// to within a tick while the room is busy. A visitor who entered before the runner's first reading
// (before this manager took the room over) is not timed.
type arrivalClock struct {
	// marks rise in seq and at; the first is the runner's first reading.
	marks []arrivalMark
}

// mark notes the sequence a tick read at now.
func (c *arrivalClock) mark(seq int64, now time.Time) {
	n := len(c.marks)
	if n > 0 && (seq <= c.marks[n-1].seq || now.Before(c.marks[n-1].at)) {
		// Nobody entered since the last mark, or Redis lost its sequence (it restarts at 0): a lower
		// reading would break the order, and a restarted sequence times nobody it had before.
		if seq < c.marks[n-1].seq {
			c.marks = append(c.marks[:0], arrivalMark{seq, now})
		}
		return
	}
	if n == maxArrivalMarks {
		c.thin()
	}
	c.marks = append(c.marks, arrivalMark{seq, now})
}

// thin keeps the first and the last mark and, between them, marks at least 1/512 of the span apart.
// The gap follows the whole span each time, so older stretches, thinned before, are not thinned
// again and again: the marks stay evenly spread over time.
func (c *arrivalClock) thin() {
	n := len(c.marks)
	gap := c.marks[n-1].at.Sub(c.marks[0].at) / (maxArrivalMarks / 2)
	last := c.marks[n-1]
	kept := c.marks[:1]
	for _, m := range c.marks[1 : n-1] {
		if m.at.Sub(kept[len(kept)-1].at) >= gap {
			kept = append(kept, m)
		}
	}
	kept = append(kept, last)
	c.marks = kept
}

// entered is the latest time the visitor of arrival may have entered: the first reading that
// includes it. ok is false for a visitor who entered before the first reading.
func (c *arrivalClock) entered(arrival int64) (at time.Time, ok bool) {
	if len(c.marks) == 0 || arrival <= c.marks[0].seq {
		return time.Time{}, false
	}
	lo, hi := 1, len(c.marks)
	for lo < hi {
		mid := (lo + hi) / 2
		if c.marks[mid].seq >= arrival {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo == len(c.marks) {
		return time.Time{}, false
	}
	return c.marks[lo].at, true
}

// forgetBefore drops the marks no visitor still waiting needs: admission follows arrival, so once the
// visitor of arrival is admitted, later admissions look up arrivals above it. The last mark below it
// stays as the lower bound of the next one.
func (c *arrivalClock) forgetBefore(arrival int64) {
	i := 0
	for i+1 < len(c.marks) && c.marks[i+1].seq < arrival {
		i++
	}
	if i > 0 {
		c.marks = append(c.marks[:0], c.marks[i:]...)
	}
}

// observeWaits records in the wait histogram how long each visitor a tick admitted waited: from when
// it entered (to within a tick) to its pass's not-before time, when it may go in. It reads the tick's
// own sequence first, so every admitted arrival is covered.
func (st *tickState) observeWaits(res queue.AdmitResult) {
	st.arrivals.mark(res.Sequence, res.Now)
	last := int64(-1)
	for _, v := range res.Admitted {
		if at, ok := st.arrivals.entered(v.Arrival); ok {
			st.metrics.wait.Observe(max(0, v.Pass.NotBefore.Sub(at).Seconds()))
		}
		last = max(last, v.Arrival)
	}
	if last >= 0 {
		st.arrivals.forgetBefore(last)
	}
}

// observeWaitsAtOnce records the visitors the proxies admitted at once on entering: they waited for
// nothing.
func (m *queueMetrics) observeWaitsAtOnce(n int64) {
	for range min(n, maxObservedAtOnce) {
		m.wait.Observe(0)
	}
}

// maxObservedAtOnce bounds the instant admissions one stats read records, so a counter that jumped
// (another manager's Redis, a restored backup) costs a bounded loop.
const maxObservedAtOnce = 1 << 16
