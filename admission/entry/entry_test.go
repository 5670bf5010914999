package entry

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/route"
	"github.com/herdgate/herdgate/internal/settings"
)

// request is a Request from headers and a peer address.
type request struct {
	header http.Header
	peer   netip.Addr
}

func newRequest(peer string, kv ...string) request {
	r := request{header: http.Header{}, peer: netip.MustParseAddr(peer)}
	for i := 0; i+1 < len(kv); i += 2 {
		r.header.Add(kv[i], kv[i+1])
	}
	return r
}

func (r request) Header(name string) string         { return r.header.Get(name) }
func (r request) HeaderCount(name string) int       { return len(r.header.Values(name)) }
func (r request) HeaderValues(name string) []string { return r.header.Values(name) }
func (r request) RemoteAddr() netip.Addr            { return r.peer }
func (r request) Cookie(name string) string {
	if c, err := (&http.Request{Header: r.header}).Cookie(name); err == nil {
		return c.Value
	}
	return ""
}

var now = time.Unix(1_800_000_000, 0)

func input(r request) Input { return Input{Request: r, Visitor: "visitor-1", Now: now} }

// wantRefusal checks a refusal's status and code; code "" wants none.
func wantRefusal(t *testing.T, what string, got *Refusal, status int, code string) {
	t.Helper()
	switch {
	case code == "" && got != nil:
		t.Fatalf("%s: refused %+v; want it through", what, got)
	case code != "" && (got == nil || got.Status != status || got.Code != code):
		t.Fatalf("%s: %+v; want %d %s", what, got, status, code)
	}
}

// counting is a check that counts its calls and refuses when told to (with a verdict against the
// request when fail is set).
type counting struct {
	calls        atomic.Int32
	refuse, fail bool
	token        string
}

func (c *counting) Check(_ Input, out *Outcome) *Refusal {
	c.calls.Add(1)
	if c.refuse {
		return &Refusal{Status: http.StatusForbidden, Code: "no", Failed: c.fail}
	}
	out.Limit.SingleUse = append(out.Limit.SingleUse, queue.SingleUse{ID: c.token})
	return nil
}

func TestAChainRunsInOrderAndStopsAtTheFirstRefusal(t *testing.T) {
	a, b, c := &counting{token: "a"}, &counting{token: "b", refuse: true}, &counting{token: "c"}
	var out Outcome
	if r := (Chain{a, b, c}).Check(input(newRequest("203.0.113.7")), &out); r == nil || r.Code != "no" {
		t.Fatalf("refusal %+v; want b's", r)
	}
	if a.calls.Load() != 1 || b.calls.Load() != 1 || c.calls.Load() != 0 {
		t.Fatalf("calls a %d b %d c %d; want 1 1 0", a.calls.Load(), b.calls.Load(), c.calls.Load())
	}
	out = Outcome{}
	b.refuse = false
	if r := (Chain{a, b, c}).Check(input(newRequest("203.0.113.7")), &out); r != nil || len(out.Limit.SingleUse) != 3 || out.Limit.SingleUse[2].ID != "c" {
		t.Fatalf("refusal %+v, grants %v; want every check's grant in order", r, out.Limit.SingleUse)
	}
	if r := (Chain{}).Check(input(newRequest("203.0.113.7")), &out); r != nil {
		t.Fatalf("an empty chain refused: %+v", r)
	}
}

