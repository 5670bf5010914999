package queue

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herdgate/herdgate/internal/draw"
	"github.com/herdgate/herdgate/internal/phase"
)

// publishPhase publishes a plan whose phase is phase.
func publishPhase(t *testing.T, q *Queue, phase phase.Phase) {
	t.Helper()
	if err := q.PublishPlan(context.Background(), PublishedPlan{Quota: mustQuota(t, 14, 100*time.Millisecond), PollMin: time.Second, PollMax: 5 * time.Second,
		AbandonAfter: longAbandon, Phase: phase}); err != nil {
		t.Fatal(err)
	}
}

// drawAbandon is how long a silent visitor keeps a place in these tests.
const drawAbandon = time.Minute

func mustEnter(t *testing.T, q *Queue, visitor string) Position {
	t.Helper()
	p, err := q.Enter(context.Background(), visitor, drawAbandon)
	if err != nil {
		t.Fatalf("Enter(%s): %v", visitor, err)
	}
	return p
}

func mustStatus(t *testing.T, q *Queue, visitor string) Position {
	t.Helper()
	p, err := q.Status(context.Background(), visitor, drawAbandon)
	if err != nil {
		t.Fatalf("Status(%s): %v", visitor, err)
	}
	return p
}

// silencePreQueued moves a pre-queue visitor's last-seen time back by d.
func silencePreQueued(t *testing.T, q *Queue, visitor string, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	seq, err := q.rdb.ZScore(ctx, q.keys.pre, visitor).Result()
	if err != nil {
		t.Fatalf("silencePreQueued(%s): %v", visitor, err)
	}
	now, err := q.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	writeLastSeen(t, q, int64(seq), now.Add(-d))
}

