package admission

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"
	"time"

	"github.com/herdgate/herdgate/admission/replica"
)

// ReleaseHeader is the response header with which the workload ends a visitor's session: on any
// response to a request with a valid pass, "true" releases the pass. The proxy strips it.
const ReleaseHeader = "Herdgate-Release"

// SessionHeader carries a request's session handle to the workload, when the queue has a release key
// (spec.pass.releaseKeySecretRef): with it the workload ends the session by POST /.herdgate/release.
const SessionHeader = "Herdgate-Session"

// Session is the handle of the session of the request's pass, for the workload; "" when the request
// has no valid pass or the queue no release key.
func (d Decision) Session() string {
	if !d.hasPass || d.cfg == nil || d.cfg.releaseKey == nil {
		return ""
	}
	return d.cfg.Signer.Session(d.pass)
}

// serveRelease ends the session a handle names, for the workload's own servers: the release header's
// equivalent where no answer of the workload reaches herdgate. It is authenticated by the queue's
// release key, compared in constant time.
func (p *Proxy) serveRelease(x Exchange, cfg *Config) {
	if cfg.releaseKey == nil {
		p.metrics.requests.WithLabelValues("internal", "not_found").Inc()
		replyJSON(x, http.StatusNotFound, errorBody{Error: "no_release_key", Message: "this queue has no spec.pass.releaseKeySecretRef"})
		return
	}
	token, ok := strings.CutPrefix(x.Header("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(token), cfg.releaseKey) != 1 {
		p.metrics.requests.WithLabelValues("internal", "release_unauthorized").Inc()
		x.SetHeader("WWW-Authenticate", `Bearer realm="herdgate release"`)
		replyJSON(x, http.StatusUnauthorized, errorBody{Error: "unauthorized", Message: "send the queue's release key as Authorization: Bearer <key>"})
		return
	}
	session := x.Header(SessionHeader)
	if session == "" || x.HeaderCount(SessionHeader) != 1 {
		p.metrics.requests.WithLabelValues("internal", "release_bad_request").Inc()
		replyJSON(x, http.StatusBadRequest, errorBody{Error: "bad_request", Message: "send the Herdgate-Session header the visitor's request carried, once"})
		return
	}
	handle, ok := cfg.Signer.VerifySession(session)
	if !ok {
		p.metrics.requests.WithLabelValues("internal", "release_bad_session").Inc()
		replyJSON(x, http.StatusUnprocessableEntity, errorBody{Error: "bad_session", Message: "the session handle is not one this queue signed"})
		return
	}
	if p.now().Before(handle.Expiry) {
		p.sessions.Release(handle)
	}
	p.metrics.requests.WithLabelValues("internal", "released").Inc()
	replyJSON(x, http.StatusOK, map[string]bool{"released": true})
}

// syncSessions runs one exchange with Redis: what this replica owes, and the revocations it lacks.
func (p *Proxy) syncSessions(ctx context.Context) error {
	// A pass written back after a failover is in Redis before its release, which would otherwise
	// find no pass to end.
	p.flushReclaims(ctx)
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
