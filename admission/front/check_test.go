package front

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/admissiontest"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
)

// checked is a proxy on the in-memory engine whose visitors say who they are in X-User-Id, with the
// checkout pages protected, and the net/http front that answers its checks.
func checked(t testing.TB) (*admission.Room, *admissiontest.MemoryEngine, http.Handler) {
	t.Helper()
	wq := builder.Queue("shop", "orders").UID("uid-1").UpstreamURL("http://orders.internal:8080").Identity("X-User-Id").
		Routes(builder.Route("/checkout", true, "GET"), builder.Route("/api/v1/orders", false, "POST")).Obj()
	wq.Spec.Pass = &herdgatev1alpha1.PassSpec{CompletionRoutes: []herdgatev1alpha1.ProtectedRoute{builder.Route("/checkout/done", false, "GET")}}
	room, engine := admissiontest.NewRoom("shop/orders", admissiontest.Config(t, wq), admission.Options{})
	return room, engine, NewNetHTTP(room, NetHTTPOptions{})
}

// ask sends a check naming the request method uri with the headers kv.
func ask(h http.Handler, kv ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "http://herdgate.internal"+CheckPath, nil)
	r.RemoteAddr = "10.0.0.9:4000"
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Add(kv[i], kv[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// forge changes one character of the pass' signature. Not the last: base64 leaves its low bits
// unused, so a change there may decode to the same signature.
func forge(token string) string {
	i := len(token) - 5
	c := byte('A')
	if token[i] == c {
		c = 'B'
	}
	return token[:i] + string(c) + token[i+1:]
}

func jsonOf(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	out := map[string]any{}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%d %q is not JSON: %v", rec.Code, rec.Body, err)
	}
	return out
}

func TestTheCheckAnswersForwardAuth(t *testing.T) {
	p, engine, h := checked(t)
	now := time.Now()
	token := p.Config().Signer.Issue("ada", now.Add(-time.Second), now.Add(time.Minute))

	rec := ask(h, "X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/checkout/cart?step=2", "X-User-Id", "ada",
		"Cookie", "theme=dark; herdgate_pass="+token+"; herdgate_visitor=x; lang=en")
	if rec.Code != http.StatusOK || rec.Header().Get(CheckCookieHeader) != "theme=dark; lang=en" || rec.Header().Get("Cookie") != "theme=dark; lang=en" {
		t.Fatalf("a valid pass: %d, cookie for upstream %q; want 200 and the site's cookies only", rec.Code, rec.Header().Get(CheckCookieHeader))
	}

	// A browser the queue would admit at once is sent to the waiting page: nothing is handed out on
	// the allow path.
	engine.SetPosition("bea", queue.Position{State: queue.Admitted, Now: now, Pass: queue.Pass{NotBefore: now.Add(-time.Second), Expiry: now.Add(time.Minute)}})
	rec = ask(h, "X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/checkout?x=1", "X-User-Id", "bea", "Accept", "text/html")
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/.herdgate/?return=%2Fcheckout%3Fx%3D1" || len(rec.Result().Cookies()) != 0 {
		t.Fatalf("a browser without a pass: %d, Location %q, cookies %v; want 303 to the waiting page and no pass",
			rec.Code, rec.Header().Get("Location"), rec.Result().Cookies())
	}

	rec = ask(h, "X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/api/v1/orders", "X-User-Id", "cy", "Accept", "application/json")
	if body := jsonOf(t, rec); rec.Code != http.StatusForbidden || body["error"] != "pass_required" || body["enter"] != "/.herdgate/enter" {
		t.Fatalf("an API client without a pass: %d %v; want the contract's 403 pass_required", rec.Code, body)
	}
	forged := forge(token)
	rec = ask(h, "X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/api/v1/orders", "X-User-Id", "ada", "X-Herdgate-Pass", forged)
	if rec.Code != http.StatusForbidden || rec.Header().Get("X-Herdgate-Pass-Result") != "tampered" {
		t.Fatalf("a forged pass: %d, result %q", rec.Code, rec.Header().Get("X-Herdgate-Pass-Result"))
	}
	rec = ask(h, "X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/api/v1/orders", "X-User-Id", "bea", "X-Herdgate-Pass", token)
	if rec.Code != http.StatusForbidden || rec.Header().Get("X-Herdgate-Pass-Result") != "wrong_visitor" {
		t.Fatalf("another visitor's pass: %d, result %q", rec.Code, rec.Header().Get("X-Herdgate-Pass-Result"))
	}
	expired := p.Config().Signer.Issue("ada", now.Add(-2*time.Minute), now.Add(-time.Minute))
	other, err := pass.NewSigner("uid-other-queue", testKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ token, result string }{
		"an expired pass":      {expired, "expired"},
		"another queue's pass": {other.Issue("ada", now.Add(-time.Second), now.Add(time.Minute)), "tampered"},
		"a pass cut short":     {token[:len(token)/2], "malformed"},
	} {
		rec := ask(h, "X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/api/v1/orders", "X-User-Id", "ada", "X-Herdgate-Pass", c.token)
		if rec.Code != http.StatusForbidden || rec.Header().Get("X-Herdgate-Pass-Result") != c.result {
			t.Errorf("%s: %d, result %q; want 403 and %s", name, rec.Code, rec.Header().Get("X-Herdgate-Pass-Result"), c.result)
		}
	}
	if rec := ask(h, "X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/open/page"); rec.Code != http.StatusOK {
		t.Fatalf("an open route: %d", rec.Code)
	}
	if rec := ask(h, "X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/.herdgate/enter"); rec.Code != http.StatusOK {
		t.Fatalf("herdgate's own path: %d; want it left to the gateway's route to herdgate", rec.Code)
	}
	if rec := ask(h, "X-Forwarded-Uri", "/api//v1/./orders", "X-Forwarded-Method", "post", "X-User-Id", "cy"); rec.Code != http.StatusForbidden {
		t.Fatalf("a protected route spelt otherwise: %d; want it judged as the route", rec.Code)
	}
	for name, kv := range map[string][]string{
		"no request":                    {},
		"both conventions":              {"X-Forwarded-Uri", "/open/page", "X-Original-URI", "/checkout"},
		"the other convention's method": {"X-Forwarded-Uri", "/checkout", "X-Original-Method", "GET"},
		"a second URI":                  {"X-Forwarded-Uri", "/open/page", "X-Forwarded-Uri", "/checkout"},
		"a second method":               {"X-Original-URI", "/checkout", "X-Original-Method", "GET", "X-Original-Method", "POST"},
		"NGF's and nginx's":             {"Path", "/open/page", "Method", "GET", "X-Original-URI", "/checkout"},
		"NGF's and Traefik's":           {"Path", "/open/page", "X-Forwarded-Method", "POST"},
		"a second path":                 {"Path", "/open/page", "Path", "/checkout"},
	} {
		if rec := ask(h, kv...); rec.Code != http.StatusBadRequest || jsonOf(t, rec)["error"] != "bad_check" {
			t.Errorf("a check naming %s: %d %s; want 400 bad_check", name, rec.Code, rec.Body)
		}
	}
}

