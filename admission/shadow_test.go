package admission_test

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/golang-jwt/jwt/v5"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/entry"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
)

// wrongNonce is a nonce that does not solve challenge at difficulty.
func wrongNonce(challenge string, difficulty int) string {
	for n := 0; ; n++ {
		if nonce := fmt.Sprintf("x%d", n); entry.LeadingZeroBits(challenge, nonce) < difficulty {
			return nonce
		}
	}
}

// wantShadowPlace checks that r reads as the ordinary waiting answer real is, at position of depth:
// the same fields, a place when real has one, shaped as real's is (an arrival number and a MAC), no
// error.
func wantShadowPlace(t *testing.T, what string, r response, real response, position, depth int) {
	t.Helper()
	body := r.json(t)
	if r.StatusCode != http.StatusOK || body["position"] != float64(position) || body["queueDepth"] != float64(depth) {
		t.Fatalf("%s: %d %s; want an ordinary place, %d of %d", what, r.StatusCode, r.body, position, depth)
	}
	realBody := real.json(t)
	if keys, realKeys := slices.Sorted(maps.Keys(body)), slices.Sorted(maps.Keys(realBody)); !slices.Equal(keys, realKeys) {
		t.Fatalf("%s: fields %v; a real waiting visitor's answer has %v", what, keys, realKeys)
	}
	if realPlace, ok := realBody["place"].(string); ok {
		place, _ := body["place"].(string)
		shape := regexp.MustCompile(`^[1-9][0-9]*\.[A-Za-z0-9_-]{22}$`)
		if !shape.MatchString(place) || !shape.MatchString(realPlace) {
			t.Fatalf("%s: place %q; a real one reads %q", what, place, realPlace)
		}
	}
}

