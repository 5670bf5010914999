package admission

import (
	"context"

	"github.com/go-logr/logr"

	"github.com/herdgate/herdgate/admission/replica"
	"github.com/herdgate/herdgate/internal/capacity"

	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/herdgate/herdgate/admission/entry"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/phase"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/route"
)

// The proxy's own paths live under this prefix and never reach the upstream.
const reservedPrefix = "/.herdgate"

// gate is the room's gate (glossary: gate): Decide and what follows a forward. It checks passes
// against the sessions this replica knows ended, meters the protected requests, notes the passes a
// failover may have lost, and admits a browser at once through the engine.
type gate struct {
	engine   Engine
	standing *standings
	redis    *redisHealth
	links    *links
	sessions *replica.Sessions
	workload *replica.WorkloadMeter
	reclaims *replica.Reclaims
	metrics  *metrics
	log      logr.Logger
	now      func() time.Time
	rand     capacity.Rand
}

// Verdict is what the gate decided of a request.
type Verdict uint8

const (
	// Forward: the request goes upstream as its Decision says; asked by a gateway, it may pass.
	Forward Verdict = iota
	// Answer: the gate answers the request itself with the Decision's Reply (a refusal, the waiting
	// page's redirect, a malformed request), and nothing of it reaches the upstream.
	Answer
	// Reserved: the path is herdgate's own (/.herdgate/…), which the room's endpoints serve
	// (Room.AnswerReserved); asked by a gateway, it goes on to herdgate as it is.
	Reserved
)

// Reply is an answer the gate wrote: what it answers a request it does not let through, or, on a
// Forward, the headers and cookies it adds to the upstream's answer (a pass handed out at once, a
// pass extended). Each front writes it in its own form, and each check in its gateway's convention.
type Reply struct {
	// Status is 300 or more on an Answer, and 0 on a Forward.
	Status      int
	ContentType string
	// Header holds the reply's headers but Set-Cookie; Cookies are its cookies.
	Header  http.Header
	Cookies []*http.Cookie
	Body    []byte
}

// Decision is what the gate decided of a request, with the config it was decided under: a front
// forwards as that config says, whatever config is in force by the time it forwards, and renders
// the gate's Reply as it is.
type Decision struct {
	verdict Verdict
	reply   Reply
	cfg     *Config
	// canonical is the normalised path; class "protected", "open" or "bypass".
	canonical, class string
	// pass is the request's valid pass, when hasPass (checked on a protected route in Queue mode).
	pass    pass.Pass
	hasPass bool
	// presented is the pass the request carried when the gate did not check it (any other route): it
	// is checked only if the workload ends the session with its answer.
	presented presentedPass
	// completion says the route is a completion route: a 2xx or 3xx answer ends the session.
	completion bool
	// checking: a gateway asked (DecideForGateway); nothing is handed out on the allow path.
	checking bool
}

// Verdict says whether the request goes upstream, is answered by the gate, or is herdgate's own.
func (d Decision) Verdict() Verdict { return d.verdict }

// Reply is the gate's answer (Answer), or what it adds to the upstream's answer (Forward).
func (d Decision) Reply() Reply { return d.reply }

// Config is the config the request was decided under, which its forward follows; nil for a
// reserved path while the room has no valid config.
func (d Decision) Config() *Config { return d.cfg }

// Path is the request's normalised path, as its routes were matched.
func (d Decision) Path() string { return d.canonical }

// decide is the gate, for a request to the room's routes whose path normalises to canonical (not
// herdgate's own: the room sends those to the visitor API first). It reads the request through x and
// returns its decision, and the answer it gives a request it does not let through, or what it adds to
// the upstream's answer on a Forward (a pass handed out at once or extended); checking says a gateway
// asks (DecideForGateway).
func (g *gate) decide(x Exchange, cfg *Config, canonical string, checking bool) (Decision, answer) {
	d, a, forward := g.judge(x, cfg, canonical, checking)
	if !forward {
		d.verdict = Answer
	}
	return d, a
}

