// Package herd is the load tool behind cmd/herd: a stand-in orders service that behaves like the
// reference post's database, the virtual visitors of its k6 scenarios, and the experiment that runs
// them against herdgate with several batch sizes, with and without jitter.
package herd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Backend is an orders service whose bottleneck is a connection pool, like the reference post's
// Spring service in front of its database: Pool slots, each held Latency per order; an order that
// finds no free slot waits in line (HikariCP's pool wait) and fails after Timeout.
type Backend struct {
	Pool    int
	Latency time.Duration
	Timeout time.Duration

	slots chan struct{}

	mu        sync.Mutex
	profile   func(since time.Duration) (latency time.Duration, fail bool)
	failures  []time.Duration // since start, of the orders answered 503 by the profile
	start     time.Time
	inFlight  int // orders inside the service: waiting for a slot or holding one
	peak      int
	arrivals  []time.Duration // since start
	series    []Sample        // in-flight after every change
	poolWaits []time.Duration
	waitsAt   []time.Duration
	ok        int
	timeouts  int
	orderID   atomic.Int64
}

// Sample is the number of orders in the service at a moment.
type Sample struct {
	At       time.Duration `json:"atMs"`
	InFlight int           `json:"inFlight"`
}

// NewBackend returns the reference service: 40 slots, 200 ms per order, 30 s pool timeout.
func NewBackend(pool int, latency, timeout time.Duration) *Backend {
	b := &Backend{Pool: pool, Latency: latency, Timeout: timeout}
	b.Reset()
	return b
}

// Reset empties the pool and forgets every measurement.
func (b *Backend) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.slots = make(chan struct{}, b.Pool)
	b.start = time.Now()
	b.inFlight, b.peak, b.ok, b.timeouts = 0, 0, 0, 0
	b.arrivals, b.series, b.poolWaits, b.waitsAt, b.failures = nil, nil, nil, nil, nil
	b.profile = nil
}

// SetProfile makes the service behave as profile says from now on, by the time since the last
// Reset: how long an order holds its connection, and whether the service answers 503 at once (a
// database that slows down, or fails). Reset forgets the profile.
func (b *Backend) SetProfile(profile func(since time.Duration) (latency time.Duration, fail bool)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.profile = profile
}

// behaviour is how the next order is served.
func (b *Backend) behaviour() (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.profile == nil {
		return b.Latency, false
	}
	latency, fail := b.profile(time.Since(b.start))
	if fail {
		b.failures = append(b.failures, time.Since(b.start))
	}
	return latency, fail
}

func (b *Backend) enter() (time.Time, chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.inFlight++
	b.peak = max(b.peak, b.inFlight)
	b.arrivals = append(b.arrivals, now.Sub(b.start))
	b.series = append(b.series, Sample{now.Sub(b.start), b.inFlight})
	return now, b.slots
}

func (b *Backend) leave(wait time.Duration, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inFlight--
	b.series = append(b.series, Sample{time.Since(b.start), b.inFlight})
	b.poolWaits = append(b.poolWaits, wait)
	b.waitsAt = append(b.waitsAt, time.Since(b.start))
	if ok {
		b.ok++
	} else {
		b.timeouts++
	}
}

// ServeHTTP serves POST /api/v1/orders and /api/v1/orders/direct (an order), GET /stats (the
// measurements as JSON), POST /reset, and a small page at / for browsers.
func (b *Backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && (r.URL.Path == "/api/v1/orders" || r.URL.Path == "/api/v1/orders/direct"):
		b.order(w, r)
	case r.URL.Path == "/stats":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(b.Stats())
	case r.Method == http.MethodPost && r.URL.Path == "/reset":
		b.Reset()
	case r.Method == http.MethodGet && r.URL.Path == "/":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>Orders</title><h1>Orders</h1><p>You are through the waiting room.</p>`)
	default:
		http.NotFound(w, r)
	}
}

func (b *Backend) order(w http.ResponseWriter, r *http.Request) {
	latency, fail := b.behaviour()
	if fail {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, `{"error":"unavailable","message":"the database is down"}`)
		return
	}
	arrived, slots := b.enter()
	timer := time.NewTimer(b.Timeout)
	defer timer.Stop()
	select {
	case slots <- struct{}{}:
	case <-timer.C:
		b.leave(time.Since(arrived), false)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"error":"connection_timeout","message":"no connection available after %s"}`+"\n", b.Timeout)
		return
	case <-r.Context().Done():
		b.leave(time.Since(arrived), false)
		return
	}
	wait := time.Since(arrived)
	time.Sleep(latency) // the order holds its connection
	<-slots
	b.leave(wait, true)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"order":%d}`+"\n", b.orderID.Add(1))
}

// BackendStats are the service's measurements since the last reset.
type BackendStats struct {
	Pool         int             `json:"pool"`
	PeakInFlight int             `json:"peakInFlight"`
	Orders       int             `json:"orders"`
	Timeouts     int             `json:"timeouts"`
	PoolWaitP95  time.Duration   `json:"poolWaitP95Ns"`
	PoolWaitMax  time.Duration   `json:"poolWaitMaxNs"`
	Arrivals     []time.Duration `json:"arrivalsNs"`
	Series       []Sample        `json:"series"`
	// Waits are the pool waits of the orders, in the order they got (or gave up on) a connection,
	// and WaitsAt when each ended, since the start.
	Waits   []time.Duration `json:"waitsNs,omitempty"`
	WaitsAt []time.Duration `json:"waitsAtNs,omitempty"`
	// Failures are when the service answered 503 by its profile, since the start.
	Failures []time.Duration `json:"failuresNs,omitempty"`
}

// Stats copies the measurements.
func (b *Backend) Stats() BackendStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	waits := slices.Clone(b.poolWaits)
	slices.Sort(waits)
	s := BackendStats{Pool: b.Pool, PeakInFlight: b.peak, Orders: b.ok, Timeouts: b.timeouts,
		Arrivals: slices.Clone(b.arrivals), Series: slices.Clone(b.series), Waits: slices.Clone(b.poolWaits),
		WaitsAt: slices.Clone(b.waitsAt), Failures: slices.Clone(b.failures)}
	if len(waits) > 0 {
		s.PoolWaitP95, s.PoolWaitMax = p95(waits), waits[len(waits)-1]
	}
	return s
}

// PeakArrivals is the most orders that arrived within one window of the given width, the windows
// laid back to back from the service's start (a histogram's fullest bin).
func (s BackendStats) PeakArrivals(window time.Duration) int {
	bins := map[time.Duration]int{}
	peak := 0
	for _, a := range s.Arrivals {
		bin := a / window
		bins[bin]++
		peak = max(peak, bins[bin])
	}
	return peak
}

// p95 of sorted durations, nearest rank.
func p95(sorted []time.Duration) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*95 + 99) / 100
	return sorted[min(len(sorted), max(1, i))-1]
}
