package admission

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/herdgate/herdgate/internal/queue"
)

// InvitationHeader carries an invitation on enter.
const InvitationHeader = "X-Herdgate-Invitation"

const (
	// maxInvitation bounds the invitations read; longer ones are refused unread.
	maxInvitation = 4096
)

// invitationCheck verifies the invitations the site signs (spec.entry.invitation): a JWT signed with
// HS256 whose audience is the queue (namespace/name), with an expiry, a subject (the user the site
// verified) or a visitor claim (the herdgate visitor it is for), or both.
type invitationCheck struct {
	key       []byte
	audience  string
	singleUse bool
}

// invitationClaims are an invitation's claims: the registered ones and vis, the visitor it is for.
type invitationClaims struct {
	jwt.RegisteredClaims
	Visitor string `json:"vis,omitempty"`
}

// refusal is an entry the gate refuses before it asks the engine: the status and the JSON error.
type refusal struct {
	status int
	body   errorBody
}

// verify checks token for visitor at now. It returns the single-use token the engine binds when
// the queue's invitations are single use, or why the entry is refused.
func (c *invitationCheck) verify(token, visitor string, now time.Time) ([]queue.SingleUse, *refusal) {
	refuse := func(status int, code, message string) ([]queue.SingleUse, *refusal) {
		return nil, &refusal{status, errorBody{Error: code, Message: message, Header: InvitationHeader}}
	}
	if token == "" {
		return refuse(http.StatusUnauthorized, "invitation_required", "this queue takes only invited visitors: enter with the invitation the site gave you")
	}
	if len(token) > maxInvitation {
		return refuse(http.StatusForbidden, "invitation_invalid", "the invitation is too long")
	}
	claims := &invitationClaims{}
	_, err := jwt.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return c.key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired(),
		jwt.WithAudience(c.audience), jwt.WithTimeFunc(func() time.Time { return now }))
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
	if !c.singleUse {
		return nil, nil
	}
	return []queue.SingleUse{{ID: singleUseID("invitation", token), Until: claims.ExpiresAt.Time}}, nil
}

// singleUseID names a single-use token in Redis: a hash of what it is and its text.
func singleUseID(kind, token string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + token))
	return hex.EncodeToString(sum[:16])
}
