package admission_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/entry"

	"github.com/golang-jwt/jwt/v5"
	"k8s.io/utils/ptr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// wantError checks an answer's status and JSON error code.
func wantError(t *testing.T, what string, r response, status int, code string) {
	t.Helper()
	if r.StatusCode != status || !strings.Contains(r.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("%s: %d %s %q; want %d with a JSON body", what, r.StatusCode, r.Header.Get("Content-Type"), r.body, status)
	}
	if got := r.json(t)["error"]; got != code {
		t.Fatalf("%s: error %v (%s); want %q", what, got, r.body, code)
	}
}

const invitationKey = "the site's invitation key, 32 bytes or more"

// invitation signs claims as the site would, with key (HS256).
func invitation(t *testing.T, key string, claims jwt.MapClaims) string {
	t.Helper()
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return token
}

func TestInvitations(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		for _, singleUse := range []bool{false, true} {
			h := newHarnessWith(t, harnessOptions{secrets: map[string]map[string]string{"invites": {"key": invitationKey}}},
				func(wq *herdgatev1alpha1.WaitingQueue) {
					wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Invitation: &herdgatev1alpha1.InvitationSpec{
						KeySecretRef: herdgatev1alpha1.SecretValueRef{Name: "invites", Key: "key"}, SingleUse: singleUse}}
				})
			hour := time.Now().Add(time.Hour).Unix()
			valid := invitation(t, invitationKey, jwt.MapClaims{"aud": "shop/orders", "sub": "user-1", "exp": hour})
			enter := func(v *visitor, token string) response {
				return v.do(http.MethodPost, "/.herdgate/enter", nil, admission.InvitationHeader, token)
			}

			first := h.visitor()
			if r := enter(first, valid); r.StatusCode != http.StatusOK || r.json(t)["position"] != float64(1) {
				t.Fatalf("a valid invitation: %d %s; want a place", r.StatusCode, r.body)
			}
			if r := enter(first, valid); r.StatusCode != http.StatusOK || r.json(t)["position"] != float64(1) {
				t.Fatalf("the same visitor with its invitation again: %d %s; want its place", r.StatusCode, r.body)
			}
			second := enter(h.visitor(), valid)
			if singleUse {
				wantError(t, "a single-use invitation for a second visitor", second, http.StatusConflict, "invitation_used")
			} else if second.StatusCode != http.StatusOK || second.json(t)["position"] != float64(2) {
				t.Fatalf("a reusable invitation for a second visitor: %d %s; want the second place", second.StatusCode, second.body)
			}

			wantError(t, "no invitation", h.visitor().enter(), http.StatusUnauthorized, "invitation_required")
			wantError(t, "an expired invitation", enter(h.visitor(), invitation(t, invitationKey, jwt.MapClaims{
				"aud": "shop/orders", "sub": "user-2", "exp": time.Now().Add(-time.Minute).Unix()})), http.StatusForbidden, "invitation_expired")
			wantError(t, "another queue's invitation", enter(h.visitor(), invitation(t, invitationKey, jwt.MapClaims{
				"aud": "shop/returns", "sub": "user-3", "exp": hour})), http.StatusForbidden, "invitation_wrong_queue")
			wantError(t, "an invitation without expiry", enter(h.visitor(), invitation(t, invitationKey, jwt.MapClaims{
				"aud": "shop/orders", "sub": "user-4"})), http.StatusForbidden, "invitation_invalid")
			wantError(t, "an invitation signed with another key", enter(h.visitor(), invitation(t, "another key of thirty-two bytes..!", jwt.MapClaims{
				"aud": "shop/orders", "sub": "user-5", "exp": hour})), http.StatusForbidden, "invitation_invalid")
			wantError(t, "an invitation naming nobody", enter(h.visitor(), invitation(t, invitationKey, jwt.MapClaims{
				"aud": "shop/orders", "exp": hour})), http.StatusForbidden, "invitation_invalid")
			wantError(t, "an invitation for another visitor", enter(h.visitor(), invitation(t, invitationKey, jwt.MapClaims{
				"aud": "shop/orders", "vis": "someone-else", "exp": hour})), http.StatusForbidden, "invitation_other_visitor")
			unsigned, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"aud": "shop/orders", "sub": "x", "exp": hour}).
				SignedString(jwt.UnsafeAllowNoneSignatureType)
			wantError(t, "an unsigned invitation (alg none)", enter(h.visitor(), unsigned), http.StatusForbidden, "invitation_invalid")
			wantError(t, "garbage", enter(h.visitor(), "not.a.token"), http.StatusForbidden, "invitation_invalid")
			wantError(t, "an invitation of 5000 bytes", enter(h.visitor(), strings.Repeat("a", 5000)), http.StatusForbidden, "invitation_invalid")

			st, err := h.q.Stats(t.Context())
			want := int64(2)
			if singleUse {
				want = 1
			}
			if err != nil || st.Depth != want {
				t.Fatalf("depth %d (%v) after the refused entries; want %d: only invited visitors hold places", st.Depth, err, want)
			}
		}
	})
}

