package admission_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdgate/herdgate/admission"
)

// redisClient is a client of the harness's Redis of the test's own, to look at or change the room's
// keys as the engine would not.
func (h *harness) redisClient() *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: h.redis.Addr()})
	h.t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// loseLastPlace does what a failover to a replica behind the primary does to the waiting set: its
// last place is gone, and the arrival sequence is back at sequence.
func (h *harness) loseLastPlace(set string, sequence int64) {
	h.t.Helper()
	rdb, ctx := h.redisClient(), context.Background()
	if err := rdb.Set(ctx, h.q.KeyPrefix()+":seq", sequence, 0).Err(); err != nil {
		h.t.Fatal(err)
	}
	if err := rdb.ZRemRangeByRank(ctx, set, -1, -1).Err(); err != nil {
		h.t.Fatal(err)
	}
}

// TestAVisitorGetsBackAPlaceAFailoverLost: a failover takes the last place and the sequence back;
// the visitor's next poll brings its signed place, and it waits where it was. The same place shown by
// another visitor is nobody's but its own.
func TestAVisitorGetsBackAPlaceAFailoverLost(t *testing.T) {
	h := newHarness(t, nil)
	first, lost := h.visitor(), h.visitor()
	first.enter()
	res := lost.enter()
	place, _ := res.json(t)["place"].(string)
	if res.StatusCode != http.StatusOK || place == "" {
		t.Fatalf("enter: %d %s, want a place", res.StatusCode, res.body)
	}
	ctx := context.Background()
	rdb := h.redisClient()
	prefix := h.q.KeyPrefix()
	h.loseLastPlace(prefix+":q", 1)

	time.Sleep(600 * time.Millisecond) // the poll interval
	res = lost.status()
	if body := res.json(t); res.StatusCode != http.StatusOK || body["position"] != 2.0 || body["queueDepth"] != 2.0 {
		t.Fatalf("the lost visitor's poll: %d %s, want its place, 2 of 2", res.StatusCode, res.body)
	}
	if n := h.metric("herdgate_proxy_requests_total", `route_class="status",outcome="restored"`); n != 1 {
		t.Fatalf("restored polls counted %v, want 1", n)
	}
	// Another visitor showing the place gets one of its own, at the back.
	other := h.visitor()
	res = other.do(http.MethodPost, "/.herdgate/enter", nil, admission.PlaceHeader, place)
	if body := res.json(t); res.StatusCode != http.StatusOK || body["position"] != 3.0 {
		t.Fatalf("another visitor with the lost place: %d %s, want position 3", res.StatusCode, res.body)
	}
	// The first visitor leaves the queue (admitted, say): its place was not lost, and a poll with it
	// is told to enter, and takes nothing.
	if err := rdb.ZRemRangeByRank(ctx, prefix+":q", 0, 0).Err(); err != nil {
		t.Fatal(err)
	}
	res = first.status()
	if res.StatusCode != http.StatusNotFound || res.json(t)["error"] != "not_queued" {
		t.Fatalf("a poll with a place that was not lost: %d %s, want 404 not_queued", res.StatusCode, res.body)
	}
	if n, err := rdb.ZCard(ctx, prefix+":q").Result(); err != nil || n != 2 {
		t.Fatalf("%d waiting after that poll, %v; want 2", n, err)
	}
}
