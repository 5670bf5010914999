package admission_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission"

	"k8s.io/utils/ptr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// Headers and cookies a client may send that are herdgate's, in the spellings a hostile one tries;
// none may reach the workload.
var (
	ownHeaderNames = []string{
		admission.PassHeader, "X-Herdgate-Proof", "X-Herdgate-Invitation", "X-Herdgate-Challenge-Response", "Herdgate-Place",
		admission.ReleaseHeader, "X-Herdgate-Pass-Result", "X-HERDGATE-PASS", "x-herdgate-invitation", "HERDGATE-PLACE",
		"herdgate-anything-later", "X-Herdgate-", "Herdgate-",
	}
	ownCookieNames = []string{
		admission.PassCookie, admission.VisitorCookie, "herdgate_place", "HERDGATE_PLACE", "Herdgate_Pass", "herdgate_anything_later", "herdgate_",
	}
	// Look-alikes that are the site's own and must go through untouched.
	siteHeaderNames = []string{"X-Herdgateway", "Herdgatekeeper", "X-App-Herdgate-Pass", "X-Herdgate"}
	siteCookies     = []string{"theme=dark", "herdgateway=1", "session=herdgate_pass", "xherdgate_pass=2"}
)

// TestNothingOfHerdgatesReachesTheUpstream sends requests carrying herdgate's headers and cookies in
// every spelling, spread over several Cookie lines, to open, protected, bypassed and upgraded routes,
// and reads what the workload got off the wire.
func TestNothingOfHerdgatesReachesTheUpstream(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		up := startRawUpstream(t)
		h := newMemoryHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Upstream.URL = ptr.To(up.URL())
			wq.Spec.Identity = &herdgatev1alpha1.IdentitySpec{Header: "X-User-Id"}
			wq.Spec.Bypass = []herdgatev1alpha1.BypassRule{{Name: "health", Path: ptr.To(herdgatev1alpha1.RoutePath("/health"))}}
		})
		now := time.Now()
		token := h.room.Config().Signer.Issue("alice", now.Add(-time.Second), now.Add(time.Minute))
		rng := rand.New(rand.NewPCG(uint64(now.UnixNano()), 26))
		targets := []string{
			"GET /open HTTP/1.1", "POST /api/v1/orders HTTP/1.1", "GET /health HTTP/1.1", "GET /open/socket HTTP/1.1",
		}
		sent := 0
		for i := range 48 {
			target := targets[i%len(targets)]
			var req strings.Builder
			req.WriteString(target + "\r\nHost: shop.example\r\nX-User-Id: alice\r\n")
			if strings.Contains(target, "orders") {
				req.WriteString(admission.PassHeader + ": " + token + "\r\n")
			}
			if strings.Contains(target, "socket") {
				req.WriteString("Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")
			} else {
				req.WriteString("Content-Length: 0\r\n")
			}
			for _, name := range pick(rng, ownHeaderNames, 4) {
				fmt.Fprintf(&req, "%s: v%d\r\n", name, rng.IntN(100))
			}
			for _, name := range pick(rng, siteHeaderNames, 2) {
				fmt.Fprintf(&req, "%s: site\r\n", name)
			}
			var pairs []string
			for _, name := range pick(rng, ownCookieNames, 4) {
				switch rng.IntN(3) {
				case 0:
					pairs = append(pairs, name+"=x")
				case 1:
					pairs = append(pairs, " "+name+" =y") // blanks around the name
				default:
					pairs = append(pairs, name) // a bare value, which some servers take for a name
				}
			}
			pairs = append(pairs, pick(rng, siteCookies, 3)...)
			rng.Shuffle(len(pairs), func(a, b int) { pairs[a], pairs[b] = pairs[b], pairs[a] })
			for len(pairs) > 0 { // over one to three Cookie lines
				n := min(len(pairs), 1+rng.IntN(3))
				fmt.Fprintf(&req, "Cookie: %s\r\n", strings.Join(pairs[:n], ";"+strings.Repeat(" ", rng.IntN(2))))
				pairs = pairs[n:]
			}
			req.WriteString("\r\n")
			res, body, conn, _ := h.send(req.String())
			_ = conn.Close()
			want := http.StatusOK
			if strings.Contains(target, "socket") {
				want = http.StatusSwitchingProtocols
			}
			if res.StatusCode != want {
				t.Fatalf("%q: %d %s, want %d", req.String(), res.StatusCode, body, want)
			}
			sent++
		}
		deadline := time.Now().Add(5 * time.Second)
		for len(up.all()) < sent && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		calls := up.all()
		if len(calls) != sent {
			t.Fatalf("the upstream got %d of %d requests", len(calls), sent)
		}
		siteSeen := 0
		for _, c := range calls {
			for _, hv := range c.Headers {
				if admission.IsOwnHeader([]byte(hv[0])) {
					t.Errorf("%s: the upstream got herdgate's header %s: %s", c.Line, hv[0], hv[1])
				}
				if strings.EqualFold(hv[0], "Cookie") {
					for pair := range strings.SplitSeq(hv[1], ";") {
						name := cookieName(pair)
						if admission.IsOwnCookie([]byte(name)) {
							t.Errorf("%s: the upstream got herdgate's cookie %q in %q", c.Line, pair, hv[1])
						}
						for _, site := range siteCookies {
							if strings.TrimSpace(pair) == site {
								siteSeen++
							}
						}
					}
				}
			}
		}
		if siteSeen == 0 {
			t.Fatal("the site's own cookies never reached the upstream")
		}
		for _, c := range calls {
			for _, name := range siteHeaderNames {
				for _, hv := range c.Headers {
					if strings.EqualFold(hv[0], name) && hv[1] != "site" {
						t.Errorf("%s: the site's header %s arrived as %q", c.Line, name, hv[1])
					}
				}
			}
		}
	})
}

// pick is up to n distinct entries of list, at random.
func pick(rng *rand.Rand, list []string, n int) []string {
	out := append([]string(nil), list...)
	rng.Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	return out[:rng.IntN(n+1)]
}

func TestOwnHeadersAndCookiesAreOneRule(t *testing.T) {
	for _, name := range ownHeaderNames {
		if !admission.IsOwnHeader([]byte(name)) {
			t.Errorf("%s is not taken for herdgate's", name)
		}
	}
	for _, name := range append(siteHeaderNames, "X-Forwarded-For", "Cookie", "") {
		if admission.IsOwnHeader([]byte(name)) {
			t.Errorf("%s is taken for herdgate's", name)
		}
	}
	for _, name := range ownCookieNames {
		if !admission.IsOwnCookie([]byte(name)) {
			t.Errorf("cookie %s is not taken for herdgate's", name)
		}
	}
	for _, pair := range siteCookies {
		if admission.IsOwnCookie([]byte(cookieName(pair))) {
			t.Errorf("cookie %s is taken for herdgate's", pair)
		}
	}
}

// cookieName is the name of one cookie-pair as a server reads it: before '=', blanks trimmed.
func cookieName(pair string) string {
	name, _, _ := strings.Cut(pair, "=")
	return strings.Trim(name, " \t")
}
