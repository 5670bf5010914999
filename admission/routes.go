package admission

import (
	"errors"
	"net/url"
	"path"
	"strings"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// ErrBadPath is returned for a request path that cannot be normalised (a bad escape, a NUL byte).
var ErrBadPath = errors.New("malformed request path")

// NormalizePath returns the one form of a request path that the proxy matches routes against and
// forwards upstream, so that no spelling of a protected path can slip past the match and still reach
// the protected handler: percent-escapes are decoded (%2F becomes a slash, %2E a dot, %3B a
// semicolon), backslashes become slashes, ";parameters" are cut from every segment, repeated slashes
// collapse, "." and ".." segments resolve, and a trailing slash goes.
func NormalizePath(escaped string) (string, error) {
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

// escapePath is the RawPath form of a normalised path: each segment escaped.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// Route is one protected route, compiled.
type Route struct {
	Methods map[string]bool
	Path    string // exact match when Prefix is false
	Prefix  bool
}

// Matches reports whether a request with this upper-case method and normalised path is protected.
func (r Route) Matches(method, p string) bool {
	if !r.Methods[method] {
		return false
	}
	if !r.Prefix {
		return p == r.Path
	}
	return p == r.Path || r.Path == "/" || strings.HasPrefix(p, r.Path+"/")
}

// compileRoutes turns spec routes into Routes, normalising their paths the way requests are.
func compileRoutes(spec []herdgatev1alpha1.ProtectedRoute) ([]Route, error) {
	out := make([]Route, 0, len(spec))
	for i, r := range spec {
		var raw string
		prefix := false
		switch {
		case r.Path != nil && r.PathPrefix == nil:
			raw = *r.Path
		case r.PathPrefix != nil && r.Path == nil:
			raw, prefix = *r.PathPrefix, true
		default:
			return nil, fieldError("protectedRoutes[%d]: exactly one of path or pathPrefix must be set", i)
		}
		if !strings.HasPrefix(raw, "/") {
			return nil, fieldError("protectedRoutes[%d]: path %q must start with '/'", i, raw)
		}
		p, err := NormalizePath(raw)
		if err != nil || p != raw {
			return nil, fieldError("protectedRoutes[%d]: path %q is not normalised (it would match as %q)", i, raw, p)
		}
		methods := map[string]bool{}
		for _, m := range r.EffectiveMethods() {
			upper := strings.ToUpper(string(m))
			switch upper {
			case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS":
			default:
				return nil, fieldError("protectedRoutes[%d].methods: unsupported method %q", i, m)
			}
			methods[upper] = true
		}
		// Most servers answer HEAD with their GET handler: protecting GET protects HEAD.
		if methods["GET"] {
			methods["HEAD"] = true
		}
		out = append(out, Route{Methods: methods, Path: p, Prefix: prefix})
	}
	return out, nil
}