// TestAnInvitationForAVisitor: with an identity header, the site can sign for the visitor itself.
func TestAnInvitationForAVisitor(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{memory: true, secrets: map[string]map[string]string{"invites": {"key": invitationKey}}},
		func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Identity = &herdgatev1alpha1.IdentitySpec{Header: "X-User-Id"}
			wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Invitation: &herdgatev1alpha1.InvitationSpec{
				KeySecretRef: herdgatev1alpha1.SecretValueRef{Name: "invites", Key: "key"}}}
		})
	token := invitation(t, invitationKey, jwt.MapClaims{"aud": "shop/orders", "vis": "alice", "exp": time.Now().Add(time.Hour).Unix()})
	v := h.visitor()
	if r := v.do(http.MethodPost, "/.herdgate/enter", nil, "X-User-Id", "alice", admission.InvitationHeader, token); r.StatusCode != http.StatusOK {
		t.Fatalf("alice with her invitation: %d %s", r.StatusCode, r.body)
	}
	wantError(t, "bob with alice's invitation", v.do(http.MethodPost, "/.herdgate/enter", nil, "X-User-Id", "bob", admission.InvitationHeader, token),
		http.StatusForbidden, "invitation_other_visitor")
}

// clock is a test's settable clock.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

func TestTheProofOfWork(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		c := &clock{}
		h := newHarnessWith(t, harnessOptions{now: c.now}, func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{
				ProofOfWork: &herdgatev1alpha1.ProofOfWorkSpec{Difficulty: 10}}}
		})
		challenge := func() entry.Challenge {
			t.Helper()
			r := h.visitor().do(http.MethodGet, "/.herdgate/challenge", nil)
			body := entry.Challenge{}
			if r.StatusCode != http.StatusOK || json.Unmarshal(r.body, &body) != nil || body.Algorithm != entry.ProofOfWorkAlgorithm || body.Difficulty != 10 {
				t.Fatalf("GET /.herdgate/challenge: %d %s", r.StatusCode, r.body)
			}
			return body
		}
		enter := func(v *visitor, proof string) response {
			return v.do(http.MethodPost, "/.herdgate/enter", nil, admission.ProofHeader, proof)
		}

		ch := challenge()
		solved := ch.Challenge + ":" + entry.Solve(ch.Challenge, ch.Difficulty)
		first := h.visitor()
		if r := enter(first, solved); r.StatusCode != http.StatusOK || r.json(t)["position"] != float64(1) {
			t.Fatalf("a solved challenge: %d %s; want a place", r.StatusCode, r.body)
		}
		if r := enter(first, solved); r.StatusCode != http.StatusOK {
			t.Fatalf("the same visitor with its solution again: %d %s; want its place", r.StatusCode, r.body)
		}
		wantError(t, "the solution for a second visitor", enter(h.visitor(), solved), http.StatusConflict, "challenge_reused")
		wantError(t, "no proof", h.visitor().enter(), http.StatusUnauthorized, "challenge_required")

		fresh := challenge()
		wrong := ""
		for n := 0; ; n++ { // the first nonce that does not solve it
			if nonce := strings.Repeat("7", 1) + string(rune('a'+n%26)); entry.LeadingZeroBits(fresh.Challenge, nonce) < fresh.Difficulty {
				wrong = nonce
				break
			}
		}
		wantError(t, "a wrong nonce", enter(h.visitor(), fresh.Challenge+":"+wrong), http.StatusForbidden, "challenge_failed")
		// A challenge whose difficulty byte is lowered no longer carries its MAC.
		parts := strings.Split(fresh.Challenge, ".")
		payload, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil || len(payload) < 9 || payload[8] <= 1 {
			t.Fatalf("the challenge's payload %x, %v: want its difficulty byte, above 1, at 8", payload, err)
		}
		payload[8] = 1
		forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + parts[2]
		wantError(t, "a forged challenge", enter(h.visitor(), forged+":"+entry.Solve(forged, 1)), http.StatusForbidden, "challenge_invalid")
		wantError(t, "a proof without a nonce", enter(h.visitor(), fresh.Challenge), http.StatusBadRequest, "challenge_invalid")
		wantError(t, "a nonce of symbols", enter(h.visitor(), fresh.Challenge+":1;2"), http.StatusBadRequest, "challenge_invalid")

		old := challenge()
		oldProof := old.Challenge + ":" + entry.Solve(old.Challenge, old.Difficulty)
		c.advance(entry.ChallengeLifetime + time.Second)
		wantError(t, "a challenge solved too late", enter(h.visitor(), oldProof), http.StatusForbidden, "challenge_expired")

		st, err := h.q.Stats(t.Context())
		if err != nil || st.Depth != 1 {
			t.Fatalf("depth %d (%v) after the refused entries; want the one solved entry", st.Depth, err)
		}
	})
}

