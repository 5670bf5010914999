package admission

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/herdgate/herdgate/internal/route"
)

// The route class of a request: whether a protected route matches it, as every method it may act as.

func matchesAny(routes []route.Route, method, host, canonical string) bool {
	method = strings.ToUpper(method)
	for _, r := range routes {
		if r.MatchesHost(host) && r.Matches(method, canonical) {
			return true
		}
	}
	return false
}

func isReserved(canonical string) bool {
	return canonical == reservedPrefix || strings.HasPrefix(canonical, reservedPrefix+"/")
}

// pathOf reads what every request must be before any role takes it, whatever its path: its path
// normalised once (canonical), or the answer to one that no role serves. With no config in force
// (cfg nil) only herdgate's own paths are served: the probes and the page's endpoints answer for
// themselves that there is none.
func pathOf(x Exchange, cfg *Config, escapedPath string, fragment bool) (canonical string, a answer, ok bool) {
	if cfg == nil {
		if canonical, err := route.Normalize(escapedPath); err == nil && !fragment && isReserved(canonical) {
			return canonical, a, true
		}
		return "", unconfigured(""), false
	}
	if strings.EqualFold(x.Method(), http.MethodConnect) {
		// A gateway in front of one workload tunnels nothing.
		return "", errorAnswer(http.StatusMethodNotAllowed, errorBody{Error: "method_not_allowed", Message: "CONNECT is not served"}).
			counted("open", "method_not_allowed"), false
	}
	if cfg.IdentityHeader != "" && x.HeaderCount(cfg.IdentityHeader) > 1 {
		// Which of two identities a hop behind us would pick is anybody's guess: refuse both.
		return "", errorAnswer(http.StatusBadRequest, errorBody{Error: "bad_identity", Message: "the identity header " + cfg.IdentityHeader + " is repeated", Header: cfg.IdentityHeader}).
			counted("open", "bad_identity"), false
	}
	canonical, err := route.Normalize(escapedPath)
	// A fragment is no part of a request; where a '#' would end the path is anybody's guess.
	if err != nil || fragment {
		return "", badPath(), false
	}
	return canonical, a, true
}

// badPath is the answer to a request whose path cannot be normalised.
func badPath() answer {
	return errorAnswer(http.StatusBadRequest, errorBody{Error: "bad_path", Message: "the request path cannot be normalised"}).counted("open", "bad_path")
}

// methodOverrides are the headers through which frameworks let a request act as another method.
var methodOverrides = []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"}

// routeClassOf judges the request for host (as route.HostOf gives it) as every method it may act as
// upstream: its own, the one an override header or a _method query parameter names, and — for a form
// body, which may carry a _method field the gate does not read — any method. It is protected when a
// protected route matches one of them; overrides then reach the upstream unchanged, judged.
func routeClassOf(cfg *Config, x Exchange, host, canonical string) string {
	if routeClass(cfg, x.Method(), host, canonical) == "protected" {
		return "protected"
	}
	anyMethod := false
	for _, h := range methodOverrides {
		switch x.HeaderCount(h) {
		case 0:
		case 1:
			if routeClass(cfg, strings.TrimSpace(x.Header(h)), host, canonical) == "protected" {
				return "protected"
			}
		default:
			anyMethod = true // which one a framework reads is its business: judge them all
		}
	}
	// "method" rather than "_method": the key may come escaped (%5Fmethod), and some frameworks
	// read "." or " " in a key as "_" (isMethodParam).
	if q := x.RawQuery(); q != "" && containsFold(q, "method") {
		values, err := url.ParseQuery(q)
		if err != nil {
			anyMethod = true
		}
		for key, vs := range values {
			if isMethodParam(key) {
				for _, v := range vs {
					if routeClass(cfg, v, host, canonical) == "protected" {
						return "protected"
					}
				}
			}
		}
	}
	if ct := x.Header("Content-Type"); hasPrefixFold(ct, "application/x-www-form-urlencoded") || hasPrefixFold(ct, "multipart/form-data") {
		anyMethod = true
	}
	if anyMethod {
		for _, r := range cfg.Routes {
			if r.MatchesHost(host) && r.MatchesPath(canonical) {
				return "protected"
			}
		}
	}
	return "open"
}

// isMethodParam says a decoded query key is the _method parameter as a framework may read it: in
// any case, its underscore also spelled "." or " " (which PHP turns into "_").
func isMethodParam(key string) bool {
	return len(key) == len("_method") && strings.ContainsRune("_. ", rune(key[0])) && strings.EqualFold(key[1:], "method")
}

// hasPrefixFold and containsFold compare ASCII without regard to case and without a lower-cased copy:
// they run on every request to an open route.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// routeClass is "protected" when a protected route matches the method, host and normalised path.
func routeClass(cfg *Config, method, host, canonical string) string {
	method = strings.ToUpper(method)
	for _, route := range cfg.Routes {
		if route.MatchesHost(host) && route.Matches(method, canonical) {
			return "protected"
		}
	}
	return "open"
}
