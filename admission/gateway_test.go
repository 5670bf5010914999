package admission_test

import (
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/gatewayconfig"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

// guideBlock is the code block of language lang in docs/guides/gateways.md, with the placeholders
// filled in (testenv.GuideBlock).
func guideBlock(t *testing.T, lang string, fill *strings.Replacer) string {
	t.Helper()
	block, err := testenv.GuideBlock(lang, fill)
	if err != nil {
		t.Fatal(err)
	}
	return block
}

// gateway is a gateway the tests run the room through, started with the configuration
// docs/guides/gateways.md gives for it (block reads the guide's block of a language). jwt says the
// gateway verifies JWT passes itself, with the public keys published in keysDir.
// coarse says the gateway passes on the check's refusals only as refusals, not with the check's own
// status. fill fills in the placeholders of a string.
//
// firstOfRepeated says the gateway's configuration copies a visitor's headers by nginx variable,
// which the nginx here (before 1.23) reads as a repeated header's first value only; the gateway's
// own nginx joins the values, as the check reads them, so such requests are left out for it.
type gateway struct {
	jwt, coarse     bool
	firstOfRepeated bool
	start           func(t *testing.T, dir string, block func(lang string) string, fill func(string) string) (stop func())
}

var gateways = map[string]gateway{
	"nginx": {start: func(t *testing.T, dir string, block func(string) string, _ func(string) string) func() {
		n, err := testenv.StartNginx(dir, block("nginx"))
		if err != nil {
			t.Fatal(err)
		}
		return n.Stop
	}},
	"caddy": {start: func(t *testing.T, dir string, block func(string) string, _ func(string) string) func() {
		c, err := testenv.StartCaddy(dir, block("caddyfile"))
		if err != nil {
			t.Fatal(err)
		}
		return c.Stop
	}},
	"traefik": {start: func(t *testing.T, dir string, block func(string) string, _ func(string) string) func() {
		tr, err := testenv.StartTraefik(dir, block("yaml traefik-static"), block("yaml traefik-dynamic"))
		if err != nil {
			t.Fatal(err)
		}
		return stopShowingLog(t, tr.Stop, filepath.Join(dir, "traefik.log"))
	}},
	"haproxy": {jwt: true, start: func(t *testing.T, dir string, block func(string) string, _ func(string) string) func() {
		hp, err := testenv.StartHAProxy(dir, block("haproxy"))
		if err != nil {
			t.Fatal(err)
		}
		return stopShowingLog(t, hp.Stop, filepath.Join(dir, "haproxy.log"))
	}},
}

// stopShowingLog is stop, then the gateway's log when the test failed.
func stopShowingLog(t *testing.T, stop func(), log string) func() {
	return func() {
		stop()
		if t.Failed() {
			text, _ := os.ReadFile(log)
			t.Logf("%s:\n%s", filepath.Base(log), text)
		}
	}
}

// TestGatewaysEnforceTheRoom runs the room through real gateways, configured as
// docs/guides/gateways.md says: nginx's auth_request, Caddy's forward_auth and Traefik's ForwardAuth
// ask herdgate's check; HAProxy verifies herdgate's ES256 pass with jwt_verify and the published PEM.
// Through each, a browser is sent to the waiting page, enters, waits, gets its pass at its
// not-before time and reaches the protected route; an API client gets the JSON contract; a missing,
// forged, expired or other queue's pass is refused, and, through the gateways that ask the check, a
// pass whose session a completion route ended; the workload never sees a pass, a herdgate cookie or
// header.
func TestGatewaysEnforceTheRoom(t *testing.T) {
	for name, gw := range gateways {
		t.Run(name, func(t *testing.T) { testGatewayEnforcesTheRoom(t, gw) })
	}
}

// throughGateway serves the harness's room behind gw, configured as the guide says, with the room
// changed as change says and the Secret values of secrets besides the release key; it returns the
// harness and the gateway's address.
func throughGateway(t *testing.T, gw gateway, change func(*herdgatev1alpha1.WaitingQueue), secrets ...map[string]map[string]string) (*harness, string) {
	t.Helper()
	var h *harness
	keysDir := t.TempDir()
	values := map[string]map[string]string{"orders-release": {"key": releaseKey}}
	for _, s := range secrets {
		maps.Copy(values, s)
	}
	if gw.jwt {
		keys, stored := newPassKeys(t, pass.ES256)
		h = newHarnessWith(t, harnessOptions{passKeys: stored, secrets: values}, func(wq *herdgatev1alpha1.WaitingQueue) {
			jwtQueue(herdgatev1alpha1.PassAlgorithmES256)(wq)
			change(wq)
		})
		pems, err := keys.PublicPEMs(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for slot, pem := range pems {
			if err := os.WriteFile(filepath.Join(keysDir, slot+".pem"), pem, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		h = newHarnessWith(t, harnessOptions{secrets: values}, change)
	}
	// Every question the gateway asks is herdgate's: a check that reached the workload carried the
	// visitor's pass there, and the workload's answer, when 2xx, would have let the request in.
	// Registered before the gateway starts, this runs after it stopped, over all it sent.
	t.Cleanup(func() {
		for _, call := range h.upstream.all() {
			if strings.HasPrefix(call.Path, "/.herdgate/") {
				t.Errorf("the gateway sent the workload %s %s, a question for herdgate (X-Forwarded-Uri %q)", call.Method, call.Path, call.Header.Get("X-Forwarded-Uri"))
			}
		}
	})
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	upstream, _ := url.Parse(*h.wq.Spec.Upstream.URL)
	fill := strings.NewReplacer("LISTEN_ADDRESS", fmt.Sprintf("127.0.0.1:%d", port), "HERDGATE_ADDRESS", strings.TrimPrefix(h.server.URL, "http://"),
		"WORKLOAD_ADDRESS", upstream.Host, "KEYS_DIR", keysDir, "QUEUE_NAME", h.wq.Namespace+"/"+h.wq.Name)
	t.Cleanup(gw.start(t, t.TempDir(), func(lang string) string {
		// The gateway's configuration is generated for the room (its routes, its cookie, its pool);
		// for the test's own room it is the guide's (TestTheGuideShowsTheGeneratedConfigurations).
		if target, ok := guideTargets[lang]; ok {
			return fill.Replace(generated(t, changed(h.wq, func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Enforcement = herdgatev1alpha1.EnforcementGateway }), target))
		}
		return guideBlock(t, lang, fill)
	}, fill.Replace))
	gateway := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitFor(t, gateway+"/.herdgate/healthz")
	return h, gateway
}

func testGatewayEnforcesTheRoom(t *testing.T, gw gateway) {
	h, gateway := throughGateway(t, gw, func(wq *herdgatev1alpha1.WaitingQueue) {
		if !gw.jwt {
			wq.Spec.Pass = &herdgatev1alpha1.PassSpec{CompletionRoutes: []herdgatev1alpha1.ProtectedRoute{builder.Route("/checkout/done", false, "GET")}}
			*wq = *builder.From(wq).ReleaseKey("orders-release", "key").Obj()
		}
	})
	// The replica counts the checks the gateway asks, and reports their rate (GatewayChecking).
	start := time.Now()
	h.room.ReportAt(start)
	defer func() {
		if r := h.room.ReportAt(start.Add(time.Minute)); r.ChecksPerSecond <= 0 {
			t.Errorf("the replica reports %v gateway checks a second after the gateway asked", r.ChecksPerSecond)
		}
	}()

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// answer is what a client got: the status, the headers, the body.
	type answer struct {
		StatusCode int
		Header     http.Header
	}
	do := func(c *http.Client, method, path string, kv ...string) (answer, string) {
		t.Helper()
		req, _ := http.NewRequest(method, gateway+path, nil)
		for i := 0; i+1 < len(kv); i += 2 {
			req.Header.Set(kv[i], kv[i+1])
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return answer{res.StatusCode, res.Header}, string(body)
	}

	res, body := do(browser, http.MethodGet, "/checkout/cart", "Accept", "text/html")
	// On the visitor's own origin: a path, or the gateway's address with it.
	if loc := strings.TrimPrefix(res.Header.Get("Location"), gateway); res.StatusCode != http.StatusSeeOther || loc != "/.herdgate/?return=%2Fcheckout%2Fcart" {
		t.Fatalf("a browser without a pass: %d %q (Location %q); want 303 to the waiting page", res.StatusCode, body, res.Header.Get("Location"))
	}
	res, body = do(http.DefaultClient, http.MethodPost, "/api/v1/orders", "Accept", "application/json")
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, `"error":"pass_required"`) {
		t.Fatalf("an API client without a pass: %d %q; want the contract's 403 JSON", res.StatusCode, body)
	}
	// Passes that must not open the route: made up, expired, another queue's, and one whose payload
	// was changed after signing.
	cfg := h.room.Config()
	other, err := admission.NewConfigWithSecrets(changed(h.wq, func(wq *herdgatev1alpha1.WaitingQueue) { wq.Name, wq.UID = "other", "uid-other" }),
		h.key, (&admission.FileConfig{PassKeys: passKeysOf(t, cfg), Secrets: map[string]map[string]string{"orders-release": {"key": releaseKey}}}).Values())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	valid := cfg.Passes.Issue("someone", now, now.Add(time.Minute))
	for name, token := range map[string]string{
		"made up":         "forged",
		"expired":         cfg.Passes.Issue("someone", now.Add(-time.Hour), now.Add(-time.Second)),
		"another queue's": other.Passes.Issue("someone", now, now.Add(time.Minute)),
		"altered":         alter(valid),
	} {
		res, body = do(http.DefaultClient, http.MethodPost, "/api/v1/orders", admission.PassHeader, token)
		if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "pass_required") {
			t.Fatalf("a pass %s: %d %q; want the contract's 403", name, res.StatusCode, body)
		}
	}

	// No spelling of a protected path gets past the gateway without a pass.
	for _, spelling := range []string{"/api//v1/orders", "/api/v1/%6frders", "/API/v1/orders", "/api/v1/orders/", "/api/v1;x=1/orders", "/api/v1/x/../orders"} {
		if res, body = do(http.DefaultClient, http.MethodPost, spelling); res.StatusCode < 400 {
			t.Fatalf("POST %s without a pass: %d %q; want it refused", spelling, res.StatusCode, body)
		}
	}
	if calls := h.upstream.all(); len(calls) != 0 {
		t.Fatalf("the workload got %s without a pass", calls[0].Path)
	}

	// A visitor naming another request in the check's own headers gets what its request earns: every
	// gateway drops such headers, or overwrites them with its own.
	for _, smuggled := range [][]string{
		{"X-Original-URI", "/open/page", "X-Original-Method", "GET"},
		{"X-Forwarded-Uri", "/open/page", "X-Forwarded-Method", "GET"},
	} {
		if res, body = do(http.DefaultClient, http.MethodPost, "/api/v1/orders", smuggled...); res.StatusCode != http.StatusForbidden {
			t.Fatalf("an order naming %s in %s: %d %q; want it refused", smuggled[1], smuggled[0], res.StatusCode, body)
		}
	}

	// The waiting page's calls go to herdgate through the gateway: enter, wait for the tick, take the
	// pass.
	if res, body = do(browser, http.MethodPost, "/.herdgate/enter"); res.StatusCode != http.StatusOK || !strings.Contains(body, `"position":1`) {
		t.Fatalf("enter: %d %q", res.StatusCode, body)
	}
	h.admit(1, 0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		time.Sleep(600 * time.Millisecond) // as told: no poll sooner than nextPollMs
		res, body = do(browser, http.MethodGet, "/.herdgate/status")
		if strings.Contains(body, `"admitted":true`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never admitted: %d %q", res.StatusCode, body)
		}
	}
	res, body = do(browser, http.MethodGet, "/checkout/cart?step=2", "Accept", "text/html", "Cookie", "theme=dark",
		"Herdgate-Place", "1.x", "X-Herdgate-Proof", "p:1", admission.SessionHeader, "forged-by-the-visitor")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "upstream GET /checkout/cart") {
		t.Fatalf("with its pass: %d %q; want the workload's answer", res.StatusCode, body)
	}
	calls := h.upstream.all()
	if len(calls) != 1 {
		t.Fatalf("the workload got %d requests; want only the one with a pass", len(calls))
	}
	got := calls[0]
	if got.Query != "step=2" {
		t.Errorf("the workload got the query %q", got.Query)
	}
	// The session's handle is the one header of herdgate's the workload gets, when the gateway asks
	// the check, and never the visitor's own.
	handle := got.Header.Get(admission.SessionHeader)
	if handle == "forged-by-the-visitor" || (handle == "") != gw.jwt {
		t.Errorf("the workload got the session handle %q", handle)
	}
	for name, values := range got.Header {
		if admission.IsOwnHeader([]byte(name)) && name != admission.SessionHeader {
			t.Errorf("the workload got herdgate's header %s: %v", name, values)
		}
	}
	if cookie := got.Header.Get("Cookie"); strings.Contains(cookie, "herdgate_") || !strings.Contains(cookie, "theme=dark") {
		t.Errorf("the workload got the cookies %q; want the site's only", cookie)
	}
	// A gateway that asks the check has herdgate count the allowed request; one that verifies the
	// pass itself never calls herdgate for it.
	want := 1.0
	if gw.jwt {
		want = 0
	}
	if got := h.metric("herdgate_proxy_requests_total", `{outcome="allowed",route_class="protected"}`); got != want {
		t.Errorf("allowed requests counted by herdgate: %v, want %v", got, want)
	}
	if gw.jwt {
		return // a gateway that verifies passes itself never sees a release (the guide says so)
	}

	// The checkout's last step ends the session (a completion route, which the check sees): the same
	// pass is refused from then on.
	if res, body = do(browser, http.MethodGet, "/checkout/done", "Accept", "text/html"); res.StatusCode != http.StatusOK {
		t.Fatalf("the completion route with the pass: %d %q", res.StatusCode, body)
	}
	if res, body = do(browser, http.MethodGet, "/checkout/cart", "Accept", "text/html"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the released pass after the checkout: %d %q; want 303 to the waiting page", res.StatusCode, body)
	}

	// A second visitor's session ends from the workload's own server, with the handle its request
	// carried.
	jar2, _ := cookiejar.New(nil)
	second := &http.Client{Jar: jar2, CheckRedirect: browser.CheckRedirect}
	do(second, http.MethodPost, "/.herdgate/enter")
	h.admit(1, 0)
	for deadline := time.Now().Add(10 * time.Second); ; {
		time.Sleep(600 * time.Millisecond)
		if _, body = do(second, http.MethodGet, "/.herdgate/status"); strings.Contains(body, `"admitted":true`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second visitor was never admitted: %q", body)
		}
	}
	if res, body = do(second, http.MethodPost, "/api/v1/orders"); res.StatusCode != http.StatusOK {
		t.Fatalf("the second visitor's order: %d %q", res.StatusCode, body)
	}
	calls = h.upstream.all()
	handle = calls[len(calls)-1].Header.Get(admission.SessionHeader)
	req, _ := http.NewRequest(http.MethodPost, h.server.URL+"/.herdgate/release", nil)
	req.Header.Set("Authorization", "Bearer "+releaseKey)
	req.Header.Set(admission.SessionHeader, handle)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("the workload's release: %d", r.StatusCode)
	}
	if res, body = do(second, http.MethodPost, "/api/v1/orders"); res.StatusCode != http.StatusForbidden {
		t.Fatalf("the second visitor's order after the workload released it: %d %q", res.StatusCode, body)
	}
}

