package front

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/herdgate/herdgate/admission"
)

// streamedBodyFrom: a request body longer than this no longer falls under the read timeout.
const streamedBodyFrom = 64 << 10

// escalatedBodyLimit bounds the body of a request handed to the net/http handler (upgrade requests
// only, which rarely carry one); it is held in memory while the connection changes hands.
const escalatedBodyLimit = 1 << 20

// Fast is the proxy's visitor-facing HTTP/1.1 server, the front herdgate-proxy serves. It carries
// requests to the gate and what the gate lets through to the upstream on fasthttp, whose per-request
// cost is a fraction of net/http's (the gate sits in every request of the workload). A connection that asks for a protocol upgrade
// (WebSocket) is handed over, with the request already read, to a net/http server running the same
// Room, which stays in charge of it until it closes.
type Fast struct {
	rooms  admission.Rooms
	server *fasthttp.Server
	// escalated serves the connections handed over; it accepts from handover.
	escalated *http.Server
	handover  *handoverListener

	// upstream is the client used last; upstreams holds a *fasthttp.HostClient per upstream scheme
	// and host.
	upstream  atomic.Pointer[upstreamClient]
	upstreams sync.Map
}

// FastOptions tune a Fast front.
type FastOptions struct {
	// ErrorLog receives the servers' own errors (malformed requests, failed handovers).
	ErrorLog *log.Logger
	// HeaderTimeout bounds the wait for a request's headers; 10 s when zero.
	HeaderTimeout time.Duration
	// UpstreamTransport reaches the upstream for the upgraded connections the net/http front
	// carries; nil means NewUpstreamTransport.
	UpstreamTransport http.RoundTripper
}

// NewFast is the visitor-facing server of rooms: one Room, or a shared set's.
func NewFast(rooms admission.Rooms, o FastOptions) *Fast {
	f := &Fast{rooms: rooms, handover: newHandoverListener()}
	f.server = &fasthttp.Server{
		Handler:                      f.serve,
		ErrorHandler:                 f.badRequest,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		ReadBufferSize:               MaxHeaderBytes,
		ReadTimeout:                  cmp.Or(o.HeaderTimeout, 10*time.Second), // to the end of the headers; lifted for bodies
		IdleTimeout:                  120 * time.Second,
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		KeepHijackedConns:            true,
		CloseOnShutdown:              true,
		Logger:                       fasthttpLogger{o.ErrorLog},
	}
	// A request that asks to send its body only once it may is judged before the 100 Continue: a
	// refused one gets its refusal instead, and its body is never read.
	f.server.ExpectHandler = f.expect
	f.escalated = NewNetHTTPServer(NewNetHTTP(rooms, NetHTTPOptions{UpstreamTransport: o.UpstreamTransport}), o.ErrorLog)
	return f
}

// Serve answers visitors on ln until Shutdown.
func (f *Fast) Serve(ln net.Listener) error {
	f.handover.addr = ln.Addr()
	escalatedDone := make(chan error, 1)
	go func() { escalatedDone <- f.escalated.Serve(f.handover) }()
	err := f.server.Serve(ln)
	// Nothing can be handed over once the front has stopped; net/http keeps the connections it
	// already holds until Shutdown or their end.
	_ = f.handover.Close()
	if escalatedErr := <-escalatedDone; err == nil && !errors.Is(escalatedErr, http.ErrServerClosed) && !errors.Is(escalatedErr, net.ErrClosed) {
		err = escalatedErr
	}
	if err == nil {
		return http.ErrServerClosed // as net/http says it, so callers need to know one server only
	}
	return err
}

// Shutdown stops accepting and waits, until ctx ends, for the requests in flight on both servers.
func (f *Fast) Shutdown(ctx context.Context) error {
	return errors.Join(f.server.ShutdownWithContext(ctx), f.escalated.Shutdown(ctx))
}

// decidedKey holds, on a request judged before its 100 Continue, the gate's decision, so that the
// handler carries it on instead of judging the request again.
const decidedKey = "herdgate.decided"

func (f *Fast) expect(ctx *fasthttp.RequestCtx) int {
	room := f.rooms.Room(ctx.Host(), ctx.Method(), ctx.Request.Header.RequestURI())
	if room == nil || !validHeaderNames(&ctx.Request.Header) || len(ctx.Request.Header.Peek("Upgrade")) > 0 ||
		isCheck(ctx.Request.Header.RequestURI()) {
		return fasthttp.StatusContinue // the handler refuses, hands over or checks as for any request
	}
	d := f.decide(ctx, room)
	if d.Verdict() == admission.Answer {
		writeReply(fastExchange{ctx}, d.Reply())
		return ctx.Response.StatusCode() // the body stays unread
	}
	ctx.SetUserValue(decidedKey, decided{room, d})
	return fasthttp.StatusContinue
}

