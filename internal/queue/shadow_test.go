package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herdgate/herdgate/internal/phase"
)

// TestShadowPlaces runs the shadow queue on every kind of Redis: a shadow place reads as a place
// behind everyone waiting and never comes up; the real queue's positions, depth and instant
// admissions leave it out; a client that asks for the shadow factor times its burst takes shadow
// places from then on; and silent shadow places are swept like any.
func TestShadowPlaces(t *testing.T) {
	for _, b := range startBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Run("a shadow place never comes up and is counted apart", func(t *testing.T) { testShadowNeverAdmits(t, b) })
			t.Run("a client far over its limit takes shadow places", func(t *testing.T) { testShadowOverLimit(t, b) })
			t.Run("silent shadow places are swept", func(t *testing.T) { testShadowSwept(t, b) })
			t.Run("a failed challenge over the limit is refused", func(t *testing.T) { testShadowKeepsLimit(t, b) })
			t.Run("a shadow place reads as the lane the visitor would have joined", func(t *testing.T) { testShadowInALane(t, b) })
		})
	}
}

func testShadowNeverAdmits(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	enterAll(t, q, visitorIDs("a", 3)...)
	p, err := q.EnterFrom(ctx, "bot-1", longAbandon, EntryLimit{Shadow: true})
	if err != nil || p.State != Waiting || !p.Shadow || p.Position != 4 || p.Depth != 4 {
		t.Fatalf("a shadow entry = %+v, %v; want Waiting, shadow, place 4 of 4", p, err)
	}
	enterAll(t, q, "a-9999")
	if p, err := q.Status(ctx, "a-9999", longAbandon); err != nil || p.Shadow || p.Position != 4 || p.Depth != 4 {
		t.Fatalf("a real visitor behind the shadow place = %+v, %v; want place 4 of 4: the shadow place counts for nothing", p, err)
	}
	if p, err := q.Status(ctx, "bot-1", longAbandon); err != nil || !p.Shadow || p.Position != 5 || p.Depth != 5 {
		t.Fatalf("the shadow place polled = %+v, %v; want it behind all 4 waiting", p, err)
	}
	// Entering again keeps the shadow place; asking for a real one does not move it.
	if p, err := q.Enter(ctx, "bot-1", longAbandon); err != nil || !p.Shadow {
		t.Fatalf("the shadowed visitor entering again = %+v, %v; want its shadow place", p, err)
	}
	res, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 10, InstantBudget: 6, Tick: time.Second, PassTTL: passTTL, AbandonAfter: longAbandon})
	if err != nil || len(res.Admitted) != 4 {
		t.Fatalf("a tick of 10: %d admitted, %v; want the 4 real visitors", len(res.Admitted), err)
	}
	for _, a := range res.Admitted {
		if a.ID == "bot-1" {
			t.Fatal("a tick admitted the shadow place")
		}
	}
	// Nobody real waits: a newcomer is admitted at once, whoever holds a shadow place.
	if p, err := q.Enter(ctx, "a-new", longAbandon); err != nil || p.State != Admitted {
		t.Fatalf("a newcomer with only a shadow place in the room = %+v, %v; want admitted at once", p, err)
	}
	if p, err := q.Status(ctx, "bot-1", longAbandon); err != nil || !p.Shadow || p.Position != 1 || p.Depth != 1 {
		t.Fatalf("the shadow place with nobody else waiting = %+v, %v; want 1 of 1, still waiting", p, err)
	}
	st, err := q.Stats(ctx)
	if err != nil || st.Depth != 0 || st.Shadowed != 1 || st.ShadowedChallengeFailed != 1 || st.ShadowedOverLimit != 0 {
		t.Fatalf("stats = %+v, %v; want depth 0, 1 shadow place, given for a failed challenge", st, err)
	}
}

