package admission

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/netip"
	"strconv"
	"time"
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

// replyJSON answers with body as JSON, never cached.
func replyJSON(x Exchange, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal"}`)
	}
	x.SetHeader("Cache-Control", "no-store")
	x.Reply(status, "application/json", append(b, '\n'))
}

// replyRedirect sends a browser to location with 303 See Other.
func replyRedirect(x Exchange, location string) {
	x.SetHeader("Location", location)
	x.Reply(http.StatusSeeOther, "text/html; charset=utf-8", []byte(`<a href="`+html.EscapeString(location)+`">See Other</a>.`+"\n"))
}

func retryAfter(x Exchange, d time.Duration) {
	x.SetHeader("Retry-After", strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10))
}

// ReplyError answers x with status and the JSON body of every error answer: an error code and,
// when not empty, a message. Fronts answer their own refusals (a malformed request, a panic) with it.
func ReplyError(x Exchange, status int, code, message string) {
	replyJSON(x, status, errorBody{Error: code, Message: message})
}
