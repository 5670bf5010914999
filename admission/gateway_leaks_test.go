package admission_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/builder"
)

// TestGatewaysForwardOnlyWhatTheCheckAllows sends every class of request the check judges through
// each real gateway, configured as docs/guides/gateways.md says, and asks the check about the same
// request: each method on protected and open paths, every method override, with and without a pass,
// a session, the site's cookies, herdgate's cookies and herdgate's headers. The gateway must give
// the check's verdict (the workload's answer, or the check's own refusal status), and the workload
// must get exactly the herdgate headers and cookies the check's answer says: the session's handle
// the check gave, if any, the visitor's cookies without herdgate's, and no other header of
// herdgate's — never a placeholder the gateway did not fill in.
func TestGatewaysForwardOnlyWhatTheCheckAllows(t *testing.T) {
	for name, gw := range gateways {
		t.Run(name, func(t *testing.T) { testGatewayForwardsOnlyWhatTheCheckAllows(t, gw) })
	}
	t.Run("ingress-nginx", func(t *testing.T) { testGatewayForwardsOnlyWhatTheCheckAllows(t, ingressNginx) })
	t.Run("nginx-gateway-fabric", func(t *testing.T) { testGatewayForwardsOnlyWhatTheCheckAllows(t, nginxGatewayFabric) })
}

// leakRequest is one request of the table: its method, target and headers.
type leakRequest struct {
	method, target string
	header         []string
}

// leakRequests are the requests of the table, for a room protecting POST /api/v1/orders,
// GET /checkout/* and PUT, PATCH, DELETE /api/v1/items/*.
func leakRequests() []leakRequest {
	var reqs []leakRequest
	for _, method := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "PURGE", "post"} {
		for _, target := range []string{"/api/v1/orders", "/checkout/cart?step=2", "/api/v1/items/7", "/open/page"} {
			reqs = append(reqs, leakRequest{method: method, target: target})
		}
	}
	overrides := []leakRequest{
		{"GET", "/api/v1/orders", []string{"X-HTTP-Method-Override", "POST"}},
		{"GET", "/api/v1/orders", []string{"X-HTTP-Method", "post"}},
		{"GET", "/api/v1/orders", []string{"X-Method-Override", " POST "}},
		{"GET", "/api/v1/orders", []string{"X-HTTP-Method-Override", "GET"}},
		{"GET", "/api/v1/orders", []string{"X-HTTP-Method-Override", "GET", "X-HTTP-Method-Override", "GET"}},
		{"GET", "/api/v1/orders", []string{"X-HTTP-Method-Override", "GET, POST"}},
		{"POST", "/checkout/cart", []string{"X-HTTP-Method-Override", "GET"}},
		{"GET", "/api/v1/items/7", []string{"X-Method-Override", "DELETE"}},
		{"GET", "/api/v1/orders?_method=POST", nil},
		{"GET", "/api/v1/orders?a=1&_METHOD=post", nil},
		{"GET", "/api/v1/orders?_method=GET", nil},
		{"GET", "/api/v1/orders?_method=GET&_method=POST", nil},
		{"GET", "/api/v1/orders?%5Fmethod=POST", nil},
		{"GET", "/api/v1/orders?paymentmethod=card", nil},
		{"GET", "/api/v1/orders", []string{"Content-Type", "application/x-www-form-urlencoded"}},
		{"GET", "/api/v1/orders", []string{"Content-Type", "multipart/form-data; boundary=x"}},
		{"GET", "/api/v1/orders", []string{"Content-Type", "application/json"}},
		{"GET", "/open/page", []string{"X-HTTP-Method-Override", "POST"}},
	}
	return append(reqs, overrides...)
}

