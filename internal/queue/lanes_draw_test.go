package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/herdgate/herdgate/internal/draw"
	"github.com/herdgate/herdgate/internal/phase"
)

// TestTheDrawPlacesEachVisitorInItsLane: a visitor who joins a lane in the pre-queue takes part in
// the one draw with everybody else and is placed in its lane, in drawn order; a lane the room
// dropped before the draw sends its visitors to the main queue at their drawn places; a lane's new
// visitor while the draw runs waits behind the lane's drawn part, and no tick admits it before the
// draw is done; the record of which lane each joined is gone with the draw.
func TestTheDrawPlacesEachVisitorInItsLane(t *testing.T) {
	ctx := context.Background()
	rdb := startClient(t)
	q := newQueue(t, rdb)
	if err := q.SetLanes([]string{"members", "presale"}); err != nil {
		t.Fatal(err)
	}
	publishPhase(t, q, phase.PreQueue)
	laneOf := map[string]string{}
	var visitors []string
	for i := range 16 {
		for _, lane := range []string{"", "members", "presale"} {
			v := fmt.Sprintf("%s-%04d", map[string]string{"": "a", "members": "m", "presale": "p"}[lane], i)
			p, err := q.EnterFrom(ctx, v, drawAbandon, EntryLimit{Lane: lane})
			if err != nil || p.State != PreQueued || p.Arrival != int64(len(visitors)+1) || p.Lane != lane {
				t.Fatalf("Enter(%s, lane %q) in the pre-queue = %+v, %v; want PreQueued in its lane at arrival %d", v, lane, p, err, len(visitors)+1)
			}
			laneOf[v] = lane
			visitors = append(visitors, v)
		}
	}
	// Coming back or polling, a pre-queue visitor is told the lane it joined.
	if p, err := q.EnterFrom(ctx, "m-0003", drawAbandon, EntryLimit{}); err != nil || p.State != PreQueued || p.Lane != "members" {
		t.Fatalf("m-0003 entering again = %+v, %v; want PreQueued in members", p, err)
	}
	if p := mustStatus(t, q, "p-0003"); p.State != PreQueued || p.Lane != "presale" || p.Arrival != 12 {
		t.Fatalf("Status(p-0003) in the pre-queue = %+v; want PreQueued in presale at arrival 12", p)
	}
	// The room drops presale before it opens: those visitors wait in the main queue, and are told so.
	if err := q.SetLanes([]string{"members"}); err != nil {
		t.Fatal(err)
	}
	if p := mustStatus(t, q, "p-0003"); p.State != PreQueued || p.Lane != "" {
		t.Fatalf("Status(p-0003) once presale is dropped = %+v; want PreQueued in the main queue", p)
	}
	if p := mustStatus(t, q, "m-0003"); p.State != PreQueued || p.Lane != "members" {
		t.Fatalf("Status(m-0003) in the pre-queue = %+v; want PreQueued in members", p)
	}

	st, err := q.BeginDraw(ctx, time.UnixMilli(time.Now().UnixMilli()), phase.Open)
	if err != nil {
		t.Fatal(err)
	}
	arrivals, err := q.PreQueueArrivals(ctx)
	if err != nil || len(arrivals) != len(visitors) {
		t.Fatalf("PreQueueArrivals = %d, %v; want %d", len(arrivals), err, len(visitors))
	}
	draw.Order([]byte("a seed of thirty-two bytes, ok!!"), arrivals)
	st, err = q.PlaceDrawn(ctx, st, arrivals[:20], drawAbandon, phase.Open)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := q.EnterFrom(ctx, "m-late", drawAbandon, EntryLimit{Lane: "members"}); err != nil || p.State != Drawing {
		t.Fatalf("a members visitor entering while the draw runs = %+v, %v; want Drawing", p, err)
	}
	if p := mustStatus(t, q, "m-late"); p.State != Drawing {
		t.Fatalf("its status while the draw runs = %+v, want Drawing", p)
	}
	// A tick while drawing admits the placed part of every lane, and nobody behind it.
	res, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 100, PassTTL: passTTL, AbandonAfter: drawAbandon,
		Holding: true, Through: st.Settled(), Lanes: []LaneShare{{Name: "members", Percent: 20}}})
	if err != nil {
		t.Fatal(err)
	}
	var admitted, placedFirst []string
	for _, a := range res.Admitted {
		admitted = append(admitted, a.ID)
	}
	for _, a := range arrivals[:20] {
		placedFirst = append(placedFirst, visitors[a-1])
	}
	slices.Sort(admitted)
	slices.Sort(placedFirst)
	if diff := cmp.Diff(placedFirst, admitted); diff != "" {
		t.Fatalf("a tick while drawing admitted other than the 20 placed (-placed +admitted):\n%s", diff)
	}
	for from := 20; from < len(arrivals); from += MaxPlaceChunk {
		if st, err = q.PlaceDrawn(ctx, st, arrivals[from:min(from+MaxPlaceChunk, len(arrivals))], drawAbandon, phase.Open); err != nil {
			t.Fatal(err)
		}
	}
	if !st.Done {
		t.Fatalf("the draw ended as %+v, want done", st)
	}

	// Each set holds, in drawn order, the visitors of the rest of the draw that joined it.
	want := map[string][]string{}
	for _, a := range arrivals[20:] {
		v := visitors[a-1]
		set := q.keys.wait
		if laneOf[v] == "members" {
			set = q.laneKey("members")
		}
		want[set] = append(want[set], v)
	}
	want[q.laneKey("members")] = append(want[q.laneKey("members")], "m-late")
	for _, set := range []string{q.keys.wait, q.laneKey("members")} {
		got, err := rdb.ZRange(ctx, set, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want[set], got); diff != "" {
			t.Errorf("%s after the draw (-drawn order +held):\n%s", set, diff)
		}
	}
	for v, lane := range laneOf {
		if lane == "presale" && slices.Contains(want[q.keys.wait], v) {
			if p := mustStatus(t, q, v); p.State != Waiting || p.Lane != "" {
				t.Errorf("a visitor of the dropped lane = %+v, want waiting in the main queue", p)
			}
		}
	}
	if p := mustStatus(t, q, "m-late"); p.State != Waiting || p.Lane != "members" || p.Position != int64(len(want[q.laneKey("members")])) {
		t.Errorf("the members visitor who came during the draw = %+v, want last in members", p)
	}
	if n, err := rdb.Exists(ctx, q.keys.preLanes).Result(); err != nil || n != 0 {
		t.Errorf("the pre-queue's lanes outlive the draw: %d keys, %v", n, err)
	}
	if err := rdb.ZScore(ctx, q.keys.pre, visitors[0]).Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("the pre-queue outlives the draw: %v", err)
	}
}

