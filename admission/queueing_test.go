package admission_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// queueingStatus sets spec.page.queueingStatusCode; 0 leaves it unset.
func queueingStatus(code int32) func(*herdgatev1alpha1.WaitingQueue) {
	return func(wq *herdgatev1alpha1.WaitingQueue) {
		if code == 0 {
			return
		}
		if wq.Spec.Page == nil {
			wq.Spec.Page = &herdgatev1alpha1.PageSpec{}
		}
		wq.Spec.Page.QueueingStatusCode = ptr.To(code)
	}
}

// fillAhead puts n visitors in the queue in front of whoever comes next, past the budget a tick
// admits at once.
func (h *harness) fillAhead(n int) {
	h.t.Helper()
	for i := range n {
		if _, err := h.q.Enter(context.Background(), fmt.Sprintf("ahead-%03d", i), time.Hour); err != nil {
			h.t.Fatal(err)
		}
	}
}

// TestAWaitingVisitorGetsTheQueueingStatus: with spec.page.queueingStatusCode, every answer of a
// visitor who is not through yet (entering, polling, an admission valid in a moment) comes with that
// status and Retry-After, the next poll in whole seconds, and the same body; the answer that hands
// out the pass, and errors, keep theirs. Unset, it is 200 without Retry-After, as before.
func TestAWaitingVisitorGetsTheQueueingStatus(t *testing.T) {
	for _, code := range []int32{0, 200, 202, 429} {
		t.Run(strconv.Itoa(int(code)), func(t *testing.T) {
			onBothFronts(t, func(t *testing.T) {
				want := int(code)
				if want == 0 {
					want = http.StatusOK
				}
				h := newHarness(t, queueingStatus(code))
				h.fillAhead(30)
				v := h.visitor()
				check := func(what string, r response) map[string]any {
					t.Helper()
					body := r.json(t)
					if r.StatusCode != want || body["error"] != nil {
						t.Fatalf("%s: %d %v; want %d with the visitor's place", what, r.StatusCode, body, want)
					}
					retry := r.Header.Get("Retry-After")
					if code == 0 {
						if retry != "" {
							t.Fatalf("%s: Retry-After %q without a queueing status", what, retry)
						}
						return body
					}
					next := int64(body["nextPollMs"].(float64))
					if s, err := strconv.ParseInt(retry, 10, 64); err != nil || s != max(1, (next+999)/1000) {
						t.Fatalf("%s: Retry-After %q with nextPollMs %d; want the next poll in whole seconds", what, retry, next)
					}
					return body
				}
				body := check("entering behind 30", v.enter())
				if body["position"].(float64) < 1 {
					t.Fatalf("entering behind 30: %v; want a place", body)
				}
				time.Sleep(time.Duration(body["nextPollMs"].(float64)) * time.Millisecond)
				check("polling", v.status())
				// Too early stays 429 too_early, whatever the room's queueing status.
				if r := v.status(); r.StatusCode != http.StatusTooManyRequests || r.json(t)["error"] != "too_early" {
					t.Fatalf("polling at once: %d %s; want 429 too_early", r.StatusCode, r.body)
				}
				time.Sleep(5 * time.Second)
				h.admit(100, 800*time.Millisecond)
				soon := check("admitted, valid in a moment", v.status())
				if soon["admitted"] != false {
					t.Fatalf("admitted, valid in a moment: %v", soon)
				}
				time.Sleep(time.Duration(soon["nextPollMs"].(float64)) * time.Millisecond)
				r := v.status()
				if r.StatusCode != http.StatusOK || r.json(t)["admitted"] != true || r.Header.Get("Retry-After") != "" {
					t.Fatalf("admitted: %d %s (Retry-After %q); want 200 with the pass", r.StatusCode, r.body, r.Header.Get("Retry-After"))
				}
			})
		})
	}
}

var metaRefresh = regexp.MustCompile(`<meta http-equiv="refresh" content="(\d+); url=([^"]+)">`)