// decided is a request's room and the gate's decision, made before its 100 Continue.
type decided struct {
	room *admission.Room
	d    admission.Decision
}

// decide asks the gate of the request's room about it.
func (f *Fast) decide(ctx *fasthttp.RequestCtx, room *admission.Room) admission.Decision {
	target := ctx.Request.Header.RequestURI()
	return room.Decide(fastExchange{ctx}, requestPath(target), bytes.IndexByte(target, '#') >= 0)
}

func (f *Fast) serve(ctx *fasthttp.RequestCtx) {
	defer f.recoverPanic(ctx)
	if f.rooms.Draining() {
		// Clients move to another replica after this answer, before the front stops accepting and
		// closes idle connections (a request sent on one as it closes would fail).
		ctx.SetConnectionClose()
	}
	if !validHeaderNames(&ctx.Request.Header) {
		// fasthttp's parser lets through names the grammar forbids, which net/http refuses.
		ctx.SetConnectionClose()
		admission.ReplyError(fastExchange{ctx}, http.StatusBadRequest, "bad_request", "a header name or line is malformed")
		return
	}
	if pd, ok := ctx.UserValue(decidedKey).(decided); ok {
		f.carry(ctx, pd.room, pd.d)
		return
	}
	room := f.rooms.Room(ctx.Host(), ctx.Method(), ctx.Request.Header.RequestURI())
	if room == nil {
		admission.AnswerUnrouted(f.rooms, requestPath(ctx.Request.Header.RequestURI())).WriteTo(fastExchange{ctx})
		return
	}
	if target := ctx.Request.Header.RequestURI(); isCheck(target) {
		check(room, fastExchange{ctx}, checkTarget(target))
		return
	}
	if upgrade := ctx.Request.Header.Peek("Upgrade"); len(upgrade) > 0 {
		if !isWebSocketUpgrade(string(upgrade)) {
			// Only WebSocket upgrades are honoured: any other (h2c, ...) goes on as a plain request.
			ctx.Request.Header.Del("Upgrade")
			ctx.Request.Header.Del("HTTP2-Settings")
		} else {
			// The gate decides before the connection is handed over (and before any of its body is
			// read); net/http carries the upgrade, deciding again on the same request.
			if d := f.decide(ctx, room); d.Verdict() != admission.Forward {
				f.carry(ctx, room, d)
				ctx.SetConnectionClose()
				return
			}
			ctx.Response.Reset()
			f.escalate(ctx) // net/http carries it, as every request on that connection after it
			return
		}
	}
	f.carry(ctx, room, f.decide(ctx, room))
}

// carry carries out the gate's decision: the request goes upstream, gets the gate's answer, or is
// served by the room as herdgate's own.
func (f *Fast) carry(ctx *fasthttp.RequestCtx, room *admission.Room, d admission.Decision) {
	switch d.Verdict() {
	case admission.Forward:
		f.forward(ctx, room, d)
	case admission.Reserved:
		room.AnswerReserved(fastExchange{ctx}, d).WriteTo(fastExchange{ctx})
	default:
		writeReply(fastExchange{ctx}, d.Reply())
	}
}

// recoverPanic answers 500 and closes the connection instead of letting one request's bug end the
// process, as net/http does.
func (f *Fast) recoverPanic(ctx *fasthttp.RequestCtx) {
	if v := recover(); v != nil {
		f.rooms.Log().Error(fmt.Errorf("%v", v), "Serving a request panicked", "path", string(ctx.Path()), "stack", string(debug.Stack()))
		ctx.ResetBody()
		ctx.SetConnectionClose()
		admission.ReplyError(fastExchange{ctx}, http.StatusInternalServerError, "internal", "")
	}
}

func (f *Fast) badRequest(ctx *fasthttp.RequestCtx, err error) {
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		// No request came in time: a connection a client opened and kept idle, or headers too slow.
		// Close it without an answer, as net/http does: a client takes an answer on a connection it
		// sent nothing on for an unsolicited response.
		_ = ctx.Conn().Close()
		return
	}
	status := http.StatusBadRequest
	var tooBig *fasthttp.ErrSmallBuffer
	if errors.As(err, &tooBig) {
		status = http.StatusRequestHeaderFieldsTooLarge
	}
	ctx.SetConnectionClose()
	admission.ReplyError(fastExchange{ctx}, status, "bad_request", http.StatusText(status))
}

