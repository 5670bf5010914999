package queue

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"
)

var (
	//go:embed lua/reclaim.lua
	reclaimLua    string
	reclaimScript = newScript(reclaimLua)
)

// HeldPass is a pass a proxy saw a visitor hold.
type HeldPass struct {
	Visitor           string
	NotBefore, Expiry time.Time
}

// ReclaimResult is what a Reclaim call changed.
type ReclaimResult struct {
	// LeftQueue counts visitors taken out of the waiting queue: each would have been admitted a
	// second time. Restored counts passes counted as active again under maxActive.
	LeftQueue, Restored int64
}

// reclaimBatch bounds the passes one Reclaim call writes, so that Redis answers others between them.
const reclaimBatch = 500

// Reclaim writes back passes that visitors hold, after a failover may have lost their admissions
// (docs/guides/redis.md): each visitor leaves the waiting queue, its pass record comes back unless
// it holds a newer pass, and its pass counts under maxActive until it expires.
func (q *Queue) Reclaim(ctx context.Context, passes []HeldPass) (ReclaimResult, error) {
	var out ReclaimResult
	for len(passes) > 0 {
		batch := passes[:min(len(passes), reclaimBatch)]
		passes = passes[len(batch):]
		args := make([]any, 0, 3*len(batch))
		for _, p := range batch {
			args = append(args, p.Visitor, strconv.FormatInt(p.NotBefore.UnixMilli(), 10), strconv.FormatInt(p.Expiry.UnixMilli(), 10))
		}
		res, err := reclaimScript.Run(ctx, q.rdb, []string{q.keys.wait, q.keys.active, q.keys.revoked, q.keys.passes}, args...).Int64Slice()
		if err != nil {
			return out, fmt.Errorf("reclaiming passes of queue %s: %w", q.prefix, err)
		}
		if len(res) != 2 {
			return out, fmt.Errorf("reclaiming passes of queue %s: unexpected reply %v", q.prefix, res)
		}
		out.LeftQueue += res[0]
		out.Restored += res[1]
	}
	return out, nil
}

// Failovers is the failover watch of the store the queue came from; nil without one.
func (q *Queue) Failovers() *FailoverWatch {
	if q.store == nil {
		return nil
	}
	return q.store.failovers
}

// Reach makes a round trip to the server that holds the queue's keys. After failed calls, a caller
// that reaches it first learns of a failover (FailoverWatch, as the client connects anew) before
// its next call writes.
func (q *Queue) Reach(ctx context.Context) error {
	return q.rdb.Exists(ctx, q.keys.plan).Err()
}