// TestTheCheckSpeaksNginx: nginx's auth_request passes on 2xx, 401 and 403 only. The waiting page's
// redirect comes as 401 with its Location, any other refusal as 403, the gate's status beside; with
// X-Herdgate-Answer: full the gate's answer comes as it is, for nginx to show.
func TestTheCheckSpeaksNginx(t *testing.T) {
	_, _, h := checked(t)
	rec := ask(h, "X-Original-Method", "GET", "X-Original-URI", "/checkout", "X-User-Id", "bea", "Accept", "text/html")
	if rec.Code != http.StatusUnauthorized || !strings.HasPrefix(rec.Header().Get("Location"), "/.herdgate/?return=") || rec.Header().Get(CheckStatusHeader) != "303" {
		t.Fatalf("a browser: %d, Location %q, status %q; want 401 with the page's Location and 303", rec.Code, rec.Header().Get("Location"), rec.Header().Get(CheckStatusHeader))
	}
	rec = ask(h, "X-Original-Method", "POST", "X-Original-URI", "/api/v1/orders", "X-User-Id", "cy")
	if rec.Code != http.StatusForbidden || rec.Header().Get(CheckStatusHeader) != "403" {
		t.Fatalf("an API client: %d, status %q", rec.Code, rec.Header().Get(CheckStatusHeader))
	}
	rec = ask(h, "X-Original-Method", "POST", "X-Original-URI", "/api/v1/orders", CheckAnswerHeader, "full")
	if body := jsonOf(t, rec); rec.Code != http.StatusUnauthorized || body["error"] != "identity_required" {
		t.Fatalf("the full answer without an identity: %d %v; want the contract's 401", rec.Code, body)
	}
}

