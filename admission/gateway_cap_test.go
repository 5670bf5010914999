package admission_test

import (
	"net/http"
	"strings"
	"testing"
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
