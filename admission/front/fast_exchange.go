package front

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/netip"

	"github.com/valyala/fasthttp"

	"github.com/herdgate/herdgate/admission"
)

// fastExchange is an exchange of the fast front.
type fastExchange struct{ ctx *fasthttp.RequestCtx }

// Context: fasthttp notices no disconnects, so a call ends on its own timeouts.
func (x fastExchange) Context() context.Context { return context.Background() }
func (x fastExchange) Method() string           { return string(x.ctx.Method()) }
func (x fastExchange) Header(name string) string {
	return string(x.ctx.Request.Header.Peek(name))
}
func (x fastExchange) HeaderCount(name string) int { return len(x.ctx.Request.Header.PeekAll(name)) }
func (x fastExchange) HeaderValues(name string) []string {
	var out []string
	for _, v := range x.ctx.Request.Header.PeekAll(name) {
		out = append(out, string(v))
	}
	return out
}
func (x fastExchange) RemoteAddr() netip.Addr {
	a, _ := netip.AddrFromSlice(x.ctx.RemoteIP())
	return a.Unmap()
}
func (x fastExchange) Cookie(name string) string { return string(x.ctx.Request.Header.Cookie(name)) }
func (x fastExchange) RawQuery() string          { return string(x.ctx.URI().QueryString()) }
func (x fastExchange) Host() string              { return string(x.ctx.Host()) }
func (x fastExchange) Secure() bool {
	return x.ctx.IsTLS() || string(x.ctx.Request.Header.Peek("X-Forwarded-Proto")) == "https"
}
func (x fastExchange) SetHeader(name, v string) { x.ctx.Response.Header.Set(name, v) }
func (x fastExchange) SetCookie(c *http.Cookie) { x.ctx.Response.Header.Add("Set-Cookie", c.String()) }
func (x fastExchange) Reply(status int, contentType string, body []byte) {
	x.ctx.SetStatusCode(status)
	x.ctx.SetContentType(contentType)
	x.ctx.SetBody(body)
}

type fasthttpLogger struct{ l *log.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	if l.l != nil {
		l.l.Printf(format, args...)
	}
}

// upstreamError names fasthttp's own errors in the words the gate knows them by.
func upstreamError(err error) error {
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout):
		return fmt.Errorf("%w: %w", admission.ErrUpstreamTimeout, err)
	case errors.Is(err, fasthttp.ErrConnectionClosed):
		return fmt.Errorf("%w: %w", admission.ErrUpstreamClosed, err)
	}
	return err
}
