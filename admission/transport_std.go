package admission

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The net/http transport: the Proxy as an http.Handler. The fast front hands it the connections
// that ask for a protocol upgrade (WebSocket), and programs that embed the gate serve it directly.

// NetHTTPServer is the net/http server for p, with the front's limits: the one that takes over
// upgraded connections, and the one to use when serving p as an http.Handler on its own.
func NetHTTPServer(p *Proxy, errorLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		// net/http allows 4 KiB on top of this, for the request line.
		MaxHeaderBytes: MaxHeaderBytes - 4<<10,
		ErrorLog:       errorLog,
	}
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.draining.Load() {
		w.Header().Set("Connection", "close") // as the fast front does while draining
	}
	if !isWebSocketUpgrade(r.Header.Get("Upgrade")) {
		// Only WebSocket upgrades are honoured: any other (h2c, ...) goes on as a plain request.
		r.Header.Del("Upgrade")
		r.Header.Del("HTTP2-Settings")
	}
	d, ok := p.gate(stdExchange{w, r}, p.cfg.Load(), r.URL.EscapedPath(), strings.IndexByte(r.RequestURI, '#') >= 0)
	if !ok {
		return
	}
	start := time.Now()
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = readCloser{&visitorBody{r: r.Body}, r.Body}
	}
	waiting := &upstreamWait{gauge: p.metrics.upstreamGauge(d.class)}
	waiting.gauge.Inc()
	if d.class == "protected" {
		waiting.meter = p.workload
		waiting.began = waiting.meter.begin()
	}
	ctx := context.WithValue(context.WithValue(r.Context(), decisionKey{}, d), waitKey{}, waiting)
	p.rp.ServeHTTP(w, r.WithContext(ctx))
	waiting.answered(false) // in case neither the response nor the error handler said so
	p.metrics.forwarded(d.class, time.Since(start))
}

// decisionKey carries the gate's decision from ServeHTTP to the upstream's response.
type decisionKey struct{}

// waitKey carries a request's upstreamWait: it is in flight until the upstream's response headers
// (or its failure), as on the fast front, not for as long as an upgraded connection lasts.
type waitKey struct{}

type upstreamWait struct {
	gauge prometheus.Gauge
	// meter, for a protected request, measures it for the workload report from began.
	meter *workloadMeter
	began time.Time
	done  atomic.Bool
}

// answered ends the wait once; failed says whether the upstream failed the request.
func (u *upstreamWait) answered(failed bool) {
	if u != nil && !u.done.Swap(true) {
		u.gauge.Dec()
		if u.meter != nil {
			u.meter.end(u.began, failed)
		}
	}
}

func waitOf(r *http.Request) *upstreamWait {
	u, _ := r.Context().Value(waitKey{}).(*upstreamWait)
	return u
}

// modifyResponse strips the release header from the upstream's answer and ends the session it asks
// to end.
func (p *Proxy) modifyResponse(res *http.Response) error {
	waitOf(res.Request).answered(res.StatusCode >= 500)
	release := res.Header.Get(ReleaseHeader)
	res.Header.Del(ReleaseHeader)
	if d, ok := res.Request.Context().Value(decisionKey{}).(decision); ok {
		p.metrics.answered(d.class, res.StatusCode)
		p.afterUpstream(d, res.StatusCode, release)
	}
	return nil
}

func newReverseProxy(p *Proxy, transport http.RoundTripper) *httputil.ReverseProxy {
	if transport == nil {
		transport = NewUpstreamTransport()
	}
	return &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		ModifyResponse: p.modifyResponse,
		Transport:      transport,
		BufferPool:     bufferPool{},
		ErrorHandler:   p.upstreamError,
	}
}

// rewrite applies the forwarding policy to the outbound request; the reverse proxy has removed the
// hop-by-hop headers already (keeping those of a protocol upgrade). It forwards as the gate decided,
// under the config the gate decided with: a config swapped in meanwhile never sends a request judged
// under another to its upstream.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	d, _ := pr.In.Context().Value(decisionKey{}).(decision)
	cfg := d.cfg
	f := forwardingOf(cfg, inbound{
		method: pr.In.Method, canonical: d.canonical, rawQuery: pr.In.URL.RawQuery, host: pr.In.Host,
		clientIP: forwardedClient(stdExchange{nil, pr.In}, cfg), tls: pr.In.TLS != nil,
	})
	pr.Out.Method = f.Method
	pr.Out.URL = f.URL()
	pr.Out.Host = f.Host
	// ReverseProxy keeps "TE: trailers" for gRPC; the fast front drops TE with the other hop-by-hop
	// headers, and so does this one.
	pr.Out.Header.Del("Te")
	f.apply(stdHeader(pr.Out.Header))
}

