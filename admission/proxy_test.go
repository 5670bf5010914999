package admission_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission"

	"github.com/herdgate/herdgate/admission/front"
	"github.com/herdgate/herdgate/internal/pass"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
)

func TestEnterAndStatus(t *testing.T) {
	h := newHarness(t, nil)
	first, second := h.visitor(), h.visitor()

	res := first.enter()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("enter: %d %s", res.StatusCode, res.body)
	}
	body := res.json(t)
	// Every waiting visitor holds its signed place, the sequence 1 here (far.go).
	if place, _ := body["place"].(string); !strings.HasPrefix(place, "1.") || res.setCookie(h.cookies().Place) == "" {
		t.Fatalf("enter gave the place %q and the cookie %q, want place 1 in both", place, res.setCookie(h.cookies().Place))
	}
	delete(body, "place")
	if diff := cmp.Diff(map[string]any{"position": 1.0, "queueDepth": 1.0, "estimatedWaitSeconds": 1.0, "nextPollMs": 500.0, "admitted": false, "phase": "Open"}, body); diff != "" {
		t.Fatalf("enter body (-want +got):\n%s", diff)
	}
	c := first.visitorCookie()
	if c == nil {
		t.Fatal("enter minted no visitor cookie")
	}
	setCookie := res.setCookie(h.cookies().Visitor)
	for _, attr := range []string{"HttpOnly", "SameSite=Lax", "Path=/"} {
		if !strings.Contains(setCookie, attr) {
			t.Errorf("visitor cookie %q lacks %s", setCookie, attr)
		}
	}
	if got := second.enter().json(t)["position"]; got != 2.0 {
		t.Fatalf("second visitor's position = %v, want 2", got)
	}
	// Entering again keeps the place.
	if got := first.enter().json(t); got["position"] != 1.0 || got["queueDepth"] != 2.0 {
		t.Fatalf("re-enter = %v, want position 1 of 2", got)
	}

	// A poll right after an entry comes too early: 429 with Retry-After, and the place is kept.
	res = second.status()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "1" {
		t.Fatalf("early poll: %d, Retry-After %q; want 429 and 1", res.StatusCode, res.Header.Get("Retry-After"))
	}
	early := res.json(t)
	if early["error"] != "too_early" || early["position"] != 2.0 || early["retryAfterMs"].(float64) <= 0 {
		t.Fatalf("early poll body = %v", early)
	}
	if h.metric("herdgate_proxy_too_early_total", "") != 1 {
		t.Fatal("the 429 was not counted")
	}
	// A client that waits as told is answered: the early poll counted as a sign of life, and
	// retryAfterMs runs from it.
	time.Sleep(time.Duration(early["retryAfterMs"].(float64))*time.Millisecond + 10*time.Millisecond)
	res = second.status()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("poll after the interval: %d %s", res.StatusCode, res.body)
	}
	if diff := cmp.Diff(map[string]any{"position": 2.0, "queueDepth": 2.0, "estimatedWaitSeconds": 1.0, "nextPollMs": 500.0, "admitted": false, "phase": "Open"}, res.json(t)); diff != "" {
		t.Fatalf("status body (-want +got):\n%s", diff)
	}

	// Without a visitor cookie, status says to enter.
	res = h.visitor().status()
	if res.StatusCode != http.StatusNotFound || res.json(t)["enter"] != "/.herdgate/enter" || res.json(t)["error"] != "not_queued" {
		t.Fatalf("status of a stranger: %d %s", res.StatusCode, res.body)
	}
	// A forged cookie is no identity.
	stranger := h.visitor()
	res = stranger.do(http.MethodGet, "/.herdgate/status", nil, "Cookie", admission.VisitorCookie+"="+c.Value[:22]+".AAAAAAAAAAAAAAAAAAAAAA")
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("status with a forged visitor cookie: %d %s", res.StatusCode, res.body)
	}
}