// TestTheProofOfWorkRisesUnderLoad: above raiseAbove entries a second, new challenges ask one bit
// more per doubling, up to maxDifficulty.
func TestTheProofOfWorkRisesUnderLoad(t *testing.T) {
	h := newMemoryHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{
			ProofOfWork: &herdgatev1alpha1.ProofOfWorkSpec{Difficulty: 4, RaiseAbove: ptr.To[int32](5), MaxDifficulty: ptr.To[int32](6)}}}
	})
	difficulty := func() float64 {
		r := h.visitor().do(http.MethodGet, "/.herdgate/challenge", nil)
		return r.json(t)["difficulty"].(float64)
	}
	if d := difficulty(); d != 4 {
		t.Fatalf("difficulty at rest %v, want 4", d)
	}
	// 40 entries at once (without proofs: each is refused, and each counts).
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() { h.visitor().enter() })
	}
	wg.Wait()
	if d := difficulty(); d != 6 {
		t.Fatalf("difficulty after 40 entries in a second %v, want 6 (4, one bit above 5 and another above 10, capped at 6)", d)
	}
	if m := h.metric("herdgate_proxy_challenge_difficulty", ""); m != 6 {
		t.Fatalf("herdgate_proxy_challenge_difficulty %v, want 6", m)
	}
}

// verifierStandIn is a stand-in for a siteverify endpoint: it knows the site's secret and the
// responses its widget handed out, and spends each once.
type verifierStandIn struct {
	mu        sync.Mutex
	secret    string
	responses map[string]bool
	remoteIPs []string
	succeed   bool // say success to everything, as a provider that does not spend responses
	// errorCodes are the error codes of the failed answer to a response, when not the usual
	// invalid-input-response.
	errorCodes map[string][]string
}

func (v *verifierStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if r.Method != http.MethodPost || r.ParseForm() != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	v.remoteIPs = append(v.remoteIPs, r.PostForm.Get("remoteip"))
	answer := map[string]any{"success": false}
	switch resp := r.PostForm.Get("response"); {
	case r.PostForm.Get("secret") != v.secret:
		answer["error-codes"] = []string{"invalid-input-secret"}
	case v.succeed:
		answer["success"] = true
	case v.responses[resp]:
		delete(v.responses, resp)
		answer["success"] = true
	case v.errorCodes[resp] != nil:
		answer["error-codes"] = v.errorCodes[resp]
	default:
		answer["error-codes"] = []string{"invalid-input-response"}
	}
	_ = json.NewEncoder(w).Encode(answer)
}

