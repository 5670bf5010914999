package admission

import (
	"net/http"
	"sync/atomic"
	"time"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/queue"
)

// Who a request is for and from: the room it names where rooms share a host, the room's cookie
// names, the visitor it identifies and the pass it presents. The gate (gate.go) and the visitor's
// endpoints (endpoints.go, visit.go) read them only through these.

// Cookie and header names of the HTTP contract.
const (
	PassCookie    = "herdgate_pass"
	VisitorCookie = "herdgate_visitor"
	PassHeader    = "X-Herdgate-Pass"
	// maxCookieValue bounds the herdgate cookies read; longer values are ignored as forged.
	maxCookieValue = 512
	visitorMaxAge  = 24 * time.Hour
	// planTTL is how long a proxy reuses the plan read from Redis.
	planTTL = time.Second
	// tooEarlyShare: a poll is refused when it comes sooner than this share of the shortest interval
	// the proxy could have told the visitor; the rest is room for network jitter.
	tooEarlyShare = 0.8
)

// RoomParam, on a request for one of herdgate's own paths, names the room it is for by its
// herdgatev1alpha1.RoomID, where rooms share a host in a shared proxy set.
const RoomParam = "room"

// links make the room's links to its own paths: where rooms share a host in a shared proxy set,
// they name the room (RoomParam).
type links struct {
	// roomID names the room in them (herdgatev1alpha1.RoomID); sharesHost says the room shares its
	// host now (the set's routing sets it).
	roomID     string
	sharesHost atomic.Bool
}

// enter is where a visitor enters the room.
func (l *links) enter() string {
	if l.sharesHost.Load() {
		return reservedPrefix + "/enter?" + RoomParam + "=" + l.roomID
	}
	return reservedPrefix + "/enter"
}

// CookieNames are the names of a room's cookies.
type CookieNames struct{ Pass, Visitor, Place, Estimate string }

// CookieNamesOf are the names of the cookies of the room namespace/name.
func CookieNamesOf(namespace, name string) CookieNames {
	return CookieNames{
		Pass:     herdgatev1alpha1.CookieName(PassCookie, namespace, name),
		Visitor:  herdgatev1alpha1.CookieName(VisitorCookie, namespace, name),
		Place:    herdgatev1alpha1.CookieName(PlaceCookie, namespace, name),
		Estimate: herdgatev1alpha1.CookieName(EstimateCookie, namespace, name),
	}
}

// roomCookie is the value of the room's cookie name, else of the unsuffixed base name the proxy set
// before cookies were named per room, so that visitors holding one keep it across an upgrade.
// Either is verified with the room's own keys: another room's cookie of the base name never
// verifies.
func roomCookie(x Exchange, name, base string) string {
	if v := x.Cookie(name); v != "" {
		return v
	}
	return x.Cookie(base)
}

// identify returns the visitor: the trusted header's value, or the ID of a valid visitor cookie.
// When mint is set and the visitor has no cookie yet, it issues one, returned as minted for the
// answer to set. It is the one place that tells who a visitor is, for passes, enter and status alike.
func identify(x Exchange, cfg *Config, mint bool) (visitor string, minted *http.Cookie, ok bool) {
	if cfg.IdentityHeader != "" {
		v := x.Header(cfg.IdentityHeader)
		return v, nil, v != ""
	}
	if id, ok := visitorOfCookie(cfg, roomCookie(x, cfg.Cookies.Visitor, VisitorCookie)); ok {
		return id, nil, true
	}
	if !mint {
		return "", nil, false
	}
	id, cookie := cfg.Signer.NewVisitorCookie()
	return id, &http.Cookie{
		Name: cfg.Cookies.Visitor, Value: cookie, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: x.Secure(), MaxAge: int(visitorMaxAge / time.Second),
	}, true
}

// visitorOfCookie is the visitor a visitor cookie names, when the cookie is one this room signed.
func visitorOfCookie(cfg *Config, cookie string) (string, bool) {
	if cookie == "" || len(cookie) > maxCookieValue {
		return "", false
	}
	return cfg.Signer.VerifyVisitorCookie(cookie)
}

// presentedPass is a pass as a request carried it, with what identifies its visitor.
type presentedPass struct {
	token string
	// identity is the identity header's value, or the visitor cookie when the room has none.
	identity string
}

// passToken is the pass a request carries: the pass header, else the room's pass cookie.
func passToken(x Exchange, cfg *Config) string {
	if token := x.Header(PassHeader); token != "" {
		return token
	}
	return roomCookie(x, cfg.Cookies.Pass, PassCookie)
}

// presentedOf is the pass x carries and what identifies its visitor, unchecked.
func presentedOf(x Exchange, cfg *Config) presentedPass {
	token := passToken(x, cfg)
	if token == "" {
		return presentedPass{}
	}
	if cfg.IdentityHeader != "" {
		return presentedPass{token: token, identity: x.Header(cfg.IdentityHeader)}
	}
	return presentedPass{token: token, identity: roomCookie(x, cfg.Cookies.Visitor, VisitorCookie)}
}

// verifyPresented checks a pass kept by the gate as admit would have: for its visitor, at now, not
// released, and issued for the opening in force.
func (g *gate) verifyPresented(cfg *Config, pp presentedPass, now time.Time) (pass.Pass, bool) {
	visitor := pp.identity
	if cfg.IdentityHeader == "" {
		visitor, _ = visitorOfCookie(cfg, pp.identity)
	}
	verified, result := g.verifyPass(cfg, pp.token, visitor, now)
	return verified, result == pass.Valid
}

// verifyPass is the one check of a pass: its MAC, its visitor and times, then whether its session
// ended and whether it belongs to the opening in force.
func (g *gate) verifyPass(cfg *Config, token, visitor string, now time.Time) (pass.Pass, pass.Result) {
	verified, result := cfg.Passes.Verify(token, visitor, now)
	switch {
	case result != pass.Valid:
	case g.sessions.IsRevoked(verified):
		result = pass.Released
	case cfg.fromEarlierOpening(verified):
		result = pass.EarlierOpening
	}
	return verified, result
}

// passCookie signs the visitor's pass, and returns it and the pass cookie that holds it.
func passCookie(x Exchange, cfg *Config, visitor string, pos queue.Position) (string, *http.Cookie) {
	token := cfg.Passes.Issue(visitor, pos.Pass.NotBefore, pos.Pass.Expiry)
	return token, &http.Cookie{
		Name: cfg.Cookies.Pass, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: x.Secure(), MaxAge: max(1, int(pos.Pass.Expiry.Sub(pos.Now)/time.Second)),
	}
}
