package admissiontest

import (
	"context"
	"net/http"
	"net/netip"
)

// Request is an admission.Exchange over an *http.Request that writes nothing anywhere: for tests
// of the gate's decisions, which read the request and return their answer in the Decision. Answers
// written through it (by the room's endpoints) are kept in the Reply fields.
type Request struct {
	R           *http.Request
	ReplyStatus int
	ReplyHeader http.Header
	ReplyBody   []byte
}

// NewRequest is a Request over r.
func NewRequest(r *http.Request) *Request { return &Request{R: r, ReplyHeader: http.Header{}} }

func (x *Request) Context() context.Context          { return x.R.Context() }
func (x *Request) Method() string                    { return x.R.Method }
func (x *Request) Header(name string) string         { return x.R.Header.Get(name) }
func (x *Request) HeaderCount(name string) int       { return len(x.R.Header.Values(name)) }
func (x *Request) HeaderValues(name string) []string { return x.R.Header.Values(name) }
func (x *Request) RawQuery() string                  { return x.R.URL.RawQuery }
func (x *Request) Host() string                      { return x.R.Host }
func (x *Request) Secure() bool                      { return x.R.TLS != nil }

func (x *Request) RemoteAddr() netip.Addr {
	ap, err := netip.ParseAddrPort(x.R.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

func (x *Request) Cookie(name string) string {
	if c, err := x.R.Cookie(name); err == nil {
		return c.Value
	}
	return ""
}

func (x *Request) SetHeader(name, value string) { x.ReplyHeader.Set(name, value) }
func (x *Request) SetCookie(c *http.Cookie)     { x.ReplyHeader.Add("Set-Cookie", c.String()) }
func (x *Request) Reply(status int, contentType string, body []byte) {
	x.ReplyStatus, x.ReplyBody = status, body
	x.ReplyHeader.Set("Content-Type", contentType)
}