// testScheduleAndDraw walks a room through its schedule: turned away before the pre-queue, pre-queue
// places with arrival numbers, the draw in chunks (with Enter and Status meanwhile), the queue behind
// it, closing, and a second opening.
func testScheduleAndDraw(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	seed := []byte("a seed of thirty-two bytes, ok!!")
	const abandon = drawAbandon

	publishPhase(t, q, phase.Scheduled)
	if p := mustEnter(t, q, "early"); p.State != TurnedAway || p.Phase != phase.Scheduled {
		t.Fatalf("Enter while Scheduled = %+v, want TurnedAway (Scheduled)", p)
	}
	if p := mustStatus(t, q, "early"); p.State != NotQueued || p.Phase != phase.Scheduled {
		t.Fatalf("Status while Scheduled = %+v, want NotQueued (Scheduled)", p)
	}

	// The pre-queue: places have an arrival number and no position; coming back keeps the number.
	// A budget for instant admission admits nobody before the room is open.
	if _, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 14, InstantBudget: 14, Tick: time.Minute, PassTTL: passTTL, AbandonAfter: abandon}); err != nil {
		t.Fatal(err)
	}
	publishPhase(t, q, phase.PreQueue)
	visitors := visitorIDs("pre", 40)
	for i, v := range visitors {
		p := mustEnter(t, q, v)
		if p.State != PreQueued || p.Arrival != int64(i+1) || p.Depth != int64(i+1) {
			t.Fatalf("Enter(%s) in the pre-queue = %+v, want PreQueued, arrival and depth %d", v, p, i+1)
		}
	}
	if p := mustEnter(t, q, visitors[3]); p.State != PreQueued || p.Arrival != 4 || p.Depth != 40 {
		t.Fatalf("Enter again in the pre-queue = %+v, want arrival 4 of 40", p)
	}
	if p := mustStatus(t, q, visitors[5]); p.State != PreQueued || p.Arrival != 6 || p.PreviousPoll.IsZero() {
		t.Fatalf("Status in the pre-queue = %+v, want PreQueued with arrival 6 and the previous poll", p)
	}
	if st, err := q.Stats(ctx); err != nil || st.PreQueued != 40 || st.Depth != 0 || st.AdmittedTotal != 0 {
		t.Fatalf("stats in the pre-queue = %+v, %v; want 40 pre-queued, nobody waiting or admitted", st, err)
	}
	silencePreQueued(t, q, visitors[7], 2*abandon)
	silencePreQueued(t, q, visitors[8], 2*abandon)

	// Opening: the pre-queue freezes; the plan says Opening whatever the scheduler publishes.
	opensAt := time.UnixMilli(time.Now().UnixMilli())
	st, err := q.BeginDraw(ctx, opensAt, phase.Open)
	if err != nil || st.Base != 40 || st.Size != 40 || st.Placed != 0 || st.Done {
		t.Fatalf("BeginDraw = %+v, %v; want base 40, size 40", st, err)
	}
	if again, err := q.BeginDraw(ctx, opensAt, phase.Open); err != nil || again != st {
		t.Fatalf("BeginDraw again = %+v, %v; want the same draw %+v", again, err, st)
	}
	// The first seed settled is the draw's, for every scheduler that finishes it.
	if kept, err := q.SettleDrawSeed(ctx, opensAt, ""); err != nil || kept != "" {
		t.Fatalf("the seed of a draw none settled = %q, %v; want none", kept, err)
	}
	if kept, err := q.SettleDrawSeed(ctx, opensAt, "beacon round 7"); err != nil || kept != "beacon round 7" {
		t.Fatalf("settling the seed = %q, %v", kept, err)
	}
	if kept, err := q.SettleDrawSeed(ctx, opensAt, "fallback"); err != nil || kept != "beacon round 7" {
		t.Fatalf("a second scheduler settling another seed = %q, %v; want the first", kept, err)
	}
	if _, err := q.SettleDrawSeed(ctx, opensAt.Add(time.Minute), "x"); !errors.Is(err, ErrDrawMoved) {
		t.Fatalf("settling the seed of another opening: %v; want ErrDrawMoved", err)
	}
	publishPhase(t, q, phase.PreQueue)
	if plan, err := q.ReadPlan(ctx); err != nil || plan.Phase != phase.Opening {
		t.Fatalf("the plan while drawing says %q (%v), want Opening", plan.Phase, err)
	}
	if p := mustEnter(t, q, "opening-1"); p.State != Drawing {
		t.Fatalf("Enter while drawing = %+v, want Drawing", p)
	}
	if p := mustStatus(t, q, visitors[0]); p.State != Drawing || p.PreviousPoll.IsZero() {
		t.Fatalf("Status of a pre-queue visitor not placed yet = %+v, want Drawing", p)
	}

	arrivals, err := q.PreQueueArrivals(ctx)
	if err != nil || len(arrivals) != 40 {
		t.Fatalf("PreQueueArrivals = %d, %v; want 40", len(arrivals), err)
	}
	draw.Order(seed, arrivals)
	// The first chunk of 12 places up to 12 visitors (fewer when a silent one is among them).
	next, err := q.PlaceDrawn(ctx, st, arrivals[:12], abandon, phase.Open)
	if err != nil || next.Step != 1 || next.Done || next.Placed+next.Dropped != 12 {
		t.Fatalf("PlaceDrawn = %+v, %v; want step 1 with 12 handled", next, err)
	}
	if _, err := q.PlaceDrawn(ctx, st, arrivals[:12], abandon, phase.Open); !errors.Is(err, ErrDrawMoved) {
		t.Fatalf("the same chunk again: %v, want ErrDrawMoved", err)
	}
	placedFirst := []string{}
	for _, a := range arrivals[:12] {
		if v := visitors[a-1]; v != visitors[7] && v != visitors[8] {
			placedFirst = append(placedFirst, v)
		}
	}
	for i, v := range placedFirst {
		if p := mustStatus(t, q, v); p.State != Waiting || p.Position != int64(i+1) {
			t.Fatalf("Status of the visitor drawn %d-th = %+v, want Waiting at %d", i+1, p, i+1)
		}
	}
	if p := mustStatus(t, q, "opening-1"); p.State != Drawing {
		t.Fatalf("Status of a visitor behind the pre-queue while drawing = %+v, want Drawing", p)
	}
	// Ticks while drawing admit from the placed part only, never the visitor behind it.
	res, err := q.Admit(ctx, AdmitRequest{TickID: 2, Limit: 100, PassTTL: passTTL, AbandonAfter: abandon, Holding: true, Through: next.Settled()})
	if err != nil || len(res.Admitted) != len(placedFirst) {
		t.Fatalf("a tick while drawing admitted %d (%v), want the %d placed", len(res.Admitted), err, len(placedFirst))
	}
	for i, a := range res.Admitted {
		if a.ID != placedFirst[i] {
			t.Fatalf("admitted %d-th: %s, want %s in drawn order", i+1, a.ID, placedFirst[i])
		}
	}

	// The rest, in chunks; then the room is Open and the record checks against the seed.
	for from := 12; from < len(arrivals); from += 10 {
		if next, err = q.PlaceDrawn(ctx, next, arrivals[from:min(from+10, len(arrivals))], abandon, phase.Open); err != nil {
			t.Fatal(err)
		}
	}
	if !next.Done || next.Placed != 38 || next.Dropped != 2 {
		t.Fatalf("the draw ended as %+v, want done with 38 placed and the 2 silent dropped", next)
	}
	if plan, _ := q.ReadPlan(ctx); plan.Phase != phase.Open {
		t.Fatalf("the plan after the draw says %q, want Open", plan.Phase)
	}
	if got, err := q.ReadDrawState(ctx); err != nil || got != next {
		t.Fatalf("ReadDrawState = %+v, %v; want %+v", got, err, next)
	}
	var buf bytes.Buffer
	if n, err := q.WriteDrawRecord(ctx, &buf); err != nil || n != 38 {
		t.Fatalf("WriteDrawRecord wrote %d lines (%v), want 38", n, err)
	}
	record, err := draw.ParseRecord(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if err := draw.Verify(seed, draw.Commitment(seed), record); err != nil {
		t.Fatalf("the draw's record does not verify: %v", err)
	}
	// Behind the pre-queue, strictly in arrival order.
	late := mustEnter(t, q, "opening-2")
	if p := mustStatus(t, q, "opening-1"); p.State != Waiting || p.Position != 38-int64(len(placedFirst))+1 || late.Position != p.Position+1 {
		t.Fatalf("after the draw, the first visitor behind the pre-queue = %+v and the next %+v", p, late)
	}
	if stats, _ := q.Stats(ctx); stats.AbandonedTotal != 2 || stats.PreQueued != 0 {
		t.Fatalf("stats after the draw = %+v, want the 2 silent abandoned and no pre-queue", stats)
	}

	// Closed: no newcomer; the queue keeps its places and drains.
	publishPhase(t, q, phase.Closed)
	if p := mustEnter(t, q, "too-late"); p.State != TurnedAway || p.Phase != phase.Closed {
		t.Fatalf("Enter after closing = %+v, want TurnedAway (Closed)", p)
	}
	if p := mustEnter(t, q, "opening-2"); p.State != Waiting {
		t.Fatalf("Enter of a waiting visitor after closing = %+v, want Waiting", p)
	}
	if res, err := q.Admit(ctx, AdmitRequest{TickID: 3, Limit: 100, PassTTL: passTTL, AbandonAfter: abandon}); err != nil || len(res.Admitted) != 38-len(placedFirst)+2 {
		t.Fatalf("a tick after closing admitted %d (%v), want everyone left", len(res.Admitted), err)
	}

	// A second opening draws its own pre-queue, behind nobody, with a record of its own.
	publishPhase(t, q, phase.PreQueue)
	for _, v := range visitorIDs("second", 5) {
		if p := mustEnter(t, q, v); p.State != PreQueued {
			t.Fatalf("Enter in the second pre-queue = %+v", p)
		}
	}
	second, err := q.BeginDraw(ctx, opensAt.Add(time.Hour), phase.Closed)
	if err != nil || second.Size != 5 || second.Base <= st.Base+st.Size {
		t.Fatalf("the second BeginDraw = %+v, %v", second, err)
	}
	if kept, err := q.SettleDrawSeed(ctx, opensAt.Add(time.Hour), ""); err != nil || kept != "" {
		t.Fatalf("the seed of the second opening = %q, %v; want none of the first's", kept, err)
	}
	if _, err := q.BeginDraw(ctx, opensAt.Add(2*time.Hour), phase.Open); !errors.Is(err, ErrDrawMoved) {
		t.Fatalf("a third draw while the second runs: %v, want ErrDrawMoved", err)
	}
	arrivals, _ = q.PreQueueArrivals(ctx)
	draw.Order(seed, arrivals)
	if second, err = q.PlaceDrawn(ctx, second, arrivals, abandon, phase.Closed); err != nil || !second.Done {
		t.Fatalf("placing the second pre-queue = %+v, %v", second, err)
	}
	if plan, _ := q.ReadPlan(ctx); plan.Phase != phase.Closed {
		t.Fatalf("the plan after a draw past closing says %q, want Closed", plan.Phase)
	}
	buf.Reset()
	if n, _ := q.WriteDrawRecord(ctx, &buf); n != 5 {
		t.Fatalf("the second record holds %d lines, want 5", n)
	}
	// An opening with nobody in the pre-queue is done at once.
	if empty, err := q.BeginDraw(ctx, opensAt.Add(3*time.Hour), phase.Open); err != nil || !empty.Done || empty.Size != 0 {
		t.Fatalf("BeginDraw of an empty pre-queue = %+v, %v; want done", empty, err)
	}
	if plan, _ := q.ReadPlan(ctx); plan.Phase != phase.Open {
		t.Fatalf("the plan after an empty draw says %q, want Open", plan.Phase)
	}
	if _, err := q.PlaceDrawn(ctx, second, make([]int64, MaxPlaceChunk+1), abandon, phase.Open); err == nil {
		t.Fatal("PlaceDrawn accepted a chunk above MaxPlaceChunk")
	}
}

