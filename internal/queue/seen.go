package queue

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"
)

var (
	//go:embed lua/seen.lua
	seenLua    string
	seenScript = newScript(seenLua)
)

// SeenVisitor is a waiting visitor's sign of life: who, and the arrival sequence it waits under.
type SeenVisitor struct {
	Visitor string
	Seq     int64
}

// SeenResult is what SeenBatch found.
type SeenResult struct {
	// Now is Redis' clock; Admitted counts the visitors admitted from the queue so far, not at once
	// on entry (everyone admitted since a RankSnapshot was ahead of every visitor still waiting), and
	// Depth the visitors waiting after the batch.
	Now             time.Time
	Admitted, Depth int64
	// Gone are the visitors of the batch that no longer wait under their sequence: admitted,
	// abandoned, or never there.
	Gone []string
}

// SeenBatch records the signs of life of waiting visitors in one call, as their status calls
// would, and names those no longer waiting.
func (q *Queue) SeenBatch(ctx context.Context, visitors []SeenVisitor, abandonAfter time.Duration) (SeenResult, error) {
	args := make([]any, 0, 1+2*len(visitors))
	args = append(args, abandonAfter.Milliseconds())
	for _, v := range visitors {
		if err := ValidateVisitorID(v.Visitor); err != nil {
			return SeenResult{}, err
		}
		args = append(args, v.Visitor, strconv.FormatInt(v.Seq, 10))
	}
	raw, err := seenScript.Run(ctx, q.rdb, []string{q.keys.wait, q.keys.totals, q.keys.seen}, args...).Slice()
	if err != nil {
		return SeenResult{}, fmt.Errorf("recording signs of life in queue %s: %w", q.prefix, err)
	}
	if len(raw) < 3 {
		return SeenResult{}, fmt.Errorf("unexpected signs-of-life reply %v", raw)
	}
	now, _ := raw[0].(int64)
	admitted, _ := raw[1].(int64)
	depth, _ := raw[2].(int64)
	out := SeenResult{Now: time.UnixMilli(now), Admitted: admitted, Depth: depth}
	for _, g := range raw[3:] {
		if s, ok := g.(string); ok {
			out.Gone = append(out.Gone, s)
		}
	}
	return out, nil
}
