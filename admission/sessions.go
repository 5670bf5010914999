package admission

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/herdgate/herdgate/admission/pass"
	"github.com/herdgate/herdgate/internal/queue"
)

// ReleaseHeader is the response header with which the workload ends a visitor's session: on any
// response to a request with a valid pass, "true" releases the pass. The proxy strips it.
const ReleaseHeader = "Herdgate-Release"

// sessionsBatch bounds the revocations one Sessions call lists; a proxy that starts behind a long
// list catches up over a few ticks.
const sessionsBatch = 1000

// passKey names a pass in memory: its visitor and not-before time.
type passKey struct {
	visitor string
	nb      int64 // Unix ms
}

func keyOf(p pass.Pass) passKey { return passKey{p.Visitor, p.NotBefore.UnixMilli()} }

// sessions is the proxy's side of sessions. Passes are checked in memory, so the passes the workload
// released are kept here as a revocation list, read from Redis once per tick; the releases and
// renewals this replica sees go to Redis once per tick, in one call with that read.
type sessions struct {
	// due wakes the sync at once when a session ends, so that the other replicas learn it within
	// their next tick.
	due      chan struct{}
	mu       sync.RWMutex
	revoked  map[passKey]time.Time // expiry
	seq      int64
	releases map[passKey]struct{}
	renewals map[passKey]time.Time
}

func newSessions() *sessions {
	return &sessions{due: make(chan struct{}, 1), revoked: map[passKey]time.Time{}, releases: map[passKey]struct{}{}, renewals: map[passKey]time.Time{}}
}

// isRevoked reports whether the workload ended p's session.
func (s *sessions) isRevoked(p pass.Pass) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.revoked[keyOf(p)]
	return ok
}

// release ends p's session: this replica refuses it from now on, the others within a tick.
func (s *sessions) release(p pass.Pass) {
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

// renew extends p's slot to expiry in Redis at the next sync.
func (s *sessions) renew(p pass.Pass, expiry time.Time) {
	k := keyOf(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, done := s.revoked[k]; !done && expiry.After(s.renewals[k]) {
		s.renewals[k] = expiry
	}
}

// take hands over what is owed to Redis.
func (s *sessions) take() ([]queue.PassRef, []queue.Renewal, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	releases := make([]queue.PassRef, 0, len(s.releases))
	for k := range s.releases {
		releases = append(releases, queue.PassRef{Visitor: k.visitor, NotBefore: time.UnixMilli(k.nb)})
	}
	renewals := make([]queue.Renewal, 0, len(s.renewals))
	for k, exp := range s.renewals {
		renewals = append(renewals, queue.Renewal{PassRef: queue.PassRef{Visitor: k.visitor, NotBefore: time.UnixMilli(k.nb)}, Expiry: exp})
	}
	clear(s.releases)
	clear(s.renewals)
	return releases, renewals, s.seq
}

// giveBack keeps what a failed call could not hand to Redis for the next one.
func (s *sessions) giveBack(releases []queue.PassRef, renewals []queue.Renewal) {
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

// learn takes in what Redis listed, and forgets the revocations of passes expired by now.
func (s *sessions) learn(res queue.SessionsResult, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if res.Restarted {
		// Redis lost its data: what it lists now is all there is, besides what this replica owes.
		for k := range s.revoked {
			if _, owed := s.releases[k]; !owed {
				delete(s.revoked, k)
			}
		}
		s.seq = 0
	}
	for _, r := range res.Revoked {
		s.revoked[passKey{r.Visitor, r.NotBefore.UnixMilli()}] = r.Expiry
		s.seq = max(s.seq, r.Seq)
	}
	if len(res.Revoked) < sessionsBatch {
		s.seq = max(s.seq, res.Seq) // caught up
	}
	for k, exp := range s.revoked {
		if !exp.After(now) {
			delete(s.revoked, k)
		}
	}
}

// syncSessions runs one exchange with Redis: what this replica owes, and the revocations it lacks.
func (p *Proxy) syncSessions(ctx context.Context) error {
	releases, renewals, seq := p.sessions.take()
	callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	res, err := p.q.Sessions(callCtx, releases, renewals, seq, sessionsBatch)
	if err != nil {
		p.sessions.giveBack(releases, renewals)
		return err
	}
	p.sessions.learn(res, p.now())
	p.metrics.releases.Add(float64(len(releases)))
	return nil
}

// keepSessions syncs every tick, and at once when a session ended here, until ctx ends.
func (p *Proxy) keepSessions(ctx context.Context) {
	for {
		tick := 100 * time.Millisecond
		if cfg := p.cfg.Load(); cfg != nil && cfg.Plan.Tick() > 0 {
			tick = cfg.Plan.Tick()
		}
		timer := time.NewTimer(tick)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-p.sessions.due:
			timer.Stop()
		}
		if err := p.syncSessions(ctx); err != nil && ctx.Err() == nil {
			p.log.V(1).Info("Syncing sessions with Redis failed; will retry", "error", err.Error())
		}
	}
}

// afterUpstream ends the session of the request's pass when the workload says so, on any route: with
// the release header, or by answering a completion route with a 2xx or 3xx. A pass the gate did not
// check (the route is not a protected one, or the room let it through without one) is checked now,
// and only now: most answers end nothing.
func (p *Proxy) afterUpstream(d decision, status int, release string) {
	released := strings.EqualFold(strings.TrimSpace(release), "true")
	completed := d.completion && status >= 200 && status < 400
	if !released && !completed {
		return
	}
	switch {
	case d.hasPass:
		p.sessions.release(d.pass)
	case d.presented.token != "" && d.cfg != nil:
		if verified, ok := p.verifyPresented(d.cfg, d.presented, p.now()); ok {
			p.sessions.release(verified)
		}
	}
}