// TestAFailedChallengeWaitsInTheShadowQueue: with spec.entry.shadowQueue.challengeFailed, an entry
// whose proof of work fails is answered as a place behind everyone, polls like one, and is never
// admitted, while the real queue's positions, depth and admissions leave it out; a missing,
// malformed, forged or expired proof is refused as before.
func TestAFailedChallengeWaitsInTheShadowQueue(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		c := &clock{}
		h := newHarnessWith(t, harnessOptions{now: c.now}, func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{
				ProofOfWork: &herdgatev1alpha1.ProofOfWorkSpec{Difficulty: 8}}}
			*wq = *builder.From(wq).ShadowQueue(true, 0).Obj()
		})
		challenge := func() entry.Challenge {
			t.Helper()
			var ch entry.Challenge
			r := h.visitor().do(http.MethodGet, "/.herdgate/challenge", nil)
			if err := json.Unmarshal(r.body, &ch); err != nil || r.StatusCode != http.StatusOK {
				t.Fatalf("GET /.herdgate/challenge: %d %s", r.StatusCode, r.body)
			}
			return ch
		}
		enter := func(v *visitor, proof string) response {
			return v.do(http.MethodPost, "/.herdgate/enter", nil, admission.ProofHeader, proof)
		}
		var real []*visitor
		var realAnswer response
		for range 3 {
			ch := challenge()
			v := h.visitor()
			if realAnswer = enter(v, ch.Challenge+":"+entry.Solve(ch.Challenge, ch.Difficulty)); realAnswer.StatusCode != http.StatusOK {
				t.Fatalf("a solved challenge: %d %s", realAnswer.StatusCode, realAnswer.body)
			}
			real = append(real, v)
		}

		ch := challenge()
		bot := h.visitor()
		wantShadowPlace(t, "a wrong nonce", enter(bot, ch.Challenge+":"+wrongNonce(ch.Challenge, ch.Difficulty)), realAnswer, 4, 4)
		if r := real[2].status(); r.json(t)["position"] != float64(3) || r.json(t)["queueDepth"] != float64(3) {
			t.Fatalf("the last real visitor after the shadowed entry: %s; want 3 of 3", r.body)
		}
		time.Sleep(time.Second) // past the shortest poll interval, which Redis' clock measures
		realPoll := real[2].status()
		wantShadowPlace(t, "the shadowed visitor's poll", bot.status(), realPoll, 4, 4)

		// A failover that loses the shadow place gives it back to nobody: the shadow place is no
		// place, neither for its holder nor as the real queue's.
		if err := h.redisClient().Del(t.Context(), h.q.KeyPrefix()+":shadow").Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if r := bot.status(); r.StatusCode != http.StatusNotFound || r.json(t)["error"] != "not_queued" {
			t.Fatalf("the shadowed visitor's poll after its place was lost: %d %s; want 404 not_queued", r.StatusCode, r.body)
		}
		if st, err := h.q.Stats(t.Context()); err != nil || st.Depth != 3 {
			t.Fatalf("stats %+v, %v; want the 3 real visitors alone in the real queue", st, err)
		}
		ch = challenge()
		wantShadowPlace(t, "the shadowed visitor back with a failed challenge", enter(bot, ch.Challenge+":"+wrongNonce(ch.Challenge, ch.Difficulty)), realAnswer, 4, 4)

		// What is no verdict on a proof is refused as before.
		wantError(t, "no proof", h.visitor().enter(), http.StatusUnauthorized, "challenge_required")
		wantError(t, "a proof without a nonce", enter(h.visitor(), ch.Challenge), http.StatusBadRequest, "challenge_invalid")
		wantError(t, "a challenge the room never issued", enter(h.visitor(), "v1.AAAA.AAAA:1"), http.StatusForbidden, "challenge_invalid")
		old := challenge()
		c.advance(entry.ChallengeLifetime + time.Second)
		wantError(t, "a challenge solved too late", enter(h.visitor(), old.Challenge+":"+wrongNonce(old.Challenge, old.Difficulty)), http.StatusForbidden, "challenge_expired")

		// A tick with room for everyone admits the three real visitors and never the shadow place.
		if res := h.admit(10, 0); len(res.Admitted) != 3 {
			t.Fatalf("a tick of 10 admitted %d; want the 3 real visitors", len(res.Admitted))
		}
		time.Sleep(time.Second)
		wantShadowPlace(t, "the shadowed visitor once the others are through", bot.status(), realPoll, 1, 1)
		if r := bot.do(http.MethodGet, "/checkout/cart", nil); r.StatusCode == http.StatusOK {
			t.Fatalf("the shadowed visitor reached a protected route: %d %s", r.StatusCode, r.body)
		}
		st, err := h.q.Stats(t.Context())
		if err != nil || st.Depth != 0 || st.Shadowed != 1 || st.ShadowedChallengeFailed != 2 {
			t.Fatalf("stats %+v, %v; want nobody in the real queue, one shadow place, and two failed challenges shadowed", st, err)
		}
		if got := h.metric("herdgate_proxy_requests_total", `{outcome="shadowed",route_class="enter"}`); got != 2 {
			t.Fatalf("shadowed enters counted %v; want 2", got)
		}
		if got := h.metric("herdgate_proxy_requests_total", `{outcome="shadowed",route_class="status"}`); got != 2 {
			t.Fatalf("shadowed polls counted %v; want 2", got)
		}
	})
}

