package admission

import (
	"context"
	"net"
	"syscall"

	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/herdgate/herdgate/admission/pass"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/route"
)

// The proxy's own paths live under this prefix and never reach the upstream.
const reservedPrefix = "/.herdgate"

// Cookie and header names of the HTTP contract.
const (
	PassCookie    = "herdgate_pass"
	VisitorCookie = "herdgate_visitor"
	PassHeader    = "X-Herdgate-Pass"
	// maxCookieValue bounds the herdgate cookies read; longer values are ignored as forged.
	maxCookieValue = 512
	visitorMaxAge  = 24 * time.Hour
	// planTTL is how long a proxy reuses the plan read from Redis.
	planTTL = time.Second
	// tooEarlyShare: a poll is refused when it comes sooner than this share of the shortest interval
	// the proxy could have told the visitor; the rest is room for network jitter.
	tooEarlyShare = 0.8
)

// Engine is what the gate needs of the queue engine. A *queue.Queue is the one it runs on; unit tests
// give it one in memory.
type Engine interface {
	queue.PlanReader
	EnterFrom(ctx context.Context, visitor string, abandonAfter time.Duration, limit queue.EntryLimit) (queue.Position, error)
	Status(ctx context.Context, visitor string, abandonAfter time.Duration) (queue.Position, error)
	Ping(ctx context.Context) error
	ReportProxy(ctx context.Context, r queue.ProxyReport) error
	ReportWorkload(ctx context.Context, r queue.WorkloadReport, uses []queue.PassUse) error
	Sessions(ctx context.Context, releases []queue.PassRef, renewals []queue.Renewal, after int64, most int) (queue.SessionsResult, error)
}

// Options tune a Proxy.
type Options struct {
	Log logr.Logger
	// Now is the proxy's clock; nil means time.Now.
	Now func() time.Time
	// Rand spreads poll hints; nil means math/rand/v2.
	Rand capacity.Rand
	// Transport reaches the upstream on the net/http path; nil means a keep-alive transport sized
	// for one upstream.
	Transport http.RoundTripper
	// Replica, when set, names this proxy replica (its pod) in the reports Serve writes to Redis of
	// the config it serves or refuses, from which the manager sets the Programmed condition.
	Replica string
}

// Proxy is the admission proxy's gate: it decides every request (a route, a visitor, a pass; enter,
// status and the proxy's other endpoints) and says how a request it lets through goes upstream. The
// transports, the fast front (transport_fast.go) and net/http (transport_std.go), only carry bytes.
// A Proxy is an http.Handler, for programs that embed the gate.
type Proxy struct {
	cfg     atomic.Pointer[Config]
	queue   string // namespace/name
	q       Engine
	plans   *queue.PlanCache
	rp      *httputil.ReverseProxy
	metrics *metrics
	log     logr.Logger
	now     func() time.Time
	rand    capacity.Rand

	redisDown atomic.Bool
	draining  atomic.Bool
	// redisRetryAt is when, after a failed Redis call, visitor calls try Redis again (UnixNano).
	redisRetryAt atomic.Int64
	state        configState
	sessions     *sessions
	workload     *workloadMeter
	polls        pollStretches
	far          *farPositions
	// verifier calls an external challenge's provider.
	verifier *http.Client
}

// NewProxy serves cfg's queue, stored in store.
func NewProxy(cfg *Config, store *queue.Store, opts Options) (*Proxy, error) {
	p, err := NewUnconfiguredProxy(cfg.Namespace, cfg.Name, store, opts)
	if err != nil {
		return nil, err
	}
	p.SetConfig(cfg)
	return p, nil
}

// NewUnconfiguredProxy serves the queue namespace/name before it has a valid config: it answers
// healthz, fails readyz and answers everything else 503 until SetConfig, so that a proxy whose
// first config is refused stays up, reports why, and serves as soon as a valid one comes.
func NewUnconfiguredProxy(namespace, name string, store *queue.Store, opts Options) (*Proxy, error) {
	q, err := store.Queue(namespace, name)
	if err != nil {
		return nil, err
	}
	return NewProxyOn(namespace+"/"+name, q, opts), nil
}