// passKeysOf is the stored key set of cfg's JWT passes, "" for HMAC passes.
func passKeysOf(t *testing.T, cfg *admission.Config) string {
	t.Helper()
	j, ok := cfg.Passes.(*pass.JWTPasses)
	if !ok {
		return ""
	}
	raw, err := j.Keys().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// alter changes a pass after it was signed: a JWT's payload, or an HMAC pass's first byte after the
// version.
func alter(token string) string {
	if parts := strings.Split(token, "."); len(parts) == 3 {
		payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
		payload = []byte(strings.Replace(string(payload), `"sub":"someone"`, `"sub":"someone-else"`, 1))
		return parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + parts[2]
	}
	raw, _ := base64.RawURLEncoding.DecodeString(token)
	raw[2] ^= 1
	return base64.RawURLEncoding.EncodeToString(raw)
}

// waitFor polls url until it answers 200: a gateway may listen before its routes are loaded.
func waitFor(t *testing.T, url string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("status %d", res.StatusCode)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered 200: %v", url, err)
		}
	}
}

// TestTheGuideShowsTheGeneratedHAProxyConfig: the HAProxy configuration the guide shows, and the
// guideTargets are the gateway-config targets whose output the guide shows in a block of its
// language, for the test's own room.
var guideTargets = map[string]string{"haproxy": "haproxy", "nginx": "nginx", "caddyfile": "caddy", "yaml traefik-dynamic": "traefik-file",
	"yaml nginx-gateway-fabric": "nginx-gateway-fabric"}

