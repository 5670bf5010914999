package admission_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/test/builder"
)

// newPassKeys is a queue's key set as the operator keeps it in the Secret.
func newPassKeys(t *testing.T, alg pass.Algorithm) (*pass.KeySet, string) {
	t.Helper()
	ks := &pass.KeySet{}
	if _, err := ks.Rotate(time.Now(), pass.Rotation{Algorithm: alg, Every: 24 * time.Hour, Keep: time.Hour}); err != nil {
		t.Fatal(err)
	}
	raw, err := ks.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return ks, string(raw)
}

func jwtQueue(alg herdgatev1alpha1.PassAlgorithm) func(*herdgatev1alpha1.WaitingQueue) {
	return func(wq *herdgatev1alpha1.WaitingQueue) {
		*wq = *builder.From(wq).JWTPasses(alg, 0).Obj()
	}
}

// admitted enters v, admits it and returns the pass its status hands out.
func (h *harness) admitted(v *visitor) string {
	h.t.Helper()
	v.enter()
	if len(h.admit(1, 0).Admitted) != 1 {
		h.t.Fatal("the tick admitted nobody")
	}
	time.Sleep(550 * time.Millisecond) // the poll interval after the entry
	body := v.status().json(h.t)
	token, _ := body["pass"].(string)
	if body["admitted"] != true || token == "" {
		h.t.Fatalf("status after admission: %v", body)
	}
	return token
}

// TestJWTPassesOpenTheProtectedRoutes: a queue with JWT passes hands out an ES256 JWT that a JOSE
// library verifies with the keys from /.herdgate/jwks.json alone; the pass opens the protected
// routes and never reaches the upstream; another queue's JWT, a forged one and an expired one do not.
func TestJWTPassesOpenTheProtectedRoutes(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		own, keys := newPassKeys(t, pass.ES256)
		h := newHarnessWith(t, harnessOptions{passKeys: keys}, jwtQueue(herdgatev1alpha1.PassAlgorithmES256))
		v := h.visitor()
		token := h.admitted(v)
		if strings.Count(token, ".") != 2 {
			t.Fatalf("pass %q is not a compact JWT", token)
		}

		res := v.do(http.MethodGet, "/.herdgate/jwks.json", nil)
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/jwk-set+json" ||
			!strings.Contains(res.Header.Get("Cache-Control"), "max-age=") {
			t.Fatalf("jwks.json: %d %v %s", res.StatusCode, res.Header, res.body)
		}
		var set jose.JSONWebKeySet
		if err := json.Unmarshal(res.body, &set); err != nil {
			t.Fatal(err)
		}
		parsed, err := josejwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
		if err != nil {
			t.Fatal(err)
		}
		published := set.Key(parsed.Headers[0].KeyID)
		var c josejwt.Claims
		if len(published) != 1 || parsed.Claims(published[0].Key, &c) != nil {
			t.Fatalf("the pass does not verify with the published key %s", parsed.Headers[0].KeyID)
		}
		if err := c.ValidateWithLeeway(josejwt.Expected{Issuer: pass.Issuer, AnyAudience: josejwt.Audience{"shop/orders"}, Time: time.Now()}, time.Second); err != nil {
			t.Fatalf("claims: %v", err)
		}

		if r := v.do(http.MethodPost, "/api/v1/orders", strings.NewReader(`{}`)); r.StatusCode != http.StatusOK {
			t.Fatalf("order with the JWT pass cookie: %d %s", r.StatusCode, r.body)
		}
		for _, call := range h.upstream.all() {
			if call.Header.Get(admission.PassHeader) != "" || strings.Contains(call.Header.Get("Cookie"), "herdgate_") {
				t.Fatalf("the pass reached the upstream: %v", call.Header)
			}
		}

		otherKeys, _ := newPassKeys(t, pass.ES256)
		other, err := pass.NewJWTPasses("shop/orders", otherKeys, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		otherQueue, _ := pass.NewJWTPasses("shop/other", own, time.Now)
		now := time.Now()
		for name, forged := range map[string]string{
			"signed by other keys":     other.Issue("x", now, now.Add(time.Minute)),
			"another queue's":          otherQueue.Issue("x", now, now.Add(time.Minute)),
			"expired":                  mustJWT(t, own).Issue("x", now.Add(-time.Hour), now.Add(-time.Minute)),
			"with a changed signature": token[:len(token)-4] + "AAAA",
			"of another format":        "AQAAAZ",
		} {
			r := h.visitor().do(http.MethodPost, "/api/v1/orders", nil, admission.PassHeader, forged)
			if r.StatusCode == http.StatusOK {
				t.Errorf("a pass %s opened the route", name)
			}
		}
	})
}

func mustJWT(t *testing.T, ks *pass.KeySet) *pass.JWTPasses {
	t.Helper()
	j, err := pass.NewJWTPasses("shop/orders", ks, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestNoJWKSWithoutPublicKeys: a queue whose passes no public key verifies says so with a 404 JSON
// answer, never an empty key set a gateway would take for one that refuses everything.
func TestNoJWKSWithoutPublicKeys(t *testing.T) {
	_, hs256 := newPassKeys(t, pass.HS256)
	for name, opts := range map[string]struct {
		keys   string
		change func(*herdgatev1alpha1.WaitingQueue)
	}{
		"HMAC passes":  {"", nil},
		"HS256 passes": {hs256, jwtQueue(herdgatev1alpha1.PassAlgorithmHS256)},
	} {
		h := newHarnessWith(t, harnessOptions{passKeys: opts.keys, memory: true}, opts.change)
		r := h.visitor().do(http.MethodGet, "/.herdgate/jwks.json", nil)
		if r.StatusCode != http.StatusNotFound || r.json(t)["error"] != "no_public_keys" {
			t.Errorf("%s: jwks.json answered %d %s", name, r.StatusCode, r.body)
		}
	}
	// A JWT queue without its keys is no config: the proxy keeps the last good one.
	_, err := admission.NewConfigWithSecrets(builder.Queue("shop", "orders").JWTPasses("", 0).Obj(), make([]byte, 32), nil)
	if err == nil || !strings.Contains(err.Error(), "spec.pass.format") {
		t.Errorf("a JWT queue without keys: %v", err)
	}
}
