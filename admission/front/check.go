package front

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/herdgate/herdgate/admission"
)

// The gateway's check: a front for gateways that ask whether a request may pass and forward it
// themselves (forward auth). The gateway sends the request's headers to CheckPath and names the
// request itself in forwarding headers, or (Envoy's HTTP ext_authz) asks with the request's own
// method at CheckPath followed by the request's target; the gate decides as for a request it would
// carry, and the answer says allow (2xx) or is the gate's own answer (the waiting page's redirect,
// the JSON of the HTTP contract). docs/guides/gateways.md has the configurations.

// CheckPath is where a gateway asks about a request.
const CheckPath = "/.herdgate/check"

// envoyHeadersToRemove names, in an allow, the request headers Envoy's HTTP ext_authz removes
// before the upstream (its counterpart of the gRPC answer's headers_to_remove).
const envoyHeadersToRemove = "X-Envoy-Auth-Headers-To-Remove"

// Headers of the check. A gateway names the request it asks about in one of three pairs: nginx's
// auth_request as its configuration sets them (X-Original-*), Traefik's ForwardAuth and Caddy's
// forward_auth as they send them (X-Forwarded-*), NGINX Gateway Fabric as it sends them (Path,
// Method).
const (
	originalURIHeader     = "X-Original-URI"
	originalMethodHeader  = "X-Original-Method"
	forwardedURIHeader    = "X-Forwarded-Uri"
	forwardedMethodHeader = "X-Forwarded-Method"
	// The host of the request, for routes with a host: nginx's configuration sets X-Original-Host,
	// Traefik and Caddy send X-Forwarded-Host, and Envoy's HTTP ext_authz keeps the request's Host.
	originalHostHeader = "X-Original-Host"
	// NGINX Gateway Fabric's ExternalAuth (protocol HTTP) names the request in Path and Method, sends
	// no other header of the visitor's but those the route allows, and keeps the request's Host.
	fabricPathHeader    = "Path"
	fabricMethodHeader  = "Method"
	forwardedHostHeader = "X-Forwarded-Host"
	// CheckCookieHeader, on an allowed request, is the request's Cookie header without herdgate's
	// cookies: the gateway sends it upstream in place of the visitor's. The answer's Cookie header
	// says the same, when there is one left, for gateways that copy headers by their names.
	CheckCookieHeader = "X-Herdgate-Cookie"
	// CheckStatusHeader, on a refusal nginx can only pass as 401 or 403, is the gate's own status.
	CheckStatusHeader = "X-Herdgate-Status"
	// CheckAnswerHeader set to "full" asks for the gate's answer as it is, whatever the convention:
	// what nginx fetches to show a refusal its auth_request could not carry.
	CheckAnswerHeader = "X-Herdgate-Answer"
)

// convention is how a gateway wants the gate's verdict.
type convention uint8

const (
	// asIs: the gate's answer as it is, with its waiting page's Location made absolute (Traefik's
	// ForwardAuth and Caddy's forward_auth pass a refusal on; nginx fetches the full answer this way).
	asIs convention = iota
	// nginxStatuses: nginx's auth_request passes on 2xx, 401 and 403 only; any other answer is its
	// own 500.
	nginxStatuses
	// envoyHTTP: Envoy's HTTP ext_authz; an allow names the headers it removes.
	envoyHTTP
)

// checkedRequest is the request a gateway asks about, and the convention of its answer.
type checkedRequest struct {
	method, uri, host string
	convention        convention
}

