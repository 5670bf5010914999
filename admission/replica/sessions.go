package replica

import (
	"sync"
	"time"

	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/queue"
)

// SessionsBatch bounds the revocations one Sessions call lists; a proxy that starts behind a long
// list catches up over a few ticks.
const SessionsBatch = 1000

// passKey names a pass in memory: its visitor and not-before time.
type passKey struct {
	visitor string
	nb      int64 // Unix ms
}

func keyOf(p pass.Pass) passKey { return passKey{p.Visitor, p.NotBefore.UnixMilli()} }

// Sessions is the proxy's side of sessions. Passes are checked in memory, so the passes the workload
// released are kept here as a revocation list, read from Redis once per tick; the releases and
// renewals this replica sees go to Redis once per tick, in one call with that read.
type Sessions struct {
	// due wakes the sync at once when a session ends, so that the other replicas learn it within
	// their next tick (Due).
	due     chan struct{}
	mu      sync.RWMutex
	revoked map[passKey]time.Time // expiry
	seq     int64
	// rewinds counts Rewind and Restarted; takenAt is its value at the last Take, so that the answer
	// to a call taken before a rewind does not move the sequence on past it (Learn).
	rewinds, takenAt int
	releases         map[passKey]struct{}
	renewals         map[passKey]time.Time
}

func NewSessions() *Sessions {
	return &Sessions{due: make(chan struct{}, 1), revoked: map[passKey]time.Time{}, releases: map[passKey]struct{}{}, renewals: map[passKey]time.Time{}}
}

// IsRevoked reports whether the workload ended p's session.
func (s *Sessions) IsRevoked(p pass.Pass) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.revoked[keyOf(p)]
	return ok
}

// Release ends p's session: this replica refuses it from now on, the others within a tick.
func (s *Sessions) Release(p pass.Pass) {
	k := keyOf(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, done := s.revoked[k]; done {
		return
	}
	s.revoked[k] = p.Expiry
	s.releases[k] = struct{}{}
	delete(s.renewals, k)
	select {
	case s.due <- struct{}{}:
	default:
	}
}

// Renew extends p's slot to expiry in Redis at the next sync.
func (s *Sessions) Renew(p pass.Pass, expiry time.Time) {
	k := keyOf(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, done := s.revoked[k]; !done && expiry.After(s.renewals[k]) {
		s.renewals[k] = expiry
	}
}

// Rewind, after a failover, owes Redis every revocation this replica knows, and lists Redis'
// revocations from the start: the new primary may lack some of either (docs/guides/redis.md).
func (s *Sessions) Rewind() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rewindLocked()
	select {
	case s.due <- struct{}{}:
	default:
	}
}

func (s *Sessions) rewindLocked() {
	for k := range s.revoked {
		s.releases[k] = struct{}{}
	}
	s.seq = 0
	s.rewinds++
}

// Due receives when a session ended here, so that the sync need not wait for the next tick.
func (s *Sessions) Due() <-chan struct{} { return s.due }

// Take hands over what is owed to Redis.
func (s *Sessions) Take() ([]queue.Release, []queue.Renewal, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	releases := make([]queue.Release, 0, len(s.releases))
	for k := range s.releases {
		releases = append(releases, queue.Release{PassRef: queue.PassRef{Visitor: k.visitor, NotBefore: time.UnixMilli(k.nb)}, Expiry: s.revoked[k]})
	}
	renewals := make([]queue.Renewal, 0, len(s.renewals))
	for k, exp := range s.renewals {
		renewals = append(renewals, queue.Renewal{PassRef: queue.PassRef{Visitor: k.visitor, NotBefore: time.UnixMilli(k.nb)}, Expiry: exp})
	}
	clear(s.releases)
	clear(s.renewals)
	s.takenAt = s.rewinds
	return releases, renewals, s.seq
}

// GiveBack keeps what a failed call could not hand to Redis for the next one.
func (s *Sessions) GiveBack(releases []queue.Release, renewals []queue.Renewal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range releases {
		s.releases[passKey{r.Visitor, r.NotBefore.UnixMilli()}] = struct{}{}
	}
	for _, r := range renewals {
		k := passKey{r.Visitor, r.NotBefore.UnixMilli()}
		if r.Expiry.After(s.renewals[k]) {
			s.renewals[k] = r.Expiry
		}
	}
}

// Learn takes in what Redis listed, and forgets the revocations of passes expired by now.
func (s *Sessions) Learn(res queue.SessionsResult, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A rewind since the call was taken stands: the list it asked for began after what it knew.
	keep := s.rewinds == s.takenAt
	if res.Restarted {
		// Redis lost its data: this replica writes back the revocations it knows. The list began at
		// the start.
		s.rewindLocked()
	}
	for _, r := range res.Revoked {
		s.revoked[passKey{r.Visitor, r.NotBefore.UnixMilli()}] = r.Expiry
		if keep {
			s.seq = max(s.seq, r.Seq)
		}
	}
	if keep && len(res.Revoked) < SessionsBatch {
		s.seq = max(s.seq, res.Seq) // caught up
	}
	for k, exp := range s.revoked {
		if !exp.After(now) {
			delete(s.revoked, k)
		}
	}
}