// TestAFailedCheckShadowsTheEntryAndTheChainGoesOn: with the shadow queue taking failed challenges,
// a verdict against the request marks the entry shadowed and the later checks still grant what they
// would have (the lane); any other refusal, before or after, still refuses.
func TestAFailedCheckShadowsTheEntryAndTheChainGoesOn(t *testing.T) {
	a, b, c := &counting{token: "a"}, &counting{token: "b", refuse: true, fail: true}, &counting{token: "c"}
	var out Outcome
	if r := (Chain{a, b, c}).CheckShadowingFailed(input(newRequest("203.0.113.7")), &out); r != nil || !out.Limit.Shadow ||
		len(out.Limit.SingleUse) != 2 || out.Limit.SingleUse[1].ID != "c" {
		t.Fatalf("refusal %+v, outcome %+v; want a shadowed entry with a's and c's grants", r, out.Limit)
	}
	if c.calls.Load() != 1 {
		t.Fatalf("the check after the failed one ran %d times; want once", c.calls.Load())
	}
	out = Outcome{}
	c.refuse = true
	if r := (Chain{a, b, c}).CheckShadowingFailed(input(newRequest("203.0.113.7")), &out); r == nil || r.Code != "no" || r.Failed {
		t.Fatalf("refusal %+v; want c's, which a shadowed entry is refused by too", r)
	}
	out = Outcome{}
	b.fail = false
	c.refuse = false
	if r := (Chain{a, b, c}).CheckShadowingFailed(input(newRequest("203.0.113.7")), &out); r == nil || out.Limit.Shadow || c.calls.Load() != 2 {
		t.Fatalf("refusal %+v, shadow %v, c ran %d times; want b's refusal, no shadow, c not run", r, out.Limit.Shadow, c.calls.Load())
	}
	out = Outcome{}
	b.refuse = false
	if r := (Chain{a, b, c}).CheckShadowingFailed(input(newRequest("203.0.113.7")), &out); r != nil || out.Limit.Shadow || len(out.Limit.SingleUse) != 3 {
		t.Fatalf("refusal %+v, outcome %+v; want every grant and no shadow", r, out.Limit)
	}
}

const inviteKey = "the site's invitation key, 32 bytes or more"

func invite(t *testing.T, key string, claims jwt.MapClaims) string {
	t.Helper()
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return token
}

func TestInvitation(t *testing.T) {
	inv := &Invitation{Key: []byte(inviteKey), Audience: "shop/orders"}
	hour := now.Add(time.Hour).Unix()
	for _, tc := range []struct {
		name   string
		token  string
		status int
		code   string
	}{
		{"none", "", http.StatusUnauthorized, "invitation_required"},
		{"too long", strings.Repeat("a", maxInvitation+1), http.StatusForbidden, "invitation_invalid"},
		{"valid, for a subject", invite(t, inviteKey, jwt.MapClaims{"aud": "shop/orders", "sub": "user-1", "exp": hour}), 0, ""},
		{"valid, for this visitor", invite(t, inviteKey, jwt.MapClaims{"aud": "shop/orders", "vis": "visitor-1", "exp": hour}), 0, ""},
		{"for another visitor", invite(t, inviteKey, jwt.MapClaims{"aud": "shop/orders", "vis": "visitor-2", "exp": hour}), http.StatusForbidden, "invitation_other_visitor"},
		{"expired", invite(t, inviteKey, jwt.MapClaims{"aud": "shop/orders", "sub": "u", "exp": now.Add(-time.Minute).Unix()}), http.StatusForbidden, "invitation_expired"},
		{"not valid yet", invite(t, inviteKey, jwt.MapClaims{"aud": "shop/orders", "sub": "u", "exp": hour, "nbf": now.Add(time.Minute).Unix()}), http.StatusForbidden, "invitation_not_yet_valid"},
		{"without an expiry", invite(t, inviteKey, jwt.MapClaims{"aud": "shop/orders", "sub": "u"}), http.StatusForbidden, "invitation_invalid"},
		{"for another queue", invite(t, inviteKey, jwt.MapClaims{"aud": "shop/other", "sub": "u", "exp": hour}), http.StatusForbidden, "invitation_wrong_queue"},
		{"signed with another key", invite(t, strings.Repeat("k", 40), jwt.MapClaims{"aud": "shop/orders", "sub": "u", "exp": hour}), http.StatusForbidden, "invitation_invalid"},
		{"naming nobody", invite(t, inviteKey, jwt.MapClaims{"aud": "shop/orders", "exp": hour}), http.StatusForbidden, "invitation_invalid"},
	} {
		var out Outcome
		got := inv.Check(input(newRequest("203.0.113.7", InvitationHeader, tc.token)), &out)
		wantRefusal(t, tc.name, got, tc.status, tc.code)
		if got != nil && got.Header != InvitationHeader {
			t.Errorf("%s: the refusal names header %q", tc.name, got.Header)
		}
		if len(out.Limit.SingleUse) != 0 {
			t.Errorf("%s: an invitation that is not single use granted tokens %v", tc.name, out.Limit.SingleUse)
		}
	}
	inv.SingleUse = true
	token := invite(t, inviteKey, jwt.MapClaims{"aud": "shop/orders", "sub": "user-1", "exp": hour})
	var first, second Outcome
	_ = inv.Check(input(newRequest("203.0.113.7", InvitationHeader, token)), &first)
	_ = inv.Check(input(newRequest("198.51.100.1", InvitationHeader, token)), &second)
	if len(first.Limit.SingleUse) != 1 || first.Limit.SingleUse[0] != second.Limit.SingleUse[0] || first.Limit.SingleUse[0].Until.Unix() != hour {
		t.Fatalf("a single-use invitation granted %v and %v; want one token, the same for the same invitation, until its expiry",
			first.Limit.SingleUse, second.Limit.SingleUse)
	}
}