func TestPollHintsFollowThePlan(t *testing.T) {
	h := newHarness(t, nil)
	// 700 visitors ahead: the reference numbers say about 5 s of wait and a 2.5 s poll hint.
	ids := make([]string, 700)
	for i := range ids {
		ids[i] = fmt.Sprintf("ahead-%03d", i)
		if _, err := h.q.Enter(context.Background(), ids[i], time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	body := h.visitor().enter().json(t)
	if body["position"] != 701.0 || body["estimatedWaitSeconds"] != 6.0 || body["nextPollMs"] != 3000.0 {
		t.Fatalf("enter at 701 = %v; want 6 s of wait (⌈701/140⌉) and a 3 s hint", body)
	}
	// A scheduler that admits 28 per tick halves the wait.
	if err := h.q.PublishPlan(context.Background(), queue.PublishedPlan{Quota: mustQuota(28),
		PollMin: 500 * time.Millisecond, PollMax: 5 * time.Second, AbandonAfter: time.Minute}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(admission.PlanTTL + 100*time.Millisecond)
	if body = h.visitor().enter().json(t); body["estimatedWaitSeconds"] != 3.0 {
		t.Fatalf("enter at 703 with 280/s = %v; want 3 s of wait", body)
	}
	// Without a published plan, the spec's own plan (14 per tick) estimates the wait.
	if err := h.store.Client().Del(context.Background(), h.q.KeyPrefix()+":plan").Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(admission.PlanTTL + 100*time.Millisecond)
	if body = h.visitor().enter().json(t); body["estimatedWaitSeconds"] != 6.0 {
		t.Fatalf("enter at 704 without a published plan = %v; want the spec's 6 s", body)
	}
	// A suspended queue admits nobody: the wait is unknown and the hint is the longest interval.
	if err := h.q.PublishPlan(context.Background(), queue.PublishedPlan{Quota: mustQuota(14),
		PollMin: 500 * time.Millisecond, PollMax: 5 * time.Second, AbandonAfter: time.Minute, Suspended: true}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(admission.PlanTTL + 100*time.Millisecond)
	if body = h.visitor().enter().json(t); body["estimatedWaitSeconds"] != nil || body["nextPollMs"] != 5000.0 {
		t.Fatalf("enter while suspended = %v; want a null wait and a 5 s hint", body)
	}
}

func TestAdmissionHonoursNotBeforeAndIssuesThePass(t *testing.T) {
	h := newHarness(t, nil)
	v := h.visitor()
	told := time.Duration(v.enter().json(t)["nextPollMs"].(float64)) * time.Millisecond
	res := h.admit(1, told+400*time.Millisecond)
	if len(res.Admitted) != 1 {
		t.Fatal("the tick admitted nobody")
	}
	// The visitor polls as told, before the pass's not-before.
	time.Sleep(told)
	body := v.status().json(t)
	if body["admitted"] != false || body["position"] != 0.0 || body["pass"] != nil {
		t.Fatalf("status before not-before = %v; want admitted false at position 0", body)
	}
	if wait := body["nextPollMs"].(float64); wait <= 200 || wait > 400 {
		t.Fatalf("nextPollMs before not-before = %v; want the time until not-before (≈400 ms)", wait)
	}
	time.Sleep(time.Duration(body["nextPollMs"].(float64)) * time.Millisecond)
	r := v.do(http.MethodGet, "/.herdgate/status", nil, "X-Forwarded-Proto", "https")
	body = r.json(t)
	if r.StatusCode != http.StatusOK || body["admitted"] != true || body["pass"] == "" || body["passExpiresAt"] == nil {
		t.Fatalf("status at not-before: %d %v", r.StatusCode, body)
	}
	passCookie := r.setCookie(h.cookies().Pass)
	for _, attr := range []string{"HttpOnly", "SameSite=Lax", "Secure"} {
		if !strings.Contains(passCookie, attr) {
			t.Errorf("pass cookie %q lacks %s", passCookie, attr)
		}
	}
	// The cookie lives as long as the pass: 5 minutes from a not-before that has just passed.
	if !regexp.MustCompile(`Max-Age=(29\d|300)(;|$)`).MatchString(passCookie) {
		t.Errorf("pass cookie %q: Max-Age is not the pass's remaining life", passCookie)
	}
	token := body["pass"].(string)

	// The pass opens the protected routes, from the cookie or the header, and stays with the proxy.
	v.client.Jar.SetCookies(mustURL(h.server.URL), []*http.Cookie{{Name: admission.PassCookie, Value: token}})
	if r := v.do(http.MethodPost, "/api/v1/orders", strings.NewReader(`{"item":1}`)); r.StatusCode != http.StatusOK || r.Header.Get("X-Upstream") != "yes" {
		t.Fatalf("order with the pass cookie: %d %s", r.StatusCode, r.body)
	}
	other := h.visitor()
	if r := other.do(http.MethodPost, "/api/v1/orders/direct", nil, admission.PassHeader, token); r.StatusCode != http.StatusOK {
		t.Fatalf("order with the pass header from a client without cookies: %d %s", r.StatusCode, r.body)
	}
	for _, call := range h.upstream.all() {
		if call.Header.Get(admission.PassHeader) != "" || strings.Contains(call.Header.Get("Cookie"), "herdgate_") {
			t.Fatalf("the pass reached the upstream: %v", call.Header)
		}
	}
	// Entering again keeps the pass.
	if body := v.enter().json(t); body["admitted"] != true {
		t.Fatalf("re-enter of an admitted visitor = %v", body)
	}
	if h.metric("herdgate_proxy_pass_verifications_total", `{result="valid"}`) != 2 {
		t.Fatal("valid verifications were not counted")
	}
	// Two requests with one pass: one first use, well within a second of its not-before time.
	if n, soon := h.metric("herdgate_proxy_pass_first_use_delay_seconds_count", ""),
		h.metric("herdgate_proxy_pass_first_use_delay_seconds_bucket", `{le="1"}`); n != 1 || soon != 1 {
		t.Fatalf("herdgate_proxy_pass_first_use_delay_seconds: %v first uses, %v within 1 s; want 1 and 1", n, soon)
	}
}

func TestProtectedRoutesNeedAPass(t *testing.T) {
	h := newMemoryHarness(t, nil)
	v := h.visitor()
	res := v.do(http.MethodPost, "/api/v1/orders", strings.NewReader("{}"), "Accept", "application/json")
	if res.StatusCode != http.StatusForbidden || strings.TrimSpace(string(res.body)) != `{"error":"pass_required","enter":"/.herdgate/enter"}` {
		t.Fatalf("order without a pass: %d %s", res.StatusCode, res.body)
	}
	// A browser asking for a protected page is sent to the waiting page, which brings it back.
	res = v.do(http.MethodGet, "/checkout/cart?step=2", nil, "Accept", "text/html,application/xhtml+xml")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/.herdgate/?return=%2Fcheckout%2Fcart%3Fstep%3D2" {
		t.Fatalf("browser without a pass: %d, Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	// An API client asking for the same page gets the JSON answer.
	if res := v.do(http.MethodGet, "/checkout/cart", nil); res.StatusCode != http.StatusForbidden {
		t.Fatalf("API GET without a pass: %d", res.StatusCode)
	}
	// HEAD is protected with GET.
	if res := v.do(http.MethodHead, "/checkout/cart", nil); res.StatusCode != http.StatusForbidden {
		t.Fatalf("HEAD without a pass: %d", res.StatusCode)
	}
	if calls := h.upstream.all(); len(calls) != 0 {
		t.Fatalf("requests without a pass reached the upstream: %v", calls)
	}
	// Reads and other routes pass through.
	if res := v.do(http.MethodGet, "/api/v1/orders", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("GET of an order list (not protected): %d", res.StatusCode)
	}
	if res := v.do(http.MethodPost, "/api/v1/orders-archive", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("POST to a neighbour of a protected path: %d", res.StatusCode)
	}
}

func TestNoSpellingOfAProtectedPathBypassesTheGate(t *testing.T) {
	h := newMemoryHarness(t, nil)
	token := h.room.Config().Signer.Issue("somebody", time.Now().Add(-time.Second), time.Now().Add(time.Minute))
	variants := []struct{ method, path string }{
		{"POST", "/api/v1/orders"},
		{"POST", "//api/v1/orders"},
		{"POST", "/api//v1///orders"},
		{"POST", "/api/v1/orders/"},
		{"POST", "/api/v1/./orders"},
		{"POST", "/api/v1/x/../orders"},
		{"POST", "/api/v1/orders/."},
		{"POST", "/api/v1/%2E/orders"},
		{"POST", "/api/v1/x/%2e%2e/orders"},
		{"POST", "/api%2Fv1%2Forders"},
		{"POST", "/api%2fv1/orders"},
		{"POST", "/api/v1/orders;jsessionid=1"},
		{"POST", "/api/v1;x=y/orders"},
		{"POST", "/api/v1/orders%3Bx"},
		{"POST", "/api\\v1\\orders"},
		{"POST", "/%61pi/v1/orders"},
		{"post", "/api/v1/orders"},
		{"Post", "/api/v1/orders"},
		{"POST", "/api/v1/orders?x=1"},
		{"POST", "http://shop/api/v1/orders"},
		{"POST", "http://shop//api/v1/./orders"},
	}
	for _, v := range variants {
		req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: shop\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", v.method, v.path)
		if res := h.raw(req); res.StatusCode != http.StatusForbidden {
			t.Errorf("%s %s without a pass: %d %s; want 403", v.method, v.path, res.StatusCode, res.Body)
		}
	}
	if calls := h.upstream.all(); len(calls) != 0 {
		t.Fatalf("%d spellings reached the upstream without a pass: %v", len(calls), calls)
	}
	// With a pass, the upstream sees exactly the path and method that were matched.
	for _, v := range variants {
		req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: shop\r\n%s: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", v.method, v.path, admission.PassHeader, token)
		if res := h.raw(req); res.StatusCode != http.StatusOK {
			t.Errorf("%s %s with a pass: %d %s", v.method, v.path, res.StatusCode, res.Body)
		}
	}
	for _, call := range h.upstream.all() {
		if call.Method != http.MethodPost || call.Path != "/api/v1/orders" || call.RawPath != "" {
			t.Errorf("upstream saw %s %s (raw %q), want POST /api/v1/orders", call.Method, call.Path, call.RawPath)
		}
	}
	// A path that cannot be normalised is refused, not guessed; so is a fragment, which no client sends.
	for _, bad := range []string{"/api/v1/orders%zz", "/api/v1/%00orders", "/api/v1/orders#x", "/api/v1/x#/../orders"} {
		if res := h.raw("POST " + bad + " HTTP/1.1\r\nHost: shop\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"); res.StatusCode != http.StatusBadRequest {
			t.Errorf("POST %s: %d, want 400", bad, res.StatusCode)
		}
	}
	// The reserved prefix is never forwarded, however it is spelled.
	for _, p := range []string{"/.herdgate/nope", "//.herdgate/nope", "/x/../.herdgate/nope", "/%2Eherdgate/nope"} {
		if res := h.raw("GET " + p + " HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n"); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want the proxy's 404", p, res.StatusCode)
		}
	}
}

func TestBadPassesAreRefused(t *testing.T) {
	h := newMemoryHarness(t, nil)
	signer := h.room.Config().Signer
	v := h.visitor()
	v.enter() // known visitor: the cookie names it
	id, _ := signer.VerifyVisitorCookie(v.visitorCookie().Value)
	now := time.Now()
	good := signer.Issue(id, now.Add(-time.Second), now.Add(time.Minute))
	otherKey := make([]byte, 32)
	_, _ = rand.Read(otherKey)
	otherQueue, err := pass.NewSigner("uid-other", h.key)
	if err != nil {
		t.Fatal(err)
	}
	otherSigner, err := pass.NewSigner("uid-orders", otherKey)
	if err != nil {
		t.Fatal(err)
	}
	flip := []byte(good)
	// Another letter of the base64url alphabet: the token still decodes, its MAC no longer holds.
	if flip[10] == 'A' {
		flip[10] = 'B'
	} else {
		flip[10] = 'A'
	}
	cases := []struct {
		name, token string
		want        pass.Result
	}{
		{"no pass", "", pass.Missing},
		{"tampered", string(flip), pass.Tampered},
		{"truncated", good[:len(good)-5], pass.Malformed},
		{"truncated to the header", good[:20], pass.Malformed},
		{"oversized", strings.Repeat("A", pass.MaxLength+1), pass.Oversized},
		{"not base64", "!!!!" + good[4:], pass.Malformed},
		{"expired", signer.Issue(id, now.Add(-time.Hour), now.Add(-time.Second)), pass.Expired},
		{"not yet valid", signer.Issue(id, now.Add(time.Minute), now.Add(time.Hour)), pass.NotYetValid},
		{"another queue's", otherQueue.Issue(id, now.Add(-time.Second), now.Add(time.Minute)), pass.Tampered},
		{"another key's", otherSigner.Issue(id, now.Add(-time.Second), now.Add(time.Minute)), pass.Tampered},
		{"another visitor's", signer.Issue("someone-else", now.Add(-time.Second), now.Add(time.Minute)), pass.WrongVisitor},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := h.metric("herdgate_proxy_pass_verifications_total", fmt.Sprintf(`{result="%s"}`, tc.want))
			res := v.do(http.MethodPost, "/api/v1/orders", nil, admission.PassHeader, tc.token)
			if res.StatusCode != http.StatusForbidden || res.Header.Get("X-Herdgate-Pass-Result") != string(tc.want) {
				t.Fatalf("%d, result %q; want 403 and %q", res.StatusCode, res.Header.Get("X-Herdgate-Pass-Result"), tc.want)
			}
			if after := h.metric("herdgate_proxy_pass_verifications_total", fmt.Sprintf(`{result="%s"}`, tc.want)); after != before+1 {
				t.Fatalf("verification metric %q went from %v to %v", tc.want, before, after)
			}
		})
	}
	if res := v.do(http.MethodPost, "/api/v1/orders", nil, admission.PassHeader, good); res.StatusCode != http.StatusOK {
		t.Fatalf("the good pass: %d %s", res.StatusCode, res.body)
	}
	if calls := h.upstream.all(); len(calls) != 1 {
		t.Fatalf("%d requests reached the upstream, want only the good one", len(calls))
	}
}

func TestIdentityHeader(t *testing.T) {
	h := newHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.Identity = &herdgatev1alpha1.IdentitySpec{Header: "x-user-id"}
	})
	v := h.visitor()
	res := v.enter()
	if res.StatusCode != http.StatusUnauthorized || res.json(t)["error"] != "identity_required" || res.json(t)["header"] != "X-User-Id" {
		t.Fatalf("enter without the identity header: %d %s", res.StatusCode, res.body)
	}
	if res := v.do(http.MethodPost, "/api/v1/orders", nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("order without the identity header: %d", res.StatusCode)
	}
	v.header.Set("X-User-Id", "user-42")
	if res := v.enter(); res.StatusCode != http.StatusOK || v.visitorCookie() != nil {
		t.Fatalf("enter with the identity header: %d, visitor cookie %v (none expected)", res.StatusCode, v.visitorCookie())
	}
	h.admit(1, 0)
	time.Sleep(450 * time.Millisecond)
	token, _ := v.status().json(t)["pass"].(string)
	if token == "" {
		t.Fatal("no pass for user-42")
	}
	if res := v.do(http.MethodPost, "/api/v1/orders", nil, admission.PassHeader, token); res.StatusCode != http.StatusOK {
		t.Fatalf("user-42 with its pass: %d", res.StatusCode)
	}
	thief := h.visitor()
	thief.header.Set("X-User-Id", "user-7")
	if res := thief.do(http.MethodPost, "/api/v1/orders", nil, admission.PassHeader, token); res.StatusCode != http.StatusForbidden ||
		res.Header.Get("X-Herdgate-Pass-Result") != string(pass.WrongVisitor) {
		t.Fatalf("user-7 with user-42's pass: %d %s", res.StatusCode, res.Header.Get("X-Herdgate-Pass-Result"))
	}
	bad := h.visitor()
	bad.header.Set("X-User-Id", "tab\tseparated")
	if res := bad.enter(); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("enter with an unprintable identity: %d %s", res.StatusCode, res.body)
	}
}