// TestAPassOfAnEarlierOpeningHoldsNoPlace: a visitor whose pass record is of an opening before the
// current schedule's pre-queue is treated as holding none: it takes a pre-queue place like anyone
// else, and neither enter nor status hands its old pass out again.
func TestAPassOfAnEarlierOpeningHoldsNoPlace(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t, startClient(t))
	mustEnter(t, q, "returning")
	res, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 1, PassTTL: time.Hour, AbandonAfter: drawAbandon})
	if err != nil || len(res.Admitted) != 1 {
		t.Fatalf("admitting at the earlier opening: %+v, %v", res, err)
	}
	issued := res.Admitted[0].Pass.NotBefore
	publish := func(preQueueFrom time.Time) {
		t.Helper()
		if err := q.PublishPlan(ctx, PublishedPlan{Quota: mustQuota(t, 14, 100*time.Millisecond), PollMin: time.Second, PollMax: 5 * time.Second,
			AbandonAfter: longAbandon, Phase: phase.PreQueue, PreQueueFrom: preQueueFrom, OpensAt: preQueueFrom.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	// A schedule whose pre-queue began before the pass was issued keeps it.
	publish(issued.Add(-time.Second))
	if p := mustStatus(t, q, "returning"); p.State != Admitted {
		t.Fatalf("Status with a pass of this opening = %+v, want Admitted", p)
	}
	// The next launch's pre-queue began after it: the old pass counts for nothing.
	publish(issued.Add(time.Millisecond))
	if p := mustStatus(t, q, "returning"); p.State != NotQueued {
		t.Fatalf("Status with a pass of an earlier opening = %+v, want NotQueued", p)
	}
	if p := mustEnter(t, q, "returning"); p.State != PreQueued || p.Arrival == 0 {
		t.Fatalf("Enter with a pass of an earlier opening = %+v, want a pre-queue place", p)
	}

	// At the opening its slot under maxActive is freed; a pass of this opening keeps its own.
	if err := q.PublishPlan(ctx, PublishedPlan{Quota: mustQuota(t, 14, 100*time.Millisecond), PollMin: time.Second, PollMax: 5 * time.Second, AbandonAfter: longAbandon}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enter(ctx, "current", drawAbandon); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // a not-before time after the earlier pass's, by Redis' clock
	res, err = q.Admit(ctx, AdmitRequest{TickID: 2, Limit: 1, PassTTL: time.Hour, AbandonAfter: drawAbandon})
	if err != nil || len(res.Admitted) != 1 || res.Admitted[0].ID != "current" {
		t.Fatalf("admitting a visitor of this opening: %+v, %v", res, err)
	}
	if st, err := q.Stats(ctx); err != nil || st.Active != 2 {
		t.Fatalf("active passes before the opening forgets the earlier one = %+v, %v; want 2", st, err)
	}
	forgotten, err := q.ForgetPassesBefore(ctx, issued.Add(time.Millisecond))
	if err != nil || forgotten != 1 {
		t.Fatalf("ForgetPassesBefore = %d, %v; want the earlier opening's one pass", forgotten, err)
	}
	if st, err := q.Stats(ctx); err != nil || st.Active != 1 {
		t.Fatalf("active passes after = %+v, %v; want this opening's 1", st, err)
	}
	if again, err := q.ForgetPassesBefore(ctx, issued.Add(time.Millisecond)); err != nil || again != 0 {
		t.Fatalf("ForgetPassesBefore again = %d, %v; want nothing left to forget", again, err)
	}
}

// TestForgettingAnEarlierOpeningScansInBoundedCalls: the passes of an earlier opening are dropped a
// thousand active passes per call, whatever their number.
func TestForgettingAnEarlierOpeningScansInBoundedCalls(t *testing.T) {
	ctx := context.Background()
	rdb := startClient(t)
	q := newQueue(t, rdb)
	const n = 2500
	visitors := visitorIDs("old", n)
	for _, v := range visitors {
		mustEnter(t, q, v)
	}
	for tick := int64(1); ; tick++ {
		res, err := q.Admit(ctx, AdmitRequest{TickID: tick, Limit: MaxAdmitPerTick, PassTTL: time.Hour, AbandonAfter: drawAbandon})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Admitted) == 0 {
			break
		}
	}
	if st, err := q.Stats(ctx); err != nil || st.Active != n {
		t.Fatalf("active = %+v, %v; want %d", st, err, n)
	}
	forgotten, err := q.ForgetPassesBefore(ctx, time.Now().Add(time.Hour))
	if err != nil || forgotten != n {
		t.Fatalf("ForgetPassesBefore = %d, %v; want %d", forgotten, err, n)
	}
	if st, err := q.Stats(ctx); err != nil || st.Active != 0 {
		t.Fatalf("active after = %+v, %v; want 0", st, err)
	}
	if left, err := rdb.HLen(ctx, q.keys.passes).Result(); err != nil || left != 0 {
		t.Fatalf("pass records left: %d (%v)", left, err)
	}
}