func TestTheExternalChallenge(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		stand := &verifierStandIn{secret: "the site's secret", responses: map[string]bool{"widget-1": true, "widget-2": true}}
		verifier := httptest.NewServer(stand)
		defer verifier.Close()
		h := newHarnessWith(t, harnessOptions{memory: true, secrets: map[string]map[string]string{"captcha": {"secret": stand.secret}}},
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{
					External: &herdgatev1alpha1.ExternalChallengeSpec{VerifyURL: verifier.URL + "/siteverify",
						SecretKeyRef: herdgatev1alpha1.SecretValueRef{Name: "captcha", Key: "secret"}}}}
			})
		enter := func(v *visitor, response string) response {
			return v.do(http.MethodPost, "/.herdgate/enter", nil, admission.ChallengeResponseHeader, response)
		}
		if r := enter(h.visitor(), "widget-1"); r.StatusCode != http.StatusOK || r.json(t)["position"] != float64(1) {
			t.Fatalf("a response the provider verifies: %d %s; want a place", r.StatusCode, r.body)
		}
		// The provider spent it (the engine would refuse it too: TestAnExternalResponseEntersOneVisitor).
		wantError(t, "the response again, for another visitor", enter(h.visitor(), "widget-1"), http.StatusForbidden, "challenge_failed")
		wantError(t, "a response the provider refuses", enter(h.visitor(), "made-up"), http.StatusForbidden, "challenge_failed")
		wantError(t, "no response", h.visitor().enter(), http.StatusUnauthorized, "challenge_required")
		stand.mu.Lock()
		ips := append([]string(nil), stand.remoteIPs...)
		stand.mu.Unlock()
		if len(ips) != 3 || ips[0] != "127.0.0.1" {
			t.Fatalf("the verifier was told remote IPs %v; want the visitor's address, once per verification", ips)
		}
		verifier.Close()
		wantError(t, "a provider that does not answer", enter(h.visitor(), "widget-2"), http.StatusServiceUnavailable, "challenge_unavailable")
	})
}

// TestAnExternalResponseEntersOneVisitor: a provider that does not spend its responses still lets
// one enter only one visitor.
func TestAnExternalResponseEntersOneVisitor(t *testing.T) {
	stand := &verifierStandIn{secret: "s3cret", succeed: true}
	verifier := httptest.NewServer(stand)
	defer verifier.Close()
	h := newHarnessWith(t, harnessOptions{secrets: map[string]map[string]string{"captcha": {"secret": "s3cret"}}},
		func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{
				External: &herdgatev1alpha1.ExternalChallengeSpec{VerifyURL: verifier.URL,
					SecretKeyRef: herdgatev1alpha1.SecretValueRef{Name: "captcha", Key: "secret"}}}}
		})
	if r := h.visitor().do(http.MethodPost, "/.herdgate/enter", nil, admission.ChallengeResponseHeader, "token"); r.StatusCode != http.StatusOK {
		t.Fatalf("first: %d %s", r.StatusCode, r.body)
	}
	wantError(t, "second", h.visitor().do(http.MethodPost, "/.herdgate/enter", nil, admission.ChallengeResponseHeader, "token"), http.StatusConflict, "challenge_reused")
}