func TestOpenRoutesPassThroughUnchanged(t *testing.T) {
	// A richer upstream: streams, counts uploads, upgrades to WebSocket (and echoes).
	streamed := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: first\n\n")
			w.(http.Flusher).Flush()
			<-streamed // the client must see the first event before the second is written
			fmt.Fprint(w, "data: second\n\n")
		case "/upload":
			n, _ := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "%d %v", n, r.TransferEncoding)
		case "/download":
			w.Header().Set("Content-Length", "100000")
			if r.Method != http.MethodHead {
				_, _ = w.Write(make([]byte, 100000))
			}
		case "/ws":
			if r.Header.Get("Upgrade") != "websocket" {
				http.Error(w, "upgrade required", http.StatusUpgradeRequired)
				return
			}
			conn, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			_ = brw.Flush()
			_, _ = io.Copy(conn, brw)
		default:
			fmt.Fprintf(w, "xff=%s xfh=%s xfp=%s cookie=%s hop=%s%s", r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Host"),
				r.Header.Get("X-Forwarded-Proto"), r.Header.Get("Cookie"), r.Header.Get("X-Hop"), r.Header.Get("Keep-Alive"))
		}
	}))
	defer up.Close()
	h := newMemoryHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Upstream.URL = ptr.To(up.URL) })

	res, err := http.Get(h.server.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	close(streamed)
	if err != nil || line != "data: first\n" {
		t.Fatalf("first streamed event: %q, %v", line, err)
	}
	res.Body.Close()

	// Uploads of every framing arrive whole: small and large with a length, and chunked.
	for _, up := range []struct {
		name string
		body io.Reader
		want string
	}{
		{"1 KiB", bytes.NewReader(make([]byte, 1<<10)), fmt.Sprint(1<<10, " []")},
		{"16 MiB", bytes.NewReader(make([]byte, 16<<20)), fmt.Sprint(16<<20, " []")},
		{"chunked 3 MiB", io.MultiReader(bytes.NewReader(make([]byte, 1<<20)), strings.NewReader(strings.Repeat("x", 2<<20))), fmt.Sprint(3<<20, " [chunked]")},
	} {
		res, err = http.Post(h.server.URL+"/upload", "application/octet-stream", up.body)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if string(got) != up.want {
			t.Fatalf("upload of %s arrived as %q, want %q", up.name, got, up.want)
		}
	}

	// A download larger than the proxy buffers streams whole; HEAD keeps the upstream's length.
	res, err = http.Get(h.server.URL + "/download")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if len(got) != 100000 || res.ContentLength != 100000 {
		t.Fatalf("download: %d bytes, Content-Length %d", len(got), res.ContentLength)
	}
	if res, err = http.Head(h.server.URL + "/download"); err != nil || res.ContentLength != 100000 {
		t.Fatalf("HEAD download: %v, Content-Length %d", err, res.ContentLength)
	}
	res.Body.Close()

	req, _ := http.NewRequest(http.MethodGet, h.server.URL+"/headers", nil)
	req.Host = "shop.example"
	req.Header.Set("Cookie", "session=abc; "+admission.PassCookie+"=zzz; "+admission.VisitorCookie+"=yyy; theme=dark")
	// Hop-by-hop headers, and those the Connection header names, stay on this side of the proxy.
	req.Header.Set("Connection", "keep-alive, X-Hop")
	req.Header.Set("X-Hop", "1")
	req.Header.Set("Keep-Alive", "timeout=5")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if want := "xff=127.0.0.1 xfh=shop.example xfp=http cookie=session=abc; theme=dark hop="; string(got) != want {
		t.Fatalf("forwarded headers: %q, want %q", got, want)
	}

	conn, err := net.Dial("tcp", strings.TrimPrefix(h.server.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprint(conn, "GET /ws HTTP/1.1\r\nHost: shop\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	br := bufio.NewReader(conn)
	upgrade, err := http.ReadResponse(br, nil) //nolint:bodyclose // a 101 has no body: the connection itself is the stream
	if err != nil || upgrade.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v, %v", upgrade, err)
	}
	fmt.Fprint(conn, "ping over the upgraded connection\n")
	if echoed, err := br.ReadString('\n'); err != nil || echoed != "ping over the upgraded connection\n" {
		t.Fatalf("echo: %q, %v", echoed, err)
	}
}

func TestRedisOutage(t *testing.T) {
	for _, policy := range []herdgatev1alpha1.FailurePolicy{herdgatev1alpha1.FailClosed, herdgatev1alpha1.FailOpen} {
		t.Run(string(policy), func(t *testing.T) {
			h := newHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Proxy = &herdgatev1alpha1.ProxySpec{FailurePolicy: policy}
			})
			admitted, waiting := h.visitor(), h.visitor()
			admitted.enter()
			h.admit(1, 0)
			waiting.enter()
			time.Sleep(450 * time.Millisecond)
			token, _ := admitted.status().json(t)["pass"].(string)
			if token == "" {
				t.Fatal("no pass before the outage")
			}

			h.redis.Stop()
			if err := h.room.CheckRedis(context.Background()); err == nil {
				t.Fatal("CheckRedis did not notice the stopped Redis")
			}
			for _, res := range []response{waiting.status(), h.visitor().enter()} {
				if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" || res.json(t)["error"] != "queue_unavailable" {
					t.Fatalf("enter/status during the outage: %d %s (Retry-After %q)", res.StatusCode, res.body, res.Header.Get("Retry-After"))
				}
			}
			if res := admitted.do(http.MethodPost, "/api/v1/orders", nil, admission.PassHeader, token); res.StatusCode != http.StatusOK {
				t.Fatalf("a valid pass during the outage: %d", res.StatusCode)
			}
			res := waiting.do(http.MethodPost, "/api/v1/orders", nil)
			switch policy {
			case herdgatev1alpha1.FailClosed:
				if res.StatusCode != http.StatusForbidden {
					t.Fatalf("FailClosed let a request without a pass through: %d", res.StatusCode)
				}
			case herdgatev1alpha1.FailOpen:
				if res.StatusCode != http.StatusOK || h.metric("herdgate_proxy_fail_open_total", "") != 1 {
					t.Fatalf("FailOpen: %d, fail-open count %v", res.StatusCode, h.metric("herdgate_proxy_fail_open_total", ""))
				}
			}

			// Redis comes back (empty): the proxy recovers without a restart.
			if err := h.redis.Restart(); err != nil {
				t.Fatal(err)
			}
			h.publishPlan()
			var last response
			for range 50 {
				if last = h.visitor().enter(); last.StatusCode == http.StatusOK {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if last.StatusCode != http.StatusOK {
				t.Fatalf("enter after Redis came back: %d %s", last.StatusCode, last.body)
			}
			if res := waiting.do(http.MethodPost, "/api/v1/orders", nil); res.StatusCode != http.StatusForbidden {
				t.Fatalf("after recovery a request without a pass got %d, want 403", res.StatusCode)
			}
		})
	}
}

func TestReservedEndpoints(t *testing.T) {
	h := newMemoryHarness(t, nil)
	v := h.visitor()
	for path, want := range map[string]int{"/.herdgate/healthz": 200, "/.herdgate/readyz": 200, "/.herdgate/nope": 404} {
		if res := v.do(http.MethodGet, path, nil); res.StatusCode != want || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
			t.Errorf("GET %s: %d %s, want %d JSON", path, res.StatusCode, res.Header.Get("Content-Type"), want)
		}
	}
	if res := v.do(http.MethodGet, "/.herdgate/enter", nil); res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "POST" {
		t.Fatalf("GET enter: %d, Allow %q", res.StatusCode, res.Header.Get("Allow"))
	}
	h.room.StartDrain()
	if res := v.do(http.MethodGet, "/.herdgate/readyz", nil); res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readyz while draining: %d", res.StatusCode)
	}
	// While draining every answer closes its connection, so that clients reconnect elsewhere.
	if res := v.do(http.MethodGet, "/.herdgate/status", nil); !res.Close {
		t.Fatalf("status while draining kept the connection open (Connection %q)", res.Header.Get("Connection"))
	}
	if calls := h.upstream.all(); len(calls) != 0 {
		t.Fatalf("reserved paths reached the upstream: %v", calls)
	}
}

