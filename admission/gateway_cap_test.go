package admission_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// TestTheBusyAnswerIsTheRooms: what a gateway's cap refused and sent to /.herdgate/busy gets the
// room's 503 with Retry-After, as JSON for a client and as a page that loads itself again for a
// browser, and is counted; it takes GET and HEAD only.
func TestTheBusyAnswerIsTheRooms(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		h := newMemoryHarness(t, nil)
		v := h.visitor()
		res := v.do(http.MethodGet, "/.herdgate/busy", nil, "Accept", "application/json")
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "1" {
			t.Fatalf("a client's busy answer: %d, Retry-After %q; want 503 with Retry-After 1", res.StatusCode, res.Header.Get("Retry-After"))
		}
		if body := res.json(t); body["error"] != "workload_busy" || body["retryAfterMs"] != float64(1000) {
			t.Errorf("a client's busy answer: %s", res.body)
		}
		res = v.do(http.MethodGet, "/.herdgate/busy", nil, "Accept", "text/html")
		if res.StatusCode != http.StatusServiceUnavailable || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") ||
			!strings.Contains(string(res.body), `http-equiv="refresh" content="1"`) || res.Header.Get("Retry-After") != "1" {
			t.Errorf("a browser's busy answer: %d %s %q", res.StatusCode, res.Header.Get("Content-Type"), res.body)
		}
		if res = v.do(http.MethodPost, "/.herdgate/busy", nil); res.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST /.herdgate/busy: %d, want 405", res.StatusCode)
		}
		if n := h.metric("herdgate_proxy_requests_total", `route_class="gateway",outcome="workload_busy"`); n != 2 {
			t.Errorf("busy answers counted: %g, want 2", n)
		}
	})
}

// capTest is how the workload is pressed behind a gateway: its pool, how long it holds a request,
// and how many admitted visitors order at once.
const (
	capTestPool     = 4
	capTestHold     = 300 * time.Millisecond
	capTestVisitors = 24
)

// TestGatewaysHoldTheWorkloadWithinItsPool: through every gateway, configured as `herd
// gateway-config` prints it for a room of pool 4, 24 admitted visitors ordering at once from a
// workload that holds each order 300 ms never have more than 4 orders in flight at the workload.
// Each order is served or refused in the room's shape (503, Retry-After, workload_busy), and the
// refusals the gateway sends to herdgate are counted there. Without the cap, all 24 would be in
// flight at once, so the check can fail.
func TestGatewaysHoldTheWorkloadWithinItsPool(t *testing.T) {
	for name, gw := range gateways {
		t.Run(name, func(t *testing.T) { testGatewayHoldsThePool(t, name, gw) })
	}
}

// queueingGateways hold a request past the cap a while before they refuse it (Caddy without
// refusing at all); the others refuse it at once (Traefik), or after a burst of the cap's size
// (nginx, which paces at the room's declared latency, here shorter than the workload's).
var queueingGateways = map[string]bool{"caddy": true, "haproxy": true}

func testGatewayHoldsThePool(t *testing.T, name string, gw gateway) {
	h, gateway := throughGateway(t, gw, func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Capacity.PoolSize = capTestPool })
	h.upstream.hold.Store(int64(capTestHold))
	cfg := h.room.Config()
	type outcome struct {
		status           int
		retryAfter, body string
	}
	outcomes := make([]outcome, capTestVisitors)
	var wg sync.WaitGroup
	now := time.Now()
	for i := range capTestVisitors {
		token := cfg.Passes.Issue(fmt.Sprintf("visitor-%d", i), now, now.Add(time.Minute))
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, gateway+"/api/v1/orders", nil)
			req.Header.Set(admission.PassHeader, token)
			req.Header.Set("Accept", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			outcomes[i] = outcome{res.StatusCode, res.Header.Get("Retry-After"), string(body)}
		})
	}
	wg.Wait()
	served, refused := 0, 0
	for _, o := range outcomes {
		var refusal struct{ Error string }
		switch {
		case o.status == http.StatusOK:
			served++
		case o.status == http.StatusServiceUnavailable && o.retryAfter == "1" && json.Unmarshal([]byte(o.body), &refusal) == nil && refusal.Error == "workload_busy":
			refused++
		default:
			t.Errorf("an order: %d (Retry-After %q) %q; want it served, or refused in the room's shape", o.status, o.retryAfter, o.body)
		}
	}
	peak := h.upstream.peak.Load()
	t.Logf("%s: at most %d orders in flight at the workload (pool %d); %d served, %d refused", name, peak, capTestPool, served, refused)
	if peak > capTestPool {
		t.Errorf("%d orders were in flight at the workload at once; its pool is %d", peak, capTestPool)
	}
	switch {
	case served < capTestPool:
		t.Errorf("%d orders served: the workload should have taken a pool's worth", served)
	case queueingGateways[name] && served <= capTestPool:
		t.Errorf("%d orders served: %s queues what is past the cap, so more than a pool's worth should be served, one after another", served, name)
	}
	counted := int(h.metric("herdgate_proxy_requests_total", `route_class="gateway",outcome="workload_busy"`))
	// HAProxy answers a request whose wait in its queue ran out itself, in the same shape; the
	// others send every refusal to herdgate.
	if counted > refused || name != "haproxy" && counted != refused {
		t.Errorf("herdgate counted %d busy answers; the visitors got %d", counted, refused)
	}
}
