package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/test/testenv"
)

const (
	longAbandon = time.Hour
	passTTL     = 5 * time.Minute
)

// backend is one kind of Redis deployment the engine must work on.
type backend struct {
	name string
	rdb  redis.UniversalClient
	// store, when set, batches the queues' polls into pipelines.
	store *Store
	// nodes are direct clients of every server, to look at keys wherever they live.
	nodes []*redis.Client
}

func startBackends(t *testing.T) []backend {
	t.Helper()
	plain := testenv.StartRedis(t)
	tlsServer := testenv.StartRedis(t, testenv.WithTLS())
	cluster := testenv.StartRedisCluster(t, 3)

	var out []backend
	add := func(name, url string, opts ClientOptions, nodes []*redis.Client) {
		rdb, err := NewClient(url, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rdb.Close() })
		out = append(out, backend{name: name, rdb: rdb, nodes: nodes})
	}
	direct := func(addr string, r *testenv.Redis) *redis.Client {
		opts := &redis.Options{Addr: addr}
		if r != nil && r.TLS != nil {
			c, err := NewClient(r.URL(), ClientOptions{RootCAs: r.TLS.RootCAs})
			if err != nil {
				t.Fatal(err)
			}
			return c.(*redis.Client)
		}
		return redis.NewClient(opts)
	}
	add("standalone", plain.URL(), ClientOptions{}, []*redis.Client{direct(plain.Addr(), nil)})
	add("tls", tlsServer.URL(), ClientOptions{RootCAs: tlsServer.TLS.RootCAs}, []*redis.Client{direct("", tlsServer)})
	var clusterNodes []*redis.Client
	for _, n := range cluster.Nodes {
		clusterNodes = append(clusterNodes, direct(n.Addr(), nil))
	}
	add("cluster", cluster.URL(), ClientOptions{}, clusterNodes)
	for _, b := range out {
		for _, n := range b.nodes {
			t.Cleanup(func() { _ = n.Close() })
		}
	}
	// Every kind again, with the polls batched into pipelines.
	for _, b := range slices.Clone(out) {
		b.name += "+batched"
		b.store = NewStore(b.rdb, StoreOptions{})
		t.Cleanup(b.store.Close)
		out = append(out, b)
	}
	return out
}

var unsafeName = regexp.MustCompile(`[^a-z0-9-]+`)

