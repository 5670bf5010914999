package queue

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"
)

var (
	//go:embed lua/sessions.lua
	sessionsLua    string
	sessionsScript = newScript(sessionsLua)
	//go:embed lua/forget.lua
	forgetLua    string
	forgetScript = newScript(forgetLua)
)

// forgetBatch bounds the active passes one ForgetPassesBefore call looks at.
const forgetBatch = 1000

// ForgetPassesBefore drops every pass whose not-before time lies before from, with its slot under
// maxActive: at a schedule's opening, the passes of an earlier opening (settings.Schedule.PassesFrom).
// It makes one bounded call per thousand active passes, so that the queue answers between them, and
// returns how many passes it dropped.
func (q *Queue) ForgetPassesBefore(ctx context.Context, from time.Time) (int64, error) {
	var forgotten int64
	cursor := "0"
	for {
		raw, err := forgetScript.Run(ctx, q.rdb, []string{q.keys.active, q.keys.passes}, cursor, from.UnixMilli(), forgetBatch).Slice()
		if err != nil {
			return forgotten, fmt.Errorf("forgetting the passes of an earlier opening of queue %s: %w", q.prefix, err)
		}
		if len(raw) != 2 {
			return forgotten, fmt.Errorf("forgetting the passes of an earlier opening of queue %s: unexpected reply %v", q.prefix, raw)
		}
		next, _ := raw[0].(string)
		n, _ := raw[1].(int64)
		forgotten += n
		if next == "0" || next == "" {
			return forgotten, nil
		}
		cursor = next
	}
}

// PassRef names one pass: its visitor and its not-before time. A later pass of the same visitor is
// another pass.
type PassRef struct {
	Visitor   string
	NotBefore time.Time
}

// Release ends a pass: Expiry is the pass's own, which keeps it revoked when Redis no longer holds
// its record (a failover lost the admission, or the release before it).
type Release struct {
	PassRef
	Expiry time.Time
}

// Renewal extends a pass to a later expiry.
type Renewal struct {
	PassRef
	Expiry time.Time
}

// Revocation is a released pass that has not expired yet: every proxy refuses it.
type Revocation struct {
	PassRef
	Expiry time.Time
	// Seq orders revocations; a proxy lists those after the last it has seen.
	Seq int64
}

// SessionsResult is what one Sessions call did and found.
type SessionsResult struct {
	// Released and Renewed count the passes the call ended and extended; a pass released before, or
	// gone, counts for nothing.
	Released, Renewed int
	// Revoked are the revocations after the sequence asked for, oldest first; Seq the latest one.
	Revoked []Revocation
	Seq     int64
	// Restarted says that Redis' sequence is behind the one asked for (Redis lost its data): Revoked
	// lists from the start, and the caller should write back the revocations it knows.
	Restarted bool
}

// Sessions, in one call, releases passes (the visitor's session is over: the pass is deleted, its
// slot under maxActive freed, and it is listed as revoked until it would have expired), extends
// passes, and lists up to most revocations after the sequence after. A release whose pass Redis
// does not hold is still listed, until its own expiry: after a failover the proxies write back the
// revocations they know this way, and released passes stay released.
func (q *Queue) Sessions(ctx context.Context, releases []Release, renewals []Renewal, after int64, most int) (SessionsResult, error) {
	if most <= 0 {
		return SessionsResult{}, fmt.Errorf("sessions of queue %s: most must be positive, got %d", q.prefix, most)
	}
	args := make([]any, 0, 3+3*len(releases)+3*len(renewals))
	args = append(args, after, most, len(releases))
	for _, r := range releases {
		if err := ValidateVisitorID(r.Visitor); err != nil {
			return SessionsResult{}, err
		}
		args = append(args, r.Visitor, r.NotBefore.UnixMilli(), r.Expiry.UnixMilli())
	}
	for _, r := range renewals {
		if err := ValidateVisitorID(r.Visitor); err != nil {
			return SessionsResult{}, err
		}
		args = append(args, r.Visitor, r.NotBefore.UnixMilli(), r.Expiry.UnixMilli())
	}
	raw, err := sessionsScript.Run(ctx, q.rdb, []string{q.keys.active, q.keys.revoked, q.keys.revokedSeq, q.keys.totals, q.keys.passes}, args...).Slice()
	if err != nil {
		return SessionsResult{}, fmt.Errorf("sessions of queue %s: %w", q.prefix, err)
	}
	if len(raw) < 3 || len(raw)%2 != 1 {
		return SessionsResult{}, fmt.Errorf("unexpected sessions reply %v", raw)
	}
	released, _ := raw[0].(int64)
	renewed, _ := raw[1].(int64)
	seq, _ := raw[2].(int64)
	res := SessionsResult{Released: int(released), Renewed: int(renewed), Seq: seq, Restarted: seq < after}
	for i := 3; i < len(raw); i += 2 {
		n, _ := raw[i].(int64)
		entry, _ := raw[i+1].(string)
		rev, ok := parseRevocation(entry)
		if !ok {
			continue
		}
		rev.Seq = n
		res.Revoked = append(res.Revoked, rev)
	}
	return res, nil
}

// parseRevocation reads "expiryMs|visitor|notBeforeMs". A visitor ID may hold '|' itself, so the
// fields are cut at the first and the last one, around the two numbers.
func parseRevocation(s string) (Revocation, bool) {
	first, last := strings.IndexByte(s, '|'), strings.LastIndexByte(s, '|')
	if first < 0 || last <= first {
		return Revocation{}, false
	}
	exp, err1 := strconv.ParseInt(s[:first], 10, 64)
	nb, err2 := strconv.ParseInt(s[last+1:], 10, 64)
	if err1 != nil || err2 != nil {
		return Revocation{}, false
	}
	return Revocation{PassRef: PassRef{Visitor: s[first+1 : last], NotBefore: time.UnixMilli(nb)}, Expiry: time.UnixMilli(exp)}, true
}
