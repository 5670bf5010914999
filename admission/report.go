package admission

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdgate/herdgate/internal/queue"
)

// ReportInterval is how often a proxy replica reports the config it serves, even unchanged.
const ReportInterval = 10 * time.Second

// configState is what this replica serves and refuses, as it reports it to Redis.
type configState struct {
	mu      sync.Mutex
	current queue.ProxyReport
	changed chan struct{} // a report is due
	// checks counts the gateway checks answered; checksSeen and checksAt are the count and time
	// of the report that last measured their rate.
	checks     atomic.Int64
	checksSeen int64
	checksAt   time.Time
}

func (s *configState) init(replica string) {
	s.current.Replica = replica
	s.changed = make(chan struct{}, 1)
}

func (s *configState) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *configState) applied(generation int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current.Generation = generation
	if s.current.RefusedGeneration <= generation {
		s.current.RefusedGeneration, s.current.Refusal = 0, ""
	}
	s.notify()
}

// refused records a refusal and tells whether it is news.
func (s *configState) refused(generation int64, why string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current.RefusedGeneration == generation && s.current.Refusal == why {
		return false
	}
	s.current.RefusedGeneration, s.current.Refusal = generation, why
	s.notify()
	return true
}

// serving is the generation the replica serves.
func (s *configState) serving() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current.Generation
}

// report is the replica's report at now. The checks' rate is measured over a second at least: a
// report a change brings sooner keeps the rate measured before.
func (s *configState) report(now time.Time) queue.ProxyReport {
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
