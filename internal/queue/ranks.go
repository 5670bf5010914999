package queue

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/ranks.lua
	ranksLua    string
	ranksScript = redis.NewScript(commonLua + ranksLua)
)

// RankBlock is the stretch of arrival sequences between two boundaries of a RankSnapshot: a bound
// from the snapshot is off by at most the visitors waiting in one block.
const RankBlock = 1024

// RankSnapshot counts, every RankBlock arrival sequences from the front, the waiting visitors at or
// below the boundary. Visitors leave the queue from anywhere (admitted at the front, abandoned
// anywhere) and join it behind everyone, so a count only falls with time: a bound from an older
// snapshot is still a bound.
type RankSnapshot struct {
	// Front and Tail are the lowest and highest waiting sequence when the snapshot began; Front is
	// -1 for an empty queue.
	Front, Tail int64
	// First is the first boundary; Counts[i] counts the waiting visitors with a sequence at or below
	// First + i × RankBlock.
	First  int64
	Counts []int64
	// At is when the snapshot began, by Redis' clock.
	At time.Time
}

// RankSnapshot counts the boundaries from the front to the tail, at most perCall of them per call,
// so that no call holds Redis for long: at 10⁷ waiting that is about 10⁴ boundaries.
func (q *Queue) RankSnapshot(ctx context.Context, perCall int) (RankSnapshot, error) {
	if perCall < 1 {
		return RankSnapshot{}, fmt.Errorf("rank snapshot of queue %s: %d boundaries per call", q.prefix, perCall)
	}
	s := RankSnapshot{Front: -1, Tail: -1}
	for next := int64(-1); ; {
		first := next
		if first < 0 {
			first = 0 // the first call learns the front
		}
		raw, err := ranksScript.Run(ctx, q.rdb, []string{q.keys.wait}, first, RankBlock, perCall).Int64Slice()
		if err != nil {
			return RankSnapshot{}, fmt.Errorf("rank snapshot of queue %s: %w", q.prefix, err)
		}
		if len(raw) < 3 {
			return RankSnapshot{}, fmt.Errorf("unexpected rank reply %v", raw)
		}
		if next < 0 {
			s.At, s.Front, s.Tail = time.UnixMilli(raw[0]), raw[1], raw[2]
			if s.Front < 0 {
				return s, nil
			}
			// Start at the front's block, then ask again from there.
			s.First = s.Front / RankBlock * RankBlock
			next = s.First
			continue
		}
		s.Counts = append(s.Counts, raw[3:]...)
		last := first + int64(len(raw)-4)*RankBlock
		if len(raw) == 3 || last >= s.Tail || last >= raw[2] {
			return s, nil
		}
		next = last + RankBlock
	}
}

// PositionBound bounds from above the 1-based position of the visitor that arrived with sequence
// seq: the waiting visitors ahead of it are at most those at or below the boundary at or after
// seq − 1, and at most those at or below the boundary before it plus every sequence in between.
// ok is false when the snapshot knows nothing of that stretch (an empty queue).
func (s RankSnapshot) PositionBound(seq int64) (position int64, ok bool) {
	if s.Front < 0 || len(s.Counts) == 0 {
		return 0, false
	}
	ahead := seq - 1 // the highest sequence that can be ahead
	if ahead < s.Front {
		return 1, true
	}
	// The boundary at or before ahead (First ≤ Front ≤ ahead); beyond the last, the last.
	i := min((ahead-s.First)/RankBlock, int64(len(s.Counts))-1)
	bound := s.First + i*RankBlock
	// Those waiting at or below it, and every sequence after it up to ahead.
	n := s.Counts[i] + max(0, ahead-max(bound, s.Front-1))
	if i+1 < int64(len(s.Counts)) {
		// At most those at or below the next boundary, which is beyond ahead.
		n = min(n, s.Counts[i+1])
	}
	return n + 1, true
}