// TestTheCheckSpeaksNGINXGatewayFabric: NGF's ExternalAuth names the request in Path and Method and
// passes a deny on as nginx does, so the answer is nginx's: 401 with the page's Location for a
// browser, 403 otherwise, 200 for an open route.
func TestTheCheckSpeaksNGINXGatewayFabric(t *testing.T) {
	_, _, h := checked(t)
	rec := ask(h, "Method", "GET", "Path", "/checkout", "X-User-Id", "bea", "Accept", "text/html")
	if rec.Code != http.StatusUnauthorized || !strings.HasPrefix(rec.Header().Get("Location"), "/.herdgate/?return=") {
		t.Fatalf("a browser: %d, Location %q; want 401 with the page's Location", rec.Code, rec.Header().Get("Location"))
	}
	if rec = ask(h, "Method", "POST", "Path", "/api/v1/orders", "X-User-Id", "cy"); rec.Code != http.StatusForbidden {
		t.Fatalf("an API client: %d, want 403", rec.Code)
	}
	if rec = ask(h, "Method", "POST", "Path", "/open/page?x=1", "X-User-Id", "cy"); rec.Code != http.StatusOK {
		t.Fatalf("an open route: %d, want 200", rec.Code)
	}
}

// TestACompletionRouteEndsTheSessionAtTheCheck: the check never sees the workload's answer, so a
// completion route ends the session when the check allows it; the pass is refused from then on.
func TestACompletionRouteEndsTheSessionAtTheCheck(t *testing.T) {
	p, _, h := checked(t)
	now := time.Now()
	token := p.Config().Signer.Issue("ada", now.Add(-time.Second), now.Add(time.Minute))
	pass := func(uri string) *httptest.ResponseRecorder {
		return ask(h, "X-Forwarded-Method", "GET", "X-Forwarded-Uri", uri, "X-User-Id", "ada", "X-Herdgate-Pass", token)
	}
	if rec := pass("/checkout/cart"); rec.Code != http.StatusOK {
		t.Fatalf("before the completion route: %d", rec.Code)
	}
	if rec := pass("/checkout/done"); rec.Code != http.StatusOK {
		t.Fatalf("the completion route: %d", rec.Code)
	}
	if rec := pass("/checkout/cart"); rec.Code != http.StatusForbidden || rec.Header().Get("X-Herdgate-Pass-Result") != "released" {
		t.Fatalf("after the completion route: %d, result %q; want 403 released", rec.Code, rec.Header().Get("X-Herdgate-Pass-Result"))
	}
}

// TestTheWaitingPageIsOnTheVisitorsOrigin: a gateway that passes the check's answer on resolves a
// relative Location against the check's own address, so the check makes it absolute on the host
// the gateway says the visitor asked for; nginx, which redirects itself, keeps the path.
func TestTheWaitingPageIsOnTheVisitorsOrigin(t *testing.T) {
	_, _, h := checked(t)
	for _, c := range []struct {
		name string
		kv   []string
		want string
	}{
		{"behind TLS", []string{"X-Forwarded-Host", "shop.example", "X-Forwarded-Proto", "https"}, "https://shop.example/.herdgate/?return=%2Fcheckout"},
		{"plain", []string{"X-Forwarded-Host", "shop.example:8080"}, "http://shop.example:8080/.herdgate/?return=%2Fcheckout"},
		{"a host that is no host", []string{"X-Forwarded-Host", "evil.example/x"}, "/.herdgate/?return=%2Fcheckout"},
		{"two hosts", []string{"X-Forwarded-Host", "a.example", "X-Forwarded-Host", "b.example"}, "/.herdgate/?return=%2Fcheckout"},
		{"no host", nil, "/.herdgate/?return=%2Fcheckout"},
	} {
		kv := append([]string{"X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/checkout", "X-User-Id", "bea", "Accept", "text/html"}, c.kv...)
		if rec := ask(h, kv...); rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != c.want {
			t.Errorf("%s: %d, Location %q; want 303 to %s", c.name, rec.Code, rec.Header().Get("Location"), c.want)
		}
	}
	rec := ask(h, "X-Original-Method", "GET", "X-Original-URI", "/checkout", "X-User-Id", "bea", "Accept", "text/html", "X-Forwarded-Host", "shop.example")
	if rec.Header().Get("Location") != "/.herdgate/?return=%2Fcheckout" {
		t.Fatalf("nginx: Location %q; want the path", rec.Header().Get("Location"))
	}
}