// TestAShadowedVisitorReadsAsTheLaneItWouldHaveJoined: an entry that fails its challenge with a
// lane's header or code gets the answer a lane visitor gets, lane named, behind everyone in that
// lane, on entry and on its polls, with a lane's place; a lane code that does not verify is refused
// as it is for a solved challenge; the real lane's places leave the shadow places out; and over its
// client's limit a lane's visitor is shadowed in its lane too.
func TestAShadowedVisitorReadsAsTheLaneItWouldHaveJoined(t *testing.T) {
	lanePlace := regexp.MustCompile(`^[1-9][0-9]*\.vip\.[A-Za-z0-9_-]{22}$`)
	sameFields := func(what string, got, real response) {
		t.Helper()
		body, realBody := got.json(t), real.json(t)
		if keys, realKeys := slices.Sorted(maps.Keys(body)), slices.Sorted(maps.Keys(realBody)); !slices.Equal(keys, realKeys) {
			t.Fatalf("%s: fields %v; a real lane visitor's answer has %v", what, keys, realKeys)
		}
	}
	onBothFronts(t, func(t *testing.T) {
		h := newHarnessWith(t, harnessOptions{secrets: laneSecrets}, func(wq *herdgatev1alpha1.WaitingQueue) {
			withLanes(wq)
			wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{
				ProofOfWork: &herdgatev1alpha1.ProofOfWorkSpec{Difficulty: 8}}}
			*wq = *builder.From(wq).ShadowQueue(true, 0).Obj()
		})
		h.fillAhead(5)
		proof := func(solved bool) string {
			t.Helper()
			var ch entry.Challenge
			if r := h.visitor().do(http.MethodGet, "/.herdgate/challenge", nil); json.Unmarshal(r.body, &ch) != nil || r.StatusCode != http.StatusOK {
				t.Fatalf("GET /.herdgate/challenge: %d %s", r.StatusCode, r.body)
			}
			if solved {
				return ch.Challenge + ":" + entry.Solve(ch.Challenge, ch.Difficulty)
			}
			return ch.Challenge + ":" + wrongNonce(ch.Challenge, ch.Difficulty)
		}
		vipVisitor := func() *visitor {
			v := h.visitor()
			v.header.Set("X-Member-Tier", vipValue)
			return v
		}
		real := vipVisitor()
		realEntry := real.do(http.MethodPost, "/.herdgate/enter", nil, admission.ProofHeader, proof(true))
		if body := realEntry.json(t); realEntry.StatusCode != http.StatusOK || body["lane"] != "vip" || body["position"] != float64(1) {
			t.Fatalf("a vip visitor with a solved challenge: %d %s; want place 1 in vip", realEntry.StatusCode, realEntry.body)
		}

		bot := vipVisitor()
		r := bot.do(http.MethodPost, "/.herdgate/enter", nil, admission.ProofHeader, proof(false))
		body := r.json(t)
		if r.StatusCode != http.StatusOK || body["lane"] != "vip" || body["position"] != float64(2) || body["queueDepth"] != float64(2) {
			t.Fatalf("a vip visitor with a failed challenge: %d %s; want it to read as place 2 of 2 in vip", r.StatusCode, r.body)
		}
		sameFields("the shadowed vip entry", r, realEntry)
		if place, _ := body["place"].(string); !lanePlace.MatchString(place) {
			t.Fatalf("the shadowed vip entry's place %q; a vip place reads %q", place, realEntry.json(t)["place"])
		}

		time.Sleep(time.Second) // past the shortest poll interval, which Redis' clock measures
		realPoll := real.status()
		if body := realPoll.json(t); body["lane"] != "vip" || body["position"] != float64(1) || body["queueDepth"] != float64(1) {
			t.Fatalf("the real vip visitor's poll: %s; want 1 of 1, the shadow place left out", realPoll.body)
		}
		r = bot.status()
		if body := r.json(t); r.StatusCode != http.StatusOK || body["lane"] != "vip" || body["position"] != float64(2) || body["queueDepth"] != float64(2) {
			t.Fatalf("the shadowed vip visitor's poll: %d %s; want 2 of 2 in vip", r.StatusCode, r.body)
		}
		sameFields("the shadowed vip visitor's poll", r, realPoll)

		// A members code that verifies, with a failed challenge: members, as the code would have had it,
		// behind the members waiting (none) and the shadow place before it.
		r = h.visitor().do(http.MethodPost, "/.herdgate/enter", nil, admission.ProofHeader, proof(false), admission.LaneCodeHeader, signLaneCode(t, nil))
		if body := r.json(t); r.StatusCode != http.StatusOK || body["lane"] != "members" || body["position"] != float64(2) || body["queueDepth"] != float64(2) {
			t.Fatalf("a members code with a failed challenge: %d %s; want it to read as place 2 of 2 in members", r.StatusCode, r.body)
		}
		// A code that does not verify is refused, failed challenge or not.
		for _, solved := range []bool{true, false} {
			r = h.visitor().do(http.MethodPost, "/.herdgate/enter", nil, admission.ProofHeader, proof(solved), admission.LaneCodeHeader, signLaneCode(t, jwt.MapClaims{"aud": "shop/other"}))
			wantError(t, fmt.Sprintf("a code for another room, challenge solved %t", solved), r, http.StatusForbidden, "lane_code_wrong_queue")
		}

		st, err := h.q.Stats(t.Context())
		if err != nil || st.Shadowed != 2 || st.ShadowedChallengeFailed != 2 {
			t.Fatalf("stats %+v, %v; want the two failed challenges in the shadow queue", st, err)
		}
		if admitted := h.admitLanes(20); len(admitted) != 6 {
			t.Fatalf("a tick of 20 admitted %d; want the 6 real visitors (5 in the main queue, 1 in vip)", len(admitted))
		}
	})
}