// stdHeader is a net/http request header as the forwarding policy changes it.
type stdHeader http.Header

func (h stdHeader) Set(name, value string) { http.Header(h).Set(name, value) }
func (h stdHeader) Del(name string)        { http.Header(h).Del(name) }

func (h stdHeader) DelMatching(own func(name []byte) bool) {
	for name := range h {
		if own([]byte(name)) {
			delete(h, name)
		}
	}
}

func (h stdHeader) DelCookiesMatching(own func(name []byte) bool) {
	lines := http.Header(h).Values("Cookie")
	found := false
	for _, l := range lines {
		for part := range strings.SplitSeq(l, ";") {
			found = found || own([]byte(cookieName(part)))
		}
	}
	if !found {
		return
	}
	var kept []string
	for _, l := range lines {
		for part := range strings.SplitSeq(l, ";") {
			part = strings.TrimSpace(part)
			if part != "" && !own([]byte(cookieName(part))) {
				kept = append(kept, part)
			}
		}
	}
	http.Header(h).Del("Cookie")
	if len(kept) > 0 {
		http.Header(h).Set("Cookie", strings.Join(kept, "; "))
	}
}

type readCloser struct {
	io.Reader
	io.Closer
}

func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	waitOf(r).answered(upstreamFault(err, 0))
	d, _ := r.Context().Value(decisionKey{}).(decision)
	if d.class == "" {
		d.class = "open"
	}
	p.upstreamFailed(stdExchange{w, r}, err, d)
}

// NewUpstreamTransport is the one keep-alive transport the proxy shares for its upstream: many idle
// connections to one host, no proxy from the environment, bounded dial and handshake times.
func NewUpstreamTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		// The upstream gets the visitor's Accept-Encoding, or none: the transport adds no gzip of its own.
		DisableCompression:    true,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
	}
}

// bufferPool lends the reverse proxy its copy buffers.
type bufferPool struct{}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *(copyBuffers.Get().(*[]byte)) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }

// stdExchange is an exchange of the net/http server.
type stdExchange struct {
	w http.ResponseWriter
	r *http.Request
}

func (x stdExchange) Context() context.Context          { return x.r.Context() }
func (x stdExchange) Method() string                    { return x.r.Method }
func (x stdExchange) Header(name string) string         { return x.r.Header.Get(name) }
func (x stdExchange) HeaderCount(name string) int       { return len(x.r.Header.Values(name)) }
func (x stdExchange) HeaderValues(name string) []string { return x.r.Header.Values(name) }
func (x stdExchange) RemoteAddr() netip.Addr {
	ap, err := netip.ParseAddrPort(x.r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
func (x stdExchange) RawQuery() string         { return x.r.URL.RawQuery }
func (x stdExchange) SetHeader(name, v string) { x.w.Header().Set(name, v) }
func (x stdExchange) SetCookie(c *http.Cookie) { http.SetCookie(x.w, c) }

func (x stdExchange) Cookie(name string) string {
	if c, err := x.r.Cookie(name); err == nil {
		return c.Value
	}
	return ""
}

func (x stdExchange) Secure() bool {
	return x.r.TLS != nil || x.r.Header.Get("X-Forwarded-Proto") == "https"
}

func (x stdExchange) Reply(status int, contentType string, body []byte) {
	x.w.Header().Set("Content-Type", contentType)
	x.w.WriteHeader(status)
	_, _ = x.w.Write(body)
}

// handedConn is a connection handed to the net/http server: the request fasthttp read comes first.
type handedConn struct {
	net.Conn
	r io.Reader
}

func (c *handedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// handoverListener is what the net/http server accepts from: the connections handed over.
type handoverListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
	addr      net.Addr
}

func newHandoverListener() *handoverListener {
	return &handoverListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *handoverListener) hand(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *handoverListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoverListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *handoverListener) Addr() net.Addr {
	if l.addr == nil {
		return &net.TCPAddr{}
	}
	return l.addr
}