func TestProofOfWork(t *testing.T) {
	w := NewProofOfWork(settings.ProofOfWork{Difficulty: 8}, []byte("0123456789abcdef0123456789abcdef"), "shop/orders")
	c := w.Issue(now)
	if c.Algorithm != ProofOfWorkAlgorithm || c.Difficulty != 8 || !c.ExpiresAt.Equal(now.Add(ChallengeLifetime)) {
		t.Fatalf("challenge %+v", c)
	}
	check := func(proof string, at time.Time) (*Refusal, Outcome) {
		var out Outcome
		return w.Check(Input{Request: newRequest("203.0.113.7", ProofHeader, proof), Now: at}, &out), out
	}
	solved := c.Challenge + ":" + Solve(c.Challenge, 8)
	refused, out := check(solved, now)
	wantRefusal(t, "a solved challenge", refused, 0, "")
	if len(out.Limit.SingleUse) != 1 || !out.Limit.SingleUse[0].Until.Equal(c.ExpiresAt) {
		t.Fatalf("a solution granted %v; want one token until the challenge expires", out.Limit.SingleUse)
	}
	unsolved := ""
	for n := 0; unsolved == ""; n++ {
		if nonce := strings.Repeat("x", 1) + string(rune('a'+n%26)) + string(rune('a'+n/26%26)); LeadingZeroBits(c.Challenge, nonce) < 8 {
			unsolved = nonce
		}
	}
	refused, _ = check("", now)
	wantRefusal(t, "no proof", refused, http.StatusUnauthorized, "challenge_required")
	if refused.Link != ChallengePath || refused.Header != ProofHeader {
		t.Fatalf("the refusal points at %q, header %q", refused.Link, refused.Header)
	}
	for _, tc := range []struct {
		name, proof string
		at          time.Time
		status      int
		code        string
	}{
		{"a nonce that does not solve it", c.Challenge + ":" + unsolved, now, http.StatusForbidden, "challenge_failed"},
		{"no separator", c.Challenge, now, http.StatusBadRequest, "challenge_invalid"},
		{"a nonce of symbols", c.Challenge + ":%%", now, http.StatusBadRequest, "challenge_invalid"},
		{"a tampered challenge", strings.Replace(c.Challenge, "v1.", "v1.A", 1) + ":0", now, http.StatusForbidden, "challenge_invalid"},
		{"another queue's challenge", NewProofOfWork(settings.ProofOfWork{Difficulty: 8}, []byte("0123456789abcdef0123456789abcdef"), "shop/other").Issue(now).Challenge + ":0", now, http.StatusForbidden, "challenge_invalid"},
		{"too late", solved, now.Add(ChallengeLifetime), http.StatusForbidden, "challenge_expired"},
	} {
		refused, _ := check(tc.proof, tc.at)
		wantRefusal(t, tc.name, refused, tc.status, tc.code)
	}
	harder := NewProofOfWork(settings.ProofOfWork{Difficulty: 9}, []byte("0123456789abcdef0123456789abcdef"), "shop/orders")
	var out2 Outcome
	wantRefusal(t, "a challenge easier than the spec now asks", harder.Check(Input{Request: newRequest("203.0.113.7", ProofHeader, solved), Now: now}, &out2),
		http.StatusForbidden, "challenge_expired")
}

