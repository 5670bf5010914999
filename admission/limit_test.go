package admission_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// TestEntriesPerClientAreLimited: one address without cookies takes at most the burst of places, on
// both fronts, and behind a trusted proxy the forwarded client is the one limited.
func TestEntriesPerClientAreLimited(t *testing.T) {
	onBothFronts(t, testEntriesPerClientAreLimited)
}

func limitedHarness(t *testing.T, trusted ...herdgatev1alpha1.CIDR) *harness {
	return newHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) {
		// Five places, and one more a minute: nothing comes back while the test runs.
		wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{
			PerClient:      &herdgatev1alpha1.PerClientLimit{Burst: ptr.To[int32](5), PerMinute: ptr.To[int32](1)},
			TrustedProxies: trusted,
		}
	})
}

// enterMany sends n entries without cookies, each with the given X-Forwarded-For, and counts the
// answers by status.
func enterMany(t *testing.T, h *harness, n int, xff string) map[int]int {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			req, _ := http.NewRequest(http.MethodPost, h.server.URL+"/.herdgate/enter", nil)
			if xff != "" {
				req.Header.Set("X-Forwarded-For", xff)
			}
			res, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			body := make([]byte, 512)
			k, _ := res.Body.Read(body)
			_ = res.Body.Close()
			if res.StatusCode == http.StatusTooManyRequests &&
				(res.Header.Get("Retry-After") == "" || !strings.Contains(string(body[:k]), `"error":"too_many_entries"`)) {
				t.Errorf("a 429 without Retry-After or its JSON: %v %s", res.Header, body[:k])
			}
			mu.Lock()
			codes[res.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return codes
}

func testEntriesPerClientAreLimited(t *testing.T) {
	t.Run("1,000 entries from one address", func(t *testing.T) {
		h := limitedHarness(t)
		codes := enterMany(t, h, 1000, "")
		if codes[http.StatusOK] != 5 || codes[http.StatusTooManyRequests] != 995 {
			t.Fatalf("answers %v, want 5 × 200 and 995 × 429", codes)
		}
		st, err := h.q.Stats(context.Background())
		if err != nil || st.Depth != 5 {
			t.Fatalf("depth %d (%v), want the 5 places of the burst", st.Depth, err)
		}
		// Without trusted proxies the header is the visitor's own word: it changes nothing.
		if codes := enterMany(t, h, 10, "198.51.100.1"); codes[http.StatusTooManyRequests] != 10 {
			t.Fatalf("a forged X-Forwarded-For: %v, want every entry refused", codes)
		}
		if got := h.metric("herdgate_proxy_requests_total", `{outcome="rate_limited",route_class="enter"}`); got < 1005 {
			t.Fatalf("rate_limited requests counted %v, want 1005", got)
		}
	})

	t.Run("a visitor who holds a place keeps it", func(t *testing.T) {
		h := limitedHarness(t)
		v := h.visitor()
		if res := v.enter(); res.StatusCode != http.StatusOK {
			t.Fatalf("first entry: %d %s", res.StatusCode, res.body)
		}
		enterMany(t, h, 20, "") // the rest of the burst and more, from the same address
		for range 3 {
			if res := v.enter(); res.StatusCode != http.StatusOK {
				t.Fatalf("entering again with a place: %d %s", res.StatusCode, res.body)
			}
			if res := v.status(); res.StatusCode != http.StatusOK && res.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("status with a place: %d %s", res.StatusCode, res.body)
			}
		}
	})

	t.Run("behind a trusted proxy the forwarded client is limited", func(t *testing.T) {
		h := limitedHarness(t, "127.0.0.0/8", "::1/128")
		for i := range 3 {
			xff := fmt.Sprintf("198.51.100.%d", i+1)
			if codes := enterMany(t, h, 8, xff); codes[http.StatusOK] != 5 || codes[http.StatusTooManyRequests] != 3 {
				t.Fatalf("client %s: %v, want 5 × 200 and 3 × 429", xff, codes)
			}
		}
		// A hop the visitor wrote before the proxy's own is not believed.
		if codes := enterMany(t, h, 3, "203.0.113.9, 198.51.100.1"); codes[http.StatusTooManyRequests] != 3 {
			t.Fatalf("a forged first hop: %v, want the real client (198.51.100.1) refused", codes)
		}
	})
}

func TestTheUpstreamLearnsTheClientATrustedProxyNames(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		up := startRawUpstream(t)
		h := newMemoryHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Upstream.URL = ptr.To(up.URL())
			wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{TrustedProxies: []herdgatev1alpha1.CIDR{"127.0.0.0/8"}}
		})
		res, body, _, _ := h.send("GET /open HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 203.0.113.9, 198.51.100.1\r\n\r\n")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
		if got := up.all()[0].values("X-Forwarded-For"); len(got) != 1 || got[0] != "198.51.100.1" {
			t.Fatalf("X-Forwarded-For upstream %q, want [198.51.100.1]", got)
		}
	})
}

// After a failed Redis call, enter and status answer 503 at once for a moment instead of each waiting
// out its own bound; then they try again, and recover.
func TestAFailedRedisCallRestsTheQueueForAMoment(t *testing.T) {
	h := newHarness(t, nil)
	v := h.visitor()
	h.redis.Stop()
	if res := v.enter(); res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("enter with Redis away: %d %s", res.StatusCode, res.body)
	}
	_, before := h.store.PipelineStats()
	for range 5 {
		if res := v.enter(); res.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("enter while resting: %d %s", res.StatusCode, res.body)
		}
	}
	if _, after := h.store.PipelineStats(); after != before {
		t.Fatalf("%d calls to Redis while resting, want none", after-before)
	}
	if err := h.redis.Restart(); err != nil {
		t.Fatal(err)
	}
	h.publishPlan()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := v.enter()
		if res.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("enter after Redis came back: %d %s", res.StatusCode, res.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