// startClient starts a Redis of the test's own and returns a client to it; both stop when the test ends.
func startClient(t *testing.T) redis.UniversalClient {
	t.Helper()
	srv := testenv.StartRedis(t)
	rdb, err := NewClient(srv.URL(), ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// newQueue returns a queue named after the running test, so tests never share keys.
func newQueue(t *testing.T, rdb redis.UniversalClient) *Queue {
	t.Helper()
	q, err := New(rdb, "test", testQueueName(t))
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// queueOn returns a queue named after the running test on backend b.
func queueOn(t *testing.T, b backend) *Queue {
	t.Helper()
	if b.store == nil {
		return newQueue(t, b.rdb)
	}
	q, err := b.store.Queue("test", testQueueName(t))
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func testQueueName(t *testing.T) string {
	return strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
}

func enterAll(t *testing.T, q *Queue, visitors ...string) {
	t.Helper()
	for _, v := range visitors {
		if _, err := q.Enter(context.Background(), v, longAbandon); err != nil {
			t.Fatalf("Enter(%s): %v", v, err)
		}
	}
}

func visitorIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return ids
}

// silence moves a waiting visitor's last-seen time back by d, as if it had stopped polling d ago.
func silence(t *testing.T, q *Queue, visitor string, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	seq, err := q.rdb.ZScore(ctx, q.keys.wait, visitor).Result()
	if err != nil {
		t.Fatalf("silence(%s): %v", visitor, err)
	}
	now, err := q.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	writeLastSeen(t, q, int64(seq), now.Add(-d))
}

// writeLastSeen sets the last-seen time of arrival seq in q's last-seen hash, as the scripts lay it
// out (common.lua): the block's field, and the slot of its last digit.
func writeLastSeen(t *testing.T, q *Queue, seq int64, at time.Time) {
	t.Helper()
	ctx := context.Background()
	block := strconv.FormatInt(seq/seenBlock, 10)
	times, err := q.rdb.HGet(ctx, q.keys.seen, block).Result()
	if errors.Is(err, redis.Nil) {
		times, err = strings.Repeat("~", seenSlot*seenBlock), nil
	}
	if err != nil {
		t.Fatal(err)
	}
	off := int(seq%seenBlock) * seenSlot
	stamp := strconv.FormatInt(at.UnixMilli(), 10)
	if len(stamp) != seenSlot {
		t.Fatalf("a time of %d digits does not fit a last-seen slot", len(stamp))
	}
	if err := q.rdb.HSet(ctx, q.keys.seen, block, times[:off]+stamp+times[off+seenSlot:]).Err(); err != nil {
		t.Fatal(err)
	}
}

// keysOf lists every key of q on every node.
func keysOf(t *testing.T, b backend, q *Queue) []string {
	t.Helper()
	var keys []string
	for _, n := range b.nodes {
		iter := n.Scan(context.Background(), 0, q.prefix+"*", 1000).Iterator()
		for iter.Next(context.Background()) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(keys)
	return keys
}

func TestEngine(t *testing.T) {
	for _, b := range startBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Run("concurrent entries get distinct positions and keep them", func(t *testing.T) { testConcurrentEnter(t, b) })
			t.Run("admit takes exactly the oldest", func(t *testing.T) { testAdmitTakesTheOldest(t, b) })
			t.Run("admit spreads whom it admits over the window, up to its limit", func(t *testing.T) { testAdmitLimitAndSpread(t, b) })
			t.Run("enter admits at once what the last tick left unused while nobody waits", func(t *testing.T) { testInstantAdmission(t, b) })
			t.Run("a room nobody waits in sleeps, and the first visitor to wait wakes it", func(t *testing.T) { testSleepingRoom(t, b) })
			t.Run("a cap on active passes, released and renewed sessions", func(t *testing.T) { testMaxActiveAndSessions(t, b) })
			t.Run("status", func(t *testing.T) { testStatus(t, b) })
			t.Run("a status batch answers each visitor as if it came alone", func(t *testing.T) { testStatusBatch(t, b) })
			t.Run("enter and status tell the arrival at the queue's front", func(t *testing.T) { testFront(t, b) })
			t.Run("re-entry keeps place and pass", func(t *testing.T) { testReentry(t, b) })
			t.Run("an expired pass sends the visitor to the back", func(t *testing.T) { testPassExpiry(t, b) })
			t.Run("abandoned visitors never take a slot", func(t *testing.T) { testAbandoned(t, b) })
			t.Run("a visitor silent at its turn is passed over, deeper it keeps its place", func(t *testing.T) { testAbandonedAtTurn(t, b) })
			t.Run("sweep is bounded per call", func(t *testing.T) { testSweepBounded(t, b) })
			t.Run("sweep walks the queue and starts over at its front", func(t *testing.T) { testSweepWalk(t, b) })
			t.Run("a tick id runs once", func(t *testing.T) { testTickIdempotent(t, b) })
			t.Run("scripts reload after SCRIPT FLUSH", func(t *testing.T) { testScriptFlush(t, b) })
			t.Run("stats", func(t *testing.T) { testStats(t, b) })
			t.Run("plan", func(t *testing.T) { testPlan(t, b) })
			t.Run("a schedule: turned away, pre-queue, the draw in chunks, queue behind it, closed", func(t *testing.T) { testScheduleAndDraw(t, b) })
			t.Run("proxy reports", func(t *testing.T) { testProxyReports(t, b) })
			t.Run("workload reports and pass uses", func(t *testing.T) { testWorkloadReports(t, b) })
			t.Run("delete leaves no key", func(t *testing.T) { testDelete(t, b) })
		})
	}
}

func testConcurrentEnter(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	const n = 1000
	ids := visitorIDs("v", n)
	positions := make([]int64, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range ids {
		wg.Go(func() {
			p, err := q.Enter(ctx, ids[i], longAbandon)
			if err != nil {
				errs <- err
				return
			}
			positions[i] = p.Position
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sorted := slices.Clone(positions)
	slices.Sort(sorted)
	for i, p := range sorted {
		if p != int64(i+1) {
			t.Fatalf("positions are not exactly 1..%d: sorted[%d] = %d", n, i, p)
		}
	}
	// The queue's order is the order of the answers: position k holds whoever was told k.
	order, err := b.rdb.ZRange(ctx, q.keys.wait, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if order[positions[i]-1] != id {
			t.Fatalf("%s was told position %d but the queue holds %s there", id, positions[i], order[positions[i]-1])
		}
	}
	for i, id := range ids {
		p, err := q.Enter(ctx, id, longAbandon)
		if err != nil {
			t.Fatal(err)
		}
		if p.State != Waiting || p.Position != positions[i] || p.Depth != n {
			t.Fatalf("second Enter of %s = %+v, want Waiting at %d of %d", id, p, positions[i], n)
		}
	}
}

func testAdmitTakesTheOldest(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	ids := visitorIDs("a", 100)
	enterAll(t, q, ids...)

	const window = 100 * time.Millisecond
	offs := JitterOffsets(7, 14, window)
	res, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 14, Window: window, Seed: 7, PassTTL: passTTL, AbandonAfter: longAbandon})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, a := range res.Admitted {
		got = append(got, a.ID)
		if a.Pass.NotBefore.Before(res.Now) || !a.Pass.NotBefore.Before(res.Now.Add(window)) {
			t.Errorf("%s not-before %s lies outside [now, now+%s) with now %s", a.ID, a.Pass.NotBefore, window, res.Now)
		}
		if want := res.Now.Add(offs[i]); !a.Pass.NotBefore.Equal(want) {
			t.Errorf("%s not-before = %s, want now + JitterOffsets' offset = %s", a.ID, a.Pass.NotBefore, want)
		}
		if a.Pass.Expiry.Sub(a.Pass.NotBefore) != passTTL {
			t.Errorf("%s pass lasts %s, want %s", a.ID, a.Pass.Expiry.Sub(a.Pass.NotBefore), passTTL)
		}
		rec, err := b.rdb.HGet(ctx, q.keys.passes, a.ID).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%d:%d", a.Pass.NotBefore.UnixMilli(), a.Pass.Expiry.UnixMilli()); rec != want {
			t.Errorf("%s pass record reads %q, want %q", a.ID, rec, want)
		}
	}
	if diff := cmp.Diff(ids[:14], got); diff != "" {
		t.Fatalf("admitted (-want +got):\n%s", diff)
	}
	// The scheduler times waits with the arrivals and the sequence (internal/scheduler/wait.go).
	if res.Sequence != 100 {
		t.Errorf("the tick read the arrival sequence at %d, want 100", res.Sequence)
	}
	for i, a := range res.Admitted {
		if a.Arrival != int64(i+1) {
			t.Errorf("%s: arrival %d, want %d", a.ID, a.Arrival, i+1)
		}
	}
	for i, id := range ids[14:] {
		p, err := q.Status(ctx, id, longAbandon)
		if err != nil {
			t.Fatal(err)
		}
		if p.State != Waiting || p.Position != int64(i+1) || p.Depth != 86 {
			t.Fatalf("Status(%s) = %+v, want Waiting at %d of 86", id, p, i+1)
		}
	}

	// With jitter off every pass of the tick is valid at once; a queue shorter than the batch admits all.
	res, err = q.Admit(ctx, AdmitRequest{TickID: 2, Limit: 200, PassTTL: passTTL, AbandonAfter: longAbandon})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Admitted) != 86 {
		t.Fatalf("second tick admitted %d, want the remaining 86", len(res.Admitted))
	}
	for _, a := range res.Admitted {
		if !a.Pass.NotBefore.Equal(res.Now) {
			t.Fatalf("%s not-before %s, want exactly now %s without jitter", a.ID, a.Pass.NotBefore, res.Now)
		}
	}
	if res, err = q.Admit(ctx, AdmitRequest{TickID: 3, Limit: 14, PassTTL: passTTL, AbandonAfter: longAbandon}); err != nil || len(res.Admitted) != 0 {
		t.Fatalf("an empty queue admitted %v, %v", res.Admitted, err)
	}
}

func testAdmitLimitAndSpread(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	enterAll(t, q, visitorIDs("few", 3)...)
	// Three waiting and a limit of 14: the three share the whole window, after the lead.
	const window, lead = 90 * time.Millisecond, 600 * time.Millisecond
	res, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 14, Window: window, Lead: lead, Seed: 42, PassTTL: passTTL, AbandonAfter: longAbandon})
	if err != nil {
		t.Fatal(err)
	}
	want := JitterOffsets(42, 3, window)
	if len(res.Admitted) != 3 {
		t.Fatalf("admitted %d of 3 waiting", len(res.Admitted))
	}
	for i, a := range res.Admitted {
		got := a.Pass.NotBefore.Sub(res.Now)
		if got != lead+want[i] {
			t.Errorf("visitor %d not-before = now + %s, want now + lead + %s", i, got, want[i])
		}
		if slot := time.Duration(i) * 30 * time.Millisecond; got < lead+slot || got >= lead+slot+30*time.Millisecond {
			t.Errorf("visitor %d not-before = now + %s, outside its slot [%s, %s)", i, got, lead+slot, lead+slot+30*time.Millisecond)
		}
	}

	// The limit is the most a call admits; above MaxAdmitPerTick a call is refused before it reaches Redis.
	enterAll(t, q, visitorIDs("many", MaxAdmitPerTick+5)...)
	res, err = q.Admit(ctx, AdmitRequest{TickID: 2, Limit: MaxAdmitPerTick, Window: window, Seed: 1, PassTTL: passTTL, AbandonAfter: longAbandon})
	if err != nil || len(res.Admitted) != MaxAdmitPerTick {
		t.Fatalf("Admit with the largest limit admitted %d (%v), want %d", len(res.Admitted), err, MaxAdmitPerTick)
	}
	if !slices.IsSortedFunc(res.Admitted, func(a, b AdmittedVisitor) int { return a.Pass.NotBefore.Compare(b.Pass.NotBefore) }) {
		t.Error("not-before times of one tick are not in queue order")
	}
	if last := res.Admitted[len(res.Admitted)-1].Pass.NotBefore; !last.Before(res.Now.Add(window)) {
		t.Errorf("last not-before %s is not within the window after %s", last, res.Now)
	}
	for _, limit := range []int{MaxAdmitPerTick + 1, -1} {
		if _, err := q.Admit(ctx, AdmitRequest{TickID: 3, Limit: limit, PassTTL: passTTL, AbandonAfter: longAbandon}); err == nil {
			t.Errorf("Admit accepted limit %d", limit)
		}
	}
	if d, err := b.rdb.ZCard(ctx, q.keys.wait).Result(); err != nil || d != 5 {
		t.Fatalf("after the refused calls %d wait (%v), want the 5 left", d, err)
	}
}

