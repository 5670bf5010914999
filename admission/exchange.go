package admission

import (
	"context"
	"net/http"
	"net/netip"
)

// Exchange is one request and its answer, whichever transport carries it. The gate's decisions
// (pass checks, enter, status, the reserved endpoints) read and answer only through it, so the fast
// front and the net/http handler cannot drift apart.
type Exchange interface {
	Context() context.Context
	Method() string
	// Header is the first value of a request header, "" when absent.
	Header(name string) string
	// HeaderCount is how many times the request carries the header; HeaderValues its values.
	HeaderCount(name string) int
	HeaderValues(name string) []string
	// RemoteAddr is the address of the connection's peer.
	RemoteAddr() netip.Addr
	// Cookie is the value of the first request cookie with that name, "" when absent.
	Cookie(name string) string
	RawQuery() string
	// Host is the host the request is for: its Host header, or the host a gateway's check names for
	// the request it asks about; "" when unknown. Routes with a host match against it.
	Host() string
	// Secure reports whether the visitor reached us over TLS, directly or through a proxy that
	// says so; cookies are then marked Secure.
	Secure() bool
	SetHeader(name, value string)
	SetCookie(c *http.Cookie)
	// Reply sends the status and body; for HEAD requests the server drops the body.
	Reply(status int, contentType string, body []byte)
}
