package admission_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/test/testenv"
)

// guideBlock is the code block of language lang in docs/guides/gateways.md, with the gateway's port,
// herdgate's address and the workload's filled in.
func guideBlock(t *testing.T, lang string, port int, herdgate, workload string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	guide, err := os.ReadFile(filepath.Join(root, "docs", "guides", "gateways.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, found := strings.Cut(string(guide), "```"+lang+"\n")
	block, _, closed := strings.Cut(block, "```")
	if !found || !closed {
		t.Fatalf("docs/guides/gateways.md has no %s block", lang)
	}
	return strings.NewReplacer("LISTEN_PORT", fmt.Sprintf("127.0.0.1:%d", port), "HERDGATE_ADDRESS", herdgate,
		"WORKLOAD_ADDRESS", workload).Replace(block)
}

// gateways are the gateways the tests run the room through, each started with the configuration
// docs/guides/gateways.md gives for it (block reads the guide's block of a language).
var gateways = map[string]func(t *testing.T, dir string, block func(lang string) string) (stop func()){
	"nginx": func(t *testing.T, dir string, block func(string) string) func() {
		n, err := testenv.StartNginx(dir, block("nginx"))
		if err != nil {
			t.Fatal(err)
		}
		return n.Stop
	},
	"caddy": func(t *testing.T, dir string, block func(string) string) func() {
		c, err := testenv.StartCaddy(dir, block("caddyfile"))
		if err != nil {
			t.Fatal(err)
		}
		return c.Stop
	},
	"traefik": func(t *testing.T, dir string, block func(string) string) func() {
		tr, err := testenv.StartTraefik(dir, block("yaml traefik-static"), block("yaml traefik-dynamic"))
		if err != nil {
			t.Fatal(err)
		}
		return func() {
			tr.Stop()
			if t.Failed() {
				log, _ := os.ReadFile(filepath.Join(dir, "traefik.log"))
				t.Logf("traefik's log:\n%s", log)
			}
		}
	},
}

// TestGatewaysEnforceTheRoom runs the room through real gateways that ask herdgate's check (nginx's
// auth_request, Caddy's forward_auth, Traefik's ForwardAuth), configured as docs/guides/gateways.md says: a browser is sent
// to the waiting page, enters, waits, gets its pass at its not-before time and reaches the protected
// route; an API client gets the JSON contract; a forged or missing pass is refused; the workload never
// sees a pass, a herdgate cookie or header.
func TestGatewaysEnforceTheRoom(t *testing.T) {
	for name, start := range gateways {
		t.Run(name, func(t *testing.T) { testGatewayEnforcesTheRoom(t, start) })
	}
}

func testGatewayEnforcesTheRoom(t *testing.T, start func(t *testing.T, dir string, block func(string) string) func()) {
	h := newHarness(t, nil)
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	upstream, _ := url.Parse(*h.wq.Spec.Upstream.URL)
	block := func(lang string) string {
		return guideBlock(t, lang, port, strings.TrimPrefix(h.server.URL, "http://"), upstream.Host)
	}
	t.Cleanup(start(t, t.TempDir(), block))
	gateway := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitFor(t, gateway+"/.herdgate/healthz")

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
	res, body = do(http.DefaultClient, http.MethodPost, "/api/v1/orders", admission.PassHeader, "forged")
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "pass_required") {
		t.Fatalf("a forged pass: %d %q", res.StatusCode, body)
	}

	// A visitor naming another request in the check's own headers is refused: what its request earns
	// where the gateway drops such headers (nginx, Caddy), or 400 where it passes them on (Traefik).
	for _, smuggled := range [][]string{
		{"X-Original-URI", "/open/page", "X-Original-Method", "GET"},
		{"X-Forwarded-Uri", "/open/page", "X-Forwarded-Method", "GET"},
	} {
		if res, body = do(http.DefaultClient, http.MethodPost, "/api/v1/orders", smuggled...); res.StatusCode != http.StatusForbidden && res.StatusCode != http.StatusBadRequest {
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
		"Herdgate-Place", "1.x", "X-Herdgate-Proof", "p:1")
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
	for name, values := range got.Header {
		if admission.IsOwnHeader([]byte(name)) {
			t.Errorf("the workload got herdgate's header %s: %v", name, values)
		}
	}
	if cookie := got.Header.Get("Cookie"); strings.Contains(cookie, "herdgate_") || !strings.Contains(cookie, "theme=dark") {
		t.Errorf("the workload got the cookies %q; want the site's only", cookie)
	}
	if h.metric("herdgate_proxy_requests_total", `{outcome="allowed",route_class="protected"}`) != 1 {
		t.Errorf("allowed requests counted: %v", h.metric("herdgate_proxy_requests_total", `{outcome="allowed",route_class="protected"}`))
	}
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