func testGatewayForwardsOnlyWhatTheCheckAllows(t *testing.T, gw gateway) {
	h, gateway := throughGateway(t, gw, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.ProtectedRoutes = append(wq.Spec.ProtectedRoutes, builder.Route("/api/v1/items", true, "PUT", "PATCH", "DELETE"))
		if !gw.jwt {
			*wq = *builder.From(wq).ReleaseKey("orders-release", "key").Obj()
		}
	})
	names := h.cookies()
	admitted := admittedCookies(t, h, gateway)
	passCookie := ""
	for _, c := range admitted {
		if c.Name == names.Pass {
			passCookie = c.Value
		}
	}
	if passCookie == "" {
		t.Fatalf("the admitted visitor has no %s cookie: %v", names.Pass, admitted)
	}
	cookieLine := func(cs []*http.Cookie, extra ...string) string {
		var parts []string
		for _, c := range cs {
			parts = append(parts, c.Name+"="+c.Value)
		}
		return strings.Join(append(parts, extra...), "; ")
	}
	// Who asks: the headers each visitor sends besides the request's own.
	visitors := []struct {
		name   string
		header []string
	}{
		{"a stranger without cookies", nil},
		{"a stranger with the site's cookie", []string{"Cookie", "theme=dark"}},
		{"a stranger with made-up passes and herdgate's headers", []string{"Cookie", "theme=dark; herdgate_pass=forged; " + names.Pass + "=forged",
			admission.PassHeader, "forged", "Herdgate-Place", "1.x", "X-Herdgate-Proof", "p:1", "X-Herdgate-Invitation", "inv", admission.SessionHeader, "forged"}},
		{"the admitted visitor with the site's cookie", []string{"Cookie", cookieLine(admitted, "theme=dark")}},
		{"the admitted visitor with herdgate's cookies only", []string{"Cookie", cookieLine(admitted)}},
		{"the admitted visitor's pass in its header, no cookies", []string{admission.PassHeader, passCookie}},
		{"the admitted visitor with herdgate's headers", []string{"Cookie", cookieLine(admitted, "theme=dark"), admission.SessionHeader, "forged",
			"Herdgate-Place", "1.x", "X-Herdgate-Proof", "p:1", "X-Herdgate-Challenge-Response", "r"}},
	}
	host := strings.TrimPrefix(gateway, "http://")
	for _, v := range visitors {
		for _, r := range leakRequests() {
			if gw.firstOfRepeated && repeatsAHeader(r.header) {
				continue
			}
			header := append(slices.Clone(v.header), r.header...)
			what := fmt.Sprintf("%s: %s %s %q", v.name, r.method, r.target, r.header)
			want := askTheCheck(t, h, host, r.method, r.target, header)
			before := len(h.upstream.all())
			status, body := sendThrough(t, gateway, r.method, r.target, header)
			calls := h.upstream.all()[before:]
			if r.method != strings.ToUpper(r.method) && status == http.StatusBadRequest && len(calls) == 0 {
				continue // a gateway that takes a method in lower case for malformed (nginx) refuses it itself
			}
			if want.StatusCode != http.StatusOK {
				if refusedAlike := status == want.StatusCode || (gw.coarse && status >= 300); len(calls) != 0 || !refusedAlike {
					t.Errorf("%s: the check refuses it with %d; the gateway answered %d %q and the workload got %d requests", what, want.StatusCode, status, body, len(calls))
				}
				continue
			}
			if len(calls) != 1 || status != http.StatusOK {
				t.Errorf("%s: the check allows it; the gateway answered %d %q and the workload got %d requests", what, status, body, len(calls))
				continue
			}
			got := calls[0]
			if got.Method != r.method {
				t.Errorf("%s: the workload got the method %s", what, got.Method)
			}
			// An override reaches the workload as the visitor sent it (without the spaces around
			// a value, which HTTP drops).
			for i := 0; i+1 < len(r.header); i += 2 {
				if name := r.header[i]; name != "Content-Type" && !slices.Equal(got.Header.Values(name), headerValues(r.header, name)) {
					t.Errorf("%s: the workload got %s %q; want it as the visitor sent it", what, name, got.Header.Values(name))
				}
			}
			wantOwn := map[string][]string{}
			if session := want.Header.Get(admission.SessionHeader); session != "" && !gw.jwt {
				wantOwn[admission.SessionHeader] = []string{session}
			}
			gotOwn := map[string][]string{}
			for name, values := range got.Header {
				if isHerdgateHeader(name) {
					gotOwn[name] = values
				}
			}
			if fmt.Sprint(gotOwn) != fmt.Sprint(wantOwn) {
				t.Errorf("%s: the workload got herdgate's headers %q; want %q", what, gotOwn, wantOwn)
			}
			wantCookie := want.Header.Values("X-Herdgate-Cookie")
			if len(wantCookie) == 1 && wantCookie[0] == "" {
				wantCookie = nil
			}
			if gotCookie := got.Header.Values("Cookie"); !slices.Equal(gotCookie, wantCookie) {
				t.Errorf("%s: the workload got the cookies %q; want %q", what, gotCookie, wantCookie)
			}
		}
	}
	if gw.jwt {
		return
	}
	// The admitted visitor's requests carried its session's handle.
	sessions := 0
	for _, c := range h.upstream.all() {
		if c.Header.Get(admission.SessionHeader) != "" {
			sessions++
		}
	}
	if sessions == 0 {
		t.Errorf("no request reached the workload with the session's handle")
	}
}