// TestTheCheckSpeaksEnvoyHTTP: Envoy's HTTP ext_authz (and the Gateway API's ExternalAuth with
// protocol HTTP) asks with the request's own method at CheckPath followed by the request's target.
// Through the fast front on loopback, every request gets the answer it gets when a gateway names it
// in X-Forwarded-*; an allow names the headers Envoy removes, and a check naming a request twice is
// refused.
func TestTheCheckSpeaksEnvoyHTTP(t *testing.T) {
	p, _, _ := checked(t)
	base := serveFast(t, p)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// answer is a check's answer, its body read and closed.
	type answer struct {
		StatusCode int
		Header     http.Header
	}
	send := func(method, target string, kv ...string) (answer, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+target, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			req.Header.Add(kv[i], kv[i+1])
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return answer{res.StatusCode, res.Header}, string(body)
	}
	now := time.Now()
	token := p.Config().Signer.Issue("ada", now.Add(-time.Second), now.Add(time.Minute))
	forged := forge(token)
	for _, c := range []struct {
		name, method, uri string
		kv                []string
	}{
		{"a browser without a pass", "GET", "/checkout?x=1", []string{"X-User-Id", "bea", "Accept", "text/html"}},
		{"an API client without an identity", "POST", "/api/v1/orders", nil},
		{"an API client without a pass", "POST", "/api/v1/orders", []string{"X-User-Id", "cy", "Accept", "application/json"}},
		{"a forged pass", "POST", "/api/v1/orders", []string{"X-User-Id", "ada", "X-Herdgate-Pass", forged}},
		{"a protected route spelt otherwise", "POST", "/api//v1/./%6frders", []string{"X-User-Id", "cy"}},
		{"a protected route's other method", "GET", "/api/v1/orders", []string{"X-User-Id", "cy"}},
		{"an open route", "GET", "/open/page", nil},
		{"herdgate's own path", "POST", "/.herdgate/enter", nil},
		{"a valid pass", "POST", "/api/v1/orders", []string{"X-User-Id", "ada", "X-Herdgate-Pass", token}},
	} {
		viaPath, bodyViaPath := send(c.method, CheckPath+c.uri, c.kv...)
		viaHeaders, bodyViaHeaders := send(http.MethodGet, CheckPath, append([]string{"X-Forwarded-Method", c.method, "X-Forwarded-Uri", c.uri}, c.kv...)...)
		if viaPath.StatusCode != viaHeaders.StatusCode || bodyViaPath != bodyViaHeaders || viaPath.Header.Get("Location") != viaHeaders.Header.Get("Location") ||
			viaPath.Header.Get("X-Herdgate-Pass-Result") != viaHeaders.Header.Get("X-Herdgate-Pass-Result") {
			t.Errorf("%s: %d %q (Location %q) asked in the path, %d %q (Location %q) in X-Forwarded-*; want one answer",
				c.name, viaPath.StatusCode, bodyViaPath, viaPath.Header.Get("Location"), viaHeaders.StatusCode, bodyViaHeaders, viaHeaders.Header.Get("Location"))
		}
		if viaPath.StatusCode == http.StatusBadRequest {
			t.Errorf("%s: 400 %s", c.name, bodyViaPath)
		}
	}

	removed := func(res answer) []string {
		var names []string
		for n := range strings.SplitSeq(res.Header.Get(envoyHeadersToRemove), ",") {
			names = append(names, strings.TrimSpace(n))
		}
		return names
	}
	res, _ := send(http.MethodPost, CheckPath+"/api/v1/orders", "X-User-Id", "ada", "X-Herdgate-Pass", token,
		"Cookie", "theme=dark; herdgate_visitor=x", "Herdgate-Session", "made-up")
	names := removed(res)
	for _, own := range append(slices.Clone(ownRequestHeaders), sessionHeader) {
		if !slices.Contains(names, own) {
			t.Errorf("an allow removes %v; want %s among them", names, own)
		}
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Cookie") != "theme=dark" || slices.Contains(names, "cookie") {
		t.Fatalf("an allow with the site's cookie: %d, Cookie %q, removes %v; want 200, the site's cookie only, and the Cookie header kept",
			res.StatusCode, res.Header.Get("Cookie"), names)
	}
	res, _ = send(http.MethodPost, CheckPath+"/api/v1/orders", "X-User-Id", "ada", "Cookie", "herdgate_pass="+token)
	if res.StatusCode != http.StatusOK || !slices.Contains(removed(res), "cookie") {
		t.Fatalf("an allow with only herdgate's cookie: %d, removes %v; want the Cookie header gone", res.StatusCode, removed(res))
	}

	// A visitor's own forwarding header would name a second request beside the path's.
	for _, name := range []string{"X-Forwarded-Uri", "X-Original-URI", "X-Forwarded-Method", "X-Original-Method"} {
		res, body := send(http.MethodPost, CheckPath+"/api/v1/orders", "X-User-Id", "ada", "X-Herdgate-Pass", token, name, "/open/page")
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "bad_check") {
			t.Errorf("the path and %s: %d %s; want 400 bad_check", name, res.StatusCode, body)
		}
	}
}