// forward carries the request upstream as the forwarding policy says and streams the answer back.
// The visitor's request and response objects travel upstream and back themselves: no copy of headers
// or body, and a small body goes in the same write as its headers.
func (f *Fast) forward(ctx *fasthttp.RequestCtx, room *admission.Room, d admission.Decision) {
	up := f.client(d.Config().Upstream)
	req := &ctx.Request
	fw := d.Forwarding(fastExchange{ctx}, admission.Inbound{
		Method: string(ctx.Method()), RawQuery: string(ctx.URI().QueryString()), Host: string(ctx.Host()), TLS: ctx.IsTLS(),
	})
	// The server noted a visitor's Connection: close before this handler ran; the upstream
	// connection stays open either way.
	removeHopHeaders(&req.Header, string(req.Header.Peek("Connection")))
	req.Header.ResetConnectionClose()
	req.Header.SetNoDefaultContentType(true) // the upstream gets the visitor's Content-Type or none
	req.Header.SetProtocol("HTTP/1.1")
	if m := ctx.Method(); !isUpper(m) {
		req.Header.SetMethod(fw.Method)
	}
	req.SetRequestURI(fw.RequestURI())
	req.URI().DisablePathNormalizing = true
	// The client writes the URI's host as Host: set both, so that the upstream gets its own, once.
	req.URI().SetHost(fw.Host)
	req.Header.SetHost(fw.Host)
	fw.Apply(fastHeader{&req.Header})
	if n := req.Header.ContentLength(); n == -1 || n > streamedBodyFrom {
		// A long body takes as long as it takes: that is the upstream's business.
		_ = ctx.SetReadDeadline(time.Time{})
	}
	var body *visitorBody
	if req.Header.ContentLength() == -1 {
		// A chunked body is decoded as it goes: a bad chunk shows only on the way.
		body = &visitorBody{r: ctx.RequestBodyStream()}
		req.SetBodyStream(body, -1)
	}

	call := room.BeginUpstream(d)
	err := up.client.Do(req, &ctx.Response)
	if body != nil && body.err != nil {
		err = body.err
		ctx.SetConnectionClose() // the rest of the body cannot be told from the next request
	}
	if err != nil {
		ctx.Response.Reset()
		call.Failed(upstreamError(err)).WriteTo(fastExchange{ctx})
		return
	}
	release := string(ctx.Response.Header.Peek(admission.ReleaseHeader))
	ctx.Response.Header.Del(admission.ReleaseHeader)
	call.Answered(ctx.Response.StatusCode(), release)
	// What the gate added on the way (a pass issued at once or extended) goes out with the upstream's
	// answer.
	gate := d.Reply()
	for name, values := range gate.Header {
		ctx.Response.Header.Set(name, values[0])
	}
	for _, c := range gate.Cookies {
		ctx.Response.Header.Add("Set-Cookie", c.String())
	}
	// The body streams from the upstream connection as the visitor reads it; a body of unknown
	// length goes out chunked, flushed chunk by chunk, so streams stay live.
	out := &ctx.Response.Header
	removeHopHeaders(out, string(out.Peek("Connection")))
	out.ResetConnectionClose()
}

// escalate hands the connection, with the request already read, to the net/http server.
func (f *Fast) escalate(ctx *fasthttp.RequestCtx) {
	var head bytes.Buffer
	head.Write(ctx.Method())
	head.WriteByte(' ')
	head.Write(ctx.Request.Header.RequestURI())
	head.WriteByte(' ')
	head.Write(ctx.Request.Header.Protocol())
	head.WriteString("\r\n")
	head.Write(ctx.Request.Header.RawHeaders())
	if !bytes.HasSuffix(head.Bytes(), []byte("\r\n\r\n")) {
		head.WriteString("\r\n")
	}
	// A chunked body is still unread on the connection; a fixed-length one was partly read ahead.
	if n := ctx.Request.Header.ContentLength(); n > 0 {
		if n > escalatedBodyLimit {
			admission.ReplyError(fastExchange{ctx}, http.StatusRequestEntityTooLarge, "body_too_large", "an upgrade request's body is limited to 1 MiB")
			return
		}
		if _, err := io.CopyN(&head, ctx.RequestBodyStream(), int64(n)); err != nil {
			ctx.SetConnectionClose()
			return
		}
	}
	ctx.HijackSetNoResponse(true)
	// KeepHijackedConns leaves the connection and its read buffer to the new owner: fasthttp's
	// Shutdown no longer waits for it, net/http's does.
	ctx.Hijack(func(c net.Conn) {
		_ = c.SetDeadline(time.Time{})
		if !f.handover.hand(&handedConn{Conn: c, r: io.MultiReader(&head, c)}) {
			_ = c.Close()
		}
	})
}

// isCheck: the request target is the check's path, or that path followed by the target of the
// request asked about. Every request asks, so the common answer costs a prefix comparison and no
// allocation.
func isCheck(target []byte) bool {
	if !bytes.HasPrefix(target, []byte(CheckPath)) {
		return false
	}
	return (len(target) > len(CheckPath) && target[len(CheckPath)] == '/') || requestPath(target) == CheckPath
}

// checkTarget is the target of the request asked about when a check's target carries it after
// CheckPath, "" otherwise.
func checkTarget(target []byte) string {
	if len(target) > len(CheckPath) && target[len(CheckPath)] == '/' {
		return string(target[len(CheckPath):])
	}
	return ""
}
