package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

// TestLanes runs the metered lanes on every kind of Redis: a lane visitor waits in its lane, in FIFO
// order; every tick's batch is shared by the lanes' percentages, exactly over the ticks; a lane with
// nobody waiting gives its share back; nobody is admitted at once while anyone waits in a lane; a code
// of several uses enters as many visitors; silent lane visitors never take a slot; and the counters
// tell each lane's depth and admissions.
func TestLanes(t *testing.T) {
	for _, b := range startBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Run("a lane visitor waits in its lane, FIFO, and keeps it", func(t *testing.T) { testLaneWaiting(t, b) })
			t.Run("the batch is shared by percentages, exactly over the ticks", func(t *testing.T) { testLaneShares(t, b) })
			t.Run("a lane with nobody waiting gives its share back", func(t *testing.T) { testLaneGivesBack(t, b) })
			t.Run("nobody is admitted at once while a lane has visitors", func(t *testing.T) { testLaneStopsInstantAdmission(t, b) })
			t.Run("a code of several uses enters that many visitors", func(t *testing.T) { testLaneCodeUses(t, b) })
			t.Run("silent lane visitors never take a slot", func(t *testing.T) { testLaneSilence(t, b) })
			t.Run("a tick tells how each lane's front moved", func(t *testing.T) { testLaneFronts(t, b) })
		})
	}
}

var twoLanes = []LaneShare{{Name: "members", Percent: 20}, {Name: "presale", Percent: 30}}

func laneQueue(t *testing.T, b backend) *Queue {
	t.Helper()
	q := queueOn(t, b)
	if err := q.SetLanes([]string{"members", "presale"}); err != nil {
		t.Fatal(err)
	}
	return q
}

func enterLane(t *testing.T, q *Queue, lane string, visitors ...string) {
	t.Helper()
	for _, v := range visitors {
		if _, err := q.EnterFrom(context.Background(), v, longAbandon, EntryLimit{Lane: lane}); err != nil {
			t.Fatalf("Enter(%s, lane %q): %v", v, lane, err)
		}
	}
}

// admitted runs one tick and returns the admitted visitors by lane, as their names say.
func admittedByPrefix(t *testing.T, q *Queue, tick int64, limit int, lanes []LaneShare) map[string][]string {
	t.Helper()
	res, err := q.Admit(context.Background(), AdmitRequest{TickID: tick, Limit: limit, PassTTL: passTTL, AbandonAfter: longAbandon, Lanes: lanes})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, a := range res.Admitted {
		prefix := a.ID[:1]
		out[prefix] = append(out[prefix], a.ID)
	}
	return out
}

func testLaneWaiting(t *testing.T, b backend) {
	ctx := context.Background()
	q := laneQueue(t, b)
	enterAll(t, q, visitorIDs("a", 3)...)
	enterLane(t, q, "members", visitorIDs("m", 2)...)
	enterLane(t, q, "nosuchlane", "x-0000")
	p, err := q.Status(ctx, "m-0001", longAbandon)
	if err != nil || p.State != Waiting || p.Lane != "members" || p.Position != 2 || p.Depth != 2 {
		t.Fatalf("a members visitor's status = %+v, %v; want 2 of 2 in members", p, err)
	}
	p, err = q.Status(ctx, "x-0000", longAbandon)
	if err != nil || p.Lane != "" || p.Position != 4 || p.Depth != 4 {
		t.Fatalf("a visitor of a lane the room does not have = %+v, %v; want 4 of 4 in the main queue", p, err)
	}
	// A visitor keeps the lane it took its place in, whatever it enters with later.
	if p, err = q.EnterFrom(ctx, "a-0001", longAbandon, EntryLimit{Lane: "members"}); err != nil || p.Lane != "" || p.Position != 2 {
		t.Fatalf("a main visitor entering again with a lane = %+v, %v; want its place 2 in the main queue", p, err)
	}
	if p, err = q.Enter(ctx, "m-0000", longAbandon); err != nil || p.Lane != "members" || p.Position != 1 || p.Depth != 2 {
		t.Fatalf("a members visitor entering again = %+v, %v; want its place 1 of 2 in members", p, err)
	}
	// With every tick's batch going to the members lane in full, its visitors come in arrival order.
	got := admittedByPrefix(t, q, 1, 2, []LaneShare{{Name: "members", Percent: 99}})
	if diff := cmp.Diff([]string{"m-0000", "m-0001"}, got["m"]); diff != "" {
		t.Errorf("members admitted (-want +got):\n%s", diff)
	}
}

