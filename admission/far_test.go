package admission_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herdgate/herdgate/admission"

	"github.com/redis/go-redis/v9"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
)

// waitingKey is the harness queue's waiting set in Redis (internal/queue names it so): these tests
// read exact ranks from it and take visitors out of it as abandonment would.
const waitingKey = "{hg:shop/orders}:q"

// farHarness is a harness whose visitors say who they are in a header, with a Redis client of its
// own for exact ranks.
func farHarness(t *testing.T, exactPositions int32, change func(*herdgatev1alpha1.WaitingQueue)) (*harness, redis.UniversalClient) {
	t.Helper()
	h := newHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.Identity = &herdgatev1alpha1.IdentitySpec{Header: "X-User-Id"}
		wq.Spec.Polling = &herdgatev1alpha1.PollingSpec{ExactPositions: &exactPositions}
		if change != nil {
			change(wq)
		}
	})
	rdb := redis.NewClient(&redis.Options{Addr: h.redis.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return h, rdb
}

// fillQueue enters n visitors named prefix0 … through the engine, many at a time.
func fillQueue(t *testing.T, q *queue.Queue, prefix string, n int, abandonAfter time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 32 {
				if _, err := q.Enter(context.Background(), fmt.Sprintf("%s%06d", prefix, i), abandonAfter); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// pollAs polls status as the visitor, with its place when it has one.
func (h *harness) pollAs(visitor, place string) response {
	h.t.Helper()
	v := h.visitor()
	v.header.Set("X-User-Id", visitor)
	if place != "" {
		v.header.Set(admission.PlaceHeader, place)
	}
	return v.status()
}

// exactPosition is the visitor's ZRANK + 1, or 0 when it is not waiting.
func exactPosition(t *testing.T, rdb redis.UniversalClient, visitor string) int64 {
	t.Helper()
	rank, err := rdb.ZRank(context.Background(), waitingKey, visitor).Result()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return rank + 1
}

// TestFarPositionsBoundTheExactRank: in a queue of 25,000 with a tenth gone here and there, a
// visitor within the exact zone is told ZRANK + 1 from Redis, and one further back, who brings its
// place, is told a bound from the proxy's snapshot that is never below ZRANK + 1 and within 5 % of
// it, before and after admissions the snapshot has not seen; a far visitor polling too soon is
// refused as near the front; a browser gets its place as a cookie and is answered by it.
func TestFarPositionsBoundTheExactRank(t *testing.T) {
	const n, zone = 25_000, 5000
	// The proxy hands out its own timings: polls at most a second apart.
	h, rdb := farHarness(t, zone, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.Polling.MaxInterval = &metav1.Duration{Duration: time.Second}
	})
	ctx := context.Background()
	if err := h.q.PublishPlan(ctx, queue.PublishedPlan{Quota: mustQuota(14)}); err != nil {
		t.Fatal(err)
	}
	fillQueue(t, h.q, "u", n, 5*time.Minute)
	// Entering counts as a poll: wait out the shortest interval anyone was told.
	time.Sleep(2 * time.Second)
	r := rand.New(rand.NewPCG(7, 8))
	var gone []any
	for i := range n {
		if r.IntN(10) == 0 {
			gone = append(gone, fmt.Sprintf("u%06d", i))
		}
	}
	if err := rdb.ZRem(ctx, waitingKey, gone...).Err(); err != nil {
		t.Fatal(err)
	}
	waiting, err := rdb.ZRangeWithScores(ctx, waitingKey, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	signer := h.room.Config().Signer

	// Before the proxy has counted the queue, every answer is Redis' and gives the visitor its place.
	first := waiting[len(waiting)-1].Member.(string)
	res := h.pollAs(first, "")
	body := res.json(t)
	if res.StatusCode != http.StatusOK || body["positionIsBound"] != nil || int64(body["position"].(float64)) != exactPosition(t, rdb, first) {
		t.Fatalf("status before a snapshot: %d %s", res.StatusCode, res.body)
	}
	if want := signer.Place(first, int64(waiting[len(waiting)-1].Score)); body["place"] != want {
		t.Fatalf("place %v, want %s", body["place"], want)
	}
	// The proxy learnt the depth from that answer: its next tick counts the queue.
	h.room.RefreshFar(ctx)
	if h.metric("herdgate_proxy_far_snapshots_total", "") != 1 {
		t.Fatal("no snapshot of a queue deeper than the exact zone")
	}

	// sample polls every visitor picked, with the place its enter or status would have given it,
	// and checks each answer against the exact rank.
	polled := map[string]bool{first: true}
	sample := func(what string) {
		t.Helper()
		worst := map[string]float64{}
		var far, exact int
		for i := 0; i < len(waiting); i += 1 + r.IntN(150) {
			m := waiting[i]
			visitor := m.Member.(string)
			if polled[visitor] {
				continue
			}
			polled[visitor] = true
			want := exactPosition(t, rdb, visitor)
			if want == 0 {
				continue // admitted since
			}
			res := h.pollAs(visitor, signer.Place(visitor, int64(m.Score)))
			body := res.json(t)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("%s: %s: %d %s", what, visitor, res.StatusCode, res.body)
			}
			got := int64(body["position"].(float64))
			if body["positionIsBound"] != true {
				exact++
				if got != want {
					t.Fatalf("%s: %s told %d from Redis, ZRANK + 1 is %d", what, visitor, got, want)
				}
				if want > zone+zone/20 {
					t.Fatalf("%s: %s at %d, beyond the exact zone, was asked of Redis", what, visitor, want)
				}
				continue
			}
			far++
			if want <= zone || got < want || float64(got-want) > 0.05*float64(want) {
				t.Fatalf("%s: %s at %d told %d from the snapshot", what, visitor, want, got)
			}
			band := "5,000–10,000"
			switch {
			case want > 20_000:
				band = "20,000+"
			case want > 10_000:
				band = "10,000–20,000"
			}
			worst[band] = max(worst[band], float64(got-want)/float64(want))
		}
		if far < 50 || exact < 10 {
			t.Fatalf("%s: %d far and %d exact answers; the sample missed a zone", what, far, exact)
		}
		t.Logf("%s: %d far answers, %d exact; worst bound above the exact position by depth: %v", what, far, exact, worst)
	}
	sample("fresh snapshot")

	// 3,000 are admitted; the proxy learns it at its next batch, without counting again.
	for range 12 {
		h.admit(queue.MaxAdmitPerTick, 0)
	}
	h.room.RefreshFar(ctx)
	if h.metric("herdgate_proxy_far_snapshots_total", "") != 1 {
		t.Fatal("counted again within farSnapshotEvery")
	}
	sample("after 3,000 admissions")

	// A far visitor polling again at once is refused, its place kept.
	last := waiting[len(waiting)-2]
	place := signer.Place(last.Member.(string), int64(last.Score))
	if res := h.pollAs(last.Member.(string), place); res.StatusCode != http.StatusOK || res.json(t)["positionIsBound"] != true {
		t.Fatalf("far poll: %d %s", res.StatusCode, res.body)
	}
	if res := h.pollAs(last.Member.(string), place); res.StatusCode != http.StatusTooManyRequests || res.json(t)["error"] != "too_early" {
		t.Fatalf("far poll at once again: %d %s", res.StatusCode, res.body)
	}
	polled[last.Member.(string)] = true
	// A place of another visitor is not trusted: Redis answers.
	other := ""
	for i := len(waiting) - 3; other == ""; i-- {
		if v := waiting[i].Member.(string); !polled[v] {
			other = v
		}
	}
	polled[other] = true
	if res := h.pollAs(other, place); res.StatusCode != http.StatusOK || res.json(t)["positionIsBound"] != nil ||
		int64(res.json(t)["position"].(float64)) != exactPosition(t, rdb, other) {
		t.Fatalf("someone else's place: %d %s", res.StatusCode, res.body)
	}

	// A browser enters behind everyone, gets its place as a cookie (for the reserved paths only),
	// and its next poll is answered from the snapshot.
	v := h.visitor()
	v.header.Set("X-User-Id", "browser")
	res = v.enter()
	if c := res.setCookie(h.cookies().Place); res.StatusCode != http.StatusOK || c == "" || !strings.Contains(c, "Path=/.herdgate") || !strings.Contains(c, "HttpOnly") {
		t.Fatalf("enter: %d, place cookie %q", res.StatusCode, c)
	}
	time.Sleep(time.Duration(res.json(t)["nextPollMs"].(float64)) * time.Millisecond)
	if res := v.status(); res.StatusCode != http.StatusOK || res.json(t)["positionIsBound"] != true {
		t.Fatalf("the browser's poll: %d %s", res.StatusCode, res.body)
	} else if got, want := int64(res.json(t)["position"].(float64)), exactPosition(t, rdb, "browser"); got < want || float64(got-want) > 0.05*float64(want) {
		t.Fatalf("the browser at %d told %d", want, got)
	}
	if h.metric("herdgate_proxy_requests_total", `{outcome="waiting_far",route_class="status"}`) < 100 {
		t.Fatal("the far answers were not counted")
	}

	// Redis goes away: far visitors are still answered from the snapshot, their signs of life kept
	// for when it is back; a visitor near the front is told to come back. Both are visitors nobody
	// polled yet, so that no poll of theirs can be too early, however long the steps above took.
	var farOne, nearOne string
	for i := len(waiting) - 1; i >= 0 && (farOne == "" || nearOne == ""); i-- {
		v := waiting[i].Member.(string)
		switch pos := exactPosition(t, rdb, v); {
		case polled[v] || pos == 0:
		case farOne == "" && pos > 2*zone:
			farOne = v
		case nearOne == "" && pos < zone/2:
			nearOne = v
		}
	}
	farPlace := signer.Place(farOne, int64(rdb.ZScore(ctx, waitingKey, farOne).Val()))
	h.room.RefreshFar(ctx) // nothing pending
	h.redis.Stop()
	if res := h.pollAs(farOne, farPlace); res.StatusCode != http.StatusOK || res.json(t)["positionIsBound"] != true {
		t.Fatalf("a far visitor while Redis is down: %d %s", res.StatusCode, res.body)
	}
	if res := h.pollAs(nearOne, ""); res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a visitor near the front while Redis is down: %d %s", res.StatusCode, res.body)
	}
	h.room.RefreshFar(ctx)
	if pending := h.room.FarPositions().TakePending(); len(pending) != 1 || pending[0].Visitor != farOne {
		t.Fatalf("signs of life kept while Redis is down: %v", pending)
	}
}

// TestFarVisitorsKeepTheirPlaceThroughBatchedSignsOfLife: with abandonAfter 3 s, a far visitor that
// polls as told, answered from the snapshot every time, is never dropped, its signs of life going
// to Redis in the proxy's batches; a far visitor that stays silent is dropped by the ticks' sweep,
// and once the proxy's batch learns so its next poll is answered by Redis: not queued.
func TestFarVisitorsKeepTheirPlaceThroughBatchedSignsOfLife(t *testing.T) {
	const zone, crowd = 5000, 5600
	const abandon = 3 * time.Second
	h, rdb := farHarness(t, zone, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.Polling.MaxInterval = &metav1.Duration{Duration: time.Second}
	})
	// Shorter than a spec may say (10 s at least), so that the test waits seconds, not minutes.
	short := *h.room.Config()
	short.AbandonAfter = abandon
	h.room.SetConfig(&short)
	ctx := context.Background()
	if err := h.q.PublishPlan(ctx, queue.PublishedPlan{Quota: mustQuota(14)}); err != nil {
		t.Fatal(err)
	}
	fillQueue(t, h.q, "c", crowd, abandon)
	for _, v := range []string{"told", "silent"} {
		if _, err := h.q.Enter(ctx, v, abandon); err != nil {
			t.Fatal(err)
		}
	}
	crowdAlive := func() {
		members, err := rdb.ZRangeWithScores(ctx, waitingKey, 0, crowd-1).Result()
		if err != nil {
			t.Fatal(err)
		}
		var seen []queue.SeenVisitor
		for _, m := range members {
			if v := m.Member.(string); v != "told" && v != "silent" {
				seen = append(seen, queue.SeenVisitor{Visitor: v, Seq: int64(m.Score)})
			}
		}
		for start := 0; start < len(seen); start += 1000 {
			if _, err := h.q.SeenBatch(ctx, seen[start:min(len(seen), start+1000)], abandon); err != nil {
				t.Fatal(err)
			}
		}
	}
	placeOf := func(v string) string {
		score, err := rdb.ZScore(ctx, waitingKey, v).Result()
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		return h.room.Config().Signer.Place(v, int64(score))
	}
	told, silent := placeOf("told"), placeOf("silent")

	// The proxy's loop: a batch every tick, a snapshot every farSnapshotEvery.
	loopCtx, stop := context.WithCancel(ctx)
	loopDone := make(chan struct{})
	go func() { defer close(loopDone); h.room.KeepFarPositions(loopCtx) }()
	defer func() { stop(); <-loopDone }()
	// An exact answer, from which the proxy learns the depth; Redis refuses it (the visitor entered
	// just now), and says when to come back.
	learnt := h.pollAs("told", "").json(t)
	after := cmp.Or(learnt["nextPollMs"], learnt["retryAfterMs"]).(float64)

	var tick int64
	sweep := func() {
		tick++
		if _, err := h.q.Admit(ctx, queue.AdmitRequest{TickID: tick, Limit: 0, PassTTL: time.Minute, AbandonAfter: abandon}); err != nil {
			t.Fatal(err)
		}
	}
	nextPoll, nextCrowd := time.Now().Add(time.Duration(after)*time.Millisecond), time.Now()
	var farAnswers int
	for end := time.Now().Add(3 * abandon); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		sweep()
		if time.Now().After(nextCrowd) {
			crowdAlive()
			nextCrowd = time.Now().Add(500 * time.Millisecond)
		}
		if time.Now().Before(nextPoll) {
			continue
		}
		res := h.pollAs("told", told)
		body := res.json(t)
		if res.StatusCode != http.StatusOK || body["queueDepth"] == nil {
			t.Fatalf("the visitor polling as told: %d %s", res.StatusCode, res.body)
		}
		if body["positionIsBound"] == true {
			farAnswers++
		}
		nextPoll = time.Now().Add(time.Duration(body["nextPollMs"].(float64)) * time.Millisecond)
	}
	if farAnswers < 5 {
		t.Fatalf("only %d of the visitor's answers came from the snapshot", farAnswers)
	}
	if exactPosition(t, rdb, "told") == 0 {
		t.Fatal("the visitor that polled as told was dropped")
	}
	if exactPosition(t, rdb, "silent") != 0 {
		t.Fatal("the silent visitor was kept")
	}
	t.Logf("%d far answers to the visitor polling as told; %v signs of life sent in batches", farAnswers,
		h.metric("herdgate_proxy_far_signs_of_life_total", ""))

	// A sign of life answered just before the proxy stops still reaches Redis. The loop's own last
	// poll is sent first, at the next tick: count from there.
	time.Sleep(time.Duration(admission.TooEarlyShare * float64(time.Second)))
	signs := h.metric("herdgate_proxy_far_signs_of_life_total", "")
	for deadline, steady := time.Now().Add(10*time.Second), 0; steady < 3; time.Sleep(100 * time.Millisecond) {
		// Three ticks in a row with nothing pending and nothing more sent: the batches are done.
		now := h.metric("herdgate_proxy_far_signs_of_life_total", "")
		if now == signs && h.room.FarPositions().PendingCount() == 0 {
			steady++
		} else {
			steady, signs = 0, now
		}
		if time.Now().After(deadline) {
			t.Fatal("the signs of life answered so far were never all sent")
		}
	}
	if res := h.pollAs("told", told); res.StatusCode != http.StatusOK || res.json(t)["positionIsBound"] != true {
		t.Fatalf("the last poll before the proxy stops: %d %s", res.StatusCode, res.body)
	}
	stop()
	<-loopDone
	if got := h.metric("herdgate_proxy_far_signs_of_life_total", ""); got != signs+1 {
		t.Fatalf("signs of life sent: %v, then %v after the last poll and the stop", signs, got)
	}

	// The dropped visitor comes back with its old place: at most one answer from the snapshot,
	// then, once a batch found it gone, Redis says it is not queued.
	first := h.pollAs("silent", silent)
	h.room.RefreshFar(ctx)
	time.Sleep(time.Duration(first.json(t)["nextPollMs"].(float64)) * time.Millisecond)
	if res := h.pollAs("silent", silent); res.StatusCode != http.StatusNotFound || res.json(t)["error"] != "not_queued" {
		t.Fatalf("the dropped visitor after its first answer (%d %s): %d %s", first.StatusCode, first.body, res.StatusCode, res.body)
	}
}
