package admission

import (
	"context"

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

// Verdict is what the gate decided of a request.
type Verdict uint8

const (
	// Forward: the request goes upstream as its Decision says; asked by a gateway, it may pass.
	Forward Verdict = iota
	// Answer: the gate answers the request itself with the Decision's Reply (a refusal, the waiting
	// page's redirect, a malformed request), and nothing of it reaches the upstream.
	Answer
	// Reserved: the path is herdgate's own (/.herdgate/…), which the room's endpoints serve
	// (Room.ServeReserved); asked by a gateway, it goes on to herdgate as it is.
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

// decide is the gate. It reads the request through x and writes what it answers (or adds to the
// upstream's answer) into the decision's Reply; checking says a gateway asks (DecideForGateway).
func (g *gate) decide(x Exchange, cfg *Config, escapedPath string, fragment, checking bool) Decision {
	w := &replyWriter{Exchange: x}
	d, forward := g.judge(w, cfg, escapedPath, fragment, checking)
	d.reply = w.reply
	if !forward && d.verdict != Reserved {
		d.verdict = Answer
		d.reply.mustRefuse()
	}
	return d
}

// mustRefuse makes an answer of the gate's a refusal, whatever it wrote: a gate that answers a
// request it does not let through with a 2xx (or with nothing) must never read as an allow to a
// gateway.
func (r *Reply) mustRefuse() {
	switch {
	case r.Status == 0:
		r.Status, r.ContentType, r.Body = http.StatusServiceUnavailable, "application/json",
			[]byte(`{"error":"unavailable","message":"the waiting room gave no answer; try again shortly"}`+"\n")
	case r.Status < 300:
		r.Status, r.ContentType, r.Body = http.StatusInternalServerError, "application/json", []byte(`{"error":"internal"}`+"\n")
	}
}

// replyWriter is the request as the gate reads it, with what the gate writes kept in a Reply.
type replyWriter struct {
	Exchange
	reply Reply
}

func (w *replyWriter) SetHeader(name, value string) {
	if w.reply.Header == nil {
		w.reply.Header = http.Header{}
	}
	w.reply.Header.Set(name, value)
}

func (w *replyWriter) SetCookie(c *http.Cookie) { w.reply.Cookies = append(w.reply.Cookies, c) }

func (w *replyWriter) Reply(status int, contentType string, body []byte) {
	w.reply.Status, w.reply.ContentType, w.reply.Body = status, contentType, body
}

// judge makes the gate's decision: it answers through x what the gate answers itself (a bad path, a
// protected route without a valid pass), says Reserved of herdgate's own paths, and otherwise
// returns how to forward.
func (g *gate) judge(x Exchange, cfg *Config, escapedPath string, fragment, checking bool) (d Decision, forward bool) {
	if cfg == nil {
		if canonical, err := route.Normalize(escapedPath); err == nil && !fragment && isReserved(canonical) {
			// The probes and the page's endpoints answer for themselves that there is no config.
			return Decision{verdict: Reserved, canonical: canonical}, false
		}
		g.serveUnconfigured(x, "")
		return d, false
	}
	if strings.EqualFold(x.Method(), http.MethodConnect) {
		// A gateway in front of one workload tunnels nothing.
		g.metrics.requests.WithLabelValues("open", "method_not_allowed").Inc()
		replyJSON(x, http.StatusMethodNotAllowed, errorBody{Error: "method_not_allowed", Message: "CONNECT is not served"})
		return d, false
	}
	if cfg.IdentityHeader != "" && x.HeaderCount(cfg.IdentityHeader) > 1 {
		// Which of two identities a hop behind us would pick is anybody's guess: refuse both.
		g.metrics.requests.WithLabelValues("open", "bad_identity").Inc()
		replyJSON(x, http.StatusBadRequest, errorBody{Error: "bad_identity", Message: "the identity header " + cfg.IdentityHeader + " is repeated", Header: cfg.IdentityHeader})
		return d, false
	}
	canonical, err := route.Normalize(escapedPath)
	// A fragment is no part of a request; where a '#' would end the path is anybody's guess.
	if err != nil || fragment {
		g.replyBadPath(x)
		return d, false
	}
	if isReserved(canonical) {
		return Decision{verdict: Reserved, cfg: cfg, canonical: canonical}, false
	}
	if !checking && cfg.Enforcement == herdgatev1alpha1.EnforcementGateway {
		// The gateway forwards to the workload; a request reaching herdgate's front outside its own
		// paths took a wrong turn, and passing it on would skip whatever the gateway does.
		g.metrics.requests.WithLabelValues("open", "not_forwarded").Inc()
		replyJSON(x, http.StatusMisdirectedRequest, errorBody{Error: "not_forwarded",
			Message: "this room is enforced by the gateway (spec.enforcement: Gateway): herdgate serves /.herdgate/ only"})
		return d, false
	}
	host := route.HostOf(x.Host())
	d = Decision{cfg: cfg, canonical: canonical, class: routeClassOf(cfg, x, host, canonical), checking: checking}
	if d.class == "protected" {
		if lane := bypassLane(x, cfg, canonical); lane != "" {
			// A bypass lane: no pass, no queue, whatever the mode.
			g.metrics.bypassed.WithLabelValues(lane).Inc()
			d.class = "bypass"
		} else if !g.admit(x, cfg, &d) {
			return d, false
		}
	}
	d.completion = matchesAny(cfg.CompletionRoutes, x.Method(), host, canonical)
	if !d.hasPass {
		// The workload may end a session on any route (a logout, a thank-you page): keep the pass the
		// request carried, to check it should the answer say so.
		d.presented = presentedOf(x, cfg)
	}
	return d, true
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

func (g *gate) replyBadPath(x Exchange) {
	g.metrics.requests.WithLabelValues("open", "bad_path").Inc()
	replyJSON(x, http.StatusBadRequest, errorBody{Error: "bad_path", Message: "the request path cannot be normalised"})
}

// admit decides whether a request to a protected route may pass, and answers it when not. A valid
// pass goes into d.
func (g *gate) admit(x Exchange, cfg *Config, d *Decision) bool {
	canonical := d.canonical
	switch cfg.Mode {
	case herdgatev1alpha1.ModePassthrough:
		g.metrics.requests.WithLabelValues("protected", "passthrough").Inc()
		return true
	case herdgatev1alpha1.ModeClosed:
		if isBrowserPage(x) {
			g.redirectToPage(x, canonical, "closed")
		} else {
			g.replyClosed(x, cfg, "protected")
		}
		return false
	}
	visitor, _ := g.identify(x, cfg, false)
	if cfg.IdentityHeader != "" && queue.ValidateVisitorID(visitor) != nil {
		g.metrics.requests.WithLabelValues("protected", "identity_required").Inc()
		replyJSON(x, http.StatusUnauthorized, errorBody{Error: "identity_required", Header: cfg.IdentityHeader})
		return false
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
		g.reclaim.saw(verified, now)
		if cfg.Sliding && !d.checking {
			g.slide(x, cfg, verified, now)
		}
		return true
	}
	if cfg.FailurePolicy == herdgatev1alpha1.FailOpen && g.redisDown.Load() && cfg.phaseAt(now) == phase.Open {
		// Never before the schedule opens the room, nor after it closes.
		g.metrics.failOpen.Inc()
		g.log.V(1).Info("Redis is unreachable: letting a protected request through (FailOpen)", "path", canonical)
		return true
	}
	r := g.standing(x.Context(), cfg)
	browser := isBrowserPage(x)
	if browser && r.phase == phase.Open && r.known && !d.checking && g.admitAtOnce(x, cfg, r) {
		return true
	}
	x.SetHeader("X-Herdgate-Pass-Result", string(result))
	switch {
	case r.beforeOpening():
		if browser {
			g.redirectToPage(x, canonical, "not_open")
		} else {
			g.replyNotOpen(x, cfg, r, "protected")
		}
		return false
	case r.phase == phase.Closed && !browser:
		g.replyScheduleClosed(x, cfg, "protected")
		return false
	case browser:
		// A browser goes to the waiting page, which shows its place, the opening or the closed room.
		g.redirectToPage(x, canonical, "redirected")
		return false
	}
	g.metrics.requests.WithLabelValues("protected", "pass_required").Inc()
	replyJSON(x, http.StatusForbidden, errorBody{Error: "pass_required", Enter: g.enterLink()})
	return false
}

// slide extends a Sliding pass that has used half its time: to ttl from now, up to maxSession after
// its not-before time. The visitor gets the new pass as a cookie and in the pass header of the
// response; its slot in Redis follows at the next sync.
func (g *gate) slide(x Exchange, cfg *Config, verified pass.Pass, now time.Time) {
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
	x.SetHeader(PassHeader, g.setPassCookie(x, cfg, verified.Visitor, pos))
	g.sessions.Renew(verified, expiry)
}

// admitAtOnce enters a browser that asks for a protected page without a pass. While nobody waits and
// the tick's budget has room, the queue admits it at once: it goes on to the page with its pass and
// never sees the waiting page. Otherwise it holds a place, which the waiting page then shows. The
// entry checks apply as to any enter: a browser without what they ask for (an invitation, a proof of
// work) enters nothing and goes to the waiting page, which asks for it.
func (g *gate) admitAtOnce(x Exchange, cfg *Config, r standing) bool {
	visitor, ok := g.identify(x, cfg, true)
	if !ok || queue.ValidateVisitorID(visitor) != nil {
		return false
	}
	var granted entry.Outcome
	if cfg.EntryChecks.Check(entry.Input{Request: x, Visitor: visitor, Now: g.now()}, &granted) != nil {
		return false
	}
	pos, err := g.engine.EnterFrom(x.Context(), visitor, r.abandonAfter, granted.Limit)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			g.redisResult(err)
		}
		return false
	}
	g.redisResult(nil)
	if pos.State != queue.Admitted || pos.Pass.NotBefore.After(pos.Now) {
		return false
	}
	g.setPassCookie(x, cfg, visitor, pos)
	g.metrics.requests.WithLabelValues("protected", "admitted_at_once").Inc()
	return true
}

// isBrowserPage: a GET or HEAD that asks for HTML, which a browser sends to show a page.
func isBrowserPage(x Exchange) bool {
	method := strings.ToUpper(x.Method())
	return (method == http.MethodGet || method == http.MethodHead) && strings.Contains(x.Header("Accept"), "text/html")
}

// redirectToPage sends a browser to the waiting page, which brings it back to canonical.
func (g *gate) redirectToPage(x Exchange, canonical, outcome string) {
	target := canonical
	if q := x.RawQuery(); q != "" {
		target += "?" + q
	}
	g.metrics.requests.WithLabelValues("protected", outcome).Inc()
	replyRedirect(x, reservedPrefix+"/?return="+url.QueryEscape(target))
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