func testLaneShares(t *testing.T, b backend) {
	q := laneQueue(t, b)
	enterAll(t, q, visitorIDs("a", 800)...)
	enterLane(t, q, "members", visitorIDs("m", 400)...)
	enterLane(t, q, "presale", visitorIDs("p", 500)...)
	counts := map[string]int{}
	const ticks, limit = 100, 14
	for tick := int64(1); tick <= ticks; tick++ {
		got := admittedByPrefix(t, q, tick, limit, twoLanes)
		total := 0
		for lane, ids := range got {
			counts[lane] += len(ids)
			total += len(ids)
		}
		if total != limit {
			t.Fatalf("tick %d admitted %d, want the limit %d", tick, total, limit)
		}
	}
	// 1,400 admitted: 50 %, 20 % and 30 % of them, to within the fraction one tick carries.
	for lane, want := range map[string]int{"a": 700, "m": 280, "p": 420} {
		if d := counts[lane] - want; d < -1 || d > 1 {
			t.Errorf("lane %s admitted %d of %d, want %d ± 1", lane, counts[lane], ticks*limit, want)
		}
	}
	st, err := q.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []LaneStats{{MainLane, int64(800 - counts["a"]), int64(counts["a"])}, {"members", int64(400 - counts["m"]), int64(counts["m"])},
		{"presale", int64(500 - counts["p"]), int64(counts["p"])}}
	if diff := cmp.Diff(want, st.Lanes); diff != "" {
		t.Errorf("lane stats (-want +got):\n%s", diff)
	}
}

func testLaneGivesBack(t *testing.T, b backend) {
	q := laneQueue(t, b)
	enterAll(t, q, visitorIDs("a", 100)...)
	enterLane(t, q, "presale", visitorIDs("p", 100)...)
	counts := map[string]int{}
	for tick := int64(1); tick <= 20; tick++ {
		for lane, ids := range admittedByPrefix(t, q, tick, 8, twoLanes) {
			counts[lane] += len(ids)
		}
	}
	// Nobody waits in members: its 20 % goes to the others by their weights, 50 : 30.
	if counts["a"]+counts["p"] != 160 || counts["a"] < 99 || counts["a"] > 101 {
		t.Fatalf("admitted %v in 20 ticks of 8; want 160, five eighths from the main queue", counts)
	}
	// Two members arrive: from the next tick on their lane takes its share, and no more than it
	// would have had: its idle ticks saved nothing up.
	enterLane(t, q, "members", visitorIDs("m", 2)...)
	if got := admittedByPrefix(t, q, 21, 8, twoLanes); len(got["m"]) != 2 || len(got["a"])+len(got["p"]) != 6 {
		t.Fatalf("the tick after two members came: %v; want both members and 6 others", got)
	}
	// A lane emptied mid-tick leaves its slots to the others.
	enterLane(t, q, "members", "m-9999")
	if got := admittedByPrefix(t, q, 22, 8, twoLanes); len(got["m"]) != 1 || len(got["a"])+len(got["p"]) != 7 {
		t.Fatalf("a lane of one: %v; want 1 member and 7 others", got)
	}
}