func TestWaitingPageAcceptsOnlySameOriginReturns(t *testing.T) {
	cases := map[string]string{
		"":                            "/",
		"/checkout":                   "/checkout",
		"/checkout/cart?step=2&x=%20": "/checkout/cart?step=2&x=%20",
		"https://evil.example/":       "/",
		"//evil.example/":             "/",
		"/\\evil.example":             "/",
		"\\\\evil.example":            "/",
		"javascript:alert(1)":         "/",
		"evil.example":                "/",
		"/ok\r\nSet-Cookie: x":        "/",
		"/.herdgate/":                 "/",
		"/%2Eherdgate/enter":          "/",
		"http:/evil":                  "/",
		"/a/../../evil":               "/a/../../evil", // still a path on this origin
	}
	for in, want := range cases {
		if got := admission.SafeReturn(in); got != want {
			t.Errorf("SafeReturn(%q) = %q, want %q", in, got, want)
		}
	}
	h := newMemoryHarness(t, nil)
	res := h.visitor().do(http.MethodGet, "/.herdgate/?return="+"https%3A%2F%2Fevil.example%2F", nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(res.body), `data-return="/"`) {
		t.Fatalf("waiting page with a foreign return: %d, body has data-return=\"/\": %v", res.StatusCode, strings.Contains(string(res.body), `data-return="/"`))
	}
	res = h.visitor().do(http.MethodGet, `/.herdgate/?return=%2Fcheckout%3Fa%3D%22%3E%3Cscript%3E`, nil)
	if !strings.Contains(string(res.body), `data-return="/checkout?a=&#34;&gt;&lt;script&gt;"`) {
		t.Fatalf("the return value is not escaped in the page:\n%s", res.body)
	}
	for _, ext := range []string{"http://", "https://", "<link", "@import", "src="} {
		if strings.Contains(string(res.body), ext) {
			t.Fatalf("the waiting page refers to something outside itself (%q)", ext)
		}
	}
	csp := res.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") {
		t.Fatalf("waiting page CSP = %q", csp)
	}
	// The policy allows exactly the script and style the page was served with, or a browser runs
	// neither.
	for _, tag := range []string{"script", "style"} {
		if want := tag + "-src " + inlineHash(string(res.body), tag); !strings.Contains(csp, want) {
			t.Fatalf("the CSP %q does not allow the served %s (%s)", csp, tag, want)
		}
	}
}