// TestAShadowedVisitorOverItsLimitReadsAsItsLane: a client far over its entry limit whose entries
// carry a lane's header is shadowed in that lane: its answers name the lane.
func TestAShadowedVisitorOverItsLimitReadsAsItsLane(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{secrets: laneSecrets}, func(wq *herdgatev1alpha1.WaitingQueue) {
		withLanes(wq)
		wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{
			PerClient:      &herdgatev1alpha1.PerClientLimit{Burst: ptr.To[int32](1), PerMinute: ptr.To[int32](1)},
			TrustedProxies: []herdgatev1alpha1.CIDR{"127.0.0.0/8", "::1/128"},
		}
		*wq = *builder.From(wq).ShadowQueue(false, 2).Obj()
	})
	var got []string
	for range 3 {
		r := h.visitor().do(http.MethodPost, "/.herdgate/enter", nil, "X-Forwarded-For", "198.51.100.7", "X-Member-Tier", vipValue)
		body := r.json(t)
		got = append(got, fmt.Sprintf("%d %v #%v", r.StatusCode, body["lane"], body["position"]))
	}
	if want := "[200 vip #1 200 vip #2 200 vip #3]"; fmt.Sprint(got) != want {
		t.Fatalf("asks of one address with the vip header: %v; want %v", got, want)
	}
	if st, err := h.q.Stats(t.Context()); err != nil || st.Shadowed != 2 || st.ShadowedOverLimit != 2 {
		t.Fatalf("stats %+v, %v; want 2 shadow places given over the limit", st, err)
	}
}