func testLaneStopsInstantAdmission(t *testing.T, b backend) {
	ctx := context.Background()
	q := laneQueue(t, b)
	// A tick with nobody waiting leaves its whole budget for entries at once.
	if _, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 10, InstantBudget: 10, Tick: time.Second, PassTTL: passTTL, AbandonAfter: longAbandon, Lanes: twoLanes}); err != nil {
		t.Fatal(err)
	}
	if p, err := q.EnterFrom(ctx, "m-0000", longAbandon, EntryLimit{Lane: "members"}); err != nil || p.State != Admitted {
		t.Fatalf("a members visitor into an empty room = %+v, %v; want admitted at once", p, err)
	}
	// A visitor waits in presale while budget is left (a tick leaves budget only once every lane is
	// empty, so put it there as a failover's write-back might): a main visitor may not pass it.
	if err := q.rdb.ZAdd(ctx, q.laneKey("presale"), redis.Z{Score: 1000, Member: "p-0000"}).Err(); err != nil {
		t.Fatal(err)
	}
	if p, err := q.Enter(ctx, "a-0000", longAbandon); err != nil || p.State != Waiting {
		t.Fatalf("a main visitor while a presale visitor waits = %+v, %v; want it to wait", p, err)
	}
	if p, err := q.EnterFrom(ctx, "m-0001", longAbandon, EntryLimit{Lane: "members"}); err != nil || p.State != Waiting || p.Lane != "members" {
		t.Fatalf("a members visitor while a presale visitor waits = %+v, %v; want it to wait in members", p, err)
	}
}

func testLaneCodeUses(t *testing.T, b backend) {
	ctx := context.Background()
	q := laneQueue(t, b)
	code := SingleUse{ID: "c0de", Until: time.Now().Add(time.Hour), Uses: 3}
	for i := range 3 {
		v := fmt.Sprintf("m-%04d", i)
		p, err := q.EnterFrom(ctx, v, longAbandon, EntryLimit{Lane: "members", SingleUse: []SingleUse{code}})
		if err != nil || p.State != Waiting || p.Lane != "members" {
			t.Fatalf("use %d of 3: %+v, %v", i+1, p, err)
		}
	}
	// The same visitor again takes no use; a fourth does not get in.
	if p, err := q.EnterFrom(ctx, "m-0001", longAbandon, EntryLimit{Lane: "members", SingleUse: []SingleUse{code}}); err != nil || p.State != Waiting {
		t.Fatalf("a visitor entering again with its code = %+v, %v", p, err)
	}
	p, err := q.EnterFrom(ctx, "m-0003", longAbandon, EntryLimit{Lane: "members", SingleUse: []SingleUse{code}})
	if err != nil || p.State != TokenSpent || p.Token != 0 {
		t.Fatalf("a fourth visitor with a code of three uses = %+v, %v; want TokenSpent", p, err)
	}
	if n, err := q.Stats(ctx); err != nil || n.Lanes[1].Depth != 3 {
		t.Fatalf("members after the code's uses: %+v, %v; want 3", n.Lanes, err)
	}
}

func testLaneSilence(t *testing.T, b backend) {
	ctx := context.Background()
	q := laneQueue(t, b)
	const abandonAfter = time.Minute
	enterLane(t, q, "members", visitorIDs("m", 4)...)
	for _, v := range []string{"m-0000", "m-0002"} {
		seq, err := q.rdb.ZScore(ctx, q.laneKey("members"), v).Result()
		if err != nil {
			t.Fatal(err)
		}
		now, err := q.rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		writeLastSeen(t, q, int64(seq), now.Add(-2*abandonAfter))
	}
	res, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 2, PassTTL: passTTL, AbandonAfter: abandonAfter, Lanes: twoLanes})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range res.Admitted {
		got = append(got, a.ID)
	}
	if diff := cmp.Diff([]string{"m-0001", "m-0003"}, got); diff != "" || res.Abandoned != 2 {
		t.Fatalf("admitted (-want +got):\n%s\nabandoned %d, want 2", diff, res.Abandoned)
	}
}

