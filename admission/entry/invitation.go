package entry

import (
	"errors"
	"net/http"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/herdgate/herdgate/internal/queue"
)

const (
	// maxInvitation bounds the invitations read; longer ones are refused unread.
	maxInvitation = 4096
)

// Invitation verifies the invitations the site signs (spec.entry.invitation): a JWT signed with
// HS256 whose audience is the queue (namespace/name), with an expiry, a subject (the user the site
// verified) or a visitor claim (the herdgate visitor it is for), or both.
type Invitation struct {
	// Key is the site's signing key; Audience the queue, as namespace/name.
	Key      []byte
	Audience string
	// SingleUse: an invitation enters one visitor only.
	SingleUse bool
}

// invitationClaims are an invitation's claims: the registered ones and vis, the visitor it is for.
type invitationClaims struct {
	jwt.RegisteredClaims
	Visitor string `json:"vis,omitempty"`
	// Lane names the lane the invitation joins (spec.lanes[].join.invitation).
	Lane string `json:"lane,omitempty"`
}

// Check verifies the request's invitation for its visitor; a single-use one goes in out, for the
// engine to bind.
func (c *Invitation) Check(in Input, out *Outcome) *Refusal {
	t, lane, refused := c.verify(in.Request.Header(InvitationHeader), in.Visitor, in.Now)
	out.Limit.SingleUse = append(out.Limit.SingleUse, t...)
	out.InvitationLane = lane
	return refused
}

// verify checks token for visitor at now. It returns the single-use token the engine binds when
// the queue's invitations are single use and the lane it names, or why the entry is refused.
func (c *Invitation) verify(token, visitor string, now time.Time) ([]queue.SingleUse, string, *Refusal) {
	refuse := func(status int, code, message string) ([]queue.SingleUse, string, *Refusal) {
		return nil, "", &Refusal{Status: status, Code: code, Message: message, Header: InvitationHeader}
	}
	if token == "" {
		return refuse(http.StatusUnauthorized, "invitation_required", "this queue takes only invited visitors: enter with the invitation the site gave you")
	}
	if len(token) > maxInvitation {
		return refuse(http.StatusForbidden, "invitation_invalid", "the invitation is too long")
	}
	claims := &invitationClaims{}
	_, err := jwt.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return c.Key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired(),
		jwt.WithAudience(c.Audience), jwt.WithTimeFunc(func() time.Time { return now }))
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return refuse(http.StatusForbidden, "invitation_expired", "the invitation has expired")
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return refuse(http.StatusForbidden, "invitation_not_yet_valid", "the invitation is not valid yet")
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		// Only a token this key signed gets this far: it is the site's, for another queue.
		return refuse(http.StatusForbidden, "invitation_wrong_queue", "the invitation is for another queue")
	case err != nil:
		return refuse(http.StatusForbidden, "invitation_invalid", "the invitation is not one the site signed")
	}
	if claims.Subject == "" && claims.Visitor == "" {
		return refuse(http.StatusForbidden, "invitation_invalid", "the invitation names neither a subject (sub) nor a visitor (vis)")
	}
	if claims.Visitor != "" && claims.Visitor != visitor {
		return refuse(http.StatusForbidden, "invitation_other_visitor", "the invitation is for another visitor")
	}
	if !c.SingleUse {
		return nil, claims.Lane, nil
	}
	return []queue.SingleUse{{ID: singleUseID("invitation", token), Until: claims.ExpiresAt.Time}}, claims.Lane, nil
}