func testShadowOverLimit(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	limit := EntryLimit{Client: "203.0.113.7/32", Burst: 2, PerMinute: 1, ShadowFactor: 3}
	var got []string
	for i := range 8 {
		p, err := q.EnterFrom(ctx, fmt.Sprintf("v-%d", i), longAbandon, limit)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case p.Shadow:
			got = append(got, "shadow")
		case p.State == RateLimited:
			got = append(got, "refused")
		default:
			got = append(got, p.State.String())
		}
	}
	// A burst of 2: two places, then refusals, and from the sixth ask (3 × 2) shadow places.
	want := []string{"Waiting", "Waiting", "refused", "refused", "refused", "shadow", "shadow", "shadow"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("asks of one client: %v; want %v", got, want)
	}
	if st, err := q.Stats(ctx); err != nil || st.Shadowed != 3 || st.ShadowedOverLimit != 3 || st.ShadowedChallengeFailed != 0 || st.Depth != 2 {
		t.Fatalf("stats = %+v, %v; want 2 waiting, 3 shadow places given over the limit", st, err)
	}
	// Another client is not touched.
	if p, err := q.EnterFrom(ctx, "other", longAbandon, EntryLimit{Client: "198.51.100.1/32", Burst: 2, PerMinute: 1, ShadowFactor: 3}); err != nil || p.Shadow {
		t.Fatalf("another client's entry = %+v, %v", p, err)
	}
}

// silenceShadowPlace moves the last-seen time of visitor's shadow place back by d, by Redis' clock.
func silenceShadowPlace(t *testing.T, q *Queue, visitor string, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	seq, err := q.rdb.ZScore(ctx, q.keys.shadow, visitor).Result()
	if err != nil {
		t.Fatal(err)
	}
	now, err := q.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	writeLastSeen(t, q, int64(seq), now.Add(-d))
}

func testShadowSwept(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	const abandonAfter = time.Minute
	if _, err := q.EnterFrom(ctx, "bot-1", abandonAfter, EntryLimit{Shadow: true}); err != nil {
		t.Fatal(err)
	}
	silenceShadowPlace(t, q, "bot-1", 2*abandonAfter)
	if _, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 1, PassTTL: passTTL, AbandonAfter: abandonAfter}); err != nil {
		t.Fatal(err)
	}
	if n, err := q.rdb.ZCard(ctx, q.keys.shadow).Result(); err != nil || n != 0 {
		t.Fatalf("a silent shadow place after a tick's sweep: %d left, %v", n, err)
	}
}

// testShadowKeepsLimit: an entry sent to the shadow queue for its challenge still takes a place of
// its client's limit, and is refused like any once the limit is reached: failing a challenge is no
// way around it.
func testShadowKeepsLimit(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	limit := EntryLimit{Client: "203.0.113.7/32", Burst: 2, PerMinute: 1, Shadow: true}
	var got []string
	for i := range 4 {
		p, err := q.EnterFrom(ctx, fmt.Sprintf("bot-%d", i), longAbandon, limit)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s shadow=%t", p.State, p.Shadow))
	}
	want := []string{"Waiting shadow=true", "Waiting shadow=true", "RateLimited shadow=false", "RateLimited shadow=false"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("failed challenges of one client: %v; want %v", got, want)
	}
}