// TestRetiredLanesJoinTheMainQueue: the visitors of a lane the room no longer has join the main
// queue at their arrival, ahead of those who came after them.
func TestRetiredLanesJoinTheMainQueue(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t, startClient(t))
	if retired, err := q.ReconcileLanes(ctx, []string{"members", "presale"}); err != nil || len(retired) != 0 {
		t.Fatalf("the first lanes: retired %v, %v", retired, err)
	}
	if err := q.SetLanes([]string{"members", "presale"}); err != nil {
		t.Fatal(err)
	}
	enterAll(t, q, "a-0000")
	enterLane(t, q, "members", "m-0000")
	enterAll(t, q, "a-0001")
	enterLane(t, q, "presale", "p-0000")
	retired, err := q.ReconcileLanes(ctx, []string{"presale"})
	if err != nil || len(retired) != 1 || retired[0] != "members" {
		t.Fatalf("dropping members: retired %v, %v", retired, err)
	}
	if err := q.SetLanes([]string{"presale"}); err != nil {
		t.Fatal(err)
	}
	if p, err := q.Status(ctx, "m-0000", longAbandon); err != nil || p.Lane != "" || p.Position != 2 || p.Depth != 3 {
		t.Fatalf("a retired lane's visitor = %+v, %v; want 2 of 3 in the main queue, by its arrival", p, err)
	}
	if p, err := q.Status(ctx, "p-0000", longAbandon); err != nil || p.Lane != "presale" {
		t.Fatalf("a kept lane's visitor = %+v, %v", p, err)
	}
	if retired, err := q.ReconcileLanes(ctx, []string{"presale"}); err != nil || len(retired) != 0 {
		t.Fatalf("no change: retired %v, %v", retired, err)
	}
}

func testLaneFronts(t *testing.T, b backend) {
	ctx := context.Background()
	q := laneQueue(t, b)
	enterAll(t, q, visitorIDs("a", 20)...)
	enterLane(t, q, "members", visitorIDs("m", 2)...)
	seqOf := func(key, visitor string) int64 {
		t.Helper()
		s, err := b.rdb.ZScore(ctx, key, visitor).Result()
		if err != nil {
			t.Fatal(err)
		}
		return int64(s)
	}
	mainHead, membersHead := seqOf(q.keys.wait, "a-0000"), seqOf(q.laneKey("members"), "m-0000")
	// Ten a tick: members takes 2 of its 20 %, and runs empty; presale has nobody and takes nothing.
	res, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 10, PassTTL: passTTL, AbandonAfter: longAbandon, Lanes: twoLanes})
	if err != nil {
		t.Fatal(err)
	}
	want := []FrontMove{{Head: mainHead, Admitted: 8, Depth: 12, Taken: 8}, {Head: membersHead, Admitted: 2, Emptied: true, Taken: 2}, {Head: -1}}
	if diff := cmp.Diff(want, res.Fronts); diff != "" {
		t.Fatalf("fronts (-want +got):\n%s", diff)
	}
	res, err = q.Admit(ctx, AdmitRequest{TickID: 2, Limit: 20, PassTTL: passTTL, AbandonAfter: longAbandon, Lanes: twoLanes})
	if err != nil {
		t.Fatal(err)
	}
	// The main queue's visitors entered one after the other: its front moved on by the eight taken.
	want = []FrontMove{{Head: mainHead + 8, Admitted: 12, Emptied: true, Taken: 12}, {Head: -1}, {Head: -1}}
	if diff := cmp.Diff(want, res.Fronts); diff != "" {
		t.Fatalf("fronts (-want +got):\n%s", diff)
	}
	// A lane's waiting visitor reads its lane's front, as the last tick left it.
	enterLane(t, q, "presale", "p-0000", "p-0001")
	if _, err := q.Admit(ctx, AdmitRequest{TickID: 3, Limit: 0, PassTTL: passTTL, AbandonAfter: longAbandon, Lanes: twoLanes}); err != nil {
		t.Fatal(err)
	}
	first, err := q.Status(ctx, "p-0000", longAbandon)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := q.Status(ctx, "p-0001", longAbandon); err != nil || p.Lane != "presale" || p.Front != first.Seq {
		t.Fatalf("a presale visitor's status = %+v, %v; want the lane's front at %d", p, err, first.Seq)
	}
}