func testInstantAdmission(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	tick := func(id int64, limit, budget int, lasts time.Duration) AdmitResult {
		t.Helper()
		res, err := q.Admit(ctx, AdmitRequest{TickID: id, Limit: limit, InstantBudget: budget, Tick: lasts, PassTTL: passTTL, AbandonAfter: longAbandon})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// Before any tick there is no budget: the first visitor queues.
	if p, err := q.Enter(ctx, "early", longAbandon); err != nil || p.State != Waiting {
		t.Fatalf("Enter before any tick = %+v, %v; want Waiting", p, err)
	}
	// The tick admits the one waiting and leaves 13 of its 14 for whoever comes before the next.
	if res := tick(1, 14, 14, time.Minute); len(res.Admitted) != 1 {
		t.Fatalf("the tick admitted %d, want the 1 waiting", len(res.Admitted))
	}
	for i := range 13 {
		p, err := q.Enter(ctx, fmt.Sprintf("instant-%02d", i), longAbandon)
		if err != nil {
			t.Fatal(err)
		}
		if p.State != Admitted || !p.Pass.NotBefore.Equal(p.Now) || p.Pass.Expiry.Sub(p.Pass.NotBefore) != passTTL {
			t.Fatalf("visitor %d with budget left = %+v, want a pass valid now for %s", i, p, passTTL)
		}
	}
	// The budget is spent: the next one queues, and so does everyone behind it, budget or not.
	if p, err := q.Enter(ctx, "after", longAbandon); err != nil || p.State != Waiting || p.Position != 1 {
		t.Fatalf("Enter with the budget spent = %+v, %v; want Waiting at 1", p, err)
	}
	tick(2, 0, 0, time.Minute) // a tick that admits nobody leaves no budget
	if p, err := q.Enter(ctx, "again", longAbandon); err != nil || p.State != Waiting || p.Position != 2 {
		t.Fatalf("Enter after a tick without budget = %+v, %v; want Waiting at 2", p, err)
	}
	// Somebody waiting: no instant admission even with a budget, so nobody is overtaken.
	tick(3, 1, 1, time.Minute) // admits "after" and leaves nothing
	tick(4, 3, 3, time.Minute) // admits "again" and leaves 2
	if p, err := q.Enter(ctx, "late", longAbandon); err != nil || p.State != Admitted {
		t.Fatalf("Enter with nobody waiting and budget left = %+v, %v; want Admitted", p, err)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.AdmittedTotal != 17 || st.InstantAdmittedTotal != 14 || st.Depth != 0 || st.Active != 17 {
		t.Fatalf("stats = %+v; want 17 admitted of which 14 at once, nobody waiting, 17 active", st)
	}
	// A budget no tick replaces lapses a second after its tick: a scheduler that stopped leaves none.
	tick(5, 5, 5, 20*time.Millisecond)
	time.Sleep(1100 * time.Millisecond)
	if p, err := q.Enter(ctx, "stale", longAbandon); err != nil || p.State != Waiting {
		t.Fatalf("Enter after the budget ran out of time = %+v, %v; want Waiting", p, err)
	}
	if _, err := q.Admit(ctx, AdmitRequest{TickID: 6, Limit: 2, InstantBudget: 3, Tick: time.Second, PassTTL: passTTL}); err == nil {
		t.Fatal("Admit accepted an instant budget above its limit")
	}
}

func testSleepingRoom(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	store := b.store
	if store == nil {
		store = NewStore(b.rdb, StoreOptions{})
		t.Cleanup(store.Close)
	}
	wakes, stop := store.Wakes().Listen(q)
	defer stop()
	tick := func(id int64, limit int, sleep time.Duration) AdmitResult {
		t.Helper()
		res, err := q.Admit(ctx, AdmitRequest{TickID: id, Limit: limit, InstantBudget: limit, Tick: 500 * time.Millisecond,
			PassTTL: passTTL, AbandonAfter: longAbandon, SleepFor: sleep, SleepShare: limit})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	woken := func() bool {
		select {
		case <-wakes:
			return true
		case <-time.After(2 * time.Second):
			return false
		}
	}
	enterAll(t, q, "w1", "w2", "w3")
	if res := tick(1, 2, 5*time.Second); res.Asleep || len(res.Admitted) != 2 {
		t.Fatalf("a tick that leaves one waiting: %d admitted, asleep %t; want 2 and awake", len(res.Admitted), res.Asleep)
	}
	if res := tick(2, 2, 0); res.Asleep {
		t.Fatal("a tick that may not sleep put the room to sleep")
	}
	// It takes the last one waiting and leaves a budget: the room sleeps, and the budget lasts the
	// sleep, beyond the tick and its second, refilled by each tick the room skips. The visitors come
	// early in the fourth tick, so all of them meet one tick's share.
	if res := tick(3, 3, 5*time.Second); !res.Asleep || len(res.Admitted) != 0 {
		t.Fatalf("a tick with nobody waiting: %d admitted, asleep %t; want asleep", len(res.Admitted), res.Asleep)
	}
	time.Sleep(1550 * time.Millisecond)
	for i := range 3 {
		if p, err := q.Enter(ctx, fmt.Sprintf("instant-%d", i), longAbandon); err != nil || p.State != Admitted {
			t.Fatalf("visitor %d in a sleeping room with budget = %+v, %v; want a pass at once", i, p, err)
		}
	}
	select {
	case <-wakes:
		t.Fatal("a visitor admitted at once woke the room")
	default:
	}
	// The budget is spent: the next visitor waits and wakes the room, once.
	if p, err := q.Enter(ctx, "first-to-wait", longAbandon); err != nil || p.State != Waiting {
		t.Fatalf("Enter with the budget spent = %+v, %v; want Waiting", p, err)
	}
	if !woken() {
		t.Fatal("the first visitor to wait did not wake the room")
	}
	if p, err := q.Enter(ctx, "second-to-wait", longAbandon); err != nil || p.State != Waiting {
		t.Fatalf("Enter behind the first = %+v, %v; want Waiting", p, err)
	}
	if res := tick(4, 5, 5*time.Second); len(res.Admitted) != 2 || !res.Asleep {
		t.Fatalf("the tick the wake-up asked for: %d admitted, asleep %t; want both and asleep again", len(res.Admitted), res.Asleep)
	}
	select {
	case <-wakes:
		t.Fatal("the room was woken twice for one sleep")
	default:
	}
	// A room with no budget left (no quota, or maxActive full) does not sleep: only its ticks would
	// let the next visitor in.
	if res := tick(5, 0, 5*time.Second); res.Asleep {
		t.Fatal("a tick without a budget put the room to sleep")
	}
	if _, err := q.Admit(ctx, AdmitRequest{TickID: 6, Limit: 1, PassTTL: passTTL, Holding: true, SleepFor: time.Second}); err == nil {
		t.Fatal("Admit let a room sleep while the pre-queue is drawn")
	}

	// While the room sleeps, each tick it skips refills the budget to its share, as that tick would
	// have, and never beyond maxActive.
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sleeping := func(id int64, maxActive int64) {
		t.Helper()
		res, err := q.Admit(ctx, AdmitRequest{TickID: id, Limit: 2, InstantBudget: 2, Tick: 300 * time.Millisecond,
			PassTTL: passTTL, AbandonAfter: longAbandon, SleepFor: 10 * time.Second, SleepShare: 2, MaxActive: maxActive})
		if err != nil || !res.Asleep {
			t.Fatalf("a sleeping tick: %+v, %v", res, err)
		}
	}
	enterAt := func(name string, want State) {
		t.Helper()
		if p, err := q.Enter(ctx, name, longAbandon); err != nil || p.State != want {
			t.Fatalf("%s: %+v, %v; want %v", name, p, err, want)
		}
	}
	sleeping(7, 0)
	enterAt("r1", Admitted)
	enterAt("r2", Admitted)
	time.Sleep(350 * time.Millisecond) // the next tick's share
	enterAt("r3", Admitted)
	enterAt("r4", Admitted)
	sleeping(8, st.Active+4+2) // room for two more passes
	enterAt("m1", Admitted)
	enterAt("m2", Admitted)
	time.Sleep(350 * time.Millisecond)
	enterAt("m3", Waiting) // maxActive is reached: the skipped tick had nobody to let in
	if !woken() {
		t.Fatal("the visitor maxActive held back did not wake the room")
	}
}

func testMaxActiveAndSessions(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	enterAll(t, q, visitorIDs("c", 30)...)
	tick := func(id int64) AdmitResult {
		t.Helper()
		res, err := q.Admit(ctx, AdmitRequest{TickID: id, Limit: 20, MaxActive: 10, PassTTL: passTTL, AbandonAfter: longAbandon})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := tick(1)
	if len(first.Admitted) != 10 {
		t.Fatalf("a tick of 20 under a cap of 10 admitted %d", len(first.Admitted))
	}
	if res := tick(2); len(res.Admitted) != 0 {
		t.Fatalf("a tick at the cap admitted %d", len(res.Admitted))
	}
	ref := func(a AdmittedVisitor) PassRef { return PassRef{Visitor: a.ID, NotBefore: a.Pass.NotBefore} }
	release := func(a AdmittedVisitor) Release { return Release{PassRef: ref(a), Expiry: a.Pass.Expiry} }
	released := []Release{release(first.Admitted[0]), release(first.Admitted[1]), release(first.Admitted[2])}
	res, err := q.Sessions(ctx, released, nil, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if res.Released != 3 || len(res.Revoked) != 3 || res.Seq != 3 || res.Restarted {
		t.Fatalf("releasing 3 = %+v; want 3 released and listed as revoked", res)
	}
	for i, r := range res.Revoked {
		if r.PassRef != released[i].PassRef || !r.Expiry.Equal(first.Admitted[i].Pass.Expiry) || r.Seq != int64(i+1) {
			t.Fatalf("revocation %d = %+v, want %+v expiring with its pass", i, r, released[i])
		}
	}
	// A second release of the same pass, as another replica would send it, changes nothing.
	if again, err := q.Sessions(ctx, released[:1], nil, res.Seq, 100); err != nil || again.Released != 0 || len(again.Revoked) != 0 {
		t.Fatalf("releasing a released pass again = %+v, %v", again, err)
	}
	// The released slots go to the next tick, and a released visitor who comes back queues anew.
	if res := tick(3); len(res.Admitted) != 3 {
		t.Fatalf("the tick after 3 releases admitted %d, want 3", len(res.Admitted))
	}
	if p, err := q.Enter(ctx, released[0].Visitor, longAbandon); err != nil || p.State != Waiting {
		t.Fatalf("a released visitor entering again = %+v, %v; want a new place", p, err)
	}
	// Renewal extends the pass and its slot; an older expiry changes nothing.
	holder := first.Admitted[5]
	later := holder.Pass.Expiry.Add(time.Minute)
	renew, err := q.Sessions(ctx, nil, []Renewal{{PassRef: ref(holder), Expiry: later}, {PassRef: ref(first.Admitted[6]), Expiry: first.Admitted[6].Pass.Expiry.Add(-time.Second)}}, res.Seq, 100)
	if err != nil || renew.Renewed != 1 {
		t.Fatalf("renewals = %+v, %v; want 1 renewed", renew, err)
	}
	if p, err := q.Status(ctx, holder.ID, longAbandon); err != nil || p.State != Admitted || !p.Pass.Expiry.Equal(later) {
		t.Fatalf("the renewed pass reads %+v, %v; want expiry %s", p, err, later)
	}
	if score, err := b.rdb.ZScore(ctx, q.keys.active, holder.ID).Result(); err != nil || int64(score) != later.UnixMilli() {
		t.Fatalf("the renewed slot expires at %v (%v), want %d", score, err, later.UnixMilli())
	}
	// Redis lost the sequence: the list starts over and says so.
	if err := b.rdb.Del(ctx, q.keys.revokedSeq).Err(); err != nil {
		t.Fatal(err)
	}
	if lost, err := q.Sessions(ctx, nil, nil, res.Seq, 100); err != nil || !lost.Restarted || len(lost.Revoked) != 3 {
		t.Fatalf("after the sequence was lost = %+v, %v; want a restart listing all 3", lost, err)
	}
	// A failover lost a release and the pass record with it: a proxy writes the revocation back,
	// once, with the pass's own expiry; the pass still counts as released nowhere else.
	lostPass := first.Admitted[7]
	if err := b.rdb.HDel(ctx, q.keys.passes, lostPass.ID).Err(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		back, err := q.Sessions(ctx, []Release{release(lostPass)}, nil, 0, 100)
		listed := slices.IndexFunc(back.Revoked, func(r Revocation) bool { return r.PassRef == ref(lostPass) })
		if err != nil || back.Released != 0 || len(back.Revoked) != 4 || listed < 0 || !back.Revoked[listed].Expiry.Equal(lostPass.Pass.Expiry) {
			t.Fatalf("writing back a revocation Redis lost = %+v, %v; want it listed once, with its pass's expiry", back, err)
		}
	}
	// Revocations of expired passes go at the next ticks.
	short, err := q.Admit(ctx, AdmitRequest{TickID: 4, Limit: 1, PassTTL: 30 * time.Millisecond, AbandonAfter: longAbandon})
	if err != nil || len(short.Admitted) != 1 {
		t.Fatalf("admitting a short pass: %+v, %v", short, err)
	}
	if _, err := q.Sessions(ctx, []Release{release(short.Admitted[0])}, nil, 0, 100); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	tick(5)
	if n, err := b.rdb.ZCard(ctx, q.keys.revoked).Result(); err != nil || n != 4 {
		t.Fatalf("%d revocations left (%v), want the 4 unexpired ones", n, err)
	}
}

func testStatus(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)

	p, err := q.Status(ctx, "nobody", longAbandon)
	if err != nil {
		t.Fatalf("Status of an unknown visitor: %v, want no error", err)
	}
	if p.State != NotQueued {
		t.Fatalf("Status of an unknown visitor = %v, want NotQueued", p.State)
	}

	enterAll(t, q, "first", "second", "third")
	p, err = q.Status(ctx, "second", longAbandon)
	if err != nil {
		t.Fatal(err)
	}
	if p.State != Waiting || p.Position != 2 || p.Depth != 3 {
		t.Fatalf("Status(second) = %+v, want Waiting at 2 of 3", p)
	}
	if p.PreviousPoll.IsZero() || p.PreviousPoll.After(p.Now) || p.Now.Sub(p.PreviousPoll) > time.Minute {
		t.Fatalf("Status(second) previous poll = %s with now %s, want the time of its Enter", p.PreviousPoll, p.Now)
	}
	again, err := q.Status(ctx, "second", longAbandon)
	if err != nil {
		t.Fatal(err)
	}
	if !again.PreviousPoll.Equal(p.Now) {
		t.Fatalf("second Status previous poll = %s, want the first Status' time %s", again.PreviousPoll, p.Now)
	}

	if _, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 1, Lead: time.Second, PassTTL: passTTL, AbandonAfter: longAbandon}); err != nil {
		t.Fatal(err)
	}
	p, err = q.Status(ctx, "first", longAbandon)
	if err != nil {
		t.Fatal(err)
	}
	if p.State != Admitted || p.Pass.NotBefore.Sub(p.Now) <= 0 || p.Pass.NotBefore.Sub(p.Now) > time.Second {
		t.Fatalf("Status(first) = %+v, want Admitted with not-before within the next second", p)
	}
	if p.Pass.Expiry.Sub(p.Pass.NotBefore) != passTTL {
		t.Fatalf("Status(first) pass lasts %s, want %s", p.Pass.Expiry.Sub(p.Pass.NotBefore), passTTL)
	}
	p, err = q.Status(ctx, "third", longAbandon)
	if err != nil || p.State != Waiting || p.Position != 2 || p.Depth != 2 {
		t.Fatalf("Status(third) after one admission = %+v, %v; want Waiting at 2 of 2", p, err)
	}

	for _, bad := range []string{"", strings.Repeat("x", MaxVisitorIDLength+1), "tab\there", "ünïcode", "nul\x00"} {
		if _, err := q.Status(ctx, bad, longAbandon); !errors.Is(err, ErrInvalidVisitor) {
			t.Errorf("Status(%q) error = %v, want ErrInvalidVisitor", bad, err)
		}
		if _, err := q.Enter(ctx, bad, longAbandon); !errors.Is(err, ErrInvalidVisitor) {
			t.Errorf("Enter(%q) error = %v, want ErrInvalidVisitor", bad, err)
		}
	}
	if _, err := q.Enter(ctx, strings.Repeat("~", MaxVisitorIDLength), longAbandon); err != nil {
		t.Errorf("Enter of a 128-character ID: %v", err)
	}
}

// testStatusBatch sends 1,204 polls in one script call, among them a silent visitor twice (the first
// poll drops it, so the second must find it gone) and one visitor twice (the second poll sees the
// first as its previous poll).
func testFront(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	ids := visitorIDs("f", 5)
	var seqs []int64
	for _, id := range ids {
		p, err := q.Enter(ctx, id, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if p.Front != 0 {
			t.Fatalf("Enter(%s) before any tick = %+v; want the front unknown", id, p)
		}
		seqs = append(seqs, p.Seq)
	}
	// The front is the one the last tick left, past a visitor who went silent.
	silence(t, q, ids[2], 2*time.Minute)
	if _, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 2, PassTTL: passTTL, AbandonAfter: time.Minute}); err != nil {
		t.Fatal(err)
	}
	p, err := q.Status(ctx, ids[4], time.Minute)
	if err != nil || p.Front != seqs[3] || p.Position != 2 || p.Seq != seqs[4] {
		t.Fatalf("after a tick Status = %+v, %v; want position 2 behind the front at %d", p, err, seqs[3])
	}
	p, err = q.Enter(ctx, "f-late", time.Minute)
	if err != nil || p.Front != seqs[3] || p.Position != 3 {
		t.Fatalf("a new place = %+v, %v; want position 3 behind the front at %d", p, err, seqs[3])
	}
	// A tick that empties the queue leaves no front.
	if _, err := q.Admit(ctx, AdmitRequest{TickID: 2, Limit: 10, PassTTL: passTTL, AbandonAfter: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if p, err = q.Enter(ctx, "f-after", time.Minute); err != nil || p.Front != 0 || p.Position != 1 {
		t.Fatalf("a place in a queue the last tick emptied = %+v, %v; want the front unknown", p, err)
	}
}

func testStatusBatch(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	const abandonAfter = time.Minute
	ids := visitorIDs("v", 1200)
	enterAll(t, q, "admitted")
	enterAll(t, q, ids...)
	if _, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 1, PassTTL: passTTL, AbandonAfter: abandonAfter}); err != nil {
		t.Fatal(err)
	}
	silent := ids[3]
	silence(t, q, silent, 2*abandonAfter)

	batch := append(slices.Clone(ids), silent, "nobody", "admitted", ids[len(ids)-1])
	v, err := q.runVisitors(ctx, b.rdb, opStatus, abandonAfter.Milliseconds(), EntryLimit{}, nil, batch, nil).Result()
	if err != nil {
		t.Fatal(err)
	}
	replies, err := decodeReplies(v, len(batch))
	if err != nil {
		t.Fatal(err)
	}
	var depth int64 = 1200
	var lastNow time.Time
	for i, visitor := range batch {
		p, err := decodePosition(replies[i], nil)
		if err != nil {
			t.Fatal(err)
		}
		var want State
		var wantPosition int64
		switch {
		case i < len(ids) && visitor == silent:
			want, depth = NotQueued, depth-1
		case i < len(ids):
			want, wantPosition = Waiting, int64(i+1)
			if i > 3 {
				wantPosition--
			}
		case visitor == "admitted":
			want = Admitted
		case visitor == ids[len(ids)-1]:
			want, wantPosition = Waiting, depth
			if !p.PreviousPoll.Equal(lastNow) {
				t.Errorf("second poll of %s in the batch: previous poll %s, want the first's %s", visitor, p.PreviousPoll, lastNow)
			}
		default: // the silent visitor again, and one never queued
			want = NotQueued
		}
		if p.State != want || p.Position != wantPosition || (want == Waiting && p.Depth != depth) {
			t.Fatalf("reply %d (%s) = %+v, want state %v at %d of %d", i, visitor, p, want, wantPosition, depth)
		}
		if visitor == ids[len(ids)-1] {
			lastNow = p.Now
		}
	}
	if n, err := q.rdb.ZCard(ctx, q.keys.wait).Result(); err != nil || n != depth {
		t.Fatalf("waiting set holds %d, %v; want %d", n, err, depth)
	}
}

func testReentry(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	enterAll(t, q, "a", "b", "c")
	p, err := q.Enter(ctx, "b", longAbandon)
	if err != nil || p.Position != 2 {
		t.Fatalf("re-Enter(b) = %+v, %v; want position 2", p, err)
	}
	if _, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 1, PassTTL: 20 * time.Second, AbandonAfter: longAbandon}); err != nil {
		t.Fatal(err)
	}
	first, err := q.Status(ctx, "a", longAbandon)
	if err != nil || first.State != Admitted {
		t.Fatalf("Status(a) = %+v, %v; want Admitted", first, err)
	}
	recBefore, err := b.rdb.HGet(ctx, q.keys.passes, "a").Result()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // let the pass age, so that a reset would show
	p, err = q.Enter(ctx, "a", longAbandon)
	if err != nil {
		t.Fatal(err)
	}
	if p.State != Admitted || p.Pass != first.Pass {
		t.Fatalf("re-Enter of an admitted visitor = %+v, want its original pass %+v", p, first.Pass)
	}
	recAfter, err := b.rdb.HGet(ctx, q.keys.passes, "a").Result()
	if err != nil {
		t.Fatal(err)
	}
	if recAfter != recBefore {
		t.Fatalf("re-Enter changed the pass record: %q before, %q after", recBefore, recAfter)
	}
	if n, _ := b.rdb.ZCard(ctx, q.keys.wait).Result(); n != 2 {
		t.Fatalf("queue holds %d visitors after an admitted visitor re-entered, want 2", n)
	}
}