// checkedRequestOf reads the request a check names; false when it names none, or more than one.
// target is what follows CheckPath in the check's own target when the gateway put the request's
// target there, "" otherwise. A gateway sets its own pair (or path) and passes the visitor's other
// headers on: a visitor who sends another convention's pair, or a second value, would name another
// request than the one the gateway forwards, so the check refuses to judge any.
func checkedRequestOf(x admission.Exchange, target string) (checkedRequest, bool) {
	for _, name := range []string{originalURIHeader, originalMethodHeader, forwardedURIHeader, forwardedMethodHeader, fabricPathHeader, fabricMethodHeader} {
		if x.HeaderCount(name) > 1 {
			return checkedRequest{}, false
		}
	}
	original, forwarded, fabric := x.Header(originalURIHeader), x.Header(forwardedURIHeader), x.Header(fabricPathHeader)
	if fabric != "" || x.Header(fabricMethodHeader) != "" {
		if target != "" || original != "" || forwarded != "" || x.Header(originalMethodHeader) != "" || x.Header(forwardedMethodHeader) != "" {
			return checkedRequest{}, false
		}
		return checkedRequest{method: x.Header(fabricMethodHeader), uri: fabric, host: x.Host(), convention: nginxStatuses}, true
	}
	if target != "" {
		if original != "" || forwarded != "" || x.Header(originalMethodHeader) != "" || x.Header(forwardedMethodHeader) != "" {
			return checkedRequest{}, false
		}
		return checkedRequest{method: x.Method(), uri: target, host: x.Host(), convention: envoyHTTP}, true
	}
	switch {
	case original != "" && forwarded == "" && x.Header(forwardedMethodHeader) == "":
		c := nginxStatuses
		if x.Header(CheckAnswerHeader) == "full" {
			c = asIs
		}
		return checkedRequest{method: x.Header(originalMethodHeader), uri: original, host: onlyValue(x, originalHostHeader), convention: c}, true
	case forwarded != "" && original == "" && x.Header(originalMethodHeader) == "":
		return checkedRequest{method: x.Header(forwardedMethodHeader), uri: forwarded, host: onlyValue(x, forwardedHostHeader), convention: asIs}, true
	}
	return checkedRequest{}, false
}

// onlyValue is the header's value when the request carries it once, "" otherwise: a host named twice
// is no host, and routes of every host apply.
func onlyValue(x admission.Exchange, name string) string {
	if x.HeaderCount(name) != 1 {
		return ""
	}
	return x.Header(name)
}

// check answers a gateway's check through x, the exchange of the check request itself; target is
// what follows CheckPath in the check's target when that is "/" and more (see checkedRequestOf).
func check(room *admission.Room, x admission.Exchange, target string) {
	req, ok := checkedRequestOf(x, target)
	if !ok {
		admission.ReplyError(x, http.StatusBadRequest, "bad_check",
			"name the request to check once: in "+forwardedURIHeader+" (and "+forwardedMethodHeader+"), in "+originalURIHeader+" (and "+originalMethodHeader+
				"), in "+fabricPathHeader+" (and "+fabricMethodHeader+"), or as the path after "+CheckPath+" with the request's own method")
		return
	}
	if req.method == "" {
		req.method = http.MethodGet
	}
	path, rawQuery, _ := strings.Cut(req.uri, "?")
	if i := strings.Index(path, "://"); i > 0 && path[0] != '/' {
		// An absolute URI: its path.
		path = requestPath([]byte(path))
	}
	fragment := strings.IndexByte(req.uri, '#') >= 0
	v := judge(room, &checkExchange{Exchange: x, method: req.method, rawQuery: rawQuery, host: req.host}, path, fragment)
	switch req.convention {
	case nginxStatuses:
		renderNginx(x, v)
	case envoyHTTP:
		renderEnvoyHTTP(x, v)
	default:
		renderAsIs(x, v)
	}
}

// renderAsIs answers a check with the gate's verdict for gateways that pass a refusal on as it is.
func renderAsIs(x admission.Exchange, v verdict) {
	if v.kind == admission.Answer {
		absoluteLocation(v.reply, x)
		writeReply(x, v.reply)
		return
	}
	allowHTTP(x, v)
	x.Reply(http.StatusOK, "text/plain; charset=utf-8", nil)
}