// generated is what `herd gateway-config --target target` prints for wq, its addresses left as the
// guide's placeholders.
func generated(t *testing.T, wq *herdgatev1alpha1.WaitingQueue, target string) string {
	t.Helper()
	if target == "nginx-gateway-fabric" {
		// Routes point at Services: the renderer puts the test's addresses in their place.
		wq = changed(wq, func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Upstream = herdgatev1alpha1.UpstreamSpec{Service: &herdgatev1alpha1.ServiceUpstream{Name: "orders", Port: 8080}}
		})
	}
	out, err := gatewayconfig.Render(wq, gatewayconfig.Options{Target: target, Gateway: "eg", Listen: "LISTEN_ADDRESS",
		HerdgateAddress: "HERDGATE_ADDRESS", WorkloadAddress: "WORKLOAD_ADDRESS", KeysDir: "KEYS_DIR"})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestTheGuideShowsTheGeneratedConfigurations: the configurations docs/guides/gateways.md shows are
// what `herd gateway-config` prints for the guide's room, so that the tests that run them run what
// a user is given.
func TestTheGuideShowsTheGeneratedConfigurations(t *testing.T) {
	for lang, target := range guideTargets {
		wq := testQueue("http://WORKLOAD_ADDRESS")
		if target == "haproxy" {
			wq = changed(wq, jwtQueue(herdgatev1alpha1.PassAlgorithmES256))
		}
		wq.Spec.Enforcement = herdgatev1alpha1.EnforcementGateway
		if got, want := generated(t, wq, target), guideBlock(t, lang, strings.NewReplacer()); got != want {
			t.Errorf("docs/guides/gateways.md's %s block is not what herd gateway-config --target %s prints; it prints:\n%s", lang, target, got)
		}
	}
}

