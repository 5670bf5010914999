package front

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/admissiontest"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
)

// seen is what a gateway makes of a check's answer, whichever convention carried it: whether the
// request passes, and with what for the workload, or the visitor's answer.
type seen struct {
	// Allow: the request goes on. Untouched: it goes on as it came (herdgate's own path), nothing of
	// it rewritten.
	Allow, Untouched bool
	// Session and Cookie are what the workload gets in Herdgate-Session and Cookie.
	Session, Cookie string
	// Status, Location (its path and query), Error (the JSON body's), PassResult, RetryAfter and
	// SetCookies (their names) are the visitor's answer to a refusal.
	Status                      int
	Location, Error, PassResult string
	RetryAfter                  bool
	SetCookies                  []string
}

// checkedRoom is a room behind every check: the HTTP check on the fast front (on loopback), and
// Envoy's gRPC ext_authz.
type checkedRoom struct {
	room *admission.Room
	http string
}

// TestEveryCheckGivesTheSameVerdict asks about each request of one table through the HTTP check in
// each convention (nginx's auth_request, Traefik's and Caddy's forward auth, Envoy's HTTP ext_authz)
// and through Envoy's gRPC ext_authz, and requires the same verdict of each: they share the gate's
// decision and differ only in how they write it.
func TestEveryCheckGivesTheSameVerdict(t *testing.T) {
	now := time.Now()
	releaseKey := "0123456789abcdef0123456789abcdef"
	rooms := map[string]*checkedRoom{}
	engines := map[string]*admissiontest.MemoryEngine{}
	for name, b := range map[string]*builder.QueueBuilder{
		"orders": builder.Queue("shop", "orders").Identity("X-User-Id").ReleaseKey("release", "key").
			Routes(builder.Route("/checkout", true, "GET", "POST"), builder.Route("/api/v1/orders", false, "POST")).
			Bypass(herdgatev1alpha1.BypassRule{Name: "probe", Path: ptr.To(herdgatev1alpha1.RoutePath("/checkout/health"))}),
		"tickets":     builder.Queue("shop", "tickets").Routes(builder.Route("/tickets", true, "GET")).Mode(herdgatev1alpha1.ModeClosed),
		"passthrough": builder.Queue("shop", "sale").Routes(builder.Route("/sale", true, "GET")).Mode(herdgatev1alpha1.ModePassthrough),
		"scheduled": builder.Queue("shop", "launch").Routes(builder.Route("/launch", true, "GET", "POST")).
			Schedule(now.Add(time.Hour), now.Add(2*time.Hour), time.Time{}),
		"hosted": builder.Queue("shop", "hosted").Routes(builder.RouteOn("shop.example", "/checkout", true, "GET"),
			builder.RouteOn("tickets.example", "/tickets", true, "GET")),
		"unconfigured": nil,
	} {
		room, engine := admissiontest.NewRoom("shop/"+name, nil, admission.Options{})
		engines[name] = engine
		if b != nil {
			wq := b.UID(types.UID("uid-" + name)).UpstreamURL("http://workload.internal:8080").Enforcement(herdgatev1alpha1.EnforcementGateway).Obj()
			cfg, err := admission.NewConfigWithSecrets(wq, testKey, func(key string) ([]byte, error) {
				if key == herdgatev1alpha1.SecretRefKey("release", "key") {
					return []byte(releaseKey), nil
				}
				return nil, io.EOF
			})
			if err != nil {
				t.Fatal(err)
			}
			room.SetConfig(cfg)
		}
		rooms[name] = &checkedRoom{room: room, http: serveFast(t, room)}
	}
	grpcClient := extAuthzOf(t, func(name string) (*admission.Room, bool) {
		r, ok := rooms[strings.TrimPrefix(name, "shop/")]
		if !ok {
			return nil, false
		}
		return r.room, true
	})

	orders := rooms["orders"].room.Config()
	token := orders.Signer.Issue("ada", now.Add(-time.Second), now.Add(time.Minute))
	session := orders.Signer.Session(pass.Pass{Visitor: "ada", NotBefore: now.Add(-time.Second).Truncate(time.Millisecond), Expiry: now.Add(time.Minute).Truncate(time.Millisecond)})
	expired := orders.Signer.Issue("ada", now.Add(-2*time.Minute), now.Add(-time.Minute))
	other, err := pass.NewSigner("uid-other", testKey)
	if err != nil {
		t.Fatal(err)
	}
	otherQueues := other.Issue("ada", now.Add(-time.Second), now.Add(time.Minute))
	// bea would be admitted at once: no check hands a pass out on the allow path.
	engines["orders"].SetPosition("bea", queue.Position{State: queue.Admitted, Now: now, Pass: queue.Pass{NotBefore: now.Add(-time.Second), Expiry: now.Add(time.Minute)}})

	refused := func(status int, errCode, result string) seen {
		return seen{Status: status, Error: errCode, PassResult: result}
	}
	type header = []string
	cases := []struct {
		name, room, method, uri string
		header                  header
		want                    seen
	}{
		{"a valid pass in the header", "orders", "POST", "/api/v1/orders", header{"X-User-Id", "ada", "X-Herdgate-Pass", token},
			seen{Allow: true, Session: session}},
		{"a valid pass in the cookie, the site's cookies kept", "orders", "GET", "/checkout/cart?step=2",
			header{"X-User-Id", "ada", "Cookie", "theme=dark; herdgate_pass=" + token + "; lang=en"}, seen{Allow: true, Session: session, Cookie: "theme=dark; lang=en"}},
		{"a made-up session handle without a pass", "orders", "GET", "/about", header{"Herdgate-Session", "made-up"}, seen{Allow: true}},
		{"an open route", "orders", "GET", "/about?x=1", header{"Cookie", "theme=dark"}, seen{Allow: true, Cookie: "theme=dark"}},
		{"a protected route's other method", "orders", "GET", "/api/v1/orders", nil, seen{Allow: true}},
		{"a bypass lane", "orders", "GET", "/checkout/health", nil, seen{Allow: true}},
		{"no pass", "orders", "POST", "/api/v1/orders", header{"X-User-Id", "cy", "Accept", "application/json"}, refused(403, "pass_required", "missing")},
		{"no identity", "orders", "POST", "/api/v1/orders", nil, refused(401, "identity_required", "")},
		{"a forged pass", "orders", "POST", "/api/v1/orders", header{"X-User-Id", "ada", "X-Herdgate-Pass", forge(token)}, refused(403, "pass_required", "tampered")},
		{"an expired pass", "orders", "POST", "/api/v1/orders", header{"X-User-Id", "ada", "X-Herdgate-Pass", expired}, refused(403, "pass_required", "expired")},
		{"another visitor's pass", "orders", "POST", "/api/v1/orders", header{"X-User-Id", "bea", "X-Herdgate-Pass", token}, refused(403, "pass_required", "wrong_visitor")},
		{"another queue's pass", "orders", "POST", "/api/v1/orders", header{"X-User-Id", "ada", "X-Herdgate-Pass", otherQueues}, refused(403, "pass_required", "tampered")},
		{"a pass cut short", "orders", "POST", "/api/v1/orders", header{"X-User-Id", "ada", "X-Herdgate-Pass", token[:len(token)/2]}, refused(403, "pass_required", "malformed")},
		{"a protected route spelt otherwise", "orders", "POST", "/api//v1/./%6frders", header{"X-User-Id", "cy"}, refused(403, "pass_required", "missing")},
		{"a method override", "orders", "GET", "/api/v1/orders", header{"X-User-Id", "cy", "X-HTTP-Method-Override", "POST"}, refused(403, "pass_required", "missing")},
		{"a _method parameter", "orders", "GET", "/api/v1/orders?_method=POST", header{"X-User-Id", "cy"}, refused(403, "pass_required", "missing")},
		{"a form body", "orders", "PUT", "/api/v1/orders", header{"X-User-Id", "cy", "Content-Type", "application/x-www-form-urlencoded"}, refused(403, "pass_required", "missing")},
		{"a lower-case method", "orders", "post", "/api/v1/orders", header{"X-User-Id", "cy"}, refused(403, "pass_required", "missing")},
		{"a browser the room would admit at once", "orders", "GET", "/checkout?x=1", header{"X-User-Id", "bea", "Accept", "text/html"},
			seen{Status: 303, Location: "/.herdgate/?return=%2Fcheckout%3Fx%3D1", PassResult: "missing"}},
		{"CONNECT", "orders", "CONNECT", "/api/v1/orders", nil, refused(405, "method_not_allowed", "")},
		{"a path that does not normalise", "orders", "GET", "/checkout%zz", nil, refused(400, "bad_path", "")},
		{"a fragment", "orders", "GET", "/checkout#x", nil, refused(400, "bad_path", "")},
		{"herdgate's own path", "orders", "POST", "/.herdgate/enter", header{"X-Herdgate-Proof", "room", "Cookie", "herdgate_visitor=x"}, seen{Allow: true, Untouched: true}},
		{"herdgate's own path spelt otherwise", "orders", "GET", "/x/..//.herdgate/status", nil, seen{Allow: true, Untouched: true}},
		{"herdgate's own path by CONNECT", "orders", "CONNECT", "/.herdgate/enter", nil, refused(405, "method_not_allowed", "")},
		{"a Closed room", "tickets", "GET", "/tickets/1", header{"Accept", "application/json"}, seen{Status: 503, Error: "closed", RetryAfter: true}},
		{"a Closed room's browser", "tickets", "GET", "/tickets/1", header{"Accept", "text/html"}, seen{Status: 303, Location: "/.herdgate/?return=%2Ftickets%2F1"}},
		{"a Passthrough room", "passthrough", "GET", "/sale/1", nil, seen{Allow: true}},
		{"a room not open yet", "scheduled", "POST", "/launch", header{"Accept", "application/json"},
			seen{Status: 403, Error: "not_open", PassResult: "missing", RetryAfter: true}},
		{"a room without a config", "unconfigured", "GET", "/checkout", nil, seen{Status: 503, Error: "not_configured", RetryAfter: true}},
		{"a room without a config, its probe", "unconfigured", "GET", "/.herdgate/healthz", nil, seen{Allow: true, Untouched: true}},
	}
	conventions := map[string]func(r *checkedRoom, method, uri string, h header) seen{
		"nginx": func(r *checkedRoom, method, uri string, h header) seen {
			return seenOverHTTP(t, http.MethodGet, r.http, CheckPath, append(header{"X-Original-Method", method, "X-Original-URI", uri}, h...))
		},
		"forward auth": func(r *checkedRoom, method, uri string, h header) seen {
			return seenOverHTTP(t, http.MethodGet, r.http, CheckPath, append(header{"X-Forwarded-Method", method, "X-Forwarded-Uri", uri}, h...))
		},
		"envoy http": func(r *checkedRoom, method, uri string, h header) seen {
			return seenOverHTTP(t, method, r.http, CheckPath+uri, h)
		},
		"envoy grpc": func(r *checkedRoom, method, uri string, h header) seen {
			headers := map[string]string{}
			for i := 0; i+1 < len(h); i += 2 {
				headers[strings.ToLower(h[i])] = h[i+1]
			}
			res, err := grpcClient.Check(context.Background(), checkRequest("shop/"+roomName(rooms, r), method, uri, headers))
			if err != nil {
				t.Fatal(err)
			}
			return seenOverGRPC(t, res)
		},
	}
	for _, c := range cases {
		for _, name := range []string{"nginx", "forward auth", "envoy http", "envoy grpc"} {
			if name == "envoy http" && (c.method == "CONNECT" || strings.Contains(c.uri, "#")) {
				continue // not a request an HTTP client sends: a CONNECT has an authority for its target, and '#' never leaves it
			}
			got := conventions[name](rooms[c.room], c.method, c.uri, c.header)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("%s through %s (-want +got):\n%s", c.name, name, diff)
			}
		}
	}

	// Routes for one host: each check names the request's host its own way, and the gate compares it
	// without a port, a final dot or regard to case.
	hosted := rooms["hosted"]
	withHost := map[string]func(host, uri string) seen{
		"nginx": func(host, uri string) seen {
			return seenOverHTTP(t, http.MethodGet, hosted.http, CheckPath, header{"X-Original-Method", "GET", "X-Original-URI", uri, "X-Original-Host", host, "Accept", "application/json"})
		},
		"forward auth": func(host, uri string) seen {
			return seenOverHTTP(t, http.MethodGet, hosted.http, CheckPath, header{"X-Forwarded-Method", "GET", "X-Forwarded-Uri", uri, "X-Forwarded-Host", host, "Accept", "application/json"})
		},
		"envoy http": func(host, uri string) seen {
			return seenOverHTTP(t, http.MethodGet, hosted.http, CheckPath+uri, header{"Host", host, "Accept", "application/json"})
		},
		"envoy grpc": func(host, uri string) seen {
			req := checkRequest("shop/hosted", "GET", uri, map[string]string{"accept": "application/json"})
			req.Attributes.Request.Http.Host = host
			res, err := grpcClient.Check(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			return seenOverGRPC(t, res)
		},
	}
	for _, c := range []struct {
		host, uri string
		protected bool
	}{
		{"shop.example", "/checkout/cart", true},
		{"Shop.Example:8443", "/checkout", true},
		{"shop.example.", "/checkout", true},
		{"tickets.example", "/checkout", false},
		{"tickets.example", "/tickets/1", true},
		{"shop.example", "/tickets/1", false},
		{"evil.shop.example", "/checkout", false},
		{"shop.example.evil", "/checkout", false},
	} {
		want := seen{Allow: true}
		if c.protected {
			want = refused(403, "pass_required", "missing")
		}
		for _, name := range []string{"nginx", "forward auth", "envoy http", "envoy grpc"} {
			if diff := cmp.Diff(want, withHost[name](c.host, c.uri)); diff != "" {
				t.Errorf("GET %s on %s through %s (-want +got):\n%s", c.uri, c.host, name, diff)
			}
		}
	}
	// A check that names no host, or two, gets the routes of every host.
	for _, h := range []header{
		{"X-Original-Method", "GET", "X-Original-URI", "/checkout"},
		{"X-Original-Method", "GET", "X-Original-URI", "/tickets/1"},
		{"X-Original-Method", "GET", "X-Original-URI", "/checkout", "X-Original-Host", "tickets.example", "X-Original-Host", "tickets.example"},
		{"X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/checkout", "X-Forwarded-Host", "tickets.example", "X-Forwarded-Host", "evil.example"},
		{"X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/tickets/1"},
	} {
		got := seenOverHTTP(t, http.MethodGet, hosted.http, CheckPath, append(h, "Accept", "application/json"))
		if diff := cmp.Diff(refused(403, "pass_required", "missing"), got); diff != "" {
			t.Errorf("%v (-want +got):\n%s", h, diff)
		}
	}
}