// renderEnvoyHTTP answers Envoy's HTTP ext_authz: as renderAsIs, an allow naming the headers Envoy
// removes before the upstream.
func renderEnvoyHTTP(x admission.Exchange, v verdict) {
	if v.kind == admission.Forward {
		x.SetHeader(envoyHeadersToRemove, envoyRemovals[b2i(v.session == "")][b2i(v.cookie == "")])
	}
	renderAsIs(x, v)
}

// renderNginx answers nginx's auth_request in the two refusals it passes on: a redirect (to the
// waiting page) as 401 with its Location, anything else as 403, the gate's status in
// CheckStatusHeader.
func renderNginx(x admission.Exchange, v verdict) {
	if v.kind != admission.Answer {
		allowHTTP(x, v)
		x.Reply(http.StatusOK, "text/plain; charset=utf-8", nil)
		return
	}
	r := v.reply
	x.SetHeader(CheckStatusHeader, strconv.Itoa(r.Status))
	r.Status = http.StatusForbidden
	if s := v.reply.Status; s >= 300 && s < 400 {
		r.Status = http.StatusUnauthorized
	}
	writeReply(x, r)
}

// allowHTTP writes what the workload gets of an allowed request into the headers of the check's
// answer, for the gateway to send upstream: the session's handle, and the Cookie header without
// herdgate's cookies. A reserved path goes to herdgate as it is.
func allowHTTP(x admission.Exchange, v verdict) {
	if v.kind != admission.Forward {
		return
	}
	if v.session != "" {
		x.SetHeader(admission.SessionHeader, v.session)
	}
	x.SetHeader(CheckCookieHeader, v.cookie)
	if v.cookie != "" {
		// For gateways that replace request headers with the check's own (Traefik's
		// authResponseHeaders, Envoy's allowed_upstream_headers): the Cookie the workload gets.
		x.SetHeader("Cookie", v.cookie)
	}
}

// envoyRemovals lists the request headers Envoy removes from an allowed request: herdgate's own,
// the visitor's session handle when herdgate gives none ([1]), and the Cookie header when only
// herdgate's cookies were in it ([2]; one that is left comes back in the answer's Cookie). Made
// once: every allowed request names one.
var envoyRemovals = func() (lists [2][2]string) {
	for session := range 2 {
		for cookie := range 2 {
			names := slices.Clone(ownRequestHeaders)
			if session == 1 {
				names = append(names, sessionHeader)
			}
			if cookie == 1 {
				names = append(names, "cookie")
			}
			lists[session][cookie] = strings.Join(names, ", ")
		}
	}
	return lists
}()

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// withoutOwnCookies is a Cookie header's value without herdgate's cookies, the others in order.
func withoutOwnCookies(lines []string) string {
	var kept []string
	for _, l := range lines {
		for part := range strings.SplitSeq(l, ";") {
			part = strings.TrimSpace(part)
			if part != "" && !admission.IsOwnCookie([]byte(cookieName(part))) {
				kept = append(kept, part)
			}
		}
	}
	return strings.Join(kept, "; ")
}

// checkExchange is the request a gateway asks about, as the gate reads it: the check request's
// headers, cookies and peer, the checked request's method and query.
type checkExchange struct {
	admission.Exchange
	method, rawQuery, host string
}

func (x *checkExchange) Method() string   { return x.method }
func (x *checkExchange) RawQuery() string { return x.rawQuery }
func (x *checkExchange) Host() string     { return x.host }

// absoluteLocation makes the waiting page's Location absolute on the visitor's own origin, from the
// X-Forwarded-Host and -Proto the gateway sends: a gateway that passes the check's answer on (Traefik)
// resolves a relative Location against the check's address, which the visitor cannot reach.
func absoluteLocation(r admission.Reply, x admission.Exchange) {
	loc, host := r.Header.Get("Location"), x.Header("X-Forwarded-Host")
	if !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") || host == "" || x.HeaderCount("X-Forwarded-Host") > 1 ||
		strings.ContainsAny(host, "/\\@?#") {
		return
	}
	scheme := "http"
	if x.Header("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	r.Header.Set("Location", scheme+"://"+host+loc)
}