// NewProxyOn is an unconfigured proxy of the queue named queueName (namespace/name) on engine.
func NewProxyOn(queueName string, engine Engine, opts Options) *Proxy {
	p := &Proxy{queue: queueName, q: engine, plans: queue.NewPlanCache(engine, planTTL), metrics: newMetrics(), log: opts.Log, now: opts.Now, rand: opts.Rand,
		sessions: newSessions(), workload: newWorkloadMeter(), far: newFarPositions(), verifier: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute}}}
	p.state.init(opts.Replica)
	if p.now == nil {
		p.now = time.Now
	}
	if p.rand == nil {
		p.rand = globalRand{}
	}
	p.rp = newReverseProxy(p, opts.Transport)
	return p
}

type globalRand struct{}

func (globalRand) Float64() float64 { return rand.Float64() }

// SetConfig applies a changed config to the requests that start after it.
func (p *Proxy) SetConfig(cfg *Config) {
	if cfg.PageProblem != nil {
		p.log.Error(cfg.PageProblem, "Serving the built-in waiting page in place of the queue's template")
	}
	p.cfg.Store(cfg)
	p.state.applied(cfg.Generation)
	p.metrics.configGeneration.Set(float64(cfg.Generation))
	p.metrics.configRefused.Set(0)
}

// RefuseConfig records that generation of the WaitingQueue could not be applied, and why; the
// config in force stays. The refusal is logged, counted, and reported to the manager (see Replica).
func (p *Proxy) RefuseConfig(generation int64, err error) {
	if p.state.refused(generation, err.Error()) {
		p.log.Error(err, "Refusing a WaitingQueue generation that does not make a valid config; keeping the config in force",
			"generation", generation, "serving", p.state.report().Generation)
		p.metrics.configRefusals.Inc()
	}
	p.metrics.configRefused.Set(1)
}

// Queue names the queue the proxy serves, as namespace/name.
func (p *Proxy) Queue() string { return p.queue }

// Config returns the config in force; nil before the first valid one.
func (p *Proxy) Config() *Config { return p.cfg.Load() }

// MetricsHandler serves the proxy's Prometheus metrics.
func (p *Proxy) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(p.metrics.registry, promhttp.HandlerOpts{})
}

// redisRetryAfterError is how long, after a Redis call failed, enter and status answer 503 at once
// instead of calling: while Redis is away each call would wait out its bound, and the visitors with
// it. The first call after it tries Redis again (and the proxy's own check every second does too).
const redisRetryAfterError = 500 * time.Millisecond

// redisResting says Redis failed a moment ago: enter and status answer 503 without calling it.
func (p *Proxy) redisResting() bool {
	return p.redisDown.Load() && p.now().UnixNano() < p.redisRetryAt.Load()
}

// StartDrain makes readyz fail, so that load balancers stop sending new visitors before shutdown.
func (p *Proxy) StartDrain() { p.draining.Store(true) }

// CheckRedis pings Redis and records whether it answered; FailOpen relies on it.
func (p *Proxy) CheckRedis(ctx context.Context) error {
	err := p.q.Ping(ctx)
	p.redisResult(err)
	return err
}

func (p *Proxy) redisResult(err error) {
	down := err != nil && !errors.Is(err, context.Canceled)
	if down {
		p.redisRetryAt.Store(p.now().Add(redisRetryAfterError).UnixNano())
	}
	if p.redisDown.Swap(down) != down {
		if down {
			p.log.Error(err, "Redis is unreachable")
		} else {
			p.log.Info("Redis is reachable again")
		}
	}
	if down {
		p.metrics.redisUp.Set(0)
	} else {
		p.metrics.redisUp.Set(1)
	}
}

// decision is what the gate decided of a request it lets through, for the transport that carries it,
// with the config it was decided under: the transport forwards as that config says, whatever config
// is in force by the time it forwards.
type decision struct {
	cfg *Config
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
}

