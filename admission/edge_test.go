package admission_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission"

	"k8s.io/utils/ptr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// rawUpstream is a workload that records each request exactly as it came on the wire: the request
// line, every header line in order (repeats included) and the body. It answers 200, and 101 with an
// echo to a WebSocket upgrade.
type rawUpstream struct {
	ln    net.Listener
	mu    sync.Mutex
	calls []rawCall
}

type rawCall struct {
	Line    string
	Headers [][2]string
	Body    []byte
}

func (c rawCall) values(name string) []string {
	var out []string
	for _, h := range c.Headers {
		if strings.EqualFold(h[0], name) {
			out = append(out, h[1])
		}
	}
	return out
}

func startRawUpstream(t *testing.T) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{ln: ln}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go u.serve(c)
		}
	}()
	return u
}

func (u *rawUpstream) URL() string { return "http://" + u.ln.Addr().String() }

func (u *rawUpstream) all() []rawCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]rawCall(nil), u.calls...)
}

func (u *rawUpstream) serve(c net.Conn) {
	defer func() { _ = c.Close() }()
	br := bufio.NewReader(c)
	for {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		call := rawCall{Line: strings.TrimRight(line, "\r\n")}
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			l = strings.TrimRight(l, "\r\n")
			if l == "" {
				break
			}
			name, value, _ := strings.Cut(l, ":")
			call.Headers = append(call.Headers, [2]string{name, strings.TrimSpace(value)})
		}
		switch {
		case len(call.values("Transfer-Encoding")) > 0:
			call.Body, _ = io.ReadAll(httputil.NewChunkedReader(br))
			_, _ = br.ReadString('\n') // the empty trailer
		case len(call.values("Content-Length")) > 0:
			n, _ := strconv.Atoi(call.values("Content-Length")[0])
			call.Body = make([]byte, n)
			_, _ = io.ReadFull(br, call.Body)
		}
		u.mu.Lock()
		u.calls = append(u.calls, call)
		u.mu.Unlock()
		if up := call.values("Upgrade"); len(up) == 1 && strings.EqualFold(up[0], "websocket") {
			_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			_, _ = io.Copy(c, br)
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	}
}

// wireAnswer is the status line and headers of an answer read off the wire; its body is read already.
type wireAnswer struct {
	StatusCode int
	Header     http.Header
}

// send writes request on a new connection to the proxy and reads the first answer; the connection and
// its reader are returned for more.
func (h *harness) send(request string) (wireAnswer, string, net.Conn, *bufio.Reader) {
	h.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.server.URL, "http://"))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		h.t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		h.t.Fatalf("reading the answer to %q: %v", request, err)
	}
	body := ""
	if res.StatusCode != http.StatusSwitchingProtocols && res.StatusCode != http.StatusContinue {
		b, _ := io.ReadAll(res.Body)
		body = string(b)
	}
	_ = res.Body.Close()
	return wireAnswer{res.StatusCode, res.Header}, body, conn, br
}

// edgeHarness is a room in front of a raw upstream that shows what reaches it byte for byte. What
// crosses the edge is decided before any queue, so the room runs on the memory engine.
func edgeHarness(t *testing.T) (*harness, *rawUpstream) {
	t.Helper()
	up := startRawUpstream(t)
	h := newMemoryHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.Upstream.URL = ptr.To(up.URL())
		wq.Spec.Identity = &herdgatev1alpha1.IdentitySpec{Header: "X-User-Id"}
	})
	return h, up
}

// TestTheGateForwardsOnlyWhatItMatched covers what the upstream receives (docs/reference/upstream.md) on
// both fronts.
func TestTheGateForwardsOnlyWhatItMatched(t *testing.T) {
	onBothFronts(t, testForwardsOnlyWhatItMatched)
}

