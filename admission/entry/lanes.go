package entry

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/herdgate/herdgate/internal/queue"
)

// maxLaneCode bounds the lane codes read; longer ones are refused unread.
const maxLaneCode = 4096

// Lanes decides which of the room's metered lanes (spec.lanes) an entry joins: the first lane, in
// the spec's order, whose header or cookie the request carries with the lane's value, whose name the
// entry's invitation claims (when the lane is joined by invitation), or whose signed code the
// request brings in LaneCodeHeader. It runs after the invitation's check. A code that does not
// verify is refused; anything else that matches no lane leaves the entry in the main queue.
type Lanes struct {
	Lanes []Lane
	// Audience is the room, as namespace/name, which a code names in its aud.
	Audience string
}

// Lane is one lane and how a visitor joins it.
type Lane struct {
	Name string
	// CodeKey signs the lane's codes; nil when codes do not join it.
	CodeKey []byte
	// Invitation: an invitation whose lane claim names the lane joins it.
	Invitation bool
	// Header and Cookie, when set, join a request that carries them with exactly HeaderValue and
	// CookieValue.
	Header, Cookie           string
	HeaderValue, CookieValue []byte
}

// laneCodeClaims are a lane code's claims: the registered ones, the lane and its uses.
type laneCodeClaims struct {
	jwt.RegisteredClaims
	Lane string `json:"lane"`
	// Uses is how many visitors the code may enter; 0 for any number until it expires.
	Uses int `json:"uses,omitempty"`
}

// Check names the entry's lane in out.Limit.Lane, and adds the use of its code, when it brought one,
// to the tokens the engine binds.
func (l *Lanes) Check(in Input, out *Outcome) *Refusal {
	code := in.Request.Header(LaneCodeHeader)
	var claims *laneCodeClaims
	if code != "" {
		c, refused := l.verifyCode(code, in.Now)
		if refused != nil {
			return refused
		}
		claims = c
	}
	for i := range l.Lanes {
		lane := &l.Lanes[i]
		switch {
		case claims != nil && claims.Lane == lane.Name:
			out.Limit.Lane = lane.Name
			if claims.Uses > 0 {
				out.Limit.SingleUse = append(out.Limit.SingleUse, queue.SingleUse{ID: singleUseID("lane-code", code), Until: claims.ExpiresAt.Time, Uses: claims.Uses})
				out.LaneCode = len(out.Limit.SingleUse)
			}
			return nil
		case lane.Header != "" && in.Request.HeaderCount(lane.Header) == 1 &&
			subtle.ConstantTimeCompare([]byte(in.Request.Header(lane.Header)), lane.HeaderValue) == 1,
			lane.Cookie != "" && cookieOnce(in.Request, lane.Cookie, lane.CookieValue),
			lane.Invitation && out.InvitationLane == lane.Name:
			out.Limit.Lane = lane.Name
			return nil
		}
	}
	return nil
}

// verifyCode checks a lane code: signed with the key of the lane it names, for this room, not
// expired.
func (l *Lanes) verifyCode(code string, now time.Time) (*laneCodeClaims, *Refusal) {
	// Every fault of a code is the visitor's to fix, and never worth a retry as is.
	refuse := func(errCode, message string) (*laneCodeClaims, *Refusal) {
		return nil, &Refusal{Status: http.StatusForbidden, Code: errCode, Message: message, Header: LaneCodeHeader}
	}
	if len(code) > maxLaneCode {
		return refuse("lane_code_invalid", "the lane code is too long")
	}
	claims := &laneCodeClaims{}
	_, err := jwt.ParseWithClaims(code, claims, func(t *jwt.Token) (any, error) {
		c, _ := t.Claims.(*laneCodeClaims)
		for _, lane := range l.Lanes {
			if c != nil && lane.Name == c.Lane && lane.CodeKey != nil {
				return lane.CodeKey, nil
			}
		}
		return nil, errNoSuchLane
	}, jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired(),
		jwt.WithAudience(l.Audience), jwt.WithTimeFunc(func() time.Time { return now }))
	switch {
	case errors.Is(err, errNoSuchLane):
		return refuse("lane_code_invalid", "the lane code names no lane of this room that codes join")
	case errors.Is(err, jwt.ErrTokenExpired):
		return refuse("lane_code_expired", "the lane code has expired")
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return refuse("lane_code_not_yet_valid", "the lane code is not valid yet")
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return refuse("lane_code_wrong_queue", "the lane code is for another room")
	case err != nil:
		return refuse("lane_code_invalid", "the lane code is not one the site signed")
	case claims.Uses < 0:
		return refuse("lane_code_invalid", "the lane code's uses is negative")
	}
	return claims, nil
}

var errNoSuchLane = errors.New("no such lane")

// cookieOnce says the request carries the cookie name exactly once, over all its Cookie headers,
// with exactly value: a second copy, even of the same value, joins nothing, as a header twice does
// not (a copy a visitor adds must not ride beside the one the site set).
func cookieOnce(r Request, name string, value []byte) bool {
	var found string
	n := 0
	for _, line := range r.HeaderValues("Cookie") {
		for part := range strings.SplitSeq(line, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
			if !ok || k != name {
				continue
			}
			if n++; n > 1 {
				return false
			}
			// A value may come quoted (RFC 6265); the quotes are not the value's.
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			found = v
		}
	}
	return n == 1 && subtle.ConstantTimeCompare([]byte(found), value) == 1
}