func TestConfigChangesApplyLive(t *testing.T) {
	h := newMemoryHarness(t, nil)
	v := h.visitor()
	if res := v.do(http.MethodPost, "/api/v2/checkout", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("an unprotected path: %d", res.StatusCode)
	}
	wq := h.wq.DeepCopy()
	wq.Spec.ProtectedRoutes = append(wq.Spec.ProtectedRoutes, herdgatev1alpha1.ProtectedRoute{PathPrefix: ptr.To(herdgatev1alpha1.RoutePath("/api/v2"))})
	cfg, err := admission.NewConfig(wq, h.key)
	if err != nil {
		t.Fatal(err)
	}
	h.room.SetConfig(cfg)
	if res := v.do(http.MethodPost, "/api/v2/checkout", nil); res.StatusCode != http.StatusForbidden {
		t.Fatalf("a newly protected path: %d", res.StatusCode)
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// TestContractOnNetHTTP runs the contract tests again on the Room as an http.Handler: it serves
// the connections the fast front hands over, and programs that embed the gate.
func TestContractOnNetHTTP(t *testing.T) {
	harnessFront = "net/http"
	defer func() { harnessFront = "fast" }()
	for _, test := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"EnterAndStatus", TestEnterAndStatus},
		{"PollHintsFollowThePlan", TestPollHintsFollowThePlan},
		{"AdmissionHonoursNotBeforeAndIssuesThePass", TestAdmissionHonoursNotBeforeAndIssuesThePass},
		{"ProtectedRoutesNeedAPass", TestProtectedRoutesNeedAPass},
		{"NoSpellingOfAProtectedPathBypassesTheGate", TestNoSpellingOfAProtectedPathBypassesTheGate},
		{"BadPassesAreRefused", TestBadPassesAreRefused},
		{"IdentityHeader", TestIdentityHeader},
		{"OpenRoutesPassThroughUnchanged", TestOpenRoutesPassThroughUnchanged},
		{"RedisOutage", TestRedisOutage},
		{"ReservedEndpoints", TestReservedEndpoints},
		{"WaitingPageAcceptsOnlySameOriginReturns", TestWaitingPageAcceptsOnlySameOriginReturns},
		{"ConfigChangesApplyLive", TestConfigChangesApplyLive},
		{"HeaderSizeLimit", TestHeaderSizeLimit},
		{"ClientConnectionCloseIsHonoured", TestClientConnectionCloseIsHonoured},
	} {
		t.Run(test.name, test.run)
	}
}

