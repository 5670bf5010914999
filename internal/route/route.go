// Package route is the one definition of a protected route: how a request path is normalised before
// matching, which route paths are valid, and how a route matches. The admission proxy matches every
// request with it, and the manager checks every WaitingQueue generation with it, so the route paths the
// API server's schema accepts (its CEL rules say the same, and a test holds the two together) are
// exactly the ones the proxy serves.
package route

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"
)

// ErrBadPath is returned for a request path that cannot be normalised (a bad escape, a NUL byte).
var ErrBadPath = errors.New("malformed request path")

// MaxPathLength is the longest route path, as the API's schema allows.
const MaxPathLength = 1024

// Normalize returns the one form of a request path that routes are matched against and that is
// forwarded upstream, so that no spelling of a protected path can slip past the match and still reach
// the protected handler: percent-escapes are decoded (%2F becomes a slash, %2E a dot, %3B a
// semicolon), backslashes become slashes, ";parameters" are cut from every segment, repeated slashes
// collapse, "." and ".." segments resolve, and a trailing slash goes.
func Normalize(escaped string) (string, error) {
	if isNormal(escaped) {
		return escaped, nil
	}
	p := escaped
	if strings.IndexByte(p, '%') >= 0 {
		var err error
		if p, err = url.PathUnescape(p); err != nil {
			return "", ErrBadPath
		}
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", ErrBadPath
	}
	p = strings.ReplaceAll(p, "\\", "/")
	// Servers that know path parameters drop them before routing; drop them before matching.
	if strings.IndexByte(p, ';') >= 0 {
		segs := strings.Split(p, "/")
		for i, s := range segs {
			if j := strings.IndexByte(s, ';'); j >= 0 {
				segs[i] = s[:j]
			}
		}
		p = strings.Join(segs, "/")
	}
	return path.Clean("/" + p), nil
}

// isNormal is the fast path: most paths need no work at all.
func isNormal(p string) bool {
	if p == "" || p[0] != '/' || (len(p) > 1 && p[len(p)-1] == '/') {
		return false
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '%', ';', '\\', 0:
			return false
		case '/':
			if i+1 < len(p) && (p[i+1] == '/' || p[i+1] == '.') {
				return false // "//", and "/." or "/.." (a segment starting with a dot goes the slow way)
			}
		}
	}
	return true
}

// Escape is the RawPath form of a normalised path: each segment escaped.
func Escape(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// CheckPath tells why p cannot be a route path, or returns nil. A route path is absolute, at most
// MaxPathLength bytes, free of control characters, '?' and '#', and already normalised (Normalize
// leaves it as it is): no "//", "." or ".." segments, no trailing slash, no '\', ';' or '%'. The CEL
// rules on protectedRoutes[].path and pathPrefix say the same.
func CheckPath(p string) error {
	switch {
	case p == "" || p[0] != '/':
		return errors.New("must start with '/'")
	case len(p) > MaxPathLength:
		return fmt.Errorf("is %d bytes long, at most %d allowed", len(p), MaxPathLength)
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c < 0x20 || c == 0x7f:
			return fmt.Errorf("holds the control character 0x%02x at byte %d", c, i)
		case c == '?' || c == '#':
			return fmt.Errorf("holds %q: a route matches a path, never a query or a fragment", c)
		}
	}
	if n, err := Normalize(p); err != nil || n != p {
		return fmt.Errorf("is not normalised (a request for it is matched as %q): no '//', '.' or '..' segments, trailing '/', '\\', ';' or '%%'", n)
	}
	return nil
}

// Methods the API lets a route name.
var Methods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// Route is one protected route, compiled.
type Route struct {
	Methods map[string]bool
	// Host, when not "", limits the route to requests for that host (lower case, without a port);
	// see MatchesHost.
	Host   string
	Path   string // exact match when Prefix is false
	Prefix bool
	// ExactCase matches the path letter for letter; by default a route matches whatever the letter
	// case of the request, since many servers route without regard to it.
	ExactCase bool
	folded    string // Path, case-folded
}