// TestHAProxyTerminatingTLSKeepsTheVisitorOnHTTPS: HAProxy configured as `herd gateway-config
// --target haproxy` prints, binding with TLS as most do, sends a browser without a pass to the
// waiting page on https, not http: the check learns the scheme from the configuration's
// X-Forwarded-Proto.
func TestHAProxyTerminatingTLSKeepsTheVisitorOnHTTPS(t *testing.T) {
	keys, stored := newPassKeys(t, pass.ES256)
	h := newHarnessWith(t, harnessOptions{memory: true, passKeys: stored}, jwtQueue(herdgatev1alpha1.PassAlgorithmES256))
	keysDir := t.TempDir()
	pems, err := keys.PublicPEMs(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for slot, pem := range pems {
		if err := os.WriteFile(filepath.Join(keysDir, slot+".pem"), pem, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	certs, err := testenv.WriteTestCertificates(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// HAProxy reads a certificate and its key from one file.
	crt := filepath.Join(t.TempDir(), "site.pem")
	var both []byte
	for _, f := range []string{certs.CertFile, certs.KeyFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		both = append(both, b...)
	}
	if err := os.WriteFile(crt, both, 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	upstream, _ := url.Parse(*h.wq.Spec.Upstream.URL)
	cfg, err := gatewayconfig.Render(changed(h.wq, func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Enforcement = herdgatev1alpha1.EnforcementGateway }),
		gatewayconfig.Options{Target: "haproxy", Listen: fmt.Sprintf("127.0.0.1:%d ssl crt %s", port, crt),
			HerdgateAddress: strings.TrimPrefix(h.server.URL, "http://"), WorkloadAddress: upstream.Host, KeysDir: keysDir})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hp, err := testenv.StartHAProxy(dir, string(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopShowingLog(t, hp.Stop, filepath.Join(dir, "haproxy.log")))
	site := fmt.Sprintf("https://127.0.0.1:%d", port)
	if loc := browserOverTLS(t, site, certs); loc != site+"/.herdgate/?return=%2Fcheckout%2Fcart" {
		t.Fatalf("a browser without a pass over TLS was sent to %q; want the waiting page on %s", loc, site)
	}
}

// TestGatewaysTerminatingTLSKeepTheVisitorOnHTTPS: nginx and Caddy, configured as the guide says but
// serving TLS, send a browser without a pass to the waiting page on its own https origin: nginx with
// the check's relative Location, Caddy with the scheme its forward_auth tells the check.
func TestGatewaysTerminatingTLSKeepTheVisitorOnHTTPS(t *testing.T) {
	for _, name := range []string{"nginx", "caddy"} {
		t.Run(name, func(t *testing.T) {
			h := newHarnessWith(t, harnessOptions{memory: true, secrets: map[string]map[string]string{"orders-release": {"key": releaseKey}}}, nil)
			certs, err := testenv.WriteTestCertificates(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			port, err := testenv.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			upstream, _ := url.Parse(*h.wq.Spec.Upstream.URL)
			fill := strings.NewReplacer("HERDGATE_ADDRESS", strings.TrimPrefix(h.server.URL, "http://"), "WORKLOAD_ADDRESS", upstream.Host,
				"QUEUE_NAME", h.wq.Namespace+"/"+h.wq.Name)
			dir := t.TempDir()
			switch name {
			case "nginx":
				conf := strings.Replace(guideBlock(t, "nginx", fill), "listen LISTEN_ADDRESS;",
					fmt.Sprintf("listen %s ssl;\n  ssl_certificate %s;\n  ssl_certificate_key %s;", addr, certs.CertFile, certs.KeyFile), 1)
				n, err := testenv.StartNginx(dir, conf)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(n.Stop)
			case "caddy":
				conf := strings.Replace(guideBlock(t, "caddyfile", fill), "http://LISTEN_ADDRESS {",
					fmt.Sprintf("https://%s {\n\ttls %s %s", addr, certs.CertFile, certs.KeyFile), 1)
				c, err := testenv.StartCaddy(dir, conf)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(stopShowingLog(t, c.Stop, filepath.Join(dir, "caddy.log")))
			}
			site := "https://" + addr
			loc := browserOverTLS(t, site, certs)
			if strings.TrimPrefix(loc, site) != "/.herdgate/?return=%2Fcheckout%2Fcart" {
				t.Fatalf("a browser without a pass over TLS was sent to %q; want the waiting page on %s", loc, site)
			}
			t.Logf("Location %s", loc)
		})
	}
}

// browserOverTLS waits for the gateway at site (https, its certificate from certs) to answer, then
// asks for a protected page as a browser without a pass; it returns the Location of the 303 it got.
func browserOverTLS(t *testing.T, site string, certs *testenv.TLSFiles) string {
	t.Helper()
	client := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certs.RootCAs}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res, err := client.Get(site + "/.herdgate/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered over TLS: %v", site, err)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, site+"/checkout/cart", nil)
	req.Header.Set("Accept", "text/html")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("a browser without a pass over TLS: %d; want 303 to the waiting page", res.StatusCode)
	}
	return res.Header.Get("Location")
}
