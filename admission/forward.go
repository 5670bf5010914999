package admission

import (
	"net/url"
	"strings"

	"github.com/herdgate/herdgate/internal/route"
)

// hopHeaders are meaningful for one connection only and never cross the proxy; each transport
// removes them (and those the Connection header names) as it carries the request.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Expect"}

// forwarding is how a request the gate lets through goes upstream, the same whichever transport
// carries it: the method and path it was matched with, the visitor's query, the upstream's Host, the
// forwarding headers set, and herdgate's pass and cookies removed.
type forwarding struct {
	// Method is the request method, in upper case as it was matched.
	Method string
	// Path is the upstream's path prefix and the normalised path; EscapedPath its form on the wire.
	Path, EscapedPath string
	// RawQuery is the visitor's query, as it came.
	RawQuery string
	// Scheme and Host name the upstream; Host is also the Host header it receives.
	Scheme, Host string
	// ForwardedFor, ForwardedHost and ForwardedProto are the X-Forwarded-* headers: the visitor's
	// address, the Host it asked for, and whether it came over TLS.
	ForwardedFor, ForwardedHost, ForwardedProto string
	// Strip are the bypass rules' headers, whose secret values never reach the upstream.
	Strip []string
}

// inbound is what the forwarding policy needs of the visitor's request.
type inbound struct {
	method, canonical, rawQuery, host, clientIP string
	tls                                         bool
}

// forwardingOf decides how in goes to cfg's upstream.
func forwardingOf(cfg *Config, in inbound) forwarding {
	up := cfg.Upstream
	f := forwarding{
		Method:        strings.ToUpper(in.method),
		Path:          strings.TrimSuffix(up.Path, "/") + in.canonical,
		RawQuery:      in.rawQuery,
		Scheme:        up.Scheme,
		Host:          up.Host,
		ForwardedFor:  in.clientIP,
		ForwardedHost: in.host,
		Strip:         cfg.bypassHeaders,
	}
	f.EscapedPath = escapedPath(f.Path)
	f.ForwardedProto = "http"
	if in.tls {
		f.ForwardedProto = "https"
	}
	return f
}

// URL is the upstream URL of the request; its path goes on the wire as EscapedPath, as on the fast
// transport.
func (f forwarding) URL() *url.URL {
	return &url.URL{Scheme: f.Scheme, Host: f.Host, Path: f.Path, RawPath: f.EscapedPath, RawQuery: f.RawQuery}
}

// RequestURI is the request target as it goes on the wire.
func (f forwarding) RequestURI() string {
	if f.RawQuery == "" {
		return f.EscapedPath
	}
	return f.EscapedPath + "?" + f.RawQuery
}

// outboundHeader is the header of the request going upstream, in either transport.
type outboundHeader interface {
	Set(name, value string)
	Del(name string)
	// DelCookie removes the cookie name from the Cookie header, keeping the others.
	DelCookie(name string)
}

// apply sets the forwarding headers on h and removes what the upstream must never see: herdgate's
// pass (header and cookie), its visitor cookie, and a Forwarded header the visitor may have sent.
func (f forwarding) apply(h outboundHeader) {
	h.Del(PassHeader)
	h.DelCookie(PassCookie)
	h.DelCookie(VisitorCookie)
	h.Del("Forwarded")
	for _, name := range f.Strip {
		h.Del(name)
	}
	h.Set("X-Forwarded-For", f.ForwardedFor)
	h.Set("X-Forwarded-Host", f.ForwardedHost)
	h.Set("X-Forwarded-Proto", f.ForwardedProto)
}

// escapedPath is the path as it goes on the wire; most paths need no escaping.
func escapedPath(p string) string {
	for i := 0; i < len(p); i++ {
		if !pathSafe(p[i]) {
			return route.Escape(p)
		}
	}
	return p
}

// pathSafe: the byte needs no escaping in a path.
func pathSafe(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("/-._~!$&'()*+,=:@", c) >= 0
}
