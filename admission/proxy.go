package admission

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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

// Options tune a Proxy.
type Options struct {
	Log logr.Logger
	// Now is the proxy's clock; nil means time.Now.
	Now func() time.Time
	// Rand spreads poll hints; nil means math/rand/v2.
	Rand capacity.Rand
	// Transport reaches the upstream; nil means a keep-alive transport sized for one upstream.
	Transport http.RoundTripper
	// Replica, when set, names this proxy replica (its pod) in the reports Serve writes to Redis of
	// the config it serves or refuses, from which the manager sets the Programmed condition.
	Replica string
}

// Proxy is the admission proxy's HTTP handler.
type Proxy struct {
	cfg     atomic.Pointer[Config]
	q       *queue.Queue
	plans   *queue.PlanCache
	rp      *httputil.ReverseProxy
	metrics *metrics
	log     logr.Logger
	now     func() time.Time
	rand    capacity.Rand

	redisDown atomic.Bool
	draining  atomic.Bool
	state     configState
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
	p := &Proxy{q: q, plans: queue.NewPlanCache(q, planTTL), metrics: newMetrics(), log: opts.Log, now: opts.Now, rand: opts.Rand}
	p.state.init(opts.Replica)
	if p.now == nil {
		p.now = time.Now
	}
	if p.rand == nil {
		p.rand = globalRand{}
	}
	transport := opts.Transport
	if transport == nil {
		transport = NewUpstreamTransport()
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:      p.rewrite,
		Transport:    transport,
		BufferPool:   bufferPool{},
		ErrorHandler: p.upstreamError,
	}
	return p, nil
}

type globalRand struct{}

func (globalRand) Float64() float64 { return rand.Float64() }

// NewUpstreamTransport is the one keep-alive transport the proxy shares for its upstream: many idle
// connections to one host, no proxy from the environment, bounded dial and handshake times.
func NewUpstreamTransport() *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
	}
}

// bufferPool lends the reverse proxy its copy buffers.
type bufferPool struct{}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *(copyBuffers.Get().(*[]byte)) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }

// SetConfig applies a changed config to the requests that start after it.
func (p *Proxy) SetConfig(cfg *Config) {
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
func (p *Proxy) Queue() string { return p.q.Namespace() + "/" + p.q.Name() }

// Config returns the config in force; nil before the first valid one.
func (p *Proxy) Config() *Config { return p.cfg.Load() }

// MetricsHandler serves the proxy's Prometheus metrics.
func (p *Proxy) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(p.metrics.registry, promhttp.HandlerOpts{})
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

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, class, ok := p.gate(stdExchange{w, r}, p.cfg.Load(), r.URL.EscapedPath(), strings.IndexByte(r.RequestURI, '#') >= 0)
	if !ok {
		return
	}
	start := time.Now()
	p.rp.ServeHTTP(w, r)
	p.metrics.forwarded(class, time.Since(start))
}

// gate answers what the proxy answers itself (a bad path, the reserved endpoints, a protected route
// without a valid pass) and otherwise returns the normalised path and route class to forward with.
// Both fronts decide here.
func (p *Proxy) gate(x exchange, cfg *Config, escapedPath string, fragment bool) (canonical, class string, forward bool) {
	if cfg == nil {
		p.serveUnconfigured(x, escapedPath)
		return "", "", false
	}
	canonical, err := route.Normalize(escapedPath)
	// A fragment is no part of a request; where a '#' would end the path is anybody's guess.
	if err != nil || fragment {
		p.replyBadPath(x)
		return "", "", false
	}
	if isReserved(canonical) {
		p.serveReserved(x, cfg, canonical)
		return "", "", false
	}
	class = routeClass(cfg, x.Method(), canonical)
	if class == "protected" && !p.admit(x, cfg, canonical) {
		return "", "", false
	}
	return canonical, class, true
}