// TestALanePlaceAFailoverLostComesBackToItsLane: a lane's visitor who brings back a place a failover
// lost re-enters at it in its lane, by entering or by polling; when the room has the lane no more, it
// re-enters at it in the main queue.
func TestALanePlaceAFailoverLostComesBackToItsLane(t *testing.T) {
	ctx := context.Background()
	rdb := startClient(t)
	q := newQueue(t, rdb)
	if err := q.SetLanes([]string{"members"}); err != nil {
		t.Fatal(err)
	}
	enterAll(t, q, "a")
	enterLane(t, q, "members", "m1", "m2")
	lose := func(seq int64, visitors ...string) {
		t.Helper()
		if err := rdb.Set(ctx, q.keys.seq, seq, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.ZRem(ctx, q.laneKey("members"), toAny(visitors)...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	lose(1, "m1", "m2")

	p, err := q.EnterFrom(ctx, "m2", longAbandon, EntryLimit{HeldPlace: 3, HeldLane: "members", Lane: "members"})
	if err != nil || p.State != Waiting || !p.Restored || p.Lane != "members" || p.Seq != 3 || p.Position != 1 || p.Depth != 1 {
		t.Fatalf("m2 back with its members place 3 = %+v, %v; want restored, 1 of 1 in members", p, err)
	}
	p, err = q.EnterFrom(ctx, "m1", longAbandon, EntryLimit{HeldPlace: 2, HeldLane: "members", OnlyHeldPlace: true})
	if err != nil || !p.Restored || p.Lane != "members" || p.Position != 1 || p.Depth != 2 {
		t.Fatalf("m1 polling for its members place 2 = %+v, %v; want restored, 1 of 2 in members", p, err)
	}
	if p := mustStatus(t, q, "a"); p.Lane != "" || p.Position != 1 || p.Depth != 1 {
		t.Fatalf("the main queue after the lane's places came back = %+v, want a alone", p)
	}
	if st, err := q.Stats(ctx); err != nil || st.Depth != 1 || st.Lanes[1].Depth != 2 {
		t.Fatalf("stats = %+v, %v; want 1 in the main queue and 2 in members", st, err)
	}

	// A proxy whose room has no lanes now gives a lane's lost place back in the main queue.
	enterLane(t, q, "members", "m3")
	lose(3, "m3")
	other, err := New(rdb, q.namespace, q.name)
	if err != nil {
		t.Fatal(err)
	}
	p, err = other.EnterFrom(ctx, "m3", longAbandon, EntryLimit{HeldPlace: 4, HeldLane: "members"})
	if err != nil || !p.Restored || p.Lane != "" || p.Seq != 4 || p.Position != 2 || p.Depth != 2 {
		t.Fatalf("m3 back with place 4 of a lane the room has no more = %+v, %v; want restored, 2 of 2 in the main queue", p, err)
	}
}