// judge makes the gate's decision: the answer the gate gives itself (a protected route without a
// valid pass), and otherwise how to forward, with what it adds to the upstream's answer.
func (g *gate) judge(x Exchange, cfg *Config, canonical string, checking bool) (d Decision, a answer, forward bool) {
	if !checking && cfg.Enforcement == herdgatev1alpha1.EnforcementGateway {
		// The gateway forwards to the workload; a request reaching herdgate's front outside its own
		// paths took a wrong turn, and passing it on would skip whatever the gateway does.
		return d, errorAnswer(http.StatusMisdirectedRequest, errorBody{Error: "not_forwarded",
			Message: "this room is enforced by the gateway (spec.enforcement: Gateway): herdgate serves /.herdgate/ only"}).
			counted("open", "not_forwarded"), false
	}
	host := route.HostOf(x.Host())
	d = Decision{cfg: cfg, canonical: canonical, class: routeClassOf(cfg, x, host, canonical), checking: checking}
	if d.class == "protected" {
		if lane := bypassLane(x, cfg, canonical); lane != "" {
			// A bypass lane: no pass, no queue, whatever the mode.
			g.metrics.bypassed.WithLabelValues(lane).Inc()
			d.class = "bypass"
		} else if a, forward = g.admit(x, cfg, &d); !forward {
			return d, a, false
		}
	}
	d.completion = matchesAny(cfg.CompletionRoutes, x.Method(), host, canonical)
	if !d.hasPass {
		// The workload may end a session on any route (a logout, a thank-you page): keep the pass the
		// request carried, to check it should the answer say so.
		d.presented = presentedOf(x, cfg)
	}
	return d, a, true
}

// bypassLane is the first bypass lane the request to a protected route takes, or "".
func bypassLane(x Exchange, cfg *Config, canonical string) string {
	if len(cfg.BypassLanes) == 0 {
		return ""
	}
	var out entry.Outcome
	cfg.BypassLanes.Check(entry.Input{Request: x, Path: canonical}, &out)
	return out.Bypass
}

// admit decides whether a request to a protected route may pass: the answer when not, and on a
// pass what is added to the upstream's answer. A valid pass goes into d.
func (g *gate) admit(x Exchange, cfg *Config, d *Decision) (answer, bool) {
	canonical := d.canonical
	switch cfg.Mode {
	case herdgatev1alpha1.ModePassthrough:
		g.metrics.requests.WithLabelValues("protected", "passthrough").Inc()
		return answer{}, true
	case herdgatev1alpha1.ModeClosed:
		if isBrowserPage(x) {
			return toPage(x, canonical, "closed"), false
		}
		return closed(cfg, "protected"), false
	}
	visitor, _, _ := identify(x, cfg, false)
	if cfg.IdentityHeader != "" && queue.ValidateVisitorID(visitor) != nil {
		return errorAnswer(http.StatusUnauthorized, errorBody{Error: "identity_required", Header: cfg.IdentityHeader}).counted("protected", "identity_required"), false
	}
	token := passToken(x, cfg)
	now := g.now()
	verified, result := g.verifyPass(cfg, token, visitor, now)
	g.metrics.verified(result)
	if result == pass.Valid {
		d.pass, d.hasPass = verified, true
		if g.workload.Used(verified, now) {
			g.metrics.firstUse.Observe(max(0, now.Sub(verified.NotBefore).Seconds()))
		}
		g.reclaims.Saw(verified, now)
		var slid answer
		if cfg.Sliding && !d.checking {
			g.slide(&slid, x, cfg, verified, now)
		}
		return slid, true
	}
	if cfg.FailurePolicy == herdgatev1alpha1.FailOpen && g.redis.isDown() && cfg.phaseAt(now) == phase.Open {
		// Never before the schedule opens the room, nor after it closes.
		g.metrics.failOpen.Inc()
		g.log.V(1).Info("Redis is unreachable: letting a protected request through (FailOpen)", "path", canonical)
		return answer{}, true
	}
	r := g.standing.of(x.Context(), cfg)
	browser := isBrowserPage(x)
	var minted []*http.Cookie
	if browser && r.phase == phase.Open && r.known && !d.checking {
		at, ok := g.admitAtOnce(x, cfg, r)
		if ok {
			return at, true
		}
		// A browser that entered nothing still keeps the identity it was given: the waiting page enters it.
		minted = at.cookies
	}
	a := g.refusal(x, cfg, r, canonical, browser)
	a.cookies = append(minted, a.cookies...)
	a.setHeader("X-Herdgate-Pass-Result", string(result))
	return a, false
}