// TestTheWaitingPageWithoutScript: the page with the script sends a browser without JavaScript to
// /.herdgate/wait, where each load enters or polls and shows where the visitor stands, with a meta
// refresh at its next poll; a load sooner than allowed is 429 and keeps the place; once admitted, the
// load sets the pass and goes back to the page asked for, which the visitor then reaches.
func TestTheWaitingPageWithoutScript(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		h := newHarness(t, queueingStatus(202))
		h.fillAhead(30)
		v := h.visitor()
		if r := v.do(http.MethodGet, "/checkout?item=7", nil, "Accept", "text/html"); r.StatusCode != http.StatusSeeOther {
			t.Fatalf("a protected page: %d; want the waiting page", r.StatusCode)
		}
		js := v.do(http.MethodGet, "/.herdgate/?return=%2Fcheckout%3Fitem%3D7", nil)
		if want := `<noscript><meta http-equiv="refresh" content="0; url=/.herdgate/wait?return=%2Fcheckout%3Fitem%3D7"></noscript>`; !strings.Contains(string(js.body), want) {
			t.Fatalf("the page with the script does not send browsers without it on:\n%s", js.body)
		}
		target := "/.herdgate/wait?return=%2Fcheckout%3Fitem%3D7"
		load := func(what string, wantStatus int) (response, time.Duration, string) {
			t.Helper()
			r := v.do(http.MethodGet, target, nil, "Accept", "text/html")
			page := string(r.body)
			m := metaRefresh.FindStringSubmatch(page)
			if r.StatusCode != wantStatus || m == nil || strings.Contains(page, "<script") {
				t.Fatalf("%s: %d; want %d, a refresh and no script:\n%s", what, r.StatusCode, wantStatus, page)
			}
			if m[2] != "/.herdgate/wait?poll=1&amp;return=%2Fcheckout%3Fitem%3D7" {
				t.Fatalf("%s: refreshes to %s", what, m[2])
			}
			if !strings.Contains(r.Header.Get("Content-Security-Policy"), inlineHash(page, "style")) {
				t.Fatalf("%s: the policy does not allow the page's style", what)
			}
			s, _ := strconv.Atoi(m[1])
			return r, time.Duration(s) * time.Second, page
		}
		r, refresh, page := load("the first load", http.StatusAccepted)
		if v.visitorCookie() == nil || !regexp.MustCompile(`id="position">#\d+<`).MatchString(page) || r.Header.Get("Retry-After") == "" {
			t.Fatalf("the first load enters the visitor and shows its place: cookie %v, Retry-After %q\n%s", v.visitorCookie(), r.Header.Get("Retry-After"), page)
		}
		if refresh < time.Second {
			t.Fatalf("refresh in %s; a meta refresh counts whole seconds", refresh)
		}
		position := regexp.MustCompile(`id="position">(#\d+)<`).FindStringSubmatch(page)[1]
		// From here on the page's refreshes poll, and keep to the visitor's interval.
		target = "/.herdgate/wait?poll=1&return=%2Fcheckout%3Fitem%3D7"
		time.Sleep(refresh)
		load("a refresh when allowed", http.StatusAccepted)
		_, early, page := load("a reload at once", http.StatusTooManyRequests)
		if !strings.Contains(page, `id="position">`+position+`<`) || early < time.Second {
			t.Fatalf("a reload at once keeps the place %s and comes back when allowed (in %s):\n%s", position, early, page)
		}
		time.Sleep(early)
		_, refresh, _ = load("a refresh when allowed again", http.StatusAccepted)
		h.admit(100, 0)
		time.Sleep(refresh)
		r = v.do(http.MethodGet, target, nil)
		if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/checkout?item=7" || r.setCookie(h.cookies().Pass) == "" {
			t.Fatalf("admitted: %d to %q, pass cookie %q; want 303 back with the pass", r.StatusCode, r.Header.Get("Location"), r.setCookie(h.cookies().Pass))
		}
		if r := v.do(http.MethodGet, "/checkout?item=7", nil, "Accept", "text/html"); r.StatusCode != http.StatusOK {
			t.Fatalf("the protected page with the pass: %d", r.StatusCode)
		}
	})
}

