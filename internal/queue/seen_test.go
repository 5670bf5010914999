package queue

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestSignsOfLifeInABatch: enter and status tell a waiting visitor's sequence; a batch of signs of
// life keeps visitors from being dropped as a status call would, a silent one is still dropped, and
// the batch names those no longer waiting under their sequence (admitted, or a sequence not theirs).
func TestSignsOfLifeInABatch(t *testing.T) {
	ctx := context.Background()
	rdb := startClient(t)
	q := newQueue(t, rdb)
	const abandon = 400 * time.Millisecond
	seqs := map[string]int64{}
	for _, v := range []string{"ada", "bea", "cy", "dot"} {
		p, err := q.Enter(ctx, v, abandon)
		if err != nil || p.State != Waiting || p.Seq <= 0 {
			t.Fatalf("enter %s: %+v, %v", v, p, err)
		}
		score, _ := rdb.ZScore(ctx, q.keys.wait, v).Result()
		if int64(score) != p.Seq {
			t.Fatalf("%s: enter says sequence %d, the queue holds it at %v", v, p.Seq, score)
		}
		seqs[v] = p.Seq
	}
	if p, err := q.Status(ctx, "bea", abandon); err != nil || p.Seq != seqs["bea"] || p.Position != 2 {
		t.Fatalf("status of bea: %+v, %v", p, err)
	}

	// ada, bea and dot show signs of life through a proxy that answered them; cy stays silent.
	for range 3 {
		time.Sleep(abandon / 3)
		res, err := q.SeenBatch(ctx, []SeenVisitor{{"ada", seqs["ada"]}, {"bea", seqs["bea"]}, {"dot", seqs["dot"]}}, abandon)
		if err != nil || len(res.Gone) != 0 {
			t.Fatalf("signs of life: %+v, %v", res, err)
		}
	}
	// The tick's sweep drops the silent one only.
	if _, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 0, PassTTL: time.Minute, AbandonAfter: abandon}); err != nil {
		t.Fatal(err)
	}
	waiting, err := rdb.ZRange(ctx, q.keys.wait, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(waiting, []string{"ada", "bea", "dot"}) {
		t.Fatalf("waiting after the sweep: %v, want ada, bea and dot (cy was silent)", waiting)
	}

	// ada is admitted; a forged sequence for dot does not count as dot's sign of life.
	if res, err := q.Admit(ctx, AdmitRequest{TickID: 2, Limit: 1, PassTTL: time.Minute, AbandonAfter: abandon}); err != nil || len(res.Admitted) != 1 {
		t.Fatalf("admit: %+v, %v", res, err)
	}
	res, err := q.SeenBatch(ctx, []SeenVisitor{{"ada", seqs["ada"]}, {"bea", seqs["bea"]}, {"dot", seqs["dot"] + 1}}, abandon)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Gone, []string{"ada", "dot"}) || res.Admitted != 1 || res.Depth != 2 {
		t.Fatalf("the batch: gone %v, admitted %d, depth %d; want ada and dot, 1, 2", res.Gone, res.Admitted, res.Depth)
	}
	if _, err := q.SeenBatch(ctx, []SeenVisitor{{"bad id\n", 1}}, abandon); err == nil {
		t.Fatal("a visitor id with a newline was sent")
	}
}