func TestBypassLanes(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		const monitorToken = "monitor token of 16+ bytes"
		h := newHarnessWith(t, harnessOptions{secrets: map[string]map[string]string{"monitor": {"token": monitorToken}}},
			func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{TrustedProxies: []herdgatev1alpha1.CIDR{"127.0.0.0/8"}}
				wq.Spec.Bypass = []herdgatev1alpha1.BypassRule{
					{Name: "office", SourceCIDRs: []herdgatev1alpha1.CIDR{"192.0.2.0/24"}},
					{Name: "monitor", Header: &herdgatev1alpha1.BypassHeader{Name: "X-Monitor-Token",
						ValueSecretRef: herdgatev1alpha1.SecretValueRef{Name: "monitor", Key: "token"}}},
					{Name: "health", Path: ptr.To(herdgatev1alpha1.RoutePath("/checkout/health"))},
				}
			})
		get := func(path string, header ...string) response {
			return h.visitor().do(http.MethodGet, path, nil, append([]string{"Accept", "application/json"}, header...)...)
		}
		forwarded := func(what string, r response) {
			t.Helper()
			if r.StatusCode != http.StatusOK || r.Header.Get("X-Upstream") != "yes" {
				t.Fatalf("%s: %d %s; want it forwarded without a pass", what, r.StatusCode, r.body)
			}
		}
		gated := func(what string, r response) {
			t.Helper()
			if r.StatusCode == http.StatusOK || r.Header.Get("X-Upstream") != "" {
				t.Fatalf("%s: %d %s; want it stopped at the gate", what, r.StatusCode, r.body)
			}
		}
		gated("a protected request with no rule", get("/checkout/cart"))

		forwarded("from the office, behind the trusted proxy", get("/checkout/cart", "X-Forwarded-For", "192.0.2.44"))
		gated("from elsewhere, behind the trusted proxy", get("/checkout/cart", "X-Forwarded-For", "198.51.100.9"))
		gated("the office's address written before another hop", get("/checkout/cart", "X-Forwarded-For", "192.0.2.44, 198.51.100.9"))

		before := len(h.upstream.all())
		forwarded("with the monitor's token", get("/checkout/cart", "X-Monitor-Token", monitorToken))
		calls := h.upstream.all()
		if len(calls) != before+1 || calls[len(calls)-1].Header.Get("X-Monitor-Token") != "" {
			t.Fatalf("the upstream received the bypass header %q; it must never see the secret", calls[len(calls)-1].Header.Get("X-Monitor-Token"))
		}
		gated("with a wrong token", get("/checkout/cart", "X-Monitor-Token", monitorToken+"x"))
		gated("with a token prefix", get("/checkout/cart", "X-Monitor-Token", monitorToken[:10]))
		r := h.raw("GET /checkout/cart HTTP/1.1\r\nHost: shop\r\nAccept: application/json\r\nX-Monitor-Token: " + monitorToken +
			"\r\nX-Monitor-Token: " + monitorToken + "\r\nConnection: close\r\n\r\n")
		if r.StatusCode == http.StatusOK {
			t.Fatalf("a repeated token: %d; want it judged by none of its values", r.StatusCode)
		}

		forwarded("the health path", get("/checkout/health"))
		forwarded("the health path in capitals", get("/CHECKOUT/HEALTH"))
		gated("below the health path", get("/checkout/health/deep"))

		// Closed: bypass lanes stay open, everybody else is turned away.
		closedCfg, err := admission.NewConfigWithSecrets(withMode(h.wq, herdgatev1alpha1.ModeClosed), h.key,
			(&admission.FileConfig{Secrets: map[string]map[string]string{"monitor": {"token": monitorToken}}}).Values())
		if err != nil {
			t.Fatal(err)
		}
		h.room.SetConfig(closedCfg)
		forwarded("the monitor while closed", get("/checkout/cart", "X-Monitor-Token", monitorToken))
		gated("a visitor while closed", get("/checkout/cart"))

		for rule, want := range map[string]float64{"office": 1, "monitor": 2, "health": 2} {
			if got := h.metric("herdgate_proxy_bypass_requests_total", `{rule="`+rule+`"}`); got != want {
				t.Errorf("herdgate_proxy_bypass_requests_total{rule=%q} = %v, want %v", rule, got, want)
			}
		}
		st, err := h.q.Stats(t.Context())
		if err != nil || st.Depth != 0 || st.Active != 0 {
			t.Fatalf("stats %+v (%v); bypassed requests never queue and hold no pass", st, err)
		}
	})
}

func withMode(wq *herdgatev1alpha1.WaitingQueue, mode herdgatev1alpha1.Mode) *herdgatev1alpha1.WaitingQueue {
	return changed(wq, func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Mode = mode })
}

