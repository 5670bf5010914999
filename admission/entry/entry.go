// Package entry holds the checks a request meets at the gate's door: what an entry must bring (an
// invitation, a proof of work, an external challenge's answer), the places one client may take, and
// the bypass lanes that need no pass. Each is a Check of one shape; a Chain runs checks in order and
// the first refusal ends it. The checks verify what a request carries and need no Redis: the engine
// binds the single-use tokens they grant and keeps the client's limit.
package entry

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"time"

	"github.com/herdgate/herdgate/internal/queue"
)

// Headers and paths of the HTTP contract the checks read.
const (
	// InvitationHeader carries an invitation on enter.
	InvitationHeader = "X-Herdgate-Invitation"
	// LaneCodeHeader carries a lane's signed code on enter (spec.lanes[].join.code).
	LaneCodeHeader = "X-Herdgate-Lane-Code"
	// ProofHeader carries a solved proof of work: the challenge, ':', the nonce.
	ProofHeader = "X-Herdgate-Proof"
	// ChallengeResponseHeader carries the token an external challenge's widget gave the client.
	ChallengeResponseHeader = "X-Herdgate-Challenge-Response"
	// ChallengePath serves proof-of-work challenges.
	ChallengePath = "/.herdgate/challenge"
)

// Request is what the checks read of a request; the gate's Exchange is one.
type Request interface {
	// Header is the first value of a request header, "" when absent; HeaderCount how many times
	// the request carries it; HeaderValues its values.
	Header(name string) string
	HeaderCount(name string) int
	HeaderValues(name string) []string
	// RemoteAddr is the address of the connection's peer.
	RemoteAddr() netip.Addr
	// Cookie is the value of the first cookie of that name, "" when absent.
	Cookie(name string) string
}

// Input is one request as the checks see it.
type Input struct {
	Request Request
	// Visitor is who enters ("" for a request to a protected route); Path the normalised path.
	Visitor, Path string
	Now           time.Time
}

// Outcome is what the checks of a chain granted a request.
type Outcome struct {
	// Limit is what the engine enforces as it enters the visitor: the client's limit, and the
	// single-use tokens bound to the visitor in the same call.
	Limit queue.EntryLimit
	// Bypass names the bypass lane the request took; "" when none.
	Bypass string
	// InvitationLane is the lane claim of the entry's valid invitation ("" when none), which a lane
	// joined by invitation reads.
	InvitationLane string
	// LaneCode is one more than the index in Limit.SingleUse of the lane code's use, 0 when the
	// entry used none: the engine names a token other visitors spent by its index.
	LaneCode int
}

// Refusal is a request refused at the door: its status and the error of its JSON answer.
type Refusal struct {
	Status        int
	Code, Message string
	// Header names the request header the check read; Link is where to get what it asks for.
	Header, Link string
	// Failed says the check reached a verdict against what the request brought (a nonce that does
	// not solve the challenge, a provider's answer that the response failed), as opposed to a proof
	// missing, malformed, expired or unverifiable: the shadow queue may take such an entry instead
	// (spec.entry.shadowQueue.challengeFailed).
	Failed bool
}

// Check is one check at the door: it adds what it grants to out, or refuses.
type Check interface {
	Check(in Input, out *Outcome) *Refusal
}

// Chain runs its checks in order; the first refusal ends it.
type Chain []Check

// Check runs the chain.
func (c Chain) Check(in Input, out *Outcome) *Refusal { return c.run(in, out, false) }

// CheckShadowingFailed runs the chain as Check does, except that a verdict against what the request
// brought (Refusal.Failed) does not end it: the entry is marked for the shadow queue
// (out.Limit.Shadow) and the checks after it still run, so that it is granted what it would have
// been had it passed, its lane above all, and its shadow place reads as that place. A refusal of a
// later check still refuses it, as it would have refused the entry that passed.
func (c Chain) CheckShadowingFailed(in Input, out *Outcome) *Refusal { return c.run(in, out, true) }

// run runs the chain up to its first refusal; with shadowFailed, a verdict against the request is
// no refusal but marks the entry for the shadow queue.
func (c Chain) run(in Input, out *Outcome, shadowFailed bool) *Refusal {
	for _, check := range c {
		switch r := check.Check(in, out); {
		case r == nil:
		case r.Failed && shadowFailed:
			out.Limit.Shadow = true
		default:
			return r
		}
	}
	return nil
}

// singleUseID names a single-use token in Redis: a hash of what it is and its text.
func singleUseID(kind, token string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + token))
	return hex.EncodeToString(sum[:16])
}
