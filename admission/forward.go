package admission

import (
	"net/url"
	"strings"

	"github.com/herdgate/herdgate/internal/route"
)

// Forwarding is how a request the gate lets through goes upstream, the same whichever transport
// carries it: the method and path it was matched with, the visitor's query, the upstream's Host, the
// forwarding headers set, and herdgate's pass and cookies removed.
type Forwarding struct {
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
	// Session is the handle of the request's session (SessionHeader), when the room has a release
	// key and the request a valid pass.
	Session string
}

// Inbound is what the forwarding policy needs of the visitor's request, besides its decision.
type Inbound struct {
	// Method is the request method as it came; RawQuery its query; Host the Host it asked for.
	Method, RawQuery, Host string
	// TLS: the visitor reached this proxy over TLS.
	TLS bool
}

// Forwarding is how the request decided d goes upstream: to the upstream of d's config, whatever
// config is in force by the time it leaves.
func (d Decision) Forwarding(x Exchange, in Inbound) Forwarding {
	f := forwardingOf(d.cfg, d.canonical, forwardedClient(x, d.cfg), in)
	f.Session = d.Session()
	return f
}

// forwardingOf decides how in, whose path normalises to canonical, goes to cfg's upstream.
func forwardingOf(cfg *Config, canonical, clientIP string, in Inbound) Forwarding {
	up := cfg.Upstream
	f := Forwarding{
		Method:        strings.ToUpper(in.Method),
		Path:          strings.TrimSuffix(up.Path, "/") + canonical,
		RawQuery:      in.RawQuery,
		Scheme:        up.Scheme,
		Host:          up.Host,
		ForwardedFor:  clientIP,
		ForwardedHost: in.Host,
		Strip:         cfg.bypassHeaders,
	}
	f.EscapedPath = escapedPath(f.Path)
	f.ForwardedProto = "http"
	if in.TLS {
		f.ForwardedProto = "https"
	}
	return f
}

// URL is the upstream URL of the request; its path goes on the wire as EscapedPath, as on the fast
// transport.
func (f Forwarding) URL() *url.URL {
	return &url.URL{Scheme: f.Scheme, Host: f.Host, Path: f.Path, RawPath: f.EscapedPath, RawQuery: f.RawQuery}
}

// RequestURI is the request target as it goes on the wire.
func (f Forwarding) RequestURI() string {
	if f.RawQuery == "" {
		return f.EscapedPath
	}
	return f.EscapedPath + "?" + f.RawQuery
}

// OutboundHeader is the header of the request going upstream, in either transport.
type OutboundHeader interface {
	Set(name, value string)
	Del(name string)
	// DelMatching removes every header whose name own says is herdgate's.
	DelMatching(own func(name []byte) bool)
	// DelCookiesMatching removes from the Cookie headers every cookie whose name own says is
	// herdgate's, keeping the others in order.
	DelCookiesMatching(own func(name []byte) bool)
}

// Everything of herdgate's in a request is named with one of these prefixes, whatever its letter case:
// headers X-Herdgate-* and Herdgate-* (the pass, the place, proofs, invitations, challenge answers,
// and whatever later versions add), cookies herdgate_*. One rule, so that nothing herdgate reads from a
// visitor — a bearer token among them — reaches the workload, and no new header needs a list kept in
// step with it.
const (
	ownHeaderPrefix       = "herdgate-"
	ownHeaderPrefixLegacy = "x-herdgate-"
	ownCookiePrefix       = "herdgate_"
)

// IsOwnHeader: the header is herdgate's and never goes upstream.
func IsOwnHeader(name []byte) bool {
	return hasPrefixFoldBytes(name, ownHeaderPrefixLegacy) || hasPrefixFoldBytes(name, ownHeaderPrefix)
}

// IsOwnCookie: the cookie is herdgate's and never goes upstream. A bare cookie value without a name
// is judged by its value, which some servers take for the name.
func IsOwnCookie(name []byte) bool {
	return hasPrefixFoldBytes(name, ownCookiePrefix)
}

func hasPrefixFoldBytes(s []byte, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

// Apply sets the forwarding headers on h and removes what the upstream must never see: every header
// and cookie of herdgate's, and a Forwarded header the visitor may have sent.
func (f Forwarding) Apply(h OutboundHeader) {
	h.DelMatching(IsOwnHeader)
	h.DelCookiesMatching(IsOwnCookie)
	h.Del("Forwarded")
	for _, name := range f.Strip {
		h.Del(name)
	}
	h.Set("X-Forwarded-For", f.ForwardedFor)
	h.Set("X-Forwarded-Host", f.ForwardedHost)
	h.Set("X-Forwarded-Proto", f.ForwardedProto)
	if f.Session != "" {
		h.Set(SessionHeader, f.Session) // after herdgate's headers went: a visitor's own never passes
	}
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

// forwardedClient is the X-Forwarded-For the upstream gets: the visitor's address, which behind a
// trusted proxy is the client it names.
func forwardedClient(x Exchange, cfg *Config) string {
	a := cfg.clients.Of(x)
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