// New compiles a route for path (a prefix when prefix is set) and methods, in upper case. Protecting
// GET protects HEAD too, because most servers answer HEAD with their GET handler.
func New(p string, prefix bool, methods []string) (Route, error) {
	if err := CheckPath(p); err != nil {
		return Route{}, err
	}
	if len(methods) == 0 {
		return Route{}, errors.New("at least one method is required")
	}
	set := map[string]bool{}
	for _, m := range methods {
		if !isMethod(m) {
			return Route{}, fmt.Errorf("unsupported method %q (one of %s)", m, strings.Join(Methods, ", "))
		}
		set[m] = true
	}
	if set["GET"] {
		set["HEAD"] = true
	}
	return Route{Methods: set, Path: p, Prefix: prefix, folded: Fold(p)}, nil
}

// Fold is p with its letter case folded, so that two spellings that differ only in case compare
// equal: ASCII without an allocation when p has no capital, other scripts through upper and then lower
// case (which also folds the long s and the Kelvin sign to their ASCII letters).
func Fold(p string) string {
	upper := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c >= utf8.RuneSelf {
			return strings.ToLower(strings.ToUpper(p))
		}
		if 'A' <= c && c <= 'Z' {
			upper = true
		}
	}
	if !upper {
		return p
	}
	return strings.ToLower(p)
}

func isMethod(m string) bool {
	for _, known := range Methods {
		if m == known {
			return true
		}
	}
	return false
}

// Matches reports whether a request with this upper-case method and normalised path is protected.
func (r Route) Matches(method, p string) bool {
	return r.Methods[method] && r.MatchesPath(p)
}

// MatchesHost reports whether a request for host (as HostOf gives it) is one the route is for: any
// host when the route names none, and any host when the request's is unknown (""), so that a gateway
// that does not name the host gets the routes of every host rather than none.
func (r Route) MatchesHost(host string) bool {
	return r.Host == "" || host == "" || host == r.Host
}

// Specificity orders the routes that match one request, most specific highest: the longer path
// first, an exact path before a prefix of the same path, and a route for the request's host before
// one for any host. When two rooms serve one host, the request goes to the room whose route is the
// most specific.
func (r Route) Specificity() int {
	s := len(r.Path) * 4
	if !r.Prefix {
		s += 2
	}
	if r.Host != "" {
		s++
	}
	return s
}

// Same reports whether r and o are one route: the same host, the same path in the same letter case
// rule, both exact or both prefixes, and a method in common.
func (r Route) Same(o Route) bool {
	if r.Host != o.Host || r.Prefix != o.Prefix || r.ExactCase != o.ExactCase {
		return false
	}
	if r.ExactCase && r.Path != o.Path || !r.ExactCase && Fold(r.Path) != Fold(o.Path) {
		return false
	}
	for m := range r.Methods {
		if o.Methods[m] {
			return true
		}
	}
	return false
}

// MatchesPath reports whether the normalised path is the route's, whatever the method.
func (r Route) MatchesPath(p string) bool {
	want := r.Path
	if !r.ExactCase {
		p, want = Fold(p), r.folded
		if want == "" {
			want = Fold(r.Path) // a Route built without New
		}
	}
	if !r.Prefix {
		return p == want
	}
	return p == want || want == "/" || strings.HasPrefix(p, want+"/")
}

// hostPattern is the API's Hostname: a lower-case DNS name without a port.
var hostPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// CheckHost tells why h cannot be a route's host, or returns nil; the API's Hostname pattern says
// the same.
func CheckHost(h string) error {
	if len(h) > 253 {
		return fmt.Errorf("is %d bytes long, at most 253 allowed", len(h))
	}
	if !hostPattern.MatchString(h) {
		return errors.New("must be a lower-case DNS name without a port, such as shop.example")
	}
	return nil
}

// HostOf is the host a request names in its Host header (or the host a gateway names for it), as
// routes compare it: without a port or a final dot, in lower case. "Shop.Example.:8443" is
// "shop.example"; an IPv6 literal keeps its brackets.
func HostOf(raw string) string {
	if i := strings.LastIndexByte(raw, ':'); i >= 0 && strings.IndexByte(raw[i:], ']') < 0 {
		raw = raw[:i]
	}
	raw = strings.TrimSuffix(raw, ".")
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(raw)
		}
	}
	return raw
}
