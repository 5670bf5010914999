package admission_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/herdgate/herdgate/admission"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// TestUpstreamInFlightAndErrors: on both fronts the proxy counts the requests waiting for the
// upstream, its 5xx answers and its failures by kind, and tells the visitor which kind failed.
func TestUpstreamInFlightAndErrors(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		h := newMemoryHarness(t, nil)
		release := make(chan struct{})
		var once sync.Once
		arrived := make(chan struct{}, 1)
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/fail" {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			arrived <- struct{}{}
			<-release
			_, _ = w.Write([]byte("done"))
		}))
		defer slow.Close()
		defer once.Do(func() { close(release) })
		use := func(upstream string) {
			t.Helper()
			wq := h.wq.DeepCopy()
			wq.Spec.Upstream = herdgatev1alpha1.UpstreamSpec{URL: &upstream}
			wq.Generation++
			cfg, err := admission.NewConfig(wq, h.key)
			if err != nil {
				t.Fatal(err)
			}
			h.room.SetConfig(cfg)
		}
		use(slow.URL)

		done := make(chan response, 1)
		go func() { done <- h.visitor().do(http.MethodGet, "/slow", nil) }()
		<-arrived
		if got := h.metric("herdgate_proxy_upstream_in_flight", `{route_class="open"}`); got != 1 {
			t.Fatalf("in flight while the upstream thinks: %v, want 1", got)
		}
		once.Do(func() { close(release) })
		if r := <-done; r.StatusCode != http.StatusOK {
			t.Fatalf("the slow request: %d", r.StatusCode)
		}
		if got := h.metric("herdgate_proxy_upstream_in_flight", `{route_class="open"}`); got != 0 {
			t.Fatalf("in flight after the answer: %v, want 0", got)
		}

		if r := h.visitor().do(http.MethodGet, "/fail", nil); r.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("the upstream's 503 came back as %d", r.StatusCode)
		}
		if got := h.metric("herdgate_proxy_upstream_errors_total", `{kind="status_5xx",route_class="open"}`); got != 1 {
			t.Fatalf("status_5xx errors %v, want 1", got)
		}

		// An upstream that refuses connections: a port nobody listens on.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		use("http://" + addr)
		r := h.visitor().do(http.MethodGet, "/anything", nil)
		if r.StatusCode != http.StatusBadGateway || r.json(t)["message"] != "the upstream refused the connection" {
			t.Fatalf("a refusing upstream: %d %s", r.StatusCode, r.body)
		}
		if got := h.metric("herdgate_proxy_upstream_errors_total", `{kind="refused",route_class="open"}`); got != 1 {
			t.Fatalf("refused errors %v, want 1", got)
		}
		if got := h.metric("herdgate_proxy_upstream_in_flight", `{route_class="open"}`); got != 0 {
			t.Fatalf("in flight after the failure: %v, want 0", got)
		}
	})
}