func roomName(rooms map[string]*checkedRoom, r *checkedRoom) string {
	for name, room := range rooms {
		if room == r {
			return name
		}
	}
	return ""
}

// extAuthzOf serves Envoy's ext_authz for the rooms queue finds, on loopback, and returns a client.
func extAuthzOf(t *testing.T, queue func(string) (*admission.Room, bool)) authv3.AuthorizationClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := NewExtAuthzServer(&ExtAuthz{Room: queue})
	go func() { _ = server.Serve(ln) }()
	t.Cleanup(server.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return authv3.NewAuthorizationClient(conn)
}

// seenOverHTTP sends a check to base with the request target target, and reads its answer as the gateways do: nginx by its status and
// X-Herdgate-Status, the others by the answer as it is.
func seenOverHTTP(t *testing.T, method, base, target string, h []string) seen {
	t.Helper()
	req, err := http.NewRequest(method, base, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = target // as it is, a malformed escape too
	for i := 0; i+1 < len(h); i += 2 {
		if h[i] == "Host" {
			req.Host = h[i+1]
			continue
		}
		req.Header.Add(h[i], h[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode == http.StatusOK {
		_, rewritten := res.Header[CheckCookieHeader]
		return seen{Allow: true, Untouched: !rewritten, Session: res.Header.Get(admission.SessionHeader), Cookie: res.Header.Get(CheckCookieHeader)}
	}
	s := seen{Status: res.StatusCode, Location: pathOf(res.Header.Get("Location")), PassResult: res.Header.Get("X-Herdgate-Pass-Result"),
		RetryAfter: res.Header.Get("Retry-After") != "", Error: errorOf(body)}
	if gate := res.Header.Get(CheckStatusHeader); gate != "" {
		// nginx's convention: 401 or 403 on the wire, the gate's status beside.
		if (res.StatusCode != http.StatusUnauthorized && res.StatusCode != http.StatusForbidden) ||
			(res.StatusCode == http.StatusUnauthorized) != strings.HasPrefix(gate, "3") {
			t.Errorf("nginx's convention: %d on the wire for the gate's %s", res.StatusCode, gate)
		}
		s.Status = atoi(gate)
	}
	for _, c := range res.Cookies() {
		s.SetCookies = append(s.SetCookies, c.Name)
	}
	return s
}

// seenOverGRPC reads an ext_authz answer as Envoy applies it.
func seenOverGRPC(t *testing.T, res *authv3.CheckResponse) seen {
	t.Helper()
	if ok := res.GetOkResponse(); ok != nil {
		if codes.Code(res.GetStatus().GetCode()) != codes.OK {
			t.Errorf("an OkHttpResponse with status %d", res.GetStatus().GetCode())
		}
		s := seen{Allow: true, Untouched: len(ok.GetHeaders()) == 0 && len(ok.GetHeadersToRemove()) == 0}
		for _, h := range ok.GetHeaders() {
			switch h.GetHeader().GetKey() {
			case "cookie":
				s.Cookie = h.GetHeader().GetValue()
			case sessionHeader:
				s.Session = h.GetHeader().GetValue()
			}
		}
		if !s.Untouched {
			for _, own := range ownRequestHeaders {
				if !slices.Contains(ok.GetHeadersToRemove(), own) {
					t.Errorf("an allow keeps the visitor's %s", own)
				}
			}
			if s.Session == "" && !slices.Contains(ok.GetHeadersToRemove(), sessionHeader) {
				t.Error("an allow without a session keeps the visitor's own handle")
			}
		}
		return s
	}
	d := res.GetDeniedResponse()
	if codes.Code(res.GetStatus().GetCode()) != codes.PermissionDenied {
		t.Errorf("a DeniedHttpResponse with status %d", res.GetStatus().GetCode())
	}
	s := seen{Status: int(d.GetStatus().GetCode()), Location: pathOf(deniedHeader(res, "location")), PassResult: deniedHeader(res, "x-herdgate-pass-result"),
		RetryAfter: deniedHeader(res, "retry-after") != "", Error: errorOf([]byte(d.GetBody()))}
	for _, h := range d.GetHeaders() {
		if h.GetHeader().GetKey() == "set-cookie" {
			c, err := http.ParseSetCookie(h.GetHeader().GetValue())
			if err != nil {
				t.Fatal(err)
			}
			s.SetCookies = append(s.SetCookies, c.Name)
		}
	}
	return s
}

// pathOf is a Location's path and query: an absolute one is on the visitor's own origin.
func pathOf(location string) string {
	u, err := url.Parse(location)
	if err != nil || location == "" {
		return location
	}
	return u.RequestURI()
}

func errorOf(body []byte) string {
	var b struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &b)
	return b.Error
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