// presentedPass is a pass as a request carried it, with what identifies its visitor.
type presentedPass struct {
	token string
	// identity is the identity header's value, or the visitor cookie when the queue has none.
	identity string
}

// gate answers what the proxy answers itself (a bad path, the reserved endpoints, a protected route
// without a valid pass) and otherwise returns how to forward. Both transports decide here.
func (p *Proxy) gate(x exchange, cfg *Config, escapedPath string, fragment bool) (d decision, forward bool) {
	if cfg == nil {
		p.serveUnconfigured(x, escapedPath)
		return d, false
	}
	if strings.EqualFold(x.Method(), http.MethodConnect) {
		// A gateway in front of one workload tunnels nothing.
		p.metrics.requests.WithLabelValues("open", "method_not_allowed").Inc()
		replyJSON(x, http.StatusMethodNotAllowed, errorBody{Error: "method_not_allowed", Message: "CONNECT is not served"})
		return d, false
	}
	if cfg.IdentityHeader != "" && x.HeaderCount(cfg.IdentityHeader) > 1 {
		// Which of two identities a hop behind us would pick is anybody's guess: refuse both.
		p.metrics.requests.WithLabelValues("open", "bad_identity").Inc()
		replyJSON(x, http.StatusBadRequest, errorBody{Error: "bad_identity", Message: "the identity header " + cfg.IdentityHeader + " is repeated", Header: cfg.IdentityHeader})
		return d, false
	}
	canonical, err := route.Normalize(escapedPath)
	// A fragment is no part of a request; where a '#' would end the path is anybody's guess.
	if err != nil || fragment {
		p.replyBadPath(x)
		return d, false
	}
	if isReserved(canonical) {
		p.serveReserved(x, cfg, canonical)
		return d, false
	}
	d = decision{cfg: cfg, canonical: canonical, class: routeClassOf(cfg, x, canonical)}
	if d.class == "protected" {
		if rule := p.bypass(x, cfg, canonical); rule != "" {
			// A bypass lane: no pass, no queue, whatever the mode.
			p.metrics.bypassed.WithLabelValues(rule).Inc()
			d.class = "bypass"
		} else if !p.admit(x, cfg, &d) {
			return d, false
		}
	}
	d.completion = matchesAny(cfg.CompletionRoutes, x.Method(), canonical)
	if !d.hasPass {
		// The workload may end a session on any route (a logout, a thank-you page): keep the pass the
		// request carried, to check it should the answer say so.
		d.presented = presentedOf(x, cfg)
	}
	return d, true
}

// passToken is the pass a request carries: the pass header, else the pass cookie.
func passToken(x exchange) string {
	if token := x.Header(PassHeader); token != "" {
		return token
	}
	return x.Cookie(PassCookie)
}

// presentedOf is the pass x carries and what identifies its visitor, unchecked.
func presentedOf(x exchange, cfg *Config) presentedPass {
	token := passToken(x)
	if token == "" {
		return presentedPass{}
	}
	if cfg.IdentityHeader != "" {
		return presentedPass{token: token, identity: x.Header(cfg.IdentityHeader)}
	}
	return presentedPass{token: token, identity: x.Cookie(VisitorCookie)}
}

// verifyPresented checks a pass kept by the gate as admit would have: for its visitor, at now, not
// released, and issued for the opening in force.
func (p *Proxy) verifyPresented(cfg *Config, pp presentedPass, now time.Time) (pass.Pass, bool) {
	visitor := pp.identity
	if cfg.IdentityHeader == "" {
		visitor, _ = visitorOfCookie(cfg, pp.identity)
	}
	verified, result := p.verifyPass(cfg, pp.token, visitor, now)
	return verified, result == pass.Valid
}