// TestAFailedExternalChallengeWaitsInTheShadowQueue: a provider's verdict that a response failed
// sends the entry to the shadow queue; its answers that a response is spent, expired or malformed,
// or a provider that cannot be asked, are refused as before.
func TestAFailedExternalChallengeWaitsInTheShadowQueue(t *testing.T) {
	stand := &verifierStandIn{secret: "the site's secret", responses: map[string]bool{"widget-1": true},
		errorCodes: map[string][]string{
			"spent": {"timeout-or-duplicate"}, "expired": {"expired-input-response"}, "garbled": {"bad-request"},
			"provider-trouble": {"internal-error"}, "forged-and-spent": {"invalid-input-response", "timeout-or-duplicate"},
			"no-reason": {},
		}}
	verifier := httptest.NewServer(stand)
	defer verifier.Close()
	h := newHarnessWith(t, harnessOptions{secrets: map[string]map[string]string{"captcha": {"secret": stand.secret}}},
		func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{
				External: &herdgatev1alpha1.ExternalChallengeSpec{VerifyURL: verifier.URL + "/siteverify",
					SecretKeyRef: herdgatev1alpha1.SecretValueRef{Name: "captcha", Key: "secret"}}}}
			*wq = *builder.From(wq).ShadowQueue(true, 0).Obj()
		})
	enter := func(response string) response {
		return h.visitor().do(http.MethodPost, "/.herdgate/enter", nil, admission.ChallengeResponseHeader, response)
	}
	realAnswer := enter("widget-1")
	if realAnswer.StatusCode != http.StatusOK {
		t.Fatalf("a response the provider verifies: %d %s", realAnswer.StatusCode, realAnswer.body)
	}
	wantShadowPlace(t, "a response the provider judged invalid", enter("made-up"), realAnswer, 2, 2)
	wantShadowPlace(t, "a failed answer without error codes", enter("no-reason"), realAnswer, 3, 3)
	for _, response := range []string{"spent", "expired", "garbled", "provider-trouble", "forged-and-spent"} {
		wantError(t, "a response answered "+strings.Join(stand.errorCodes[response], ", "), enter(response), http.StatusForbidden, "challenge_failed")
	}
	wantError(t, "no response", h.visitor().enter(), http.StatusUnauthorized, "challenge_required")
	wantError(t, "a response too long to send", enter(strings.Repeat("r", 4097)), http.StatusBadRequest, "challenge_invalid")
	verifier.Close()
	wantError(t, "a provider that does not answer", enter("made-up-2"), http.StatusServiceUnavailable, "challenge_unavailable")
	if st, err := h.q.Stats(t.Context()); err != nil || st.Depth != 1 || st.Shadowed != 2 {
		t.Fatalf("stats %+v, %v; want the one verified visitor waiting and two shadow places", st, err)
	}
}

// TestAClientFarOverItsLimitWaitsInTheShadowQueue: with overEntryLimitFactor, one address takes its
// burst of places, is refused with 429 until it has asked for factor × burst, then gets shadow
// places; the places of its burst stay real, and another address is not touched. Without a shadow
// queue the same asks are all refused (TestEntriesPerClientAreLimited).
func TestAClientFarOverItsLimitWaitsInTheShadowQueue(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		h := newHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{
				PerClient:      &herdgatev1alpha1.PerClientLimit{Burst: ptr.To[int32](2), PerMinute: ptr.To[int32](1)},
				TrustedProxies: []herdgatev1alpha1.CIDR{"127.0.0.0/8", "::1/128"},
			}
			*wq = *builder.From(wq).ShadowQueue(false, 3).Obj()
		})
		var got []string
		for range 9 {
			r := h.visitor().do(http.MethodPost, "/.herdgate/enter", nil, "X-Forwarded-For", "198.51.100.7")
			switch body := r.json(t); {
			case r.StatusCode == http.StatusTooManyRequests && body["error"] == "too_many_entries":
				got = append(got, "429")
			case r.StatusCode == http.StatusOK && body["position"] != nil:
				got = append(got, fmt.Sprintf("#%v", body["position"]))
			default:
				t.Fatalf("an entry: %d %s", r.StatusCode, r.body)
			}
		}
		// Two real places, three refusals, and from the sixth ask (3 × a burst of 2) shadow places,
		// each behind the last.
		if want := []string{"#1", "#2", "429", "429", "429", "#3", "#4", "#5", "#6"}; !slices.Equal(got, want) {
			t.Fatalf("asks of one address: %v; want %v", got, want)
		}
		if r := h.visitor().do(http.MethodPost, "/.herdgate/enter", nil, "X-Forwarded-For", "198.51.100.8"); r.StatusCode != http.StatusOK || r.json(t)["position"] != float64(3) {
			t.Fatalf("another address: %d %s; want a real place, 3rd", r.StatusCode, r.body)
		}
		st, err := h.q.Stats(t.Context())
		if err != nil || st.Depth != 3 || st.Shadowed != 4 || st.ShadowedOverLimit != 4 {
			t.Fatalf("stats %+v, %v; want 3 real places and 4 shadow places given over the limit", st, err)
		}
		if res := h.admit(10, 0); len(res.Admitted) != 3 {
			t.Fatalf("a tick of 10 admitted %d; want the 3 real places", len(res.Admitted))
		}
	})
}