// TestThePageWithoutScriptSaysWhatItCannotDo: a room that checks browsers with a proof of work
// cannot be entered without JavaScript: the page says so, and does not refresh into a loop.
func TestThePageWithoutScriptSaysWhatItCannotDo(t *testing.T) {
	h := newMemoryHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{ProofOfWork: &herdgatev1alpha1.ProofOfWorkSpec{Difficulty: 10}}}
	})
	r := h.visitor().do(http.MethodGet, "/.herdgate/wait?return=/checkout", nil)
	page := string(r.body)
	if r.StatusCode < 400 || metaRefresh.MatchString(page) || !strings.Contains(page, "Turn JavaScript on") {
		t.Fatalf("a proof of work without JavaScript: %d\n%s", r.StatusCode, page)
	}
}

// TestAWaitingRoomWithoutScriptThroughGateways: behind each gateway, configured as the guide says, a
// browser without JavaScript is sent from the protected page to the waiting page and on to the page
// without it, which the gateway routes to herdgate; it waits there with the room's queueing status
// (429) and lands on the protected page once admitted. An API client entering through the gateway
// gets the same status with its place and Retry-After.
func TestAWaitingRoomWithoutScriptThroughGateways(t *testing.T) {
	for name, gw := range gateways {
		t.Run(name, func(t *testing.T) {
			h, gateway := throughGateway(t, gw, queueingStatus(429))
			h.fillAhead(30)
			jar, _ := cookiejar.New(nil)
			browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			// get loads a page to its end; the answer keeps only what the test reads.
			type answer struct {
				StatusCode int
				Header     http.Header
			}
			get := func(c *http.Client, method, path string) (answer, string) {
				t.Helper()
				req, _ := http.NewRequest(method, gateway+path, nil)
				req.Header.Set("Accept", "text/html")
				res, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				body, _ := io.ReadAll(res.Body)
				return answer{res.StatusCode, res.Header}, string(body)
			}
			res, _ := get(browser, http.MethodGet, "/checkout/cart")
			page := strings.TrimPrefix(res.Header.Get("Location"), gateway)
			if res.StatusCode != http.StatusSeeOther || page != "/.herdgate/?return=%2Fcheckout%2Fcart" {
				t.Fatalf("the protected page: %d to %q", res.StatusCode, page)
			}
			_, body := get(browser, http.MethodGet, page)
			m := regexp.MustCompile(`<noscript><meta http-equiv="refresh" content="0; url=([^"]+)"></noscript>`).FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("the waiting page through the gateway has no way on without JavaScript:\n%.600s", body)
			}
			next := strings.ReplaceAll(m[1], "&amp;", "&")
			var refresh time.Duration
			for i := 0; ; i++ {
				res, body = get(browser, http.MethodGet, next)
				if res.StatusCode == http.StatusSeeOther {
					break
				}
				r := metaRefresh.FindStringSubmatch(body)
				if res.StatusCode != http.StatusTooManyRequests || r == nil || res.Header.Get("Retry-After") == "" || !strings.Contains(body, `id="position">#`) {
					t.Fatalf("load %d of the page without JavaScript: %d (Retry-After %q)\n%s", i, res.StatusCode, res.Header.Get("Retry-After"), body)
				}
				next = strings.ReplaceAll(r[2], "&amp;", "&")
				s, _ := strconv.Atoi(r[1])
				refresh = time.Duration(s) * time.Second
				if i == 1 {
					h.admit(100, 0)
				}
				if i > 10 {
					t.Fatal("never admitted")
				}
				time.Sleep(refresh)
			}
			if loc := strings.TrimPrefix(res.Header.Get("Location"), gateway); loc != "/checkout/cart" {
				t.Fatalf("admitted: back to %q", loc)
			}
			if res, body = get(browser, http.MethodGet, "/checkout/cart"); res.StatusCode != http.StatusOK || !strings.Contains(body, "upstream GET /checkout/cart") {
				t.Fatalf("the protected page once admitted: %d %q", res.StatusCode, body)
			}

			h.fillAhead(30)
			api, _ := cookiejar.New(nil)
			req, _ := http.NewRequest(http.MethodPost, gateway+"/.herdgate/enter", nil)
			r, err := (&http.Client{Jar: api}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" || !strings.Contains(string(raw), `"position":`) || strings.Contains(string(raw), `"error"`) {
				t.Fatalf("an API client entering through the gateway: %d (Retry-After %q) %s", r.StatusCode, r.Header.Get("Retry-After"), raw)
			}
		})
	}
}
