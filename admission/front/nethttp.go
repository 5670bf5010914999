package front

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
	"time"

	"github.com/herdgate/herdgate/admission"
)

// NewNetHTTPServer is a net/http server for h with the fast front's limits: the one that takes over
// upgraded connections, and the one to serve a NetHTTP front on its own.
func NewNetHTTPServer(h http.Handler, errorLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		// net/http allows 4 KiB on top of this, for the request line.
		MaxHeaderBytes: MaxHeaderBytes - 4<<10,
		ErrorLog:       errorLog,
	}
}

// NetHTTP is the net/http front: an http.Handler that decides through the gate and forwards with
// net/http's reverse proxy. It carries the connections the fast front hands over for a protocol
// upgrade (WebSocket), and serves programs that embed the gate in a net/http server (which then run
// Room.Run beside it).
type NetHTTP struct {
	rooms admission.Rooms
	rp    *httputil.ReverseProxy
}

// NetHTTPOptions tune a NetHTTP front.
type NetHTTPOptions struct {
	// UpstreamTransport reaches the upstream; nil means NewUpstreamTransport.
	UpstreamTransport http.RoundTripper
}

// NewNetHTTP is the net/http front of rooms: one Room, or a shared set's.
func NewNetHTTP(rooms admission.Rooms, o NetHTTPOptions) *NetHTTP {
	h := &NetHTTP{rooms: rooms}
	transport := o.UpstreamTransport
	if transport == nil {
		transport = NewUpstreamTransport()
	}
	h.rp = &httputil.ReverseProxy{
		Rewrite:        rewrite,
		ModifyResponse: modifyResponse,
		Transport:      transport,
		BufferPool:     bufferPool{},
		ErrorHandler:   upstreamFailed,
	}
	return h
}

func (h *NetHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.rooms.Draining() {
		w.Header().Set("Connection", "close") // as the fast front does while draining
	}
	room := h.rooms.Room([]byte(r.Host), []byte(r.Method), []byte(r.RequestURI))
	if room == nil {
		admission.AnswerUnrouted(h.rooms, r.URL.EscapedPath()).WriteTo(stdExchange{w, r})
		return
	}
	target := r.RequestURI
	if !strings.HasPrefix(target, "/") {
		target = r.URL.RequestURI() // an absolute target: its path and query
	}
	if isCheck([]byte(target)) {
		check(room, stdExchange{w, r}, checkTarget([]byte(target)))
		return
	}
	if !isWebSocketUpgrade(r.Header.Get("Upgrade")) {
		// Only WebSocket upgrades are honoured: any other (h2c, ...) goes on as a plain request.
		r.Header.Del("Upgrade")
		r.Header.Del("HTTP2-Settings")
	}
	d := room.Decide(stdExchange{w, r}, r.URL.EscapedPath(), strings.IndexByte(r.RequestURI, '#') >= 0)
	switch d.Verdict() {
	case admission.Reserved:
		room.AnswerReserved(stdExchange{w, r}, d).WriteTo(stdExchange{w, r})
		return
	case admission.Answer:
		writeReply(stdExchange{w, r}, d.Reply())
		return
	}
	// What the gate adds to the upstream's answer (a pass issued at once or extended) goes out with
	// it: the reverse proxy adds the upstream's headers to these.
	gate := d.Reply()
	for name, values := range gate.Header {
		w.Header()[name] = values
	}
	for _, c := range gate.Cookies {
		http.SetCookie(w, c)
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = readCloser{&visitorBody{r: r.Body}, r.Body}
	}
	// The call is in flight until the upstream's response headers (or its failure), as on the fast
	// front, not for as long as an upgraded connection lasts.
	call := room.BeginUpstream(d)
	defer call.End() // in case neither the response nor the error handler said so
	h.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), forwardKey{}, forward{d, call})))
}

// forwardKey carries a request's forward from ServeHTTP to the reverse proxy's hooks.
type forwardKey struct{}

// forward is what the gate decided of a request and its call to the upstream.
type forward struct {
	d    admission.Decision
	call *admission.UpstreamCall
}

func forwardOf(r *http.Request) forward {
	f, _ := r.Context().Value(forwardKey{}).(forward)
	return f
}

// modifyResponse strips the release header from the upstream's answer and reports the answer.
func modifyResponse(res *http.Response) error {
	release := res.Header.Get(admission.ReleaseHeader)
	res.Header.Del(admission.ReleaseHeader)
	forwardOf(res.Request).call.Answered(res.StatusCode, release)
	return nil
}

// rewrite applies the forwarding policy to the outbound request; the reverse proxy has removed the
// hop-by-hop headers already (keeping those of a protocol upgrade). It forwards as the gate decided,
// under the config the gate decided with: a config swapped in meanwhile never sends a request judged
// under another to its upstream.
func rewrite(pr *httputil.ProxyRequest) {
	f := forwardOf(pr.In).d.Forwarding(stdExchange{nil, pr.In}, admission.Inbound{
		Method: pr.In.Method, RawQuery: pr.In.URL.RawQuery, Host: pr.In.Host, TLS: pr.In.TLS != nil,
	})
	pr.Out.Method = f.Method
	pr.Out.URL = f.URL()
	pr.Out.Host = f.Host
	// ReverseProxy keeps "TE: trailers" for gRPC; the fast front drops TE with the other hop-by-hop
	// headers, and so does this one.
	pr.Out.Header.Del("Te")
	f.Apply(stdHeader(pr.Out.Header))
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

// upstreamFailed answers a request the upstream did not answer.
func upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	forwardOf(r).call.Failed(err).WriteTo(stdExchange{w, r})
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
func (x stdExchange) Host() string             { return x.r.Host }
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