// TestTheShadowQueueThroughGateways: behind each gateway the guide configures, an entry whose proof
// of work fails gets an ordinary place and polls it, and the protected route stays shut to it, while
// a visitor who solved the challenge is admitted and goes through.
func TestTheShadowQueueThroughGateways(t *testing.T) {
	for name, gw := range gateways {
		t.Run(name, func(t *testing.T) {
			h, gateway := throughGateway(t, gw, func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{
					ProofOfWork: &herdgatev1alpha1.ProofOfWorkSpec{Difficulty: 8}}}
				*wq = *builder.From(wq).ShadowQueue(true, 0).Obj()
			})
			client := func() *http.Client {
				jar, _ := cookiejar.New(nil)
				return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			}
			do := func(c *http.Client, method, path string, kv ...string) (int, string) {
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
				return res.StatusCode, string(body)
			}
			challenge := func() entry.Challenge {
				t.Helper()
				var ch entry.Challenge
				if code, body := do(client(), http.MethodGet, "/.herdgate/challenge"); code != http.StatusOK || json.Unmarshal([]byte(body), &ch) != nil {
					t.Fatalf("the challenge through %s: %d %s", name, code, body)
				}
				return ch
			}
			visitor, bot := client(), client()
			ch := challenge()
			if code, body := do(visitor, http.MethodPost, "/.herdgate/enter", admission.ProofHeader, ch.Challenge+":"+entry.Solve(ch.Challenge, ch.Difficulty)); code != http.StatusOK || !strings.Contains(body, `"position":1,`) {
				t.Fatalf("a solved challenge through %s: %d %s", name, code, body)
			}
			ch = challenge()
			if code, body := do(bot, http.MethodPost, "/.herdgate/enter", admission.ProofHeader, ch.Challenge+":"+wrongNonce(ch.Challenge, ch.Difficulty)); code != http.StatusOK || !strings.Contains(body, `"position":2,"queueDepth":2`) || strings.Contains(body, `"error"`) {
				t.Fatalf("a failed challenge through %s: %d %s; want an ordinary place, 2 of 2", name, code, body)
			}
			h.admit(10, 0)
			for deadline := time.Now().Add(10 * time.Second); ; {
				time.Sleep(600 * time.Millisecond)
				if _, body := do(visitor, http.MethodGet, "/.herdgate/status"); strings.Contains(body, `"admitted":true`) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the visitor who solved the challenge was never admitted through %s", name)
				}
			}
			if code, body := do(bot, http.MethodGet, "/.herdgate/status"); code != http.StatusOK || !strings.Contains(body, `"position":1,"queueDepth":1`) {
				t.Fatalf("the shadowed visitor's poll through %s: %d %s; want 1 of 1, still waiting", name, code, body)
			}
			if code, _ := do(bot, http.MethodPost, "/api/v1/orders"); code == http.StatusOK {
				t.Fatalf("the shadowed visitor's order went through %s", name)
			}
			if code, body := do(visitor, http.MethodPost, "/api/v1/orders"); code != http.StatusOK {
				t.Fatalf("the admitted visitor's order through %s: %d %s", name, code, body)
			}
		})
	}
}

