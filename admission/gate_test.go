package admission_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/admissiontest"
	"github.com/herdgate/herdgate/admission/front"

	"github.com/google/go-cmp/cmp"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
)

// roundTrips records the requests the gate sends upstream on the net/http transport.
type roundTrips struct {
	mu  sync.Mutex
	out []*http.Request
}

func (rt *roundTrips) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	rt.out = append(rt.out, r)
	rt.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("upstream")), Request: r}, nil
}

// gated is a proxy behind the net/http front, whose upstream is a roundTrips.
type gated struct {
	*admission.Room
	front *front.NetHTTP
}

func gateFor(t *testing.T, change func(*builder.QueueBuilder)) (*gated, *admissiontest.MemoryEngine, *roundTrips, *admission.Config) {
	t.Helper()
	b := builder.Queue("shop", "orders").UID("uid-1").UpstreamURL("http://orders.internal:8080/base").
		Routes(builder.Route("/api/v1/orders", false, "POST"), builder.Route("/checkout", true, "GET"))
	if change != nil {
		change(b)
	}
	cfg := admissiontest.Config(t, b.Obj())
	rt := &roundTrips{}
	room, engine := admissiontest.NewRoom("shop/orders", cfg, admission.Options{Rand: fixedRand(0.5)})
	return &gated{room, front.NewNetHTTP(room, front.NetHTTPOptions{UpstreamTransport: rt})}, engine, rt, cfg
}

func serve(room *gated, r *http.Request) (*httptest.ResponseRecorder, map[string]any) {
	rec := httptest.NewRecorder()
	room.front.ServeHTTP(rec, r)
	body := map[string]any{}
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	return rec, body
}

func TestGateForwardsWhatItLetsThroughByOnePolicy(t *testing.T) {
	room, _, rt, cfg := gateFor(t, nil)
	now := time.Now()
	token := cfg.Signer.Issue("", now.Add(-time.Second), now.Add(time.Minute))
	r := httptest.NewRequest("post", "http://shop.example/api//v1/./orders?item=7", strings.NewReader("{}")) //nolint:usestdlibvars // a lower-case method, which the gate upper-cases
	r.RemoteAddr = "198.51.100.7:40000"
	r.Header.Set(admission.PassHeader, token)
	r.Header.Set("Forwarded", "for=203.0.113.1")
	r.Header.Set("X-Forwarded-For", "203.0.113.1")
	r.Header.Add("Cookie", "theme=dark; "+admission.PassCookie+"=x; "+admission.VisitorCookie+"=y; lang=en")
	rec, _ := serve(room, r)
	if rec.Code != http.StatusOK || len(rt.out) != 1 {
		t.Fatalf("a request with a valid pass: %d, %d upstream; want 200 and 1", rec.Code, len(rt.out))
	}
	out := rt.out[0]
	got := map[string]string{
		"method": out.Method, "url": out.URL.String(), "host": out.Host,
		"xff": out.Header.Get("X-Forwarded-For"), "xfh": out.Header.Get("X-Forwarded-Host"), "xfp": out.Header.Get("X-Forwarded-Proto"),
		"pass": out.Header.Get(admission.PassHeader), "forwarded": out.Header.Get("Forwarded"), "cookie": out.Header.Get("Cookie"),
	}
	want := map[string]string{
		"method": "POST", "url": "http://orders.internal:8080/base/api/v1/orders?item=7", "host": "orders.internal:8080",
		"xff": "198.51.100.7", "xfh": "shop.example", "xfp": "http", "pass": "", "forwarded": "", "cookie": "theme=dark; lang=en",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("the upstream request (-want +got):\n%s", diff)
	}
}

func TestForwardingOf(t *testing.T) {
	_, _, _, cfg := gateFor(t, nil)
	for _, tc := range []struct {
		canonical           string
		in                  admission.Inbound
		wantURI, wantMethod string
		wantProto, wantPath string
	}{
		{"/checkout", admission.Inbound{Method: "get", Host: "h"}, "/base/checkout", "GET", "http", "/base/checkout"},
		{"/a b", admission.Inbound{Method: "POST", RawQuery: "q=1", TLS: true}, "/base/a%20b?q=1", "POST", "https", "/base/a b"},
		{"/", admission.Inbound{Method: "GET"}, "/base/", "GET", "http", "/base/"},
	} {
		f := admission.ForwardingOf(cfg, tc.canonical, "", tc.in)
		if f.RequestURI() != tc.wantURI || f.Method != tc.wantMethod || f.ForwardedProto != tc.wantProto || f.Path != tc.wantPath {
			t.Errorf("forwardingOf(%+v) = %+v; want URI %s, method %s, proto %s", tc.in, f, tc.wantURI, tc.wantMethod, tc.wantProto)
		}
		if got := f.URL().RequestURI(); got != tc.wantURI {
			t.Errorf("the net/http URL of %+v goes out as %s, the fast front's as %s", tc.in, got, tc.wantURI)
		}
	}
}

func TestGateDecisionsWithoutRedis(t *testing.T) {
	t.Run("a protected route without a pass", func(t *testing.T) {
		room, _, rt, _ := gateFor(t, nil)
		rec, body := serve(room, httptest.NewRequest(http.MethodPost, "/api/v1/orders", nil))
		if rec.Code != http.StatusForbidden || body["error"] != "pass_required" || len(rt.out) != 0 {
			t.Fatalf("got %d %v with %d upstream calls", rec.Code, body, len(rt.out))
		}
	})
	t.Run("a browser is sent to the waiting page", func(t *testing.T) {
		room, _, _, _ := gateFor(t, nil)
		r := httptest.NewRequest(http.MethodGet, "/checkout/pay?x=1", nil)
		r.Header.Set("Accept", "text/html")
		rec, _ := serve(room, r)
		if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/.herdgate/?return=%2Fcheckout%2Fpay%3Fx%3D1" {
			t.Fatalf("got %d to %q", rec.Code, rec.Header().Get("Location"))
		}
	})
	t.Run("a poll sooner than allowed", func(t *testing.T) {
		room, engine, _, _ := gateFor(t, nil)
		rec, _ := serve(room, httptest.NewRequest(http.MethodPost, "/.herdgate/enter", nil))
		cookie := rec.Result().Cookies()[0]
		id, ok := room.Config().Signer.VerifyVisitorCookie(cookie.Value)
		if !ok {
			t.Fatal("enter set no visitor cookie")
		}
		now := time.Now()
		engine.SetPosition(id, queue.Position{State: queue.Waiting, Position: 3, Depth: 10, Now: now, PreviousPoll: now.Add(-10 * time.Millisecond)})
		r := httptest.NewRequest(http.MethodGet, "/.herdgate/status", nil)
		r.AddCookie(cookie)
		rec, body := serve(room, r)
		if rec.Code != http.StatusTooManyRequests || body["error"] != "too_early" || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("got %d %v", rec.Code, body)
		}
	})
	t.Run("the proxy hands out its own timings, not the published plan's", func(t *testing.T) {
		// The published plan says 5 s at most (the memory engine's); the config says 2 s.
		room, engine, _, _ := gateFor(t, func(b *builder.QueueBuilder) { b.Identity("X-User-Id").Polling(500*time.Millisecond, 2*time.Second) })
		engine.SetPosition("ada", queue.Position{State: queue.Waiting, Position: 2000, Depth: 2000, Now: time.Now()})
		r := httptest.NewRequest(http.MethodGet, "/.herdgate/status", nil)
		r.Header.Set("X-User-Id", "ada")
		rec, body := serve(room, r)
		if rec.Code != http.StatusOK || body["nextPollMs"] != float64(2000) {
			t.Fatalf("far back: %d %v; want the config's longest interval, 2000 ms", rec.Code, body)
		}
	})
	t.Run("an admission whose pass is valid soon", func(t *testing.T) {
		room, engine, _, _ := gateFor(t, func(b *builder.QueueBuilder) { b.Identity("X-User-Id") })
		now := time.Now()
		engine.SetPosition("ada", queue.Position{State: queue.Admitted, Now: now, Pass: queue.Pass{NotBefore: now.Add(700 * time.Millisecond), Expiry: now.Add(time.Minute)}})
		r := httptest.NewRequest(http.MethodGet, "/.herdgate/status", nil)
		r.Header.Set("X-User-Id", "ada")
		rec, body := serve(room, r)
		if rec.Code != http.StatusOK || body["admitted"] != false || body["nextPollMs"] != float64(700) {
			t.Fatalf("got %d %v; want a poll in 700 ms", rec.Code, body)
		}
	})
	t.Run("no identity header", func(t *testing.T) {
		room, _, _, _ := gateFor(t, func(b *builder.QueueBuilder) { b.Identity("X-User-Id") })
		for _, r := range []*http.Request{httptest.NewRequest(http.MethodPost, "/api/v1/orders", nil), httptest.NewRequest(http.MethodPost, "/.herdgate/enter", nil)} {
			if rec, body := serve(room, r); rec.Code != http.StatusUnauthorized || body["header"] != "X-User-Id" {
				t.Fatalf("%s: got %d %v", r.URL.Path, rec.Code, body)
			}
		}
	})
	t.Run("an unreachable queue, closed and open", func(t *testing.T) {
		for _, policy := range []herdgatev1alpha1.FailurePolicy{herdgatev1alpha1.FailClosed, herdgatev1alpha1.FailOpen} {
			room, engine, rt, cfg := gateFor(t, nil)
			cfg.FailurePolicy = policy
			engine.Fail(errors.New("connection refused"))
			if err := room.CheckRedis(context.Background()); err == nil {
				t.Fatal("CheckRedis reached a queue that fails")
			}
			rec, body := serve(room, httptest.NewRequest(http.MethodPost, "/.herdgate/enter", nil))
			if rec.Code != http.StatusServiceUnavailable || body["error"] != "queue_unavailable" || rec.Header().Get("Retry-After") == "" {
				t.Fatalf("%s enter: got %d %v", policy, rec.Code, body)
			}
			rec, _ = serve(room, httptest.NewRequest(http.MethodPost, "/api/v1/orders", nil))
			if want := map[herdgatev1alpha1.FailurePolicy]int{herdgatev1alpha1.FailClosed: http.StatusForbidden, herdgatev1alpha1.FailOpen: http.StatusOK}[policy]; rec.Code != want {
				t.Fatalf("%s protected route: %d, want %d", policy, rec.Code, want)
			}
			if policy == herdgatev1alpha1.FailOpen && len(rt.out) != 1 {
				t.Fatalf("FailOpen forwarded %d requests, want 1", len(rt.out))
			}
		}
	})
}

func TestModes(t *testing.T) {
	t.Run("Passthrough lets everything through and needs no queue", func(t *testing.T) {
		room, engine, rt, _ := gateFor(t, nil)
		cfg := *room.Config()
		cfg.Mode = herdgatev1alpha1.ModePassthrough
		room.SetConfig(&cfg)
		engine.Fail(errors.New("Redis is not asked"))
		if rec, _ := serve(room, httptest.NewRequest(http.MethodPost, "/api/v1/orders", nil)); rec.Code != http.StatusOK || len(rt.out) != 1 {
			t.Fatalf("a protected route without a pass: %d, %d upstream calls", rec.Code, len(rt.out))
		}
		for _, r := range []*http.Request{httptest.NewRequest(http.MethodPost, "/.herdgate/enter", nil), httptest.NewRequest(http.MethodGet, "/.herdgate/status", nil)} {
			rec, body := serve(room, r)
			if rec.Code != http.StatusOK || body["admitted"] != true || body["phase"] != "Passthrough" {
				t.Fatalf("%s in Passthrough: %d %v", r.URL.Path, rec.Code, body)
			}
		}
	})
	t.Run("Closed turns everybody away and keeps places", func(t *testing.T) {
		room, engine, rt, cfg := gateFor(t, func(b *builder.QueueBuilder) { b.Identity("X-User-Id") })
		closed := *cfg
		closed.Mode = herdgatev1alpha1.ModeClosed
		room.SetConfig(&closed)
		now := time.Now()
		engine.SetPosition("waiting", queue.Position{State: queue.Waiting, Position: 4, Depth: 9, Now: now})
		engine.SetPosition("holder", queue.Position{State: queue.Admitted, Now: now, Pass: queue.Pass{NotBefore: now.Add(-time.Second), Expiry: now.Add(time.Minute)}})

		r := httptest.NewRequest(http.MethodPost, "/api/v1/orders", nil)
		r.Header.Set("X-User-Id", "holder")
		r.Header.Set(admission.PassHeader, cfg.Signer.Issue("holder", now.Add(-time.Second), now.Add(time.Minute)))
		rec, body := serve(room, r)
		if rec.Code != http.StatusServiceUnavailable || body["error"] != "closed" || rec.Header().Get("Retry-After") == "" || len(rt.out) != 0 {
			t.Fatalf("a pass holder's protected request while closed: %d %v, %d upstream", rec.Code, body, len(rt.out))
		}
		page := httptest.NewRequest(http.MethodGet, "/checkout", nil)
		page.Header.Set("Accept", "text/html")
		page.Header.Set("X-User-Id", "waiting")
		if rec, _ := serve(room, page); rec.Code != http.StatusSeeOther {
			t.Fatalf("a browser while closed: %d, want the waiting page", rec.Code)
		}
		enter := httptest.NewRequest(http.MethodPost, "/.herdgate/enter", nil)
		enter.Header.Set("X-User-Id", "newcomer")
		if rec, body := serve(room, enter); rec.Code != http.StatusServiceUnavailable || body["phase"] != "Closed" {
			t.Fatalf("enter while closed: %d %v", rec.Code, body)
		}
		for _, who := range []string{"waiting", "holder"} {
			st := httptest.NewRequest(http.MethodGet, "/.herdgate/status", nil)
			st.Header.Set("X-User-Id", who)
			rec, body := serve(room, st)
			if rec.Code != http.StatusOK || body["phase"] != "Closed" || body["admitted"] != false || body["nextPollMs"].(float64) < 4000 {
				t.Fatalf("%s's status while closed: %d %v", who, rec.Code, body)
			}
			if who == "waiting" && body["position"] != 4.0 {
				t.Fatalf("the waiting visitor's place while closed: %v, want 4", body["position"])
			}
		}
		// Reopened: the same visitor, the same place.
		room.SetConfig(cfg)
		st := httptest.NewRequest(http.MethodGet, "/.herdgate/status", nil)
		st.Header.Set("X-User-Id", "waiting")
		if rec, body := serve(room, st); rec.Code != http.StatusOK || body["phase"] != "Open" || body["position"] != 4.0 {
			t.Fatalf("status after reopening: %d %v", rec.Code, body)
		}
	})
}