func TestHeaderSizeLimit(t *testing.T) {
	h := newMemoryHarness(t, nil)
	v := h.visitor()
	if res := v.do(http.MethodGet, "/open", nil, "X-Big", strings.Repeat("a", 8<<10)); res.StatusCode != http.StatusOK {
		t.Fatalf("8 KiB of headers: %d %s", res.StatusCode, res.body)
	}
	res := h.raw("GET /open HTTP/1.1\r\nHost: shop\r\nX-Big: " + strings.Repeat("a", 32<<10) + "\r\n\r\n")
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("32 KiB of headers: %d %s", res.StatusCode, res.Body)
	}
	if calls := h.upstream.all(); len(calls) != 1 {
		t.Fatalf("%d requests reached the upstream, want only the small one", len(calls))
	}
}

func TestClientConnectionCloseIsHonoured(t *testing.T) {
	h := newMemoryHarness(t, nil)
	for _, req := range []string{
		"GET /open HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n",
		"GET /open HTTP/1.0\r\nHost: shop\r\n\r\n",
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(h.server.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprint(conn, req)
		br := bufio.NewReader(conn)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%q: %d", req, res.StatusCode)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("%q: the proxy kept the connection open (%v)", req, err)
		}
		conn.Close()
	}
}

func TestFrontServeEndsWithItsListener(t *testing.T) {
	h := newMemoryHarness(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fast := front.NewFast(h.room, front.FastOptions{})
	done := make(chan error, 1)
	go func() { done <- fast.Serve(ln) }()
	res, err := http.Get("http://" + ln.Addr().String() + "/.herdgate/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	ln.Close()
	select {
	case err := <-done:
		// fasthttp takes a closed listener for the end of serving, as Shutdown does.
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Fatalf("Serve after its listener closed: %v", err)
		}
	case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("Serve did not return after its listener closed")
	}
}

// TestAProxyWithoutAValidConfigStaysUpAndReportsIt serves a proxy whose first config was refused: it
// answers healthz, fails readyz, lets nothing through, and reports the refusal to Redis; the first
// valid config makes it serve, and a refused change keeps the config in force.
func TestAProxyWithoutAValidConfigStaysUpAndReportsIt(t *testing.T) {
	for _, front := range []string{"fast", "net/http"} {
		t.Run(front, func(t *testing.T) {
			harnessFront = front
			defer func() { harnessFront = "fast" }()
			h := newHarness(t, nil)
			room, err := admission.NewUnconfiguredRoom("shop", "orders", h.store, admission.Options{Replica: "proxy-0"})
			if err != nil {
				t.Fatal(err)
			}
			srv := serveFront(t, room)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); room.ReportConfig(ctx) }()
			defer func() { cancel(); <-done }()
			get := func(path string) (int, string) {
				t.Helper()
				res, err := http.Post(srv.URL+path, "application/json", nil)
				if path == "/.herdgate/healthz" || path == "/.herdgate/readyz" {
					res, err = http.Get(srv.URL + path)
				}
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				body, _ := io.ReadAll(res.Body)
				return res.StatusCode, string(body)
			}
			room.RefuseConfig(3, errors.New("spec.protectedRoutes[0].path: is not normalised"))
			if code, _ := get("/.herdgate/healthz"); code != http.StatusOK {
				t.Fatalf("healthz without a config: %d", code)
			}
			if code, body := get("/.herdgate/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not_configured") {
				t.Fatalf("readyz without a config: %d %s", code, body)
			}
			for _, path := range []string{"/api/v1/orders", "/.herdgate/enter", "/open"} {
				if code, body := get(path); code != http.StatusServiceUnavailable || !strings.Contains(body, `"error":"not_configured"`) {
					t.Fatalf("%s without a config: %d %s", path, code, body)
				}
			}
			if n := len(h.upstream.all()); n != 0 {
				t.Fatalf("%d requests reached the upstream without a config", n)
			}
			waitReport := func(want queue.ProxyReport) {
				t.Helper()
				deadline := time.Now().Add(5 * time.Second)
				for {
					got, err := h.q.ProxyReports(context.Background(), time.Minute)
					if err == nil && len(got) == 1 && got[0] == want {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("reports = %+v, %v; want %+v", got, err, want)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			waitReport(queue.ProxyReport{Replica: "proxy-0", RefusedGeneration: 3, Refusal: "spec.protectedRoutes[0].path: is not normalised"})

			cfg, err := admission.NewConfig(h.wq, h.key)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Generation = 4
			room.SetConfig(cfg)
			if code, _ := get("/.herdgate/readyz"); code != http.StatusOK {
				t.Fatalf("readyz with a config: %d", code)
			}
			if code, _ := get("/api/v1/orders"); code != http.StatusForbidden {
				t.Fatalf("a protected route with a config and no pass: %d", code)
			}
			waitReport(queue.ProxyReport{Replica: "proxy-0", Generation: 4})

			room.RefuseConfig(5, errors.New("spec.identity.header: Host cannot identify a visitor"))
			waitReport(queue.ProxyReport{Replica: "proxy-0", Generation: 4, RefusedGeneration: 5, Refusal: "spec.identity.header: Host cannot identify a visitor"})
			if room.Config() != cfg {
				t.Fatal("a refused change replaced the config in force")
			}
			rec := httptest.NewRecorder()
			room.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			labels := `{waitingqueue="` + room.Name() + `"}`
			for _, want := range []string{"herdgate_proxy_config_generation" + labels + " 4", "herdgate_proxy_config_refused" + labels + " 1", "herdgate_proxy_config_refusals_total" + labels + " 2"} {
				if !strings.Contains(rec.Body.String(), want+"\n") {
					t.Errorf("metrics lack %q", want)
				}
			}
		})
	}
}

// A connection that sends nothing, or not a whole request, in time is closed without an answer: a
// client keeping it idle would read an answer as unsolicited.
func TestFrontClosesSilentConnectionsWithoutAnAnswer(t *testing.T) {
	h := newMemoryHarness(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fast := front.NewFast(h.room, front.FastOptions{HeaderTimeout: 300 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- fast.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := errors.Join(fast.Shutdown(ctx), <-done); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("front: %v", err)
		}
	})
	for name, sent := range map[string]string{"nothing": "", "half a request": "GET /open HTTP/1.1\r\nHost: sh"} {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(conn, sent); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := io.ReadAll(conn)
		_ = conn.Close()
		if len(got) != 0 || err != nil {
			t.Errorf("a connection that sent %s: read %q, %v; want it closed with nothing", name, got, err)
		}
	}
	// A whole request is still answered.
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /open HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("a whole request: %v, %v", res, err)
	}
	_ = res.Body.Close()
}

// inlineHash is the CSP hash of the first inline tag (script or style) of page, computed apart from
// the proxy's own policy.
func inlineHash(page, tag string) string { return inlineHashNth(page, tag, 0) }

// inlineHashNth is the CSP hash of the nth inline tag of page.
func inlineHashNth(page, tag string, n int) string {
	m := regexp.MustCompile(`(?s)<`+tag+`>(.*?)</`+tag+`>`).FindAllStringSubmatch(page, -1)
	sum := sha256.Sum256([]byte(m[n][1]))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}