// TestAShadowPlaceFarFromTheFrontReadsAsABound: behind more visitors than the exact zone, a shadow
// place's polls read as a far visitor's do: with its place, a bound without the place (the proxy
// answers those from its snapshot), without it an exact answer that gives the place back, with the
// same fields each time; its entry, like anyone's, is exact.
func TestAShadowPlaceFarFromTheFrontReadsAsABound(t *testing.T) {
	h, rdb := farHarness(t, 5000, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{
			PerClient:      &herdgatev1alpha1.PerClientLimit{Burst: ptr.To[int32](1), PerMinute: ptr.To[int32](1)},
			TrustedProxies: []herdgatev1alpha1.CIDR{"127.0.0.0/8", "::1/128"},
		}
		*wq = *builder.From(wq).ShadowQueue(false, 2).Obj()
		wq.Spec.Polling.MaxInterval = &metav1.Duration{Duration: time.Second}
	})
	ctx := t.Context()
	if err := h.q.PublishPlan(ctx, queue.PublishedPlan{Quota: mustQuota(14)}); err != nil {
		t.Fatal(err)
	}
	fillQueue(t, h.q, "u", 5010, 5*time.Minute)
	last, err := rdb.ZRangeWithScores(ctx, waitingKey, -1, -1).Result()
	if err != nil || len(last) != 1 {
		t.Fatalf("the last real visitor: %v, %v", last, err)
	}
	farVisitor := last[0].Member.(string)
	realPlace := h.room.Config().Signer.Place(farVisitor, int64(last[0].Score))

	// One address: a real place (its burst of one), then, asking for twice its burst, a shadow place.
	enter := func(id string) response {
		v := h.visitor()
		v.header.Set("X-User-Id", id)
		return v.do(http.MethodPost, "/.herdgate/enter", nil, "X-Forwarded-For", "198.51.100.9")
	}
	if r := enter("burst"); r.StatusCode != http.StatusOK || r.json(t)["position"] != float64(5011) {
		t.Fatalf("the address's first entry: %d %s; want a real place, 5011th", r.StatusCode, r.body)
	}
	entered := enter("bot")
	body := entered.json(t)
	shadowPlace, _ := body["place"].(string)
	if entered.StatusCode != http.StatusOK || body["position"] != float64(5012) || body["positionIsBound"] != nil || shadowPlace == "" {
		t.Fatalf("the shadowed entry: %d %s; want an exact place, 5012th, with a place token", entered.StatusCode, entered.body)
	}

	// The proxy counts the queue, as its loop does once it knows the queue is deep.
	time.Sleep(2 * time.Second) // past the shortest interval anyone was told
	if r := h.pollAs(farVisitor, realPlace); r.StatusCode != http.StatusOK {
		t.Fatalf("the far visitor's poll: %d %s", r.StatusCode, r.body)
	}
	h.room.RefreshFar(ctx)
	time.Sleep(2 * time.Second)
	realPoll := h.pollAs(farVisitor, realPlace)
	if body := realPoll.json(t); body["positionIsBound"] != true || body["place"] != nil {
		t.Fatalf("the far visitor's poll after the snapshot: %s; want a bound from the snapshot (it holds its place)", realPoll.body)
	}
	for i := range 2 {
		r := h.pollAs("bot", shadowPlace)
		wantShadowPlace(t, fmt.Sprintf("the shadowed visitor's poll %d far from the front", i+1), r, realPoll, 5012, 5012)
		if body := r.json(t); body["positionIsBound"] != true || body["place"] != nil {
			t.Fatalf("the shadowed visitor's poll %d: %s; want a bound without the place, as the far visitor's", i+1, r.body)
		}
		time.Sleep(2 * time.Second)
	}
	// Without its place, a far visitor is answered by Redis, exactly, and given its place again.
	realAgain := h.pollAs(farVisitor, "")
	if body := realAgain.json(t); body["positionIsBound"] != nil || body["place"] != realPlace {
		t.Fatalf("the far visitor's poll without its place: %s; want an exact answer with the place", realAgain.body)
	}
	r := h.pollAs("bot", "")
	wantShadowPlace(t, "the shadowed visitor's poll without its place", r, realAgain, 5012, 5012)
	if body := r.json(t); body["positionIsBound"] != nil || body["place"] != shadowPlace {
		t.Fatalf("the shadowed visitor's poll without its place: %s; want an exact answer with the place", r.body)
	}
}
