package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"testing"
	"time"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/builder"
)

// TestModesSwitchLiveWithKubectlPatch runs a proxy as herdgate-proxy --waitingqueue does and switches
// the queue's mode with kubectl patch: the running proxy follows at once, without a restart, and a
// waiting visitor keeps its place through a Closed period.
func TestModesSwitchLiveWithKubectlPatch(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ordered") }))
	defer upstream.Close()
	// Suspended, so that nobody is admitted meanwhile and a place can be watched.
	wq := builder.Queue("modes", "orders").UpstreamURL(upstream.URL).Suspend(true).Obj()
	createQueue(t, wq)
	_, addr := servingProxy(t, context.Background(), wq, mountKey(t, wq), "orders-herdgate-proxy-0")
	tl := chartTools(t)

	jar, _ := cookiejar.New(nil)
	visitor := &http.Client{Jar: jar}
	call := func(method, path string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, addr+path, nil)
		res, err := visitor.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body := map[string]any{}
		_ = json.NewDecoder(res.Body).Decode(&body)
		return res.StatusCode, body
	}
	waitUntil(t, "the proxy serving", func() bool { return httpStatus(t, addr+"/.herdgate/readyz") == http.StatusOK })
	// Others ahead, then this visitor.
	for range 3 {
		other := &http.Client{}
		res, err := other.Post(addr+"/.herdgate/enter", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
	}
	code, body := call(http.MethodPost, "/.herdgate/enter")
	if code != http.StatusOK || body["position"] != 4.0 {
		t.Fatalf("enter: %d %v, want position 4", code, body)
	}
	place := body["position"]
	told := time.Duration(body["nextPollMs"].(float64)) * time.Millisecond
	entered := time.Now()

	patch := func(mode herdgatev1alpha1.Mode) {
		t.Helper()
		if out, err := tl.run(t, tl.kubectl, "patch", "waitingqueue", "orders", "-n", "modes", "--type=merge", "-p", `{"spec":{"mode":"`+string(mode)+`"}}`); err != nil {
			t.Fatalf("kubectl patch: %v\n%s", err, out)
		}
	}
	protected := func() int {
		code, _ := call(http.MethodPost, "/api/v1/orders")
		return code
	}

	start := time.Now()
	patch(herdgatev1alpha1.ModeClosed)
	waitUntil(t, "the closed room turning away a protected request", func() bool { return protected() == http.StatusServiceUnavailable })
	t.Logf("Closed applied by the running proxy %s after kubectl patch", time.Since(start).Round(10*time.Millisecond))
	time.Sleep(time.Until(entered.Add(told))) // the visitor polls as the entry told it
	if code, body := call(http.MethodGet, "/.herdgate/status"); code != http.StatusOK || body["phase"] != "Closed" || body["position"] != place {
		t.Fatalf("status while closed: %d %v, want phase Closed at the same place", code, body)
	}

	start = time.Now()
	patch(herdgatev1alpha1.ModePassthrough)
	waitUntil(t, "a protected request passing without a pass", func() bool { return protected() == http.StatusOK })
	t.Logf("Passthrough applied by the running proxy %s after kubectl patch", time.Since(start).Round(10*time.Millisecond))

	patch(herdgatev1alpha1.ModeQueue)
	waitUntil(t, "a protected request needing a pass again", func() bool { return protected() == http.StatusForbidden })
	// Poll when told: the closed room told the visitor to come back after a long interval.
	code, body = call(http.MethodGet, "/.herdgate/status")
	if code == http.StatusTooManyRequests {
		time.Sleep(time.Duration(body["retryAfterMs"].(float64)) * time.Millisecond)
		code, body = call(http.MethodGet, "/.herdgate/status")
	}
	if code != http.StatusOK || body["phase"] != "Open" || body["position"] != place {
		t.Fatalf("status after reopening: %d %v, want the place kept (%v)", code, body, place)
	}
}
