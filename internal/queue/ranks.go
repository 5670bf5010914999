package queue

import (
	"context"
	_ "embed"
	"fmt"
	"sort"
	"strconv"
	"time"
)

var (
	//go:embed lua/ranks.lua
	ranksLua    string
	ranksScript = newScript(ranksLua)
)

const (
	// RankFineStep is the spacing of a RankSnapshot's boundaries near the front: a bound there is
	// off by at most the visitors waiting in one such stretch of sequences.
	RankFineStep = 128
	// RankStepShare: further back the spacing grows to this share of the distance from the front,
	// so that a bound is off by at most about 1 % wherever the spacing is wider than RankFineStep,
	// and a queue of 10⁷ needs about 770 boundaries.
	RankStepShare = 0.01
)

// RankSnapshot counts, at boundaries spaced RankFineStep apart near the front and RankStepShare of
// the distance from it further back, the waiting visitors at or below each boundary. Visitors leave
// the queue from anywhere (admitted at the front, abandoned anywhere) and join it behind everyone,
// so a count only falls with time: a bound from an older snapshot is still a bound, and tighter once
// the admissions since are taken off (PositionBoundAfter).
type RankSnapshot struct {
	// Front and Tail are the lowest and highest waiting sequence when the snapshot began; Front is
	// -1 for an empty queue.
	Front, Tail int64
	// Counts[i] counts the waiting visitors with a sequence at or below Boundaries[i].
	Boundaries, Counts []int64
	// Admitted counts the visitors admitted from the queue (not at once on entry) when the last
	// count was taken: every visitor admitted since was ahead of everyone still waiting.
	Admitted int64
	// At is when the snapshot began, by Redis' clock.
	At time.Time
}

// RankBoundaries are the boundaries of a snapshot of the sequences front to tail.
func RankBoundaries(front, tail int64) []int64 {
	var out []int64
	for b := front; ; {
		b += max(RankFineStep, int64(RankStepShare*float64(b-front)))
		out = append(out, min(b, tail))
		if b >= tail {
			return out
		}
	}
}

// RankSnapshot counts the boundaries from the front to the tail, at most perCall of them per call,
// so that no call holds Redis for long.
func (q *Queue) RankSnapshot(ctx context.Context, perCall int) (RankSnapshot, error) {
	if perCall < 1 {
		return RankSnapshot{}, fmt.Errorf("rank snapshot of queue %s: %d boundaries per call", q.prefix, perCall)
	}
	keys := []string{q.keys.wait, q.keys.totals}
	call := func(boundaries []int64) ([]int64, error) {
		args := make([]any, len(boundaries))
		for i, b := range boundaries {
			args[i] = strconv.FormatInt(b, 10)
		}
		raw, err := ranksScript.Run(ctx, q.rdb, keys, args...).Int64Slice()
		if err != nil {
			return nil, fmt.Errorf("rank snapshot of queue %s: %w", q.prefix, err)
		}
		if len(raw) < 4 || (raw[1] >= 0 && len(raw) != 4+len(boundaries)) {
			return nil, fmt.Errorf("unexpected rank reply %v", raw)
		}
		return raw, nil
	}
	raw, err := call(nil)
	if err != nil {
		return RankSnapshot{}, err
	}
	s := RankSnapshot{At: time.UnixMilli(raw[0]), Front: raw[1], Tail: raw[2], Admitted: raw[3]}
	if s.Front < 0 {
		return s, nil
	}
	s.Boundaries = RankBoundaries(s.Front, s.Tail)
	s.Counts = make([]int64, 0, len(s.Boundaries))
	for start := 0; start < len(s.Boundaries); start += perCall {
		part := s.Boundaries[start:min(len(s.Boundaries), start+perCall)]
		raw, err := call(part)
		if err != nil {
			return RankSnapshot{}, err
		}
		if raw[1] < 0 {
			// Everyone left meanwhile: what is counted is zero.
			raw = append(raw[:4], make([]int64, len(part))...)
		}
		// The admissions when the last count was taken: fewer are taken off a bound later than
		// were admitted since the earlier counts, which errs on the side of a bound.
		s.Admitted = raw[3]
		s.Counts = append(s.Counts, raw[4:]...)
	}
	return s, nil
}

// PositionBound bounds from above the 1-based position of the visitor that arrived with sequence
// seq, when the snapshot was taken: the waiting visitors ahead of it are at most those at or below
// the boundary at or after seq − 1, and at most those at or below the boundary before it plus every
// sequence in between. ok is false when the snapshot knows nothing (an empty queue).
func (s RankSnapshot) PositionBound(seq int64) (position int64, ok bool) {
	if s.Front < 0 || len(s.Counts) == 0 {
		return 0, false
	}
	ahead := seq - 1 // the highest sequence that can be ahead
	if ahead < s.Front {
		return 1, true
	}
	// The first boundary beyond ahead.
	next := sort.Search(len(s.Boundaries), func(i int) bool { return s.Boundaries[i] > ahead })
	var n int64
	if next == 0 {
		n = ahead - s.Front + 1 // every sequence from the front
	} else {
		b := s.Boundaries[next-1]
		n = s.Counts[next-1] + (ahead - b)
	}
	if next < len(s.Boundaries) {
		n = min(n, s.Counts[next])
	}
	return n + 1, true
}

// PositionBoundAfter is PositionBound once the queue has admitted admitted visitors in all (as
// SeenBatch reports): those admitted since the snapshot were ahead of everyone still waiting.
func (s RankSnapshot) PositionBoundAfter(seq, admitted int64) (position int64, ok bool) {
	p, ok := s.PositionBound(seq)
	if !ok {
		return 0, false
	}
	return max(1, p-max(0, admitted-s.Admitted)), true
}