// verifyPass is the one check of a pass: its MAC, its visitor and times, then whether its session
// ended and whether it belongs to the opening in force.
func (p *Proxy) verifyPass(cfg *Config, token, visitor string, now time.Time) (pass.Pass, pass.Result) {
	verified, result := cfg.Signer.Verify(token, visitor, now)
	switch {
	case result != pass.Valid:
	case p.sessions.isRevoked(verified):
		result = pass.Released
	case cfg.fromEarlierOpening(verified):
		result = pass.EarlierOpening
	}
	return verified, result
}

// isWebSocketUpgrade: the Upgrade header asks for WebSocket, the one upgrade the gate honours.
func isWebSocketUpgrade(upgrade string) bool {
	return strings.EqualFold(strings.TrimSpace(upgrade), "websocket")
}

func matchesAny(routes []route.Route, method, canonical string) bool {
	method = strings.ToUpper(method)
	for _, r := range routes {
		if r.Matches(method, canonical) {
			return true
		}
	}
	return false
}

func isReserved(canonical string) bool {
	return canonical == reservedPrefix || strings.HasPrefix(canonical, reservedPrefix+"/")
}

// methodOverrides are the headers through which frameworks let a request act as another method.
var methodOverrides = []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"}

// routeClassOf judges the request as every method it may act as upstream: its own, the one an
// override header or a _method query parameter names, and — for a form body, which may carry a
// _method field the gate does not read — any method. It is protected when a protected route matches
// one of them; overrides then reach the upstream unchanged, judged.
func routeClassOf(cfg *Config, x exchange, canonical string) string {
	if routeClass(cfg, x.Method(), canonical) == "protected" {
		return "protected"
	}
	anyMethod := false
	for _, h := range methodOverrides {
		switch x.HeaderCount(h) {
		case 0:
		case 1:
			if routeClass(cfg, strings.TrimSpace(x.Header(h)), canonical) == "protected" {
				return "protected"
			}
		default:
			anyMethod = true // which one a framework reads is its business: judge them all
		}
	}
	if q := x.RawQuery(); q != "" && containsFold(q, "_method") {
		values, err := url.ParseQuery(q)
		if err != nil {
			anyMethod = true
		}
		for key, vs := range values {
			if strings.EqualFold(key, "_method") {
				for _, v := range vs {
					if routeClass(cfg, v, canonical) == "protected" {
						return "protected"
					}
				}
			}
		}
	}
	if ct := x.Header("Content-Type"); hasPrefixFold(ct, "application/x-www-form-urlencoded") || hasPrefixFold(ct, "multipart/form-data") {
		anyMethod = true
	}
	if anyMethod {
		for _, r := range cfg.Routes {
			if r.MatchesPath(canonical) {
				return "protected"
			}
		}
	}
	return "open"
}

// hasPrefixFold and containsFold compare ASCII without regard to case and without a lower-cased copy:
// they run on every request to an open route.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// routeClass is "protected" when a protected route matches the method and normalised path.
func routeClass(cfg *Config, method, canonical string) string {
	method = strings.ToUpper(method)
	for _, route := range cfg.Routes {
		if route.Matches(method, canonical) {
			return "protected"
		}
	}
	return "open"
}

func (p *Proxy) replyBadPath(x exchange) {
	p.metrics.requests.WithLabelValues("open", "bad_path").Inc()
	replyJSON(x, http.StatusBadRequest, errorBody{Error: "bad_path", Message: "the request path cannot be normalised"})
}

// identify returns the visitor: the trusted header's value, or the ID of a valid visitor cookie. When
// mint is set and the visitor has no cookie yet, it issues one. It is the one place that tells who a
// visitor is, for passes, enter and status alike.
func (p *Proxy) identify(x exchange, cfg *Config, mint bool) (string, bool) {
	if cfg.IdentityHeader != "" {
		v := x.Header(cfg.IdentityHeader)
		return v, v != ""
	}
	if id, ok := visitorOfCookie(cfg, x.Cookie(VisitorCookie)); ok {
		return id, true
	}
	if !mint {
		return "", false
	}
	id, cookie := cfg.Signer.NewVisitorCookie()
	x.SetCookie(&http.Cookie{
		Name: VisitorCookie, Value: cookie, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: x.Secure(), MaxAge: int(visitorMaxAge / time.Second),
	})
	return id, true
}