// testShadowInALane: a shadow place of a visitor who would have joined a lane reads as a place
// behind everyone waiting in that lane, lane named, on entry and on every poll, and before the draw
// as a pre-queue place of that lane; over the client's limit the same; a lane the room no longer has
// reads as the main queue; and a swept place leaves nothing of its lane behind.
func testShadowInALane(t *testing.T, b backend) {
	ctx := context.Background()
	q := laneQueue(t, b)
	enterAll(t, q, visitorIDs("a", 3)...)
	enterLane(t, q, "members", "m-1", "m-2")
	want := func(what string, p Position, err error, lane string, position, depth int64) {
		t.Helper()
		if err != nil || p.State != Waiting || !p.Shadow || p.Lane != lane || p.Position != position || p.Depth != depth {
			t.Fatalf("%s = %+v, %v; want a shadow place reading as %d of %d in lane %q", what, p, err, position, depth, lane)
		}
	}
	p, err := q.EnterFrom(ctx, "bot-1", longAbandon, EntryLimit{Lane: "members", Shadow: true})
	want("a shadow entry with the members lane", p, err, "members", 3, 3)
	p, err = q.Status(ctx, "bot-1", longAbandon)
	want("its poll", p, err, "members", 3, 3)
	p, err = q.Enter(ctx, "bot-1", longAbandon)
	want("its entry again, without the lane", p, err, "members", 3, 3)
	p, err = q.EnterFrom(ctx, "bot-2", longAbandon, EntryLimit{Shadow: true})
	want("a shadow entry without a lane", p, err, "", 5, 5)
	p, err = q.Status(ctx, "bot-1", longAbandon)
	want("the members shadow place behind a second shadow place", p, err, "members", 3, 4)
	if p, err := q.Status(ctx, "m-2", longAbandon); err != nil || p.Shadow || p.Position != 2 || p.Depth != 2 {
		t.Fatalf("a real members visitor = %+v, %v; want 2 of 2, the shadow places left out", p, err)
	}
	over := EntryLimit{Client: "203.0.113.7/32", Burst: 1, PerMinute: 1, ShadowFactor: 2, Lane: "presale"}
	var got []string
	for i := range 3 {
		p, err := q.EnterFrom(ctx, fmt.Sprintf("o-%d", i), longAbandon, over)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s shadow=%t lane=%s", p.State, p.Shadow, p.Lane))
	}
	// A burst of 1: one place, and from the second ask (2 × 1) shadow places, of the lane asked for.
	if want := "[Waiting shadow=false lane=presale Waiting shadow=true lane=presale Waiting shadow=true lane=presale]"; fmt.Sprint(got) != want {
		t.Fatalf("a client over its limit in the presale lane: %v; want %v", got, want)
	}

	// The room drops the lane: its shadow places read as the main queue's.
	if err := q.SetLanes([]string{"presale"}); err != nil {
		t.Fatal(err)
	}
	p, err = q.Status(ctx, "bot-1", longAbandon)
	want("the members shadow place once the room has no members lane", p, err, "", 4, 7)
	if err := q.SetLanes([]string{"members", "presale"}); err != nil {
		t.Fatal(err)
	}

	// A silent shadow place is swept with its lane.
	silenceShadowPlace(t, q, "bot-1", 2*longAbandon)
	if _, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 1, PassTTL: passTTL, AbandonAfter: longAbandon, Lanes: twoLanes}); err != nil {
		t.Fatal(err)
	}
	if ok, err := q.rdb.HExists(ctx, q.keys.shadowLanes, "bot-1").Result(); err != nil || ok {
		t.Fatalf("the lane of a swept shadow place is still recorded: %v, %v", ok, err)
	}
	if n, err := q.rdb.HLen(ctx, q.keys.shadowLanes).Result(); err != nil || n != 2 {
		t.Fatalf("%d shadow places' lanes recorded, %v; want the 2 presale places'", n, err)
	}

	// Before the draw, a shadow place of a lane reads as a pre-queue place of that lane.
	pq := laneQueue(t, b)
	publishPhase(t, pq, phase.PreQueue)
	for _, call := range []func() (Position, error){
		func() (Position, error) {
			return pq.EnterFrom(ctx, "bot-pre", longAbandon, EntryLimit{Lane: "presale", Shadow: true})
		},
		func() (Position, error) { return pq.Status(ctx, "bot-pre", longAbandon) },
	} {
		if p, err := call(); err != nil || p.State != PreQueued || p.Lane != "presale" {
			t.Fatalf("a shadow place of the presale lane before the draw = %+v, %v; want a pre-queue place of presale", p, err)
		}
	}
}