// headerValues are the values of name among the pairs of kv.
func headerValues(kv []string, name string) []string {
	var values []string
	for i := 0; i+1 < len(kv); i += 2 {
		if http.CanonicalHeaderKey(kv[i]) == http.CanonicalHeaderKey(name) {
			values = append(values, strings.TrimSpace(kv[i+1]))
		}
	}
	return values
}

// isHerdgateHeader says the header is one of herdgate's, or one its checks answer with.
func isHerdgateHeader(name string) bool {
	lower := strings.ToLower(name)
	return admission.IsOwnHeader([]byte(name)) || strings.HasPrefix(lower, "x-herdgate-") || strings.HasPrefix(lower, "herdgate-")
}

// askTheCheck is the check's answer about the request, asked as Traefik asks (herdgate's own answer).
func askTheCheck(t *testing.T, h *harness, host, method, target string, header []string) checkAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.server.URL+"/.herdgate/check", nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	req.Header.Set("X-Forwarded-Method", method)
	req.Header.Set("X-Forwarded-Uri", target)
	req.Header.Set("X-Forwarded-Host", host)
	res, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return checkAnswer{StatusCode: res.StatusCode, Header: res.Header}
}

// checkAnswer is what the check answered: its status and headers.
type checkAnswer struct {
	StatusCode int
	Header     http.Header
}

// sendThrough sends the request to the gateway; it returns the answer's status and body.
func sendThrough(t *testing.T, gateway, method, target string, header []string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, gateway+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	res, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	return res.StatusCode, string(body)
}

// noRedirects is a client that shows a redirect rather than following it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// admittedCookies are the cookies of a visitor who entered the room through the gateway and was
// admitted: its pass and the rest herdgate handed it.
func admittedCookies(t *testing.T, h *harness, gateway string) []*http.Cookie {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: noRedirects.CheckRedirect}
	post := func(path string) string {
		res, err := c.Post(gateway+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return string(body)
	}
	if body := post("/.herdgate/enter"); !strings.Contains(body, `"position"`) {
		t.Fatalf("enter: %q", body)
	}
	h.admit(1, 0)
	for deadline := time.Now().Add(10 * time.Second); ; {
		time.Sleep(600 * time.Millisecond) // as told: no poll sooner than nextPollMs
		res, err := c.Get(gateway + "/.herdgate/status")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if strings.Contains(string(body), `"admitted":true`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never admitted: %q", body)
		}
	}
	u, _ := url.Parse(gateway)
	return jar.Cookies(u)
}

// repeatsAHeader says whether header (name, value pairs) names a header twice.
func repeatsAHeader(header []string) bool {
	seen := map[string]bool{}
	for i := 0; i+1 < len(header); i += 2 {
		name := http.CanonicalHeaderKey(header[i])
		if seen[name] {
			return true
		}
		seen[name] = true
	}
	return false
}