// TestSecretValuesThatCannotServe: a value that is missing or too short is refused naming its field.
func TestSecretValuesThatCannotServe(t *testing.T) {
	wq := testQueue("http://127.0.0.1:1")
	wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Invitation: &herdgatev1alpha1.InvitationSpec{
		KeySecretRef: herdgatev1alpha1.SecretValueRef{Name: "invites", Key: "key"}}}
	wq.Spec.Bypass = []herdgatev1alpha1.BypassRule{{Name: "monitor", Header: &herdgatev1alpha1.BypassHeader{Name: "X-Monitor",
		ValueSecretRef: herdgatev1alpha1.SecretValueRef{Name: "monitor", Key: "token"}}}}
	key := make([]byte, 32)
	for _, tc := range []struct {
		secrets map[string]map[string]string
		want    string
	}{
		{nil, "spec.entry.invitation.keySecretRef: Secret invites key key"},
		{map[string]map[string]string{"invites": {"key": "short"}}, "spec.entry.invitation.keySecretRef: Secret invites key key holds 5 bytes, at least 32 required"},
		{map[string]map[string]string{"invites": {"key": invitationKey}, "monitor": {"token": "guessable"}},
			"spec.bypass[0].header.valueSecretRef: Secret monitor key token holds 9 bytes, at least 16 required"},
	} {
		_, err := admission.NewConfigWithSecrets(wq, key, (&admission.FileConfig{Secrets: tc.secrets}).Values())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("secrets %v: %v; want an error containing %q", tc.secrets, err, tc.want)
		}
	}
	if _, err := admission.NewConfig(wq, key); err == nil || !strings.Contains(err.Error(), "no Secret values to read") {
		t.Errorf("NewConfig without values: %v", err)
	}
}

// TestABrowserEntersOnlyWithWhatTheEntryAsks: a browser opening a protected page without a pass is
// admitted at once only when it brings what an enter would have to (an invitation, a proof of work,
// a challenge's answer): without, it goes to the waiting page, which asks for it, and the workload
// never sees the request.
func TestABrowserEntersOnlyWithWhatTheEntryAsks(t *testing.T) {
	stand := &verifierStandIn{secret: "the site's secret", responses: map[string]bool{}}
	verifier := httptest.NewServer(stand)
	defer verifier.Close()
	for name, spec := range map[string]*herdgatev1alpha1.EntrySpec{
		"invitation":    {Invitation: &herdgatev1alpha1.InvitationSpec{KeySecretRef: herdgatev1alpha1.SecretValueRef{Name: "invites", Key: "key"}}},
		"proof of work": {Challenge: &herdgatev1alpha1.ChallengeSpec{ProofOfWork: &herdgatev1alpha1.ProofOfWorkSpec{Difficulty: 8}}},
		"external challenge": {Challenge: &herdgatev1alpha1.ChallengeSpec{External: &herdgatev1alpha1.ExternalChallengeSpec{
			VerifyURL: verifier.URL + "/siteverify", SecretKeyRef: herdgatev1alpha1.SecretValueRef{Name: "captcha", Key: "secret"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			onBothFronts(t, func(t *testing.T) {
				h := newHarnessWith(t, harnessOptions{memory: true, secrets: map[string]map[string]string{
					"invites": {"key": invitationKey}, "captcha": {"secret": stand.secret}}},
					func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Entry = spec })
				browser := h.visitor()
				res := browser.do(http.MethodGet, "/checkout", nil, "Accept", "text/html")
				if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/.herdgate/?return=") {
					t.Fatalf("a browser without what the entry asks: %d %s (Location %q); want 303 to the waiting page",
						res.StatusCode, res.body, res.Header.Get("Location"))
				}
				if calls := h.upstream.all(); len(calls) != 0 {
					t.Fatalf("the workload saw %d requests", len(calls))
				}
				if res := browser.status(); res.StatusCode != http.StatusNotFound {
					t.Fatalf("the browser's status: %d %s; want 404, never entered", res.StatusCode, res.body)
				}
			})
		})
	}
}
