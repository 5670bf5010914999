package admission_test

import (
	"context"
	"net/http"
	"testing"
	"time"

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