// TestTheProofOfWorkRisesWithTheEntries: one bit for each doubling of the entries a second above
// raiseAbove, up to maxDifficulty, counted by the entries' checks.
func TestTheProofOfWorkRisesWithTheEntries(t *testing.T) {
	w := NewProofOfWork(settings.ProofOfWork{Difficulty: 4, RaiseAbove: 10, MaxDifficulty: 6}, []byte("0123456789abcdef0123456789abcdef"), "shop/orders")
	for range 25 {
		var out Outcome
		_ = w.Check(Input{Request: newRequest("203.0.113.7"), Now: now}, &out)
	}
	if d := w.Issue(now).Difficulty; d != 6 {
		t.Fatalf("25 entries a second above 10: difficulty %d, want 4+2", d)
	}
	if d := w.Issue(now.Add(2 * time.Second)).Difficulty; d != 4 {
		t.Fatalf("after a quiet second: difficulty %d, want 4", d)
	}
	for range 1000 {
		var out Outcome
		_ = w.Check(Input{Request: newRequest("203.0.113.7"), Now: now.Add(3 * time.Second)}, &out)
	}
	if d := w.Issue(now.Add(3 * time.Second)).Difficulty; d != 6 {
		t.Fatalf("1,000 entries a second: difficulty %d, want the most, 6", d)
	}
}

func TestExternalChallenge(t *testing.T) {
	var remoteIPs []string
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		remoteIPs = append(remoteIPs, r.Form.Get("remoteip"))
		switch {
		case r.Form.Get("secret") != "s3cret":
			http.Error(w, "bad secret", http.StatusForbidden)
		case r.Form.Get("response") == "good":
			_, _ = w.Write([]byte(`{"success":true}`))
		default:
			_, _ = w.Write([]byte(`{"success":false,"error-codes":["invalid-input-response"]}`))
		}
	}))
	defer provider.Close()
	e := &ExternalChallenge{VerifyURL: provider.URL, Secret: "s3cret", Timeout: 5 * time.Second,
		Clients: Clients{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}
	check := func(e *ExternalChallenge, response string) (*Refusal, Outcome) {
		var out Outcome
		return e.Check(input(newRequest("10.1.2.3", ChallengeResponseHeader, response, "X-Forwarded-For", "198.51.100.9")), &out), out
	}
	refused, out := check(e, "good")
	wantRefusal(t, "a response the provider verifies", refused, 0, "")
	if len(out.Limit.SingleUse) != 1 || len(remoteIPs) != 1 || remoteIPs[0] != "198.51.100.9" {
		t.Fatalf("granted %v; the provider was told %v; want one token and the forwarded client", out.Limit.SingleUse, remoteIPs)
	}
	refused, _ = check(e, "bad")
	wantRefusal(t, "a response the provider refuses", refused, http.StatusForbidden, "challenge_failed")
	if !strings.Contains(refused.Message, "invalid-input-response") {
		t.Fatalf("the refusal does not say the provider's reason: %q", refused.Message)
	}
	refused, _ = check(e, "")
	wantRefusal(t, "no response", refused, http.StatusUnauthorized, "challenge_required")
	refused, _ = check(e, strings.Repeat("r", 4097))
	wantRefusal(t, "a response too long", refused, http.StatusBadRequest, "challenge_invalid")
	wrongSecret := *e
	wrongSecret.Secret = "guess"
	refused, _ = check(&wrongSecret, "good")
	wantRefusal(t, "a provider that answers an error", refused, http.StatusServiceUnavailable, "challenge_unavailable")
	provider.Close()
	refused, _ = check(e, "good")
	wantRefusal(t, "a provider that is gone", refused, http.StatusServiceUnavailable, "challenge_unavailable")
	if calls := len(remoteIPs); calls != 3 {
		t.Fatalf("the provider was asked %d times; want 3 (no call for a missing or too long response)", calls)
	}
}

