package replica

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/queue"
)

const (
	// useWindow: a pass's first use counts for the no-show share only within this long after its
	// not-before time, which is as long as the replica remembers that it saw the pass. The scheduler
	// judges a second of passes a few seconds after it (internal/scheduler), well within it.
	useWindow = time.Minute
	// maxRememberedPasses bounds the passes a replica remembers for it.
	maxRememberedPasses = 1 << 20
)

// WorkloadMeter measures the protected requests this replica forwards: how many, how long to the
// upstream's response headers, how many failed, how many were in flight over time, and the first use
// of each pass. It keeps running totals; the scheduler takes the differences between two reports,
// so a report lost or read twice loses nothing.
type WorkloadMeter struct {
	epoch  string
	origin time.Time // monotonic

	mu       sync.Mutex
	inFlight int64
	changed  time.Duration // since origin, when inFlight last changed
	totals   queue.WorkloadReport
	buckets  []int64
	// estimates count the first waits told to the visitors this replica admitted, by their error.
	estimates []int64
	uses      []queue.PassUse
	seen      map[passKey]time.Time // → its not-before time
	prunedAt  time.Time
}

func NewWorkloadMeter() *WorkloadMeter {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &WorkloadMeter{epoch: hex.EncodeToString(b), origin: time.Now(), buckets: make([]int64, len(queue.LatencyBuckets)),
		estimates: make([]int64, len(queue.EstimateErrorBounds)+1), seen: map[passKey]time.Time{}}
}

// flightLocked adds the requests in flight since the last change to the integral.
func (m *WorkloadMeter) flightLocked(now time.Duration) {
	m.totals.FlightMicros += m.inFlight * (now - m.changed).Microseconds()
	m.changed = now
}

// Begin counts a request going upstream; the time it returns is the request's start.
func (m *WorkloadMeter) Begin() time.Time {
	now := time.Now()
	m.mu.Lock()
	m.flightLocked(now.Sub(m.origin))
	m.inFlight++
	m.mu.Unlock()
	return now
}

// End counts the request begun at start as answered (or failed).
func (m *WorkloadMeter) End(start time.Time, failed bool) {
	now := time.Now()
	latency := now.Sub(start)
	bucket := queue.LatencyBucket(latency)
	m.mu.Lock()
	m.flightLocked(now.Sub(m.origin))
	m.inFlight--
	m.totals.Requests++
	if failed {
		m.totals.Errors++
	}
	m.totals.LatencyMicros += latency.Microseconds()
	m.buckets[bucket]++
	m.mu.Unlock()
}

// Told counts a request the workload says it held for held (and whether it failed), as it tells
// when it releases the session in Gateway mode (POST /.herdgate/release with Herdgate-Held-Ms): the
// replica never saw it begin, so its share of the in-flight integral, its length, is added at once.
func (m *WorkloadMeter) Told(held time.Duration, failed bool) {
	bucket := queue.LatencyBucket(held)
	m.mu.Lock()
	m.totals.Requests++
	if failed {
		m.totals.Errors++
	}
	m.totals.LatencyMicros += held.Microseconds()
	m.totals.FlightMicros += held.Microseconds()
	m.buckets[bucket]++
	m.mu.Unlock()
}

// Judged counts the first wait told to a visitor admitted here, off by ratio of the wait it had: the
// scheduler shows the recent 90th percentile in the room's status.
func (m *WorkloadMeter) Judged(ratio float64) {
	bucket := queue.EstimateErrorBucket(ratio)
	m.mu.Lock()
	m.estimates[bucket]++
	m.mu.Unlock()
}

// Used records a protected request with a valid pass: the pass's first use, once per replica, goes
// to Redis with the next report. It tells whether this was the pass's first use here, within a
// minute of its not-before time (later uses are not told apart).
func (m *WorkloadMeter) Used(p pass.Pass, now time.Time) (first bool) {
	notBefore := p.NotBefore
	if now.Sub(notBefore) > useWindow {
		return false
	}
	k := keyOf(p)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.seen[k]; ok || len(m.seen) >= maxRememberedPasses {
		return false
	}
	m.seen[k] = notBefore
	m.uses = append(m.uses, queue.PassUse{Second: notBefore.Unix(), ID: queue.PassUseID(p.Visitor, notBefore)})
	return true
}

// Take returns the running totals and the first uses since the last take, and forgets passes too
// old to count.
func (m *WorkloadMeter) Take(now time.Time) (queue.WorkloadReport, []queue.PassUse) {
	m.mu.Lock()
	defer m.mu.Unlock()
	elapsed := now.Sub(m.origin)
	m.flightLocked(elapsed)
	r := m.totals
	r.Epoch, r.ElapsedMicros = m.epoch, elapsed.Microseconds()
	last := len(m.buckets)
	for last > 0 && m.buckets[last-1] == 0 {
		last--
	}
	r.Buckets = append([]int64(nil), m.buckets[:last]...)
	r.EstimateErrors = trimmed(m.estimates)
	uses := m.uses
	m.uses = nil
	if now.Sub(m.prunedAt) >= time.Second {
		// Once a second is enough: the map only needs to stay bounded.
		m.prunedAt = now
		for k, nb := range m.seen {
			if now.Sub(nb) > useWindow {
				delete(m.seen, k)
			}
		}
	}
	return r, uses
}

// GiveBack keeps uses a failed report did not deliver, for the next one.
func (m *WorkloadMeter) GiveBack(uses []queue.PassUse) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.uses)+len(uses) <= maxRememberedPasses {
		m.uses = append(uses, m.uses...)
	}
}

// RecentPass is a pass the replica saw used.
type RecentPass struct {
	Visitor   string
	NotBefore time.Time
}

// Recent returns the passes first used on this replica that it still remembers: those whose
// not-before time lies within the last minute.
func (m *WorkloadMeter) Recent() []RecentPass {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]RecentPass, 0, len(m.seen))
	for k, nb := range m.seen {
		out = append(out, RecentPass{Visitor: k.visitor, NotBefore: nb})
	}
	return out
}

// trimmed is a copy of counts without its trailing zeros; nil when all are.
func trimmed(counts []int64) []int64 {
	last := len(counts)
	for last > 0 && counts[last-1] == 0 {
		last--
	}
	if last == 0 {
		return nil
	}
	return append([]int64(nil), counts[:last]...)
}