// refusal is the answer to a request to a protected route without a valid pass.
func (g *gate) refusal(x Exchange, cfg *Config, r standing, canonical string, browser bool) answer {
	switch {
	case r.beforeOpening():
		if browser {
			return toPage(x, canonical, "not_open")
		}
		return notOpen(cfg, r, "protected", g.now(), g.rand.Float64(), g.links.enter())
	case r.phase == phase.Closed && !browser:
		return scheduleClosed(cfg, "protected", g.now())
	case browser:
		// A browser goes to the waiting page, which shows its place, the opening or the closed room.
		return toPage(x, canonical, "redirected")
	}
	return errorAnswer(http.StatusForbidden, errorBody{Error: "pass_required", Enter: g.links.enter()}).counted("protected", "pass_required")
}

// slide extends a Sliding pass that has used half its time: to ttl from now, up to maxSession after
// its not-before time. The visitor gets the new pass as a cookie and in the pass header of the
// response, which a adds; its slot in Redis follows at the next sync.
func (g *gate) slide(a *answer, x Exchange, cfg *Config, verified pass.Pass, now time.Time) {
	if verified.Expiry.Sub(now) > cfg.PassTTL/2 {
		return
	}
	expiry := now.Add(cfg.PassTTL)
	if limit := verified.NotBefore.Add(cfg.MaxSession); limit.Before(expiry) {
		expiry = limit
	}
	expiry = expiry.Truncate(time.Millisecond)
	if !expiry.After(verified.Expiry) {
		return
	}
	pos := queue.Position{State: queue.Admitted, Now: now, Pass: queue.Pass{NotBefore: verified.NotBefore, Expiry: expiry}}
	token, cookie := passCookie(x, cfg, verified.Visitor, pos)
	a.setCookie(cookie)
	a.setHeader(PassHeader, token)
	g.sessions.Renew(verified, expiry)
}

// admitAtOnce enters a browser that asks for a protected page without a pass. While nobody waits and
// the tick's budget has room, the queue admits it at once: it goes on to the page with its pass and
// never sees the waiting page. Otherwise it holds a place, which the waiting page then shows. The
// entry checks apply as to any enter: a browser without what they ask for (an invitation, a proof of
// work) enters nothing and goes to the waiting page, which asks for it.
//
// It returns what is added to the upstream's answer, or, when the browser is not admitted, the
// cookies the waiting page needs (a visitor cookie minted here).
func (g *gate) admitAtOnce(x Exchange, cfg *Config, r standing) (answer, bool) {
	var a answer
	visitor, minted, ok := identify(x, cfg, true)
	if minted != nil {
		a.setCookie(minted)
	}
	if !ok || queue.ValidateVisitorID(visitor) != nil {
		return a, false
	}
	var granted entry.Outcome
	if cfg.EntryChecks.Check(entry.Input{Request: x, Visitor: visitor, Now: g.now()}, &granted) != nil {
		return a, false
	}
	if g.redis.resting() {
		// Redis failed a moment ago: the browser goes to the waiting page at once, which enters it
		// when Redis answers again.
		return a, false
	}
	pos, err := g.engine.EnterFrom(x.Context(), visitor, r.abandonAfter, granted.Limit)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			g.redis.result(err)
		}
		return a, false
	}
	g.redis.result(nil)
	if pos.State != queue.Admitted || pos.Pass.NotBefore.After(pos.Now) {
		return a, false
	}
	_, cookie := passCookie(x, cfg, visitor, pos)
	a.setCookie(cookie)
	g.metrics.requests.WithLabelValues("protected", "admitted_at_once").Inc()
	return a, true
}

// isBrowserPage: a GET or HEAD that asks for HTML, which a browser sends to show a page.
func isBrowserPage(x Exchange) bool {
	method := strings.ToUpper(x.Method())
	return (method == http.MethodGet || method == http.MethodHead) && strings.Contains(x.Header("Accept"), "text/html")
}

// toPage sends a browser to the waiting page, which brings it back to canonical.
func toPage(x Exchange, canonical, outcome string) answer {
	target := canonical
	if q := x.RawQuery(); q != "" {
		target += "?" + q
	}
	return redirect(reservedPrefix+"/?return="+url.QueryEscape(target)).counted("protected", outcome)
}

// errorBody is the JSON of every error answer.
type errorBody struct {
	Error        string      `json:"error"`
	Message      string      `json:"message,omitempty"`
	Enter        string      `json:"enter,omitempty"`
	Header       string      `json:"header,omitempty"`
	RetryAfterMs int64       `json:"retryAfterMs,omitempty"`
	Phase        phase.Phase `json:"phase,omitempty"`
	Position     int64       `json:"position,omitempty"`
	QueueDepth   int64       `json:"queueDepth,omitempty"`
}