func TestClientLimitNamesTheClient(t *testing.T) {
	l := &ClientLimit{EntryLimit: settings.EntryLimit{Burst: 5, PerMinute: 2, V4Bits: 24, V6Bits: 48},
		Clients: Clients{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}
	for _, tc := range []struct {
		name string
		r    request
		want string
	}{
		{"an IPv4 client, cut to /24", newRequest("203.0.113.7"), "203.0.113.0/24"},
		{"an IPv6 client, cut to /48", newRequest("2001:db8:1:2::7"), "2001:db8:1::/48"},
		{"behind a trusted proxy, the client it names", newRequest("10.1.2.3", "X-Forwarded-For", "198.51.100.9"), "198.51.100.0/24"},
		{"a direct client's own header is ignored", newRequest("203.0.113.7", "X-Forwarded-For", "198.51.100.9"), "203.0.113.0/24"},
	} {
		var out Outcome
		wantRefusal(t, tc.name, l.Check(input(tc.r), &out), 0, "")
		if out.Limit.Client != tc.want || out.Limit.Burst != 5 || out.Limit.PerMinute != 2 {
			t.Errorf("%s: limit %+v, want client %s, burst 5, 2 a minute", tc.name, out.Limit, tc.want)
		}
	}
	var out Outcome
	_ = l.Check(Input{Request: request{header: http.Header{}}, Now: now}, &out)
	if out.Limit.Client != "" {
		t.Fatalf("a request without an address was named %q", out.Limit.Client)
	}
}

func TestBypassLanes(t *testing.T) {
	health, err := route.New("/healthz", false, []string{"GET"})
	if err != nil {
		t.Fatal(err)
	}
	lanes := Chain{
		&BypassLane{Name: "monitor", Header: "X-Monitor", Value: []byte("token")},
		&BypassLane{Name: "office", CIDRs: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
			Clients: Clients{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}},
		&BypassLane{Name: "health", Path: &health},
	}
	for _, tc := range []struct {
		name, path string
		r          request
		want       string
	}{
		{"the monitor's header", "/checkout", newRequest("203.0.113.7", "X-Monitor", "token"), "monitor"},
		{"the header with another value", "/checkout", newRequest("203.0.113.7", "X-Monitor", "tokens"), ""},
		{"the header twice", "/checkout", newRequest("203.0.113.7", "X-Monitor", "token", "X-Monitor", "token"), ""},
		{"from the office", "/checkout", newRequest("192.0.2.10"), "office"},
		{"from the office, behind a trusted proxy", "/checkout", newRequest("10.1.1.1", "X-Forwarded-For", "192.0.2.10"), "office"},
		{"claiming the office directly", "/checkout", newRequest("203.0.113.7", "X-Forwarded-For", "192.0.2.10"), ""},
		{"the health path", "/healthz", newRequest("203.0.113.7"), "health"},
		{"the first lane that matches names it", "/healthz", newRequest("192.0.2.10", "X-Monitor", "token"), "monitor"},
		{"nothing", "/checkout", newRequest("203.0.113.7"), ""},
	} {
		var out Outcome
		wantRefusal(t, tc.name, lanes.Check(Input{Request: tc.r, Path: tc.path, Now: now}, &out), 0, "")
		if out.Bypass != tc.want {
			t.Errorf("%s: lane %q, want %q", tc.name, out.Bypass, tc.want)
		}
	}
}
func TestClientAddr(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	for _, tc := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"a direct visitor: its header is ignored", "203.0.113.7", []string{"198.51.100.1"}, "203.0.113.7"},
		{"behind a trusted proxy", "10.1.2.3", []string{"198.51.100.1"}, "198.51.100.1"},
		{"a visitor's own hops come before the proxy's", "10.1.2.3", []string{"1.1.1.1, 198.51.100.1"}, "198.51.100.1"},
		{"two trusted hops", "10.1.2.3", []string{"198.51.100.1, 10.9.9.9"}, "198.51.100.1"},
		{"repeated headers read in order", "10.1.2.3", []string{"1.1.1.1", "198.51.100.1, 10.9.9.9"}, "198.51.100.1"},
		{"garbage ends the walk at the trusted hop after it", "10.1.2.3", []string{"198.51.100.1, nonsense, 10.9.9.9"}, "10.9.9.9"},
		{"only trusted hops", "10.1.2.3", []string{"10.4.4.4"}, "10.4.4.4"},
		{"no header behind a trusted proxy", "10.1.2.3", nil, "10.1.2.3"},
		{"IPv6 behind a trusted proxy", "fd00::1", []string{"2001:db8::42"}, "2001:db8::42"},
		{"an IPv4-mapped peer", "::ffff:203.0.113.7", nil, "203.0.113.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClientAddr(netip.MustParseAddr(tc.peer), tc.xff, trusted); got.String() != tc.want {
				t.Fatalf("ClientAddr = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestTheProofOfWorkAlgorithm(t *testing.T) {
	// SHA-256("abc:0") starts with the bits 0110…: one leading zero.
	if got := LeadingZeroBits("abc", "0"); got != 1 {
		t.Fatalf("LeadingZeroBits(abc, 0) = %d, want 1", got)
	}
	for _, d := range []int{1, 8, 12} {
		nonce := Solve("a challenge", d)
		if LeadingZeroBits("a challenge", nonce) < d {
			t.Fatalf("Solve at %d bits found %s, which does not solve it", d, nonce)
		}
	}
}