// visitorOfCookie is the visitor a visitor cookie names, when the cookie is one this queue signed.
func visitorOfCookie(cfg *Config, cookie string) (string, bool) {
	if cookie == "" || len(cookie) > maxCookieValue {
		return "", false
	}
	return cfg.Signer.VerifyVisitorCookie(cookie)
}

// admit decides whether a request to a protected route may pass, and answers it when not. A valid
// pass goes into d.
func (p *Proxy) admit(x exchange, cfg *Config, d *decision) bool {
	canonical := d.canonical
	switch cfg.Mode {
	case herdgatev1alpha1.ModePassthrough:
		p.metrics.requests.WithLabelValues("protected", "passthrough").Inc()
		return true
	case herdgatev1alpha1.ModeClosed:
		if isBrowserPage(x) {
			p.redirectToPage(x, canonical, "closed")
		} else {
			p.replyClosed(x, cfg, "protected")
		}
		return false
	}
	visitor, _ := p.identify(x, cfg, false)
	if cfg.IdentityHeader != "" && queue.ValidateVisitorID(visitor) != nil {
		p.metrics.requests.WithLabelValues("protected", "identity_required").Inc()
		replyJSON(x, http.StatusUnauthorized, errorBody{Error: "identity_required", Header: cfg.IdentityHeader})
		return false
	}
	token := passToken(x)
	now := p.now()
	verified, result := p.verifyPass(cfg, token, visitor, now)
	p.metrics.verified(result)
	if result == pass.Valid {
		d.pass, d.hasPass = verified, true
		p.workload.used(verified, now)
		if cfg.Sliding {
			p.slide(x, cfg, verified, now)
		}
		return true
	}
	if cfg.FailurePolicy == herdgatev1alpha1.FailOpen && p.redisDown.Load() && cfg.phaseAt(now) == queue.PhaseOpen {
		// Never before the schedule opens the room, nor after it closes.
		p.metrics.failOpen.Inc()
		p.log.V(1).Info("Redis is unreachable: letting a protected request through (FailOpen)", "path", canonical)
		return true
	}
	x.SetHeader("X-Herdgate-Pass-Result", string(result))
	r := p.room(x.Context(), cfg)
	browser := isBrowserPage(x)
	switch {
	case r.beforeOpening():
		if browser {
			p.redirectToPage(x, canonical, "not_open")
		} else {
			p.replyNotOpen(x, cfg, r, "protected")
		}
		return false
	case r.phase == queue.PhaseClosed && !browser:
		p.replyScheduleClosed(x, cfg, "protected")
		return false
	case browser:
		// A browser goes to the waiting page, which shows its place, the opening or the closed room.
		if r.phase == queue.PhaseOpen && r.known && p.admitAtOnce(x, cfg, r) {
			return true
		}
		p.redirectToPage(x, canonical, "redirected")
		return false
	}
	p.metrics.requests.WithLabelValues("protected", "pass_required").Inc()
	replyJSON(x, http.StatusForbidden, errorBody{Error: "pass_required", Enter: reservedPrefix + "/enter"})
	return false
}

// slide extends a Sliding pass that has used half its time: to ttl from now, up to maxSession after
// its not-before time. The visitor gets the new pass as a cookie and in the pass header of the
// response; its slot in Redis follows at the next sync.
func (p *Proxy) slide(x exchange, cfg *Config, verified pass.Pass, now time.Time) {
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
	x.SetHeader(PassHeader, p.setPassCookie(x, cfg, verified.Visitor, pos))
	p.sessions.renew(verified, expiry)
}

