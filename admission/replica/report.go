package replica

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdgate/herdgate/internal/queue"
)

// ReportInterval is how often a proxy replica reports the config it serves, even unchanged.
const ReportInterval = 10 * time.Second

// ConfigReport is what this replica serves and refuses, as it reports it to Redis, from which the
// manager sets the Programmed condition; and the rate of the gateway checks it answers
// (GatewayChecking).
type ConfigReport struct {
	mu      sync.Mutex
	current queue.ProxyReport
	changed chan struct{} // a report is due
	// checks counts the gateway checks answered; checksSeen and checksAt are the count and time
	// of the report that last measured their rate.
	checks     atomic.Int64
	checksSeen int64
	checksAt   time.Time
}

// NewConfigReport is the report of the replica named replica (its pod); "" reports nothing.
func NewConfigReport(replica string) *ConfigReport {
	return &ConfigReport{current: queue.ProxyReport{Replica: replica}, changed: make(chan struct{}, 1)}
}

// Replica names the replica reporting; "" for one that reports nothing.
func (s *ConfigReport) Replica() string { return s.current.Replica }

// Changed is signalled when a report is due before the next interval.
func (s *ConfigReport) Changed() <-chan struct{} { return s.changed }

func (s *ConfigReport) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// Applied records that generation is the config in force.
func (s *ConfigReport) Applied(generation int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current.Generation = generation
	if s.current.RefusedGeneration <= generation {
		s.current.RefusedGeneration, s.current.Refusal = 0, ""
	}
	s.notify()
}

// Refused records that generation was refused, and why, and tells whether that is news.
func (s *ConfigReport) Refused(generation int64, why string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current.RefusedGeneration == generation && s.current.Refusal == why {
		return false
	}
	s.current.RefusedGeneration, s.current.Refusal = generation, why
	s.notify()
	return true
}

// Serving is the generation the replica serves.
func (s *ConfigReport) Serving() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current.Generation
}

// CountCheck counts a gateway check answered.
func (s *ConfigReport) CountCheck() { s.checks.Add(1) }

// At is the replica's report at now. The checks' rate is measured over a second at least: a report
// a change brings sooner keeps the rate measured before.
func (s *ConfigReport) At(now time.Time) queue.ProxyReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.checks.Load()
	if elapsed := now.Sub(s.checksAt); s.checksAt.IsZero() || elapsed >= time.Second {
		if !s.checksAt.IsZero() {
			s.current.ChecksPerSecond = float64(n-s.checksSeen) / elapsed.Seconds()
		}
		s.checksSeen, s.checksAt = n, now
	}
	return s.current
}