func testPassExpiry(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	enterAll(t, q, "early", "late")
	res, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 1, PassTTL: 30 * time.Millisecond, AbandonAfter: longAbandon})
	if err != nil || len(res.Admitted) != 1 {
		t.Fatalf("Admit = %+v, %v", res, err)
	}
	if st, _ := q.Stats(ctx); st.Active != 1 {
		t.Fatalf("active passes = %d, want 1", st.Active)
	}
	time.Sleep(60 * time.Millisecond)
	if p, err := q.Status(ctx, "early", longAbandon); err != nil || p.State != NotQueued {
		t.Fatalf("Status after the pass expired = %+v, %v; want NotQueued", p, err)
	}
	if st, _ := q.Stats(ctx); st.Active != 0 {
		t.Fatalf("active passes after expiry = %d, want 0", st.Active)
	}
	if p, err := q.Enter(ctx, "early", longAbandon); err != nil || p.State != Waiting || p.Position != 2 {
		t.Fatalf("Enter after the pass expired = %+v, %v; want Waiting at 2, behind late", p, err)
	}
	// The next tick drops the expired pass's record and active entry; a pass alive keeps both.
	if _, err := q.Admit(ctx, AdmitRequest{TickID: 2, Limit: 1, PassTTL: time.Hour, AbandonAfter: longAbandon}); err != nil {
		t.Fatal(err)
	}
	records, err := b.rdb.HKeys(ctx, q.keys.passes).Result()
	if err != nil {
		t.Fatal(err)
	}
	active, err := b.rdb.ZRange(ctx, q.keys.active, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(records, []string{"late"}) || !slices.Equal(active, []string{"late"}) {
		t.Fatalf("after a tick, pass records %v and active entries %v; want only late's", records, active)
	}
}