func testForwardsOnlyWhatItMatched(t *testing.T) {
	user := "X-User-Id: alice\r\n"
	t.Run("the upstream gets exactly one Host, its own", func(t *testing.T) {
		for name, req := range map[string]string{
			"HTTP/1.1":         "GET /open HTTP/1.1\r\nHost: shop.example\r\n" + user + "\r\n",
			"HTTP/1.0 no Host": "GET /open HTTP/1.0\r\n" + user + "\r\n",
			"HTTP/1.0":         "GET /open HTTP/1.0\r\nHost: shop.example\r\n" + user + "\r\n",
			"Connection: Host": "GET /open HTTP/1.1\r\nHost: shop.example\r\nConnection: Host\r\n" + user + "\r\n",
			"absolute form":    "GET http://evil.example/open HTTP/1.1\r\nHost: shop.example\r\n" + user + "\r\n",
		} {
			t.Run(name, func(t *testing.T) {
				h, up := edgeHarness(t)
				res, body, _, _ := h.send(req)
				if res.StatusCode != http.StatusOK {
					t.Fatalf("%d %s", res.StatusCode, body)
				}
				calls := up.all()
				if len(calls) != 1 {
					t.Fatalf("the upstream got %d requests", len(calls))
				}
				want := strings.TrimPrefix(up.URL(), "http://")
				if hosts := calls[0].values("Host"); len(hosts) != 1 || hosts[0] != want {
					t.Fatalf("the upstream got Host %q, want exactly [%s]", hosts, want)
				}
			})
		}
	})

	t.Run("the upstream gets what the visitor sent and the forwarding headers, nothing more", func(t *testing.T) {
		h, up := edgeHarness(t)
		res, body, _, _ := h.send("POST /open/form?a=1 HTTP/1.1\r\nHost: shop.example\r\nX-App: 1\r\nCookie: theme=dark; " + admission.PassCookie + "=x; " + admission.VisitorCookie + "=y\r\n" +
			admission.PassHeader + ": zzz\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nContent-Length: 5\r\n" + user + "\r\nhello")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
		c := up.all()[0]
		if c.Line != "POST /open/form?a=1 HTTP/1.1" {
			t.Errorf("request line %q", c.Line)
		}
		var names []string
		for _, hv := range c.Headers {
			names = append(names, strings.ToLower(hv[0]))
		}
		want := []string{"content-length", "cookie", "host", "x-app", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-user-id"}
		slices.Sort(names)
		if !slices.Equal(names, want) {
			t.Errorf("the upstream got headers %v, want exactly %v", names, want)
		}
		if got := c.values("Cookie"); len(got) != 1 || got[0] != "theme=dark" {
			t.Errorf("Cookie %q, want the visitor's own cookies only", got)
		}
		if string(c.Body) != "hello" {
			t.Errorf("body %q", c.Body)
		}
	})

	t.Run("a repeated Host is 400", func(t *testing.T) {
		h, up := edgeHarness(t)
		res, body, _, _ := h.send("GET /open HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n" + user + "\r\n")
		if res.StatusCode != http.StatusBadRequest || len(up.all()) != 0 {
			t.Fatalf("%d %s; upstream got %d", res.StatusCode, body, len(up.all()))
		}
	})

	t.Run("a repeated identity header is 400", func(t *testing.T) {
		h, up := edgeHarness(t)
		res, body, _, _ := h.send("GET /open HTTP/1.1\r\nHost: a\r\nX-User-Id: alice\r\nX-User-Id: mallory\r\n\r\n")
		if res.StatusCode != http.StatusBadRequest || len(up.all()) != 0 || !strings.Contains(body, "identity") {
			t.Fatalf("%d %s; upstream got %d", res.StatusCode, body, len(up.all()))
		}
	})

	t.Run("only WebSocket upgrades are honoured", func(t *testing.T) {
		h, up := edgeHarness(t)
		res, body, _, _ := h.send("GET /open HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n" + user + "\r\n")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("h2c upgrade: %d %s, want the plain answer", res.StatusCode, body)
		}
		calls := up.all()
		if len(calls) != 1 || len(calls[0].values("Upgrade")) != 0 || len(calls[0].values("HTTP2-Settings")) != 0 {
			t.Fatalf("the upstream got %+v, want the request without its upgrade", calls)
		}

		res, _, conn, br := h.send("GET /open HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" + user + "\r\n")
		if res.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("websocket upgrade: %d", res.StatusCode)
		}
		fmt.Fprint(conn, "ping\n")
		if echoed, err := br.ReadString('\n'); err != nil || echoed != "ping\n" {
			t.Fatalf("echo over the upgraded connection: %q %v", echoed, err)
		}
	})

	t.Run("an upgrade to a protected route needs a pass before any handover", func(t *testing.T) {
		h, up := edgeHarness(t)
		// A body far beyond what an upgrade may carry, of which the first 8 KiB come: the gate answers
		// then, reading no more of it.
		res, body, _, _ := h.send("POST /api/v1/orders HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 100000000\r\n" + user + "\r\n" + strings.Repeat("x", 8<<10))
		if res.StatusCode != http.StatusForbidden || len(up.all()) != 0 {
			t.Fatalf("%d %s; upstream got %d", res.StatusCode, body, len(up.all()))
		}
	})

	t.Run("protected routes match whatever the letter case", func(t *testing.T) {
		h, up := edgeHarness(t)
		for _, path := range []string{"/API/V1/ORDERS", "/Api/v1/Orders", "/api/V1/orders/DIRECT", "/CHECKOUT/cart"} {
			method := "POST"
			if strings.HasPrefix(strings.ToLower(path), "/checkout") {
				method = "GET"
			}
			res, body, _, _ := h.send(method + " " + path + " HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n" + user + "\r\n")
			if res.StatusCode != http.StatusForbidden {
				t.Errorf("%s %s without a pass: %d %s", method, path, res.StatusCode, body)
			}
		}
		if n := len(up.all()); n != 0 {
			t.Fatalf("the upstream got %d requests", n)
		}
	})

	t.Run("a route that asks for exact case matches letter for letter", func(t *testing.T) {
		up := startRawUpstream(t)
		h := newHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Upstream.URL = ptr.To(up.URL())
			wq.Spec.ProtectedRoutes[0].ExactCase = true // POST /api/v1/orders
		})
		if res, body, _, _ := h.send("POST /api/v1/orders HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"); res.StatusCode != http.StatusForbidden {
			t.Fatalf("the exact spelling without a pass: %d %s", res.StatusCode, body)
		}
		if res, body, _, _ := h.send("POST /API/V1/ORDERS HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"); res.StatusCode != http.StatusOK {
			t.Fatalf("another case of an exact-case route: %d %s, want it forwarded as an open route", res.StatusCode, body)
		}
	})

	t.Run("a method override is judged as the method it names", func(t *testing.T) {
		h, up := edgeHarness(t)
		for name, req := range map[string]string{
			"X-HTTP-Method-Override":  "PUT /checkout HTTP/1.1\r\nHost: a\r\nX-HTTP-Method-Override: GET\r\nContent-Length: 0\r\n",
			"X-HTTP-Method":           "PUT /checkout HTTP/1.1\r\nHost: a\r\nX-HTTP-Method: GET\r\nContent-Length: 0\r\n",
			"X-Method-Override":       "PUT /checkout HTTP/1.1\r\nHost: a\r\nX-Method-Override: get\r\nContent-Length: 0\r\n",
			"_method in the query":    "PUT /checkout?_method=GET HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n",
			"_method escaped":         "PUT /checkout?%5Fmethod=GET HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n",
			"_METHOD in upper case":   "PUT /checkout?a=1&_METHOD=get HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n",
			".method as PHP reads it": "PUT /checkout?.method=GET HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n",
			"+method as PHP reads it": "PUT /checkout?+method=GET HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n",
			"_method in a form body":  "PUT /checkout HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 11\r\n",
			"a form upload":           "POST /checkout HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=x\r\nContent-Length: 11\r\n",
		} {
			body := ""
			if strings.Contains(req, "Length: 11") {
				body = "_method=GET"
			}
			res, got, _, _ := h.send(req + user + "\r\n" + body)
			if res.StatusCode != http.StatusForbidden {
				t.Errorf("%s: %d %s, want 403", name, res.StatusCode, got)
			}
		}
		if n := len(up.all()); n != 0 {
			t.Fatalf("the upstream got %d requests", n)
		}
	})

	t.Run("Forwarded is removed and X-Forwarded-* are the gate's", func(t *testing.T) {
		h, up := edgeHarness(t)
		res, body, _, _ := h.send("GET /open HTTP/1.1\r\nHost: shop.example\r\nForwarded: for=10.0.0.1;host=evil.example;proto=https\r\nX-Forwarded-For: 10.0.0.1\r\nX-Forwarded-Host: evil.example\r\nX-Forwarded-Proto: https\r\n" + user + "\r\n")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
		c := up.all()[0]
		if len(c.values("Forwarded")) != 0 {
			t.Errorf("Forwarded reached the upstream: %q", c.values("Forwarded"))
		}
		for name, want := range map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Host": "shop.example", "X-Forwarded-Proto": "http"} {
			if got := c.values(name); len(got) != 1 || got[0] != want {
				t.Errorf("%s = %q, want [%s]", name, got, want)
			}
		}
	})

	t.Run("header names the grammar forbids are 400", func(t *testing.T) {
		for name, line := range map[string]string{
			"a space":        "Bad Header: x",
			"a space before": "X-Thing : x",
			"a control byte": "X-\x01Thing: x",
			"a slash":        "X/Thing: x",
			"an empty name":  ": x",
		} {
			t.Run(name, func(t *testing.T) {
				h, up := edgeHarness(t)
				res, body, _, _ := h.send("GET /open HTTP/1.1\r\nHost: a\r\n" + line + "\r\n" + user + "\r\n")
				if res.StatusCode != http.StatusBadRequest || len(up.all()) != 0 {
					t.Fatalf("%d %s; upstream got %d", res.StatusCode, body, len(up.all()))
				}
			})
		}
	})

	t.Run("a body framed twice or oddly is refused", func(t *testing.T) {
		for name, req := range map[string]string{
			"two lengths":              "POST /open HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nContent-Length: 40\r\n" + user + "\r\nabcd",
			"an unknown coding":        "POST /open HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n" + user + "\r\n0\r\n\r\n",
			"chunked, then identity":   "POST /open HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n" + user + "\r\n0\r\n\r\n",
			"a negative length":        "POST /open HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n" + user + "\r\n",
			"a signed length":          "POST /open HTTP/1.1\r\nHost: a\r\nContent-Length: +4\r\n" + user + "\r\nabcd",
			"a space before the colon": "POST /open HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n" + user + "\r\n0\r\n\r\n",
		} {
			t.Run(name, func(t *testing.T) {
				h, up := edgeHarness(t)
				res, body, _, _ := h.send(req)
				if res.StatusCode < 400 || len(up.all()) != 0 {
					t.Fatalf("%d %s; upstream got %+v", res.StatusCode, body, up.all())
				}
			})
		}
	})

	if harnessFront == "fast" {
		t.Run("both Content-Length and Transfer-Encoding are 400", func(t *testing.T) {
			h, up := edgeHarness(t)
			res, body, _, _ := h.send("POST /open HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n" + user + "\r\n0\r\n\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n")
			if res.StatusCode != http.StatusBadRequest || len(up.all()) != 0 {
				t.Fatalf("%d %s; upstream got %+v", res.StatusCode, body, up.all())
			}
		})

		t.Run("a folded header line is 400", func(t *testing.T) {
			h, up := edgeHarness(t)
			res, body, _, _ := h.send("GET /open HTTP/1.1\r\nHost: a\r\nX-Thing: a\r\n b\r\n" + user + "\r\n")
			if res.StatusCode != http.StatusBadRequest || len(up.all()) != 0 {
				t.Fatalf("%d %s; upstream got %d", res.StatusCode, body, len(up.all()))
			}
		})
	}

	t.Run("a malformed chunked body is 400", func(t *testing.T) {
		h, up := edgeHarness(t)
		res, body, _, _ := h.send("POST /open HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n" + user + "\r\nZZ\r\nxx\r\n0\r\n\r\n")
		if res.StatusCode != http.StatusBadRequest {
			t.Fatalf("%d %s; upstream got %d", res.StatusCode, body, len(up.all()))
		}
		for _, c := range up.all() {
			if len(c.Body) > 0 {
				t.Fatalf("the upstream got a body %q", c.Body)
			}
		}
	})

	t.Run("CONNECT is 405", func(t *testing.T) {
		h, up := edgeHarness(t)
		res, body, _, _ := h.send("CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n" + user + "\r\n")
		if res.StatusCode != http.StatusMethodNotAllowed || len(up.all()) != 0 {
			t.Fatalf("%d %s; upstream got %d", res.StatusCode, body, len(up.all()))
		}
	})

	t.Run("a refused request gets no 100 Continue", func(t *testing.T) {
		h, up := edgeHarness(t)
		res, body, _, _ := h.send("POST /api/v1/orders HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n" + user + "\r\n")
		if res.StatusCode != http.StatusForbidden || len(up.all()) != 0 || !strings.Contains(body, `"error"`) {
			t.Fatalf("first answer %d %s, want 403 with no 100 Continue before it", res.StatusCode, bytes.TrimSpace([]byte(body)))
		}
		// Allowed, the request gets its 100 Continue and goes through once.
		res, body, conn, br := h.send("POST /open HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n" + user + "\r\n")
		if res.StatusCode != http.StatusContinue {
			t.Fatalf("an open route's Expect: %d %s, want 100 Continue", res.StatusCode, body)
		}
		fmt.Fprint(conn, "hello")
		final, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = final.Body.Close()
		if calls := up.all(); final.StatusCode != http.StatusOK || len(calls) != 1 || string(calls[0].Body) != "hello" {
			t.Fatalf("after 100 Continue: %d, upstream got %+v", final.StatusCode, calls)
		}
	})
}
