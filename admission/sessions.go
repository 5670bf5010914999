package admission

import (
	"context"
	"strings"
	"time"

	"github.com/herdgate/herdgate/admission/replica"
)

// ReleaseHeader is the response header with which the workload ends a visitor's session: on any
// response to a request with a valid pass, "true" releases the pass. The proxy strips it.
const ReleaseHeader = "Herdgate-Release"

// syncSessions runs one exchange with Redis: what this replica owes, and the revocations it lacks.
func (p *Proxy) syncSessions(ctx context.Context) error {
	releases, renewals, seq := p.sessions.Take()
	callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	res, err := p.q.Sessions(callCtx, releases, renewals, seq, replica.SessionsBatch)
	if err != nil {
		p.sessions.GiveBack(releases, renewals)
		return err
	}
	p.sessions.Learn(res, p.now())
	p.metrics.releases.Add(float64(len(releases)))
	return nil
}

// keepSessions syncs every tick, and at once when a session ended here, until ctx ends.
func (p *Proxy) keepSessions(ctx context.Context) {
	for {
		tick := 100 * time.Millisecond
		if cfg := p.cfg.Load(); cfg != nil && cfg.Tick() > 0 {
			tick = cfg.Tick()
		}
		timer := time.NewTimer(tick)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-p.sessions.Due():
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
func (p *Proxy) afterUpstream(d Decision, status int, release string) {
	released := strings.EqualFold(strings.TrimSpace(release), "true")
	completed := d.completion && status >= 200 && status < 400
	if !released && !completed {
		return
	}
	switch {
	case d.hasPass:
		p.sessions.Release(d.pass)
	case d.presented.token != "" && d.cfg != nil:
		if verified, ok := p.verifyPresented(d.cfg, d.presented, p.now()); ok {
			p.sessions.Release(verified)
		}
	}
}