// admitAtOnce enters a browser that asks for a protected page without a pass. While nobody waits and
// the tick's budget has room, the queue admits it at once: it goes on to the page with its pass and
// never sees the waiting page. Otherwise it holds a place, which the waiting page then shows.
func (p *Proxy) admitAtOnce(x exchange, cfg *Config, r room) bool {
	visitor, ok := p.identify(x, cfg, true)
	if !ok || queue.ValidateVisitorID(visitor) != nil {
		return false
	}
	pos, err := p.q.EnterFrom(x.Context(), visitor, r.abandonAfter, p.entryLimit(x, cfg))
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			p.redisResult(err)
		}
		return false
	}
	p.redisResult(nil)
	if pos.State != queue.Admitted || pos.Pass.NotBefore.After(pos.Now) {
		return false
	}
	p.setPassCookie(x, cfg, visitor, pos)
	p.metrics.requests.WithLabelValues("protected", "admitted_at_once").Inc()
	return true
}

// isBrowserPage: a GET or HEAD that asks for HTML, which a browser sends to show a page.
func isBrowserPage(x exchange) bool {
	method := strings.ToUpper(x.Method())
	return (method == http.MethodGet || method == http.MethodHead) && strings.Contains(x.Header("Accept"), "text/html")
}

// redirectToPage sends a browser to the waiting page, which brings it back to canonical.
func (p *Proxy) redirectToPage(x exchange, canonical, outcome string) {
	target := canonical
	if q := x.RawQuery(); q != "" {
		target += "?" + q
	}
	p.metrics.requests.WithLabelValues("protected", outcome).Inc()
	replyRedirect(x, reservedPrefix+"/?return="+url.QueryEscape(target))
}

func (p *Proxy) upstreamFailed(x exchange, err error, d decision) {
	if errors.Is(err, context.Canceled) {
		return // the visitor went away
	}
	if errors.Is(err, errVisitorBody) {
		// The visitor's own body was malformed (a bad chunk): its fault, not the upstream's.
		p.metrics.requests.WithLabelValues("open", "bad_body").Inc()
		replyJSON(x, http.StatusBadRequest, errorBody{Error: "bad_request", Message: "the request body is malformed"})
		return
	}
	kind, message := upstreamErrorKind(err)
	p.log.Error(err, "Forwarding upstream failed", "path", d.canonical, "kind", kind)
	p.metrics.requests.WithLabelValues(d.class, "upstream_error").Inc()
	p.metrics.upstreamErrors.WithLabelValues(d.class, kind).Inc()
	replyJSON(x, http.StatusBadGateway, errorBody{Error: "upstream_unavailable", Message: message})
}

// upstreamFault tells whether the upstream failed a request: it gave no answer (but for the visitor
// going away or sending a malformed body), or a 5xx.
func upstreamFault(err error, status int) bool {
	if err != nil {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, errVisitorBody)
	}
	return status >= 500
}

// upstreamErrorKind names how forwarding failed, for the metrics and the visitor (without the
// upstream's address).
func upstreamErrorKind(err error) (kind, message string) {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused", "the upstream refused the connection"
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return "timeout", "the upstream did not answer in time"
	case errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return "closed", "the upstream closed the connection before answering"
	}
	return "other", "the upstream could not be reached"
}

// errVisitorBody marks an error reading the visitor's request body while it went upstream.
var errVisitorBody = errors.New("reading the request body")

// visitorBody reads a visitor's body on its way upstream and keeps what went wrong reading it, so
// that a malformed body is answered 400 rather than taken for an upstream failure.
type visitorBody struct {
	r   io.Reader
	err error
}

func (b *visitorBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.err = fmt.Errorf("%w: %w", errVisitorBody, err)
		return n, b.err
	}
	return n, err
}

// errorBody is the JSON of every error answer.
type errorBody struct {
	Error        string `json:"error"`
	Message      string `json:"message,omitempty"`
	Enter        string `json:"enter,omitempty"`
	Header       string `json:"header,omitempty"`
	RetryAfterMs int64  `json:"retryAfterMs,omitempty"`
	Phase        string `json:"phase,omitempty"`
	Position     int64  `json:"position,omitempty"`
	QueueDepth   int64  `json:"queueDepth,omitempty"`
}