func testAbandoned(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	const abandonAfter = time.Minute
	ids := visitorIDs("w", 10)
	enterAll(t, q, ids...)
	// w-0000, w-0002 and w-0004 went silent; the rest keep polling.
	for _, i := range []int{0, 2, 4} {
		silence(t, q, ids[i], 2*abandonAfter)
	}
	first, err := b.rdb.ZScore(ctx, q.keys.wait, ids[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	res, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 3, PassTTL: passTTL, AbandonAfter: abandonAfter, QuietAfter: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The front was at the first arrival when the tick began, and moved past six places for three
	// admissions: what the scheduler measures its advance with. The three it dropped had gone quiet,
	// silent for two minutes or a moment more; the three admitted had not.
	quiet := res.Fronts[0].QuietPlaces
	for i, p := range quiet {
		if p.Silence < 2*abandonAfter || p.Silence > 2*abandonAfter+time.Minute {
			t.Errorf("quiet place %d was silent %s; want about %s", i, p.Silence, 2*abandonAfter)
		}
		quiet[i].Silence = 0
	}
	want := []FrontMove{{Head: int64(first), Admitted: 3, Depth: 4, Taken: 6, Quiet: 3,
		QuietPlaces: []QuietPlace{{Arrival: int64(first)}, {Arrival: int64(first) + 2}, {Arrival: int64(first) + 4}}}}
	if diff := cmp.Diff(want, res.Fronts); diff != "" {
		t.Fatalf("fronts (-want +got):\n%s", diff)
	}
	var got []string
	for _, a := range res.Admitted {
		got = append(got, a.ID)
	}
	if diff := cmp.Diff([]string{ids[1], ids[3], ids[5]}, got); diff != "" {
		t.Fatalf("admitted (-want +got):\n%s", diff)
	}
	if res.Abandoned != 3 {
		t.Fatalf("abandoned %d, want 3", res.Abandoned)
	}
	for _, i := range []int{0, 2, 4} {
		if held, _ := b.rdb.HExists(ctx, q.keys.passes, ids[i]).Result(); held {
			t.Fatalf("abandoned %s holds a pass", ids[i])
		}
		p, err := q.Status(ctx, ids[i], abandonAfter)
		if err != nil || p.State != NotQueued {
			t.Fatalf("Status(%s) = %+v, %v; want NotQueued", ids[i], p, err)
		}
	}

	// A visitor silent for too long that polls (or re-enters) before any tick swept it has lost its
	// place all the same: Status says NotQueued, Enter puts it at the back.
	silence(t, q, ids[6], 2*abandonAfter)
	if p, err := q.Status(ctx, ids[6], abandonAfter); err != nil || p.State != NotQueued {
		t.Fatalf("Status of a silent visitor = %+v, %v; want NotQueued", p, err)
	}
	silence(t, q, ids[7], 2*abandonAfter)
	if p, err := q.Enter(ctx, ids[7], abandonAfter); err != nil || p.Position != 3 || p.Depth != 3 {
		t.Fatalf("Enter of a silent visitor = %+v, %v; want position 3 of 3 (back of the queue)", p, err)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.AbandonedTotal != 5 || st.AdmittedTotal != 3 || st.Depth != 3 {
		t.Fatalf("stats = %+v, want 5 abandoned, 3 admitted, 3 waiting", st)
	}
}

func testSweepBounded(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	const abandonAfter, budget = time.Minute, 50
	silent := visitorIDs("silent", 700) // many blocks of last-seen records
	live := visitorIDs("live", 20)
	enterAll(t, q, silent...)
	enterAll(t, q, live...)
	for _, id := range silent {
		silence(t, q, id, 2*abandonAfter)
	}
	var admitted []string
	var abandoned int64
	for tick := int64(1); len(admitted) < len(live); tick++ {
		if tick > 20 {
			t.Fatalf("after 20 ticks only %d of %d live visitors were admitted", len(admitted), len(live))
		}
		res, err := q.Admit(ctx, AdmitRequest{TickID: tick, Limit: 14, PassTTL: passTTL, AbandonAfter: abandonAfter, FrontBudget: budget})
		if err != nil {
			t.Fatal(err)
		}
		// One call examines at most 14 + budget at the front and DefaultSweepBlocks blocks in the sweep.
		if bound := int64(14 + budget + DefaultSweepBlocks*seenBlock); res.Abandoned > bound {
			t.Fatalf("tick %d dropped %d visitors, more than its bound %d", tick, res.Abandoned, bound)
		}
		abandoned += res.Abandoned
		for _, a := range res.Admitted {
			admitted = append(admitted, a.ID)
		}
	}
	if diff := cmp.Diff(live, admitted); diff != "" {
		t.Fatalf("admitted (-want +got); no silent visitor may take a slot:\n%s", diff)
	}
	if abandoned != int64(len(silent)) {
		t.Fatalf("dropped %d silent visitors, want %d", abandoned, len(silent))
	}
}

// testSweepWalk follows the sweep block by block with no batch to admit: it passes an emptied block
// inside the queue, starts over at the front past the newest block, and jumps to the front when the
// front has moved past its cursor.
func testSweepWalk(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	const abandonAfter = time.Minute
	// Sequences start at 1: block 0 holds seenBlock-1 visitors, blocks 1 and 2 seenBlock, block 3 one.
	ids := visitorIDs("w", 3*seenBlock+1)
	enterAll(t, q, ids...)
	block := func(n int) []string {
		return ids[max(0, n*seenBlock-1):min(len(ids), (n+1)*seenBlock-1)]
	}
	silenceAll := func(visitors []string) {
		for _, id := range visitors {
			silence(t, q, id, 2*abandonAfter)
		}
	}
	tick := int64(0)
	sweep := func(want int) {
		t.Helper()
		tick++
		res, err := q.Admit(ctx, AdmitRequest{TickID: tick, PassTTL: passTTL, AbandonAfter: abandonAfter, SweepBlocks: 1})
		if err != nil {
			t.Fatal(err)
		}
		if res.Abandoned != int64(want) {
			t.Fatalf("tick %d dropped %d visitors, want %d", tick, res.Abandoned, want)
		}
	}
	silenceAll(block(1))
	sweep(0)             // block 0
	sweep(len(block(1))) // block 1
	sweep(0)             // block 2
	sweep(0)             // block 3, the newest
	silenceAll(block(2))
	sweep(0)             // past the newest: back to the front, block 0
	sweep(0)             // block 1, emptied inside the queue: passed over
	sweep(len(block(2))) // block 2
	sweep(0)             // block 3
	silenceAll(block(0))
	sweep(len(block(0))) // back to block 0
	silenceAll(block(3)) // blocks 0 to 2 are gone: block 3 holds the front
	sweep(len(block(3))) // the cursor, at block 1, is behind the front: it jumps to block 3
	if depth, err := q.rdb.ZCard(ctx, q.keys.wait).Result(); err != nil || depth != 0 {
		t.Fatalf("depth after the sweeps = %d (%v), want 0", depth, err)
	}
}

func testTickIdempotent(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	enterAll(t, q, visitorIDs("t", 30)...)
	req := AdmitRequest{TickID: 1000, Limit: 10, PassTTL: passTTL, AbandonAfter: longAbandon}
	first, err := q.Admit(ctx, req)
	if err != nil || len(first.Admitted) != 10 {
		t.Fatalf("first Admit: %d admitted, %v", len(first.Admitted), err)
	}
	for _, id := range []int64{1000, 999, 1} {
		req.TickID = id
		res, err := q.Admit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Duplicate || len(res.Admitted) != 0 {
			t.Fatalf("Admit with tick id %d after 1000 = %+v, want a duplicate that admits nobody", id, res)
		}
	}
	req.TickID = 1001
	if res, err := q.Admit(ctx, req); err != nil || res.Duplicate || len(res.Admitted) != 10 {
		t.Fatalf("Admit with the next tick id = %+v, %v; want 10 admitted", res, err)
	}
	if _, err := q.Admit(ctx, AdmitRequest{TickID: 0, Limit: 1, PassTTL: passTTL}); err == nil {
		t.Fatal("Admit accepted tick id 0")
	}
}

func testScriptFlush(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	enterAll(t, q, "before")
	for _, n := range b.nodes {
		if err := n.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := q.Enter(ctx, "after", longAbandon); err != nil || p.Position != 2 {
		t.Fatalf("Enter after SCRIPT FLUSH = %+v, %v", p, err)
	}
	for _, n := range b.nodes {
		_ = n.ScriptFlush(ctx).Err()
	}
	if p, err := q.Status(ctx, "before", longAbandon); err != nil || p.Position != 1 {
		t.Fatalf("Status after SCRIPT FLUSH = %+v, %v", p, err)
	}
	for _, n := range b.nodes {
		_ = n.ScriptFlush(ctx).Err()
	}
	if res, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 2, PassTTL: passTTL, AbandonAfter: longAbandon}); err != nil || len(res.Admitted) != 2 {
		t.Fatalf("Admit after SCRIPT FLUSH = %+v, %v", res, err)
	}
}

func testProxyReports(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	if got, err := q.ProxyReports(ctx, time.Minute); err != nil || len(got) != 0 {
		t.Fatalf("reports of a queue nobody reported to = %v, %v", got, err)
	}
	reports := []ProxyReport{
		{Replica: "proxy-b", Generation: 3},
		{Replica: "proxy-a", Generation: 2, RefusedGeneration: 3, Refusal: "spec.protectedRoutes[0].path: is not normalised"},
	}
	for _, r := range reports {
		if err := q.ReportProxy(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// A second report replaces the replica's first.
	if err := q.ReportProxy(ctx, ProxyReport{Replica: "proxy-b", Generation: 4}); err != nil {
		t.Fatal(err)
	}
	got, err := q.ProxyReports(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := []ProxyReport{reports[1], {Replica: "proxy-b", Generation: 4}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("reports (-want +got):\n%s", diff)
	}
	if err := q.ReportProxy(ctx, ProxyReport{Generation: 1}); err == nil {
		t.Fatal("a report without a replica name was accepted")
	}
	// Reports older than the age asked for are gone, and deleted.
	time.Sleep(30 * time.Millisecond)
	if got, err := q.ProxyReports(ctx, 10*time.Millisecond); err != nil || len(got) != 0 {
		t.Fatalf("stale reports = %v, %v; want none", got, err)
	}
	if n, err := b.rdb.HLen(ctx, q.keys.proxies).Result(); err != nil || n != 0 {
		t.Fatalf("%d stale reports left in Redis (%v)", n, err)
	}
}

func testWorkloadReports(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	got, err := q.ReadWorkload(ctx, time.Minute, []int64{100})
	if err != nil || len(got.Reports) != 0 || got.Used[100] != 0 || got.Now.IsZero() {
		t.Fatalf("a queue nobody reported to = %+v, %v", got, err)
	}
	a := WorkloadReport{Replica: "proxy-a", Epoch: "e1", ElapsedMicros: 5e6, Requests: 40, Errors: 2, LatencyMicros: 8e6,
		FlightMicros: 4e7, Buckets: []int64{0, 3, 37}}
	bRep := WorkloadReport{Replica: "proxy-b", Epoch: "e2", ElapsedMicros: 1e6, Requests: 1}
	// The same pass used on both replicas counts once; uses fall in the second of their not-before.
	if err := q.ReportWorkload(ctx, a, []PassUse{{100, "v1@x"}, {101, "v2@y"}, {100, "v3@z"}}); err != nil {
		t.Fatal(err)
	}
	if err := q.ReportWorkload(ctx, bRep, []PassUse{{100, "v1@x"}, {100, "v4@w"}}); err != nil {
		t.Fatal(err)
	}
	// A second report replaces the replica's first.
	bRep.Requests = 7
	if err := q.ReportWorkload(ctx, bRep, nil); err != nil {
		t.Fatal(err)
	}
	got, err = q.ReadWorkload(ctx, time.Minute, []int64{100, 101, 102})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]WorkloadReport{a, bRep}, got.Reports); diff != "" {
		t.Fatalf("reports (-want +got):\n%s", diff)
	}
	if want := map[int64]int64{100: 3, 101: 1, 102: 0}; !maps.Equal(want, got.Used) {
		t.Fatalf("uses %v, want %v", got.Used, want)
	}
	if ttl, err := b.rdb.TTL(ctx, q.prefix+":used:100").Result(); err != nil || ttl <= 0 || ttl > UseRecordTTL {
		t.Fatalf("the use record expires in %v (%v), want within %v", ttl, err, UseRecordTTL)
	}
	if err := q.ReportWorkload(ctx, WorkloadReport{Epoch: "e"}, nil); err == nil {
		t.Fatal("a report without a replica name was accepted")
	}
	// Reports older than the age asked for are gone, and deleted.
	time.Sleep(30 * time.Millisecond)
	if got, err := q.ReadWorkload(ctx, 10*time.Millisecond, nil); err != nil || len(got.Reports) != 0 {
		t.Fatalf("stale reports = %+v, %v; want none", got, err)
	}
	if n, err := b.rdb.HLen(ctx, q.keys.workload).Result(); err != nil || n != 0 {
		t.Fatalf("%d stale reports left in Redis (%v)", n, err)
	}
	// Latency buckets: 10 % apart from 1 ms, and a latency lands in the first bound at or above it.
	for _, c := range []struct {
		d    time.Duration
		want int
	}{{0, 0}, {time.Millisecond, 0}, {1001 * time.Microsecond, 1}, {time.Hour, len(LatencyBuckets) - 1}} {
		if got := LatencyBucket(c.d); got != c.want {
			t.Errorf("LatencyBucket(%s) = %d, want %d", c.d, got, c.want)
		}
	}
}

func testStats(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Stats{}, st, cmpIgnoreNow); diff != "" {
		t.Fatalf("stats of an empty queue (-want +got):\n%s", diff)
	}
	enterAll(t, q, visitorIDs("s", 25)...)
	if _, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 5, PassTTL: passTTL, AbandonAfter: longAbandon}); err != nil {
		t.Fatal(err)
	}
	// Two passes expired already: they are not active any more.
	for _, id := range []string{"s-0000", "s-0001"} {
		if err := b.rdb.ZAdd(ctx, q.keys.active, redis.Z{Score: 1, Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	st, err = q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Stats{Depth: 20, Active: 3, AdmittedTotal: 5}, st, cmpIgnoreNow); diff != "" {
		t.Fatalf("stats (-want +got):\n%s", diff)
	}
	if time.Since(st.Now).Abs() > time.Minute {
		t.Fatalf("stats Now = %s, want Redis' clock", st.Now)
	}
}

var cmpIgnoreNow = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Now" }, cmp.Ignore())

func testPlan(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	if _, err := q.ReadPlan(ctx); !errors.Is(err, ErrNoPlan) {
		t.Fatalf("ReadPlan before any publication: %v, want ErrNoPlan", err)
	}
	cache := NewPlanCache(q, time.Hour)
	if _, err := cache.Get(ctx); !errors.Is(err, ErrNoPlan) {
		t.Fatalf("PlanCache.Get before any publication: %v, want ErrNoPlan", err)
	}
	cache = NewPlanCache(q, time.Hour)
	quota, err := capacity.FromQuota(14, 1, 100*time.Millisecond, false)
	if err != nil {
		t.Fatal(err)
	}
	want := PublishedPlan{Quota: quota, PollMin: 500 * time.Millisecond, PollMax: 5 * time.Second, AbandonAfter: 5 * time.Minute, Phase: phase.Open}
	if err := q.PublishPlan(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := q.ReadPlan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("plan read back = %+v, want %+v", got, want)
	}
	if got, err := cache.Get(ctx); err != nil || got != want {
		t.Fatalf("PlanCache.Get = %+v, %v", got, err)
	}
	changed := want
	changed.Suspended = true
	if err := q.PublishPlan(ctx, changed); err != nil {
		t.Fatal(err)
	}
	changed.Quota = capacity.Plan{} // a suspended queue's plan reads as admitting nobody
	if got, _ := cache.Get(ctx); got != want {
		t.Fatalf("PlanCache.Get within its TTL = %+v, want the cached %+v", got, want)
	}
	cache.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if got, _ := cache.Get(ctx); got != changed {
		t.Fatalf("PlanCache.Get after its TTL = %+v, want %+v", got, changed)
	}
	// A forecast rides along, and stays when a publication brings none.
	forecast := &Forecast{At: time.UnixMilli(1_800_000_000_123), Queues: map[string]LaneForecast{
		MainLane: {Advance: capacity.Advance{SeqsPerAdmission: 1.25}, Waiting: 700, ArrivalsPerSecond: 12.5},
		"club":   {Waiting: 3},
	}}
	withForecast := want
	withForecast.Forecast = forecast
	if err := q.PublishPlan(ctx, withForecast); err != nil {
		t.Fatal(err)
	}
	if err := q.PublishPlan(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err = q.ReadPlan(ctx)
	if err != nil || got.Forecast == nil || !got.SameDecision(want) {
		t.Fatalf("plan read back = %+v, %v; want %+v with its forecast", got, err, want)
	}
	if diff := cmp.Diff(forecast, got.Forecast); diff != "" {
		t.Fatalf("forecast read back (-want +got):\n%s", diff)
	}
	// A capped room's slots ride beside it, and go with the next forecast without them.
	slots := &capacity.Slots{Max: 200, Active: 180, Held: 80 * time.Second, ReleasedPerSecond: 2, Counted: time.Minute}
	withForecast.Forecast = &Forecast{At: forecast.At, Queues: forecast.Queues, Slots: slots}
	if err := q.PublishPlan(ctx, withForecast); err != nil {
		t.Fatal(err)
	}
	if got, err := q.ReadPlan(ctx); err != nil || got.Forecast == nil || got.Forecast.Slots == nil || *got.Forecast.Slots != *slots {
		t.Fatalf("plan with slots read back = %+v, %v; want the slots %+v", got, err, slots)
	}
	// A manager that knows no slots (one rolled back) writes its forecast alone: the slots beside it
	// were counted for another forecast, and are not read.
	older := &Forecast{At: forecast.At.Add(2 * time.Second), Queues: forecast.Queues}
	if err := b.rdb.HSet(ctx, q.keys.plan, forecastField, older.encode()).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := q.ReadPlan(ctx); err != nil || got.Forecast == nil || !got.Forecast.At.Equal(older.At) || got.Forecast.Slots != nil {
		t.Fatalf("a later forecast beside the slots of an earlier one read back = %+v, %v; want it without slots", got.Forecast, err)
	}
	withForecast.Forecast = forecast
	if err := q.PublishPlan(ctx, withForecast); err != nil {
		t.Fatal(err)
	}
	if got, err := q.ReadPlan(ctx); err != nil || got.Forecast == nil || got.Forecast.Slots != nil {
		t.Fatalf("plan whose forecast has no slots read back = %+v, %v; want no slots", got, err)
	}
	// A forecast that cannot be read is none: waits are told by position.
	if err := b.rdb.HSet(ctx, q.keys.plan, forecastField, "soon main=1,2").Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := q.ReadPlan(ctx); err != nil || got.Forecast != nil || !got.SameDecision(want) {
		t.Fatalf("plan with a damaged forecast = %+v, %v; want the plan without one", got, err)
	}
	if err := q.PublishPlan(ctx, PublishedPlan{}); err == nil {
		t.Fatal("PublishPlan accepted the zero plan")
	}
	if err := b.rdb.HSet(ctx, q.keys.plan, "tick", "soon").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.ReadPlan(ctx); err == nil || !strings.Contains(err.Error(), "field tick") {
		t.Fatalf("ReadPlan of a damaged plan: %v, want an error naming the field", err)
	}
}

// mustQuota is the plan of num visitors a tick.
func mustQuota(t testing.TB, num int64, tick time.Duration) capacity.Plan {
	t.Helper()
	p, err := capacity.FromQuota(num, 1, tick, false)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func testDelete(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	other, err := New(b.rdb, "test", "bystander")
	if err != nil {
		t.Fatal(err)
	}
	enterAll(t, q, visitorIDs("d", 600)...) // spans several last-seen blocks
	if _, err := other.Enter(ctx, "x", longAbandon); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Admit(ctx, AdmitRequest{TickID: 1, Limit: 20, PassTTL: passTTL, AbandonAfter: longAbandon}); err != nil {
		t.Fatal(err)
	}
	if err := q.PublishPlan(ctx, PublishedPlan{Quota: mustQuota(t, 1, time.Second)}); err != nil {
		t.Fatal(err)
	}
	before := keysOf(t, b, q)
	if len(before) != 7 { // q, seq, seen, passes, active, totals, plan
		t.Fatalf("%d keys before Delete, want 7: %v", len(before), before)
	}
	if err := q.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if left := keysOf(t, b, q); len(left) != 0 {
		t.Fatalf("Delete left %d keys behind: %v", len(left), left)
	}
	if p, err := other.Status(ctx, "x", longAbandon); err != nil || p.State != Waiting {
		t.Fatalf("Delete touched another queue: Status = %+v, %v", p, err)
	}
	if err := q.Delete(ctx); err != nil {
		t.Fatalf("deleting a deleted queue: %v", err)
	}
}

func TestNewRejectsReservedCharacters(t *testing.T) {
	for _, tc := range [][2]string{{"", "a"}, {"a", ""}, {"ns}", "a"}, {"ns", "a*"}, {"ns", "a/b"}, {"n s", "a"}} {
		if _, err := New(nil, tc[0], tc[1]); err == nil {
			t.Errorf("New(%q, %q) accepted", tc[0], tc[1])
		}
	}
}

func testAbandonedAtTurn(t *testing.T, b backend) {
	ctx := context.Background()
	q := queueOn(t, b)
	const abandonAfter, atTurn = time.Minute, 15 * time.Second
	ids := visitorIDs("t", 8)
	enterAll(t, q, ids...)
	// t-0000 and t-0006 have been silent 20 s: past abandonAtTurnAfter, within abandonAfter.
	silence(t, q, ids[0], 20*time.Second)
	silence(t, q, ids[6], 20*time.Second)
	req := AdmitRequest{TickID: 1, Limit: 2, PassTTL: passTTL, AbandonAfter: abandonAfter, AbandonAtTurnAfter: atTurn}
	res, err := q.Admit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range res.Admitted {
		got = append(got, a.ID)
	}
	// At its turn t-0000 is passed over; t-0006, deeper, is not swept: it keeps its place and is
	// admitted if it polls before its turn.
	if diff := cmp.Diff([]string{ids[1], ids[2]}, got); diff != "" || res.Abandoned != 1 {
		t.Fatalf("admitted (-want +got):\n%s, abandoned %d; want t-0000 passed over", diff, res.Abandoned)
	}
	if p, err := q.Status(ctx, ids[6], abandonAfter); err != nil || p.State != Waiting || p.Position != 4 {
		t.Fatalf("Status of the silent visitor deeper = %+v, %v; want waiting at 4", p, err)
	}
	req.TickID, req.Limit = 2, 5
	if res, err = q.Admit(ctx, req); err != nil {
		t.Fatal(err)
	}
	if len(res.Admitted) != 5 || res.Abandoned != 0 {
		t.Fatalf("after polling, %d admitted and %d abandoned; want the 5 left admitted", len(res.Admitted), res.Abandoned)
	}
	// Without abandonAtTurnAfter a place silent for less than abandonAfter is admitted.
	enterAll(t, q, "u-0000")
	silence(t, q, "u-0000", 20*time.Second)
	res, err = q.Admit(ctx, AdmitRequest{TickID: 3, Limit: 1, PassTTL: passTTL, AbandonAfter: abandonAfter})
	if err != nil || len(res.Admitted) != 1 {
		t.Fatalf("without abandonAtTurnAfter: %+v, %v; want the silent visitor admitted", res, err)
	}
}