func isReserved(canonical string) bool {
	return canonical == reservedPrefix || strings.HasPrefix(canonical, reservedPrefix+"/")
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

// admit decides whether a request to a protected route may pass, and answers it when not.
func (p *Proxy) admit(x exchange, cfg *Config, canonical string) bool {
	visitor := ""
	if cfg.IdentityHeader != "" {
		visitor = x.Header(cfg.IdentityHeader)
		if queue.ValidateVisitorID(visitor) != nil {
			p.metrics.requests.WithLabelValues("protected", "identity_required").Inc()
			replyJSON(x, http.StatusUnauthorized, errorBody{Error: "identity_required", Header: cfg.IdentityHeader})
			return false
		}
	} else if c := x.Cookie(VisitorCookie); c != "" && len(c) <= maxCookieValue {
		visitor, _ = cfg.Signer.VerifyVisitorCookie(c)
	}
	token := x.Header(PassHeader)
	if token == "" {
		token = x.Cookie(PassCookie)
	}
	_, result := cfg.Signer.Verify(token, visitor, p.now())
	p.metrics.verified(result)
	if result == PassValid {
		return true
	}
	if cfg.FailurePolicy == herdgatev1alpha1.FailOpen && p.redisDown.Load() {
		p.metrics.failOpen.Inc()
		p.log.V(1).Info("Redis is unreachable: letting a protected request through (FailOpen)", "path", canonical)
		return true
	}
	x.SetHeader("X-Herdgate-Pass-Result", string(result))
	if method := strings.ToUpper(x.Method()); (method == http.MethodGet || method == http.MethodHead) && strings.Contains(x.Header("Accept"), "text/html") {
		target := canonical
		if q := x.RawQuery(); q != "" {
			target += "?" + q
		}
		p.metrics.requests.WithLabelValues("protected", "redirected").Inc()
		replyRedirect(x, reservedPrefix+"/?return="+url.QueryEscape(target))
		return false
	}
	p.metrics.requests.WithLabelValues("protected", "pass_required").Inc()
	replyJSON(x, http.StatusForbidden, errorBody{Error: "pass_required", Enter: reservedPrefix + "/enter"})
	return false
}

// rewrite sends the request upstream with the path and method it was matched with, the forwarding
// headers set, and the herdgate cookies and pass header removed. ServeHTTP already normalised the
// path successfully; normalising again here is the allocation-free fast path for most requests.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	upstream := p.cfg.Load().Upstream
	canonical, _ := route.Normalize(pr.In.URL.EscapedPath())
	pr.SetURL(upstream)
	pr.Out.URL.Path = strings.TrimSuffix(upstream.Path, "/") + canonical
	pr.Out.URL.RawPath = ""
	if escaped := route.Escape(pr.Out.URL.Path); escaped != pr.Out.URL.Path {
		pr.Out.URL.RawPath = escaped
	}
	pr.Out.Method = strings.ToUpper(pr.In.Method)
	pr.SetXForwarded()
	pr.Out.Header.Del(PassHeader)
	stripHerdgateCookies(pr.Out.Header)
}

func stripHerdgateCookies(h http.Header) {
	lines := h.Values("Cookie")
	if len(lines) == 0 {
		return
	}
	found := false
	for _, l := range lines {
		found = found || strings.Contains(l, "herdgate_")
	}
	if !found {
		return
	}
	var kept []string
	for _, l := range lines {
		for _, part := range strings.Split(l, ";") {
			if name, _, _ := strings.Cut(strings.TrimSpace(part), "="); name != PassCookie && name != VisitorCookie && strings.TrimSpace(part) != "" {
				kept = append(kept, strings.TrimSpace(part))
			}
		}
	}
	h.Del("Cookie")
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}

func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	p.upstreamFailed(stdExchange{w, r}, err, r.URL.Path)
}

func (p *Proxy) upstreamFailed(x exchange, err error, path string) {
	if errors.Is(err, context.Canceled) {
		return // the visitor went away
	}
	p.log.Error(err, "Forwarding upstream failed", "path", path)
	p.metrics.requests.WithLabelValues("open", "upstream_error").Inc()
	replyJSON(x, http.StatusBadGateway, errorBody{Error: "upstream_unavailable"})
}

// errorBody is the JSON of every error answer.
type errorBody struct {
	Error        string `json:"error"`
	Message      string `json:"message,omitempty"`
	Enter        string `json:"enter,omitempty"`
	Header       string `json:"header,omitempty"`
	RetryAfterMs int64  `json:"retryAfterMs,omitempty"`
	Position     int64  `json:"position,omitempty"`
	QueueDepth   int64  `json:"queueDepth,omitempty"`
}
