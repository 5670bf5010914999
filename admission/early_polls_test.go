package admission_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/testenv"
)

// warmStatusScript runs the status script once, so that Redis holds it: a script's first call is an
// EVALSHA that Redis does not know, then an EVAL.
func (h *harness) warmStatusScript() {
	h.t.Helper()
	if _, err := h.q.Status(context.Background(), "ahead-000", time.Hour); err != nil {
		h.t.Fatal(err)
	}
}

// redisCalls counts the commands the harness's redis-server ran, but the INFO that asks: the status
// script's calls (evalsha, eval) and all of them.
func (h *harness) redisCalls() (scripts, all int64) {
	h.t.Helper()
	rdb, err := queue.NewClient(h.redis.URL(), queue.ClientOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	defer rdb.Close()
	stats, err := testenv.CommandStats(context.Background(), rdb)
	if err != nil {
		h.t.Fatal(err)
	}
	for name, s := range stats {
		switch name {
		case "info", "hello", "client|setinfo", "client|setname", "ping":
			// The counting client's own.
		case "evalsha", "eval":
			scripts += s.Calls
			all += s.Calls
		default:
			all += s.Calls
		}
	}
	return scripts, all
}

// TestPollsTooEarlyAreRefusedWithoutRedis: a visitor that polls sooner than it was told is refused
// 429 too_early with its place, however often it polls, and none of those polls reaches Redis; the
// poll it then times as the refusal says is answered, by Redis.
func TestPollsTooEarlyAreRefusedWithoutRedis(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		h := newHarness(t, nil)
		h.fillAhead(40)
		v := h.visitor()
		entered := v.enter().json(t)
		if entered["position"] != 41.0 {
			t.Fatalf("enter = %v; want position 41", entered)
		}
		h.warmStatusScript()
		scripts, all := h.redisCalls()
		var retry time.Duration
		for i := range 200 {
			res := v.status()
			body := res.json(t)
			if res.StatusCode != http.StatusTooManyRequests || body["error"] != "too_early" || body["position"] != 41.0 || res.Header.Get("Retry-After") == "" {
				t.Fatalf("poll %d right after the entry: %d %s; want 429 too_early at position 41 with Retry-After", i, res.StatusCode, res.body)
			}
			retry = time.Duration(body["retryAfterMs"].(float64)) * time.Millisecond
		}
		scriptsAfter, allAfter := h.redisCalls()
		if scriptsAfter != scripts {
			t.Errorf("200 polls refused as too early ran the status script %d times; want none", scriptsAfter-scripts)
		}
		// The plan is read at most once a second, whoever polls.
		if allAfter-all > 2 {
			t.Errorf("200 polls refused as too early cost Redis %d commands; want at most the plan's reads", allAfter-all)
		}
		if got := h.metric("herdgate_proxy_polls_refused_in_memory_total", `{reason="too_early"}`); got != 200 {
			t.Errorf("herdgate_proxy_polls_refused_in_memory_total{reason=\"too_early\"} = %v; want 200", got)
		}

		// Timed as the last refusal said, the poll is answered, and it is Redis that answers it.
		time.Sleep(retry)
		if res := v.status(); res.StatusCode != http.StatusOK || res.json(t)["position"] != 41.0 {
			t.Fatalf("a poll timed as the refusal said: %d %s", res.StatusCode, res.body)
		}
		if scriptsNow, _ := h.redisCalls(); scriptsNow != scriptsAfter+1 {
			t.Errorf("the poll in time ran the status script %d times; want once", scriptsNow-scriptsAfter)
		}
	})
}

// TestAClientsPollsPastItsRateAreRefusedWithoutRedis: with spec.entry.perClient, the polls one client
// (as a trusted proxy names it) sends on to Redis are bounded to pollsPerSecond, with a burst of twice
// as many; the rest are refused 429 too_many_polls without a call to Redis, and another client's
// visitor, polling as told meanwhile, is answered.
func TestAClientsPollsPastItsRateAreRefusedWithoutRedis(t *testing.T) {
	h := newHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{
			TrustedProxies: []herdgatev1alpha1.CIDR{"127.0.0.0/8"},
			PerClient:      &herdgatev1alpha1.PerClientLimit{Burst: ptr.To[int32](100), PollsPerSecond: ptr.To[int32](5)},
		}
	})
	h.fillAhead(40)
	const flooders = 30
	var crowd []*visitor
	var longest time.Duration
	for range flooders {
		v := h.visitor()
		v.header.Set("X-Forwarded-For", "198.51.100.7")
		body := v.enter().json(t)
		longest = max(longest, time.Duration(body["nextPollMs"].(float64))*time.Millisecond)
		crowd = append(crowd, v)
	}
	faithful := h.visitor()
	faithful.header.Set("X-Forwarded-For", "203.0.113.9")
	longest = max(longest, time.Duration(faithful.enter().json(t)["nextPollMs"].(float64))*time.Millisecond)
	time.Sleep(longest)

	h.warmStatusScript()
	scripts, _ := h.redisCalls()
	refused := 0
	for _, v := range crowd {
		res := v.status()
		switch body := res.json(t); {
		case res.StatusCode == http.StatusOK:
		case res.StatusCode == http.StatusTooManyRequests && body["error"] == "too_many_polls" && body["retryAfterMs"].(float64) > 0 && res.Header.Get("Retry-After") != "":
			refused++
		default:
			t.Fatalf("a flooding client's poll: %d %s", res.StatusCode, res.body)
		}
	}
	if res := faithful.status(); res.StatusCode != http.StatusOK || res.json(t)["position"] == nil {
		t.Fatalf("another client's visitor polling as told: %d %s", res.StatusCode, res.body)
	}
	scriptsAfter, _ := h.redisCalls()
	// Its burst of 10 (and a poll it earned meanwhile, at 5 a second) reach Redis; the rest do not.
	if refused < flooders-12 || refused > flooders-10 {
		t.Errorf("%d of the client's %d polls in time were refused; want all but its burst of 10", refused, flooders)
	}
	if ran := scriptsAfter - scripts; ran != int64(flooders-refused+1) {
		t.Errorf("the status script ran %d times for %d polls let through and the other client's one", ran, flooders-refused)
	}
	if got := h.metric("herdgate_proxy_polls_refused_in_memory_total", `{reason="client_rate"}`); got != float64(refused) {
		t.Errorf("herdgate_proxy_polls_refused_in_memory_total{reason=\"client_rate\"} = %v; want %d", got, refused)
	}
}
