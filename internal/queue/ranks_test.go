package queue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestARankSnapshotBoundsEveryPosition: over a queue of 300,000 with a tenth abandoned here and
// there, a position bound from the snapshot is never below the exact rank (ZRANK + 1), is off by less
// than the spacing of its boundaries, and is within 5 % from 5,000 on (the least exact zone);
// after admissions and abandonments the older snapshot still bounds every position from above, and
// bounds it tighter once the admissions since are taken off.
func TestARankSnapshotBoundsEveryPosition(t *testing.T) {
	ctx := context.Background()
	rdb := startClient(t)
	q := newQueue(t, rdb)
	const n = 300_000
	// Fill the waiting set directly, as enter would (sequence as score): this test is about counting.
	pipe := rdb.Pipeline()
	for i := 1; i <= n; i++ {
		pipe.ZAdd(ctx, q.keys.wait, zMember(float64(i), fmt.Sprintf("v%06d", i)))
		if i%10_000 == 0 {
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	var gone []any
	for i := 1; i <= n; i++ {
		if r.IntN(10) == 0 {
			gone = append(gone, fmt.Sprintf("v%06d", i))
		}
	}
	if err := rdb.ZRem(ctx, q.keys.wait, gone...).Err(); err != nil {
		t.Fatal(err)
	}
	snap, err := q.RankSnapshot(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	if want := RankBoundaries(snap.Front, snap.Tail); !slices.Equal(snap.Boundaries, want) || len(snap.Counts) != len(want) {
		t.Fatalf("%d boundaries and %d counts, want the %d of RankBoundaries", len(snap.Boundaries), len(snap.Counts), len(want))
	}
	if len(snap.Boundaries) > 500 {
		t.Fatalf("%d boundaries for %d sequences", len(snap.Boundaries), n)
	}
	check := func(what string, s RankSnapshot, strict bool, admitted int64) {
		t.Helper()
		worst := 0.0
		for seq := int64(1); seq <= n; seq += 1 + int64(r.IntN(97)) {
			member := fmt.Sprintf("v%06d", seq)
			rank, err := rdb.ZRank(ctx, q.keys.wait, member).Result()
			if err != nil {
				continue // not waiting
			}
			exact := rank + 1
			bound, ok := s.PositionBoundAfter(seq, admitted)
			if !ok || bound < exact {
				t.Fatalf("%s: sequence %d at position %d, bound %d (%v)", what, seq, exact, bound, ok)
			}
			if strict && exact >= 5_000 {
				worst = max(worst, float64(bound-exact)/float64(exact))
			}
			// Fresh, a bound is off by the sequences gone between two boundaries at most.
			if step := max(RankFineStep, int64(RankStepShare*float64(seq-s.Front))); strict && bound-exact > step {
				t.Fatalf("%s: sequence %d at %d, bound %d: off by more than the spacing %d", what, seq, exact, bound, step)
			}
		}
		if worst > 0.05 {
			t.Fatalf("%s: a far bound was %.1f %% above the exact position", what, 100*worst)
		}
		t.Logf("%s: worst far bound %.2f %% above the exact position", what, 100*worst)
	}
	check("fresh", snap, true, snap.Admitted)

	// The front moves and more leave; newcomers join behind. The old snapshot still bounds.
	if err := rdb.ZPopMin(ctx, q.keys.wait, 5000).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZRem(ctx, q.keys.wait, "v150001", "v150002", "v200000").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, q.keys.wait, zMember(n+1, "late")).Err(); err != nil {
		t.Fatal(err)
	}
	check("an older snapshot", snap, false, snap.Admitted)
	// 5,000 were admitted from the front since (the pop above stands in for a tick): taken off, the
	// bound stays a bound and is as tight as a fresh one.
	check("an older snapshot less the admissions since", snap, true, snap.Admitted+5000)
	if rank, err := rdb.ZRank(ctx, q.keys.wait, "late").Result(); err != nil {
		t.Fatal(err)
	} else if bound, _ := snap.PositionBoundAfter(n+1, snap.Admitted+5000); bound < rank+1 {
		t.Fatalf("the newcomer is at %d, bounded at %d", rank+1, bound)
	}
	// An empty queue knows nothing.
	empty, err := New(rdb, "test", "ranks-of-nobody")
	if err != nil {
		t.Fatal(err)
	}
	if s, err := empty.RankSnapshot(ctx, 10); err != nil || s.Front != -1 || s.Admitted != 0 {
		t.Fatalf("an empty queue's snapshot: %+v, %v", s, err)
	} else if _, ok := s.PositionBound(1); ok {
		t.Fatal("a bound from an empty snapshot")
	}
}

func zMember(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }
