package front

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/admissiontest"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
)

// TestAGatewayRoomForwardsNothing: in Gateway mode the gateway forwards to the workload and herdgate
// serves /.herdgate/ only. Every class of request outside it (open routes, protected ones with a
// pass, without one, through a bypass lane, a completion route, a method override, a Passthrough or
// Closed room) gets 421 with a JSON body from both fronts, and none reaches the upstream. The same
// requests to a Proxy room do reach it, so the count can tell the modes apart.
func TestAGatewayRoomForwardsNothing(t *testing.T) {
	var hits atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, "workload")
	}))
	defer upstream.Close()
	now := time.Now()

	// room is a room of mode in enforcement e behind both fronts: their addresses, and its config.
	room := func(t *testing.T, e herdgatev1alpha1.Enforcement, mode herdgatev1alpha1.Mode) ([]string, *admission.Config) {
		wq := builder.Queue("shop", "orders").UID(types.UID("uid-"+string(e)+string(mode))).UpstreamURL(upstream.URL).
			Identity("X-User-Id").Enforcement(e).Mode(mode).
			Routes(builder.Route("/checkout", true, "GET", "POST"), builder.Route("/api/v1/orders", false, "POST")).
			Bypass(herdgatev1alpha1.BypassRule{Name: "probe", Path: ptr.To(herdgatev1alpha1.RoutePath("/checkout/health"))}).
			PassSpec(&herdgatev1alpha1.PassSpec{CompletionRoutes: []herdgatev1alpha1.ProtectedRoute{builder.Route("/checkout/done", false, "GET")}}).
			Obj()
		cfg, err := admission.NewConfig(wq, testKey)
		if err != nil {
			t.Fatal(err)
		}
		room, engine := admissiontest.NewRoom("shop/orders", cfg, admission.Options{})
		// bea would be admitted at once by a Proxy room.
		engine.SetPosition("bea", queue.Position{State: queue.Admitted, Now: now,
			Pass: queue.Pass{NotBefore: now.Add(-time.Second), Expiry: now.Add(time.Minute)}})
		std := httptest.NewServer(NewNetHTTP(room, NetHTTPOptions{}))
		t.Cleanup(std.Close)
		return []string{serveFast(t, room), std.URL}, cfg
	}

	type request struct {
		name, method, uri string
		header            []string
	}
	// requests are every class of request outside /.herdgate/, with a valid pass from cfg.
	requests := func(cfg *admission.Config) []request {
		token := cfg.Signer.Issue("ada", now.Add(-time.Second), now.Add(time.Minute))
		withPass := []string{"X-User-Id", "ada", "X-Herdgate-Pass", token}
		return []request{
			{"an open route", "GET", "/about", nil},
			{"an open route with site cookies", "GET", "/about?x=1", []string{"Cookie", "theme=dark"}},
			{"a protected route's other method", "GET", "/api/v1/orders", nil},
			{"a protected route with a pass in the header", "POST", "/api/v1/orders", withPass},
			{"a protected route with a pass in the cookie", "GET", "/checkout/cart",
				[]string{"X-User-Id", "ada", "Cookie", "herdgate_pass=" + token}},
			{"a protected route without a pass, from a browser", "GET", "/checkout", []string{"X-User-Id", "cy", "Accept", "text/html"}},
			{"a protected route without a pass, from an API client", "POST", "/api/v1/orders", []string{"X-User-Id", "cy"}},
			{"a visitor a Proxy room admits at once", "GET", "/checkout", []string{"X-User-Id", "bea", "Accept", "text/html"}},
			{"a bypass lane", "GET", "/checkout/health", nil},
			{"a completion route with a pass", "GET", "/checkout/done", withPass},
			{"a method override with a pass", "GET", "/api/v1/orders", append([]string{"X-HTTP-Method-Override", "POST"}, withPass...)},
			{"a _method parameter without a pass", "GET", "/api/v1/orders?_method=POST", nil},
			{"a HEAD", "HEAD", "/about", nil},
			{"an OPTIONS", "OPTIONS", "/checkout", nil},
		}
	}
	send := func(t *testing.T, front string, r request) *http.Response {
		req, err := http.NewRequest(r.method, front+r.uri, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(r.header); i += 2 {
			req.Header.Add(r.header[i], r.header[i+1])
		}
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	for _, mode := range []herdgatev1alpha1.Mode{herdgatev1alpha1.ModeQueue, herdgatev1alpha1.ModePassthrough, herdgatev1alpha1.ModeClosed} {
		t.Run(string(mode), func(t *testing.T) {
			fronts, cfg := room(t, herdgatev1alpha1.EnforcementGateway, mode)
			before := hits.Load()
			for i, front := range fronts {
				name := []string{"fast", "net/http"}[i]
				for _, r := range requests(cfg) {
					resp := send(t, front, r)
					body, _ := io.ReadAll(resp.Body)
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusMisdirectedRequest {
						t.Errorf("%s, %s %s %s: %d %q, want 421", name, r.name, r.method, r.uri, resp.StatusCode, body)
						continue
					}
					if r.method != "HEAD" && (resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(body), `"not_forwarded"`)) {
						t.Errorf("%s, %s: %s %q, want a JSON body naming not_forwarded", name, r.name, resp.Header.Get("Content-Type"), body)
					}
				}
				// herdgate's own paths are still served: the status, and the check a gateway asks.
				for _, uri := range []string{"/.herdgate/healthz", "/.herdgate/check"} {
					resp := send(t, front, request{method: "GET", uri: uri, header: []string{"X-Original-URI", "/about", "X-Original-Method", "GET"}})
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Errorf("%s, %s: %d, want 200", name, uri, resp.StatusCode)
					}
				}
			}
			if got := hits.Load() - before; got != 0 {
				t.Errorf("%d requests reached the upstream of a Gateway room", got)
			}
		})
	}

	t.Run("a Proxy room forwards the same requests", func(t *testing.T) {
		fronts, cfg := room(t, herdgatev1alpha1.EnforcementProxy, herdgatev1alpha1.ModeQueue)
		before := hits.Load()
		forwarded := 0
		for _, front := range fronts {
			for _, r := range requests(cfg) {
				resp := send(t, front, r)
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					forwarded++
				}
			}
		}
		if forwarded == 0 || hits.Load()-before != int64(forwarded) {
			t.Errorf("a Proxy room forwarded %d requests and the upstream saw %d", forwarded, hits.Load()-before)
		}
	})
}
