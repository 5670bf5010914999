package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdgate/herdgate/internal/draw"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
)

func TestSchedulerDrawsThePreQueueAtOpening(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	opensAt := gridStart.Add(time.Second)
	cfg := h.queue("launch", builder.Queue("", "").Schedule(gridStart.Add(-time.Minute), opensAt, gridStart.Add(time.Hour)))
	cfg.DrawSeed = []byte("the seed of the launch test.....")
	h.s.Ensure(cfg)
	q := h.engine("launch")

	// Before opening: the phase is PreQueue, nobody is admitted, and visitors take pre-queue places.
	if r := h.mustStep(100 * time.Millisecond); r.Phase != phase.PreQueue || r.Quota != 0 {
		t.Fatalf("a tick in the pre-queue: phase %s, quota %d; want PreQueue and 0", r.Phase, r.Quota)
	}
	if plan, err := publishedPlan(q, func(p queue.PublishedPlan) bool { return p.Phase == phase.PreQueue }); err != nil || plan.Phase != phase.PreQueue || !plan.OpensAt.Equal(opensAt) {
		t.Fatalf("the published plan = %+v, %v; want phase PreQueue and the opening time", plan, err)
	}
	// A pass of an earlier opening, still unexpired, holds a slot until the opening drops it.
	rdb, err := queue.NewClient(h.redis.URL(), queue.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	leftoverExpiry := time.Now().Add(time.Hour).UnixMilli() // Redis' clock, not the grid's
	if err := rdb.HSet(ctx, q.KeyPrefix()+":passes", "leftover", fmt.Sprintf("%d:%d", gridStart.Add(-time.Hour).UnixMilli(), leftoverExpiry)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, q.KeyPrefix()+":a", redis.Z{Score: float64(leftoverExpiry), Member: "leftover"}).Err(); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	for i := range n {
		p, err := q.Enter(ctx, fmt.Sprintf("v%05d", i), time.Hour)
		if err != nil || p.State != queue.PreQueued || p.Arrival != int64(i+1) {
			t.Fatalf("Enter in the pre-queue = %+v, %v", p, err)
		}
	}
	for range 8 {
		if r := h.mustStep(100 * time.Millisecond); len(r.Result.Admitted) != 0 {
			t.Fatal("a tick before opening admitted somebody")
		}
	}
	// The tick at opensAt draws the pre-queue and admits the first of the drawn order.
	r := h.mustStep(100 * time.Millisecond)
	if !r.Scheduled.Equal(opensAt) || r.Phase != phase.Open || len(r.Result.Admitted) != 14 {
		t.Fatalf("the opening tick at %s: phase %s, admitted %d; want Open and 14 at %s", r.Scheduled, r.Phase, len(r.Result.Admitted), opensAt)
	}
	if err := rdb.ZScore(ctx, q.KeyPrefix()+":a", "leftover").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("the earlier opening's pass still holds its slot after the opening (%v)", err)
	}
	order := make([]int64, n)
	for i := range order {
		order[i] = int64(i + 1)
	}
	draw.Order(cfg.DrawSeed, order)
	for i, a := range r.Result.Admitted {
		arrival, _ := strconv.ParseInt(strings.TrimPrefix(a.ID, "v"), 10, 64)
		if arrival+1 != order[i] {
			t.Fatalf("admitted %d-th: arrival %d, the draw put arrival %d there", i+1, arrival+1, order[i])
		}
	}
	snap, _ := h.s.Snapshot(cfg.UID)
	if d := snap.Draw; d == nil || !d.Done || d.Size != n || d.Placed != n || d.Calls < 1+n/queue.MaxPlaceChunk || d.LongestCall <= 0 {
		t.Fatalf("the snapshot's draw = %+v, want done with %d placed and its calls timed", d, n)
	}
	// Later visitors queue behind the pre-queue.
	if p, err := q.Enter(ctx, "after-opening", time.Hour); err != nil || p.State != queue.Waiting || p.Position != n-14+1 {
		t.Fatalf("Enter after opening = %+v, %v; want Waiting behind the pre-queue at %d", p, err, n-14+1)
	}
	// The draw is not run again, and the next ticks go on admitting.
	if r := h.mustStep(100 * time.Millisecond); r.Phase != phase.Open || len(r.Result.Admitted) != 14 {
		t.Fatalf("the tick after opening: phase %s, admitted %d", r.Phase, len(r.Result.Admitted))
	}
	if after, _ := h.s.Snapshot(cfg.UID); after.Draw.Calls != snap.Draw.Calls {
		t.Fatalf("the draw made %d more Redis calls after it was done", after.Draw.Calls-snap.Draw.Calls)
	}
}

func TestSchedulerHoldsAnOpeningWithoutASeed(t *testing.T) {
	h := newHarness(t)
	h.fill("seedless", 20) // visitors from before the schedule, which must not pass the pre-queue
	cfg := h.queue("seedless", builder.Queue("", "").Schedule(time.Time{}, gridStart, time.Time{}))
	h.s.Ensure(cfg)
	r := h.mustStep(100 * time.Millisecond)
	snap, _ := h.s.Snapshot(cfg.UID)
	if r.Phase != phase.Opening || len(r.Result.Admitted) != 0 || !strings.Contains(snap.DrawError, "seed") || snap.RedisError != "" {
		t.Fatalf("the opening tick of a queue without a seed: phase %s, admitted %d, draw error %q, Redis error %q; want Opening, nobody, an error naming the seed",
			r.Phase, len(r.Result.Admitted), snap.DrawError, snap.RedisError)
	}
}
