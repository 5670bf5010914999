package pass

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"
	"github.com/golang-jwt/jwt/v5"
)

const audience = "shop/orders"

func newKeySet(t *testing.T, alg Algorithm, now time.Time) *KeySet {
	t.Helper()
	ks := &KeySet{}
	if _, err := ks.Rotate(now, Rotation{Algorithm: alg, Every: 24 * time.Hour, Keep: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	return ks
}

func newJWTPasses(t *testing.T, ks *KeySet, aud string, now time.Time) *JWTPasses {
	t.Helper()
	j, err := NewJWTPasses(aud, ks, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestJWTPassVerdicts: a JWT pass verifies for its visitor in its queue between its not-before and
// its expiry, and every kind of forgery, another queue's pass and an algorithm swap is refused.
func TestJWTPassVerdicts(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for _, alg := range []Algorithm{ES256, HS256} {
		t.Run(string(alg), func(t *testing.T) {
			ks := newKeySet(t, alg, now)
			j := newJWTPasses(t, ks, audience, now)
			token := j.Issue("ada", now.Add(200*time.Millisecond), now.Add(5*time.Minute))
			p, r := j.Verify(token, "ada", now.Add(2*time.Second))
			if r != Valid || p.Visitor != "ada" {
				t.Fatalf("Verify = %+v, %s", p, r)
			}
			if want := now.Add(time.Second); !p.NotBefore.Equal(want) {
				t.Errorf("not-before %s, want %s: rounded up to the second, never earlier than asked", p.NotBefore, want)
			}
			otherQueue := newJWTPasses(t, ks, "shop/other", now)
			otherKeys := newJWTPasses(t, newKeySet(t, alg, now), audience, now)
			parts := strings.Split(token, ".")
			payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
			swapped := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), `"sub":"ada"`, `"sub":"bea"`, 1)))
			for name, c := range map[string]struct {
				j       *JWTPasses
				token   string
				visitor string
				at      time.Time
				want    Result
			}{
				"no pass":               {j, "", "ada", now.Add(2 * time.Second), Missing},
				"before not-before":     {j, token, "ada", now.Add(-time.Second), NotYetValid},
				"at expiry":             {j, token, "ada", now.Add(5 * time.Minute), Expired},
				"another visitor":       {j, token, "bea", now.Add(2 * time.Second), WrongVisitor},
				"another queue":         {otherQueue, token, "ada", now.Add(2 * time.Second), Tampered},
				"another queue's keys":  {otherKeys, token, "ada", now.Add(2 * time.Second), Tampered},
				"a changed subject":     {j, parts[0] + "." + swapped + "." + parts[2], "bea", now.Add(2 * time.Second), Tampered},
				"no signature":          {j, parts[0] + "." + parts[1] + ".", "ada", now.Add(2 * time.Second), Tampered},
				"alg none":              {j, algNone(parts), "ada", now.Add(2 * time.Second), Tampered},
				"not a JWT":             {j, "a.b", "ada", now.Add(2 * time.Second), Malformed},
				"an HMAC pass":          {j, hmacPass(t, now), "ada", now.Add(2 * time.Second), Malformed},
				"oversized":             {j, strings.Repeat("a", MaxJWTLength+1), "ada", now, Oversized},
				"HS256 with public key": {j, confused(t, ks, now), "ada", now.Add(2 * time.Second), Tampered},
			} {
				if alg == HS256 && name == "HS256 with public key" {
					continue
				}
				if _, r := c.j.Verify(c.token, c.visitor, c.at); r != c.want {
					t.Errorf("%s: %s, want %s", name, r, c.want)
				}
			}
		})
	}
}

func algNone(parts []string) string {
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	return header + "." + parts[1] + "."
}

func hmacPass(t *testing.T, now time.Time) string {
	s, err := NewSigner("uid", make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	return s.Issue("ada", now, now.Add(time.Minute))
}

// confused signs with HS256 using the ES256 public key as the secret: the classic algorithm swap.
func confused(t *testing.T, ks *KeySet, now time.Time) string {
	k := ks.Signing(now)
	if k.Algorithm != ES256 {
		return ""
	}
	public, err := k.PublicPEM()
	if err != nil {
		t.Fatal(err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": Issuer, "aud": audience, "sub": "ada", "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": "x",
	})
	tok.Header["kid"] = k.ID
	s, err := tok.SignedString(public)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestJWTPassClaims: the claims a gateway reads are all there, in the forms gateways read them.
func TestJWTPassClaims(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	ks := newKeySet(t, ES256, now)
	j := newJWTPasses(t, ks, audience, now)
	a := j.Issue("ada", now, now.Add(time.Minute))
	b := j.Issue("ada", now, now.Add(time.Minute))
	header, payload := decodePart(t, a, 0), decodePart(t, a, 1)
	if header["kid"] != ks.Signing(now).ID || header["alg"] != "ES256" || header["typ"] != "JWT" {
		t.Errorf("header %v", header)
	}
	if payload["iss"] != Issuer || payload["aud"] != audience || payload["sub"] != "ada" ||
		payload["nbf"] != float64(now.Unix()) || payload["exp"] != float64(now.Add(time.Minute).Unix()) {
		t.Errorf("payload %v", payload)
	}
	if payload["jti"] == "" || payload["jti"] == decodePart(t, b, 1)["jti"] {
		t.Errorf("jti %v and %v: each pass has its own", payload["jti"], decodePart(t, b, 1)["jti"])
	}
}

func decodePart(t *testing.T, token string, i int) map[string]any {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[i])
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPassesOutliveRotation walks a queue's keys through three weeks of daily rotation, an hour at
// a time, as the operator would: at every step a key is published ahead of its turn, and every pass
// issued so far that has not expired verifies with the keys in force, both by herdgate and by a
// JOSE library reading only the published JWKS.
func TestPassesOutliveRotation(t *testing.T) {
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	const ttl = 5 * time.Hour
	r := Rotation{Algorithm: ES256, Every: 24 * time.Hour, Keep: ttl + time.Minute}
	ks := &KeySet{}
	type issued struct {
		token  string
		expiry time.Time
	}
	var passes []issued
	signers := map[string]bool{}
	for now := start; now.Before(start.Add(21 * 24 * time.Hour)); now = now.Add(time.Hour) {
		if _, err := ks.Rotate(now, r); err != nil {
			t.Fatal(err)
		}
		// Keep it in the Secret's form, as the operator does.
		raw, err := ks.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if ks, err = ParseKeySet(raw); err != nil {
			t.Fatal(err)
		}
		if next := ks.Keys[len(ks.Keys)-1]; !next.ActiveFrom.After(now) {
			t.Fatalf("at %s no key is published ahead", now)
		}
		if len(ks.Keys) > 3 {
			t.Fatalf("at %s %d keys are kept: retired keys are not dropped", now, len(ks.Keys))
		}
		j := newJWTPasses(t, ks, audience, now)
		signers[ks.Signing(now).ID] = true
		passes = append(passes, issued{j.Issue("ada", now, now.Add(ttl)), now.Add(ttl)})
		set := jwksOf(t, ks)
		for _, p := range passes {
			if !now.Before(p.expiry) {
				continue
			}
			if _, r := j.Verify(p.token, "ada", now); r != Valid {
				t.Fatalf("at %s a pass expiring %s is %s after rotation", now, p.expiry, r)
			}
			verifyWithJOSE(t, set, p.token, now)
		}
	}
	if len(signers) < 20 {
		t.Errorf("%d keys signed in three weeks of daily rotation", len(signers))
	}
}

func jwksOf(t *testing.T, ks *KeySet) jose.JSONWebKeySet {
	t.Helper()
	raw, err := ks.PublicJWKS()
	if err != nil {
		t.Fatal(err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil {
		t.Fatal(err)
	}
	for _, k := range set.Keys {
		if !k.IsPublic() {
			t.Fatalf("the JWKS publishes a private key: %s", raw)
		}
	}
	return set
}

// verifyWithJOSE checks a pass as a gateway would, with go-jose and the published keys only.
func verifyWithJOSE(t *testing.T, set jose.JSONWebKeySet, token string, now time.Time) {
	t.Helper()
	parsed, err := josejwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	keys := set.Key(parsed.Headers[0].KeyID)
	if len(keys) != 1 {
		t.Fatalf("kid %s is not in the published JWKS", parsed.Headers[0].KeyID)
	}
	var c josejwt.Claims
	if err := parsed.Claims(keys[0].Key, &c); err != nil {
		t.Fatalf("go-jose refuses the signature: %v", err)
	}
	if err := c.ValidateWithLeeway(josejwt.Expected{Issuer: Issuer, AnyAudience: josejwt.Audience{audience}, Time: now}, 0); err != nil {
		t.Fatalf("go-jose refuses the claims: %v", err)
	}
}

// TestKeySetPublishesWhatGatewaysRead: the PEM is the key of the JWKS, and a stored set that is
// unfit is refused with the key it is about.
func TestKeySetPublishesWhatGatewaysRead(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	ks := newKeySet(t, ES256, now)
	cur := ks.Signing(now)
	raw, err := cur.PublicPEM()
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	set := jwksOf(t, ks)
	published := set.Key(cur.ID)
	if len(published) != 1 || !pub.(*ecdsa.PublicKey).Equal(published[0].Key) {
		t.Fatal("the PEM is not the JWKS key of the same kid")
	}
	for name, bad := range map[string]string{
		"not JSON":        `{`,
		"no kid":          `{"keys":[{"alg":"ES256","key":""}]}`,
		"unknown alg":     `{"keys":[{"kid":"a","alg":"RS256","key":""}]}`,
		"short HS256 key": `{"keys":[{"kid":"a","alg":"HS256","key":"YWJj"}]}`,
		"bad ES256 key":   `{"keys":[{"kid":"a","alg":"ES256","key":"YWJj"}]}`,
	} {
		if _, err := ParseKeySet([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	hs := newKeySet(t, HS256, now)
	if raw, _ := hs.PublicJWKS(); string(raw) != `{"keys":[]}` {
		t.Errorf("HS256 secrets in the public JWKS: %s", raw)
	}
	var secret jose.JSONWebKeySet
	if raw, _ := hs.SecretJWKS(); json.Unmarshal(raw, &secret) != nil || len(secret.Key(hs.Signing(now).ID)) != 1 {
		t.Errorf("the secret JWKS lacks the HS256 key: %s", raw)
	}
	if _, err := NewJWTPasses(audience, &KeySet{}, time.Now); err == nil {
		t.Error("an empty key set is accepted")
	}
}

// TestRotationChangesAlgorithm: a new algorithm signs at once; the old keys verify until they retire.
func TestRotationChangesAlgorithm(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	r := Rotation{Algorithm: ES256, Every: 24 * time.Hour, Keep: time.Hour}
	ks := newKeySet(t, ES256, now)
	old := newJWTPasses(t, ks, audience, now).Issue("ada", now, now.Add(30*time.Minute))
	r.Algorithm = HS256
	if changed, err := ks.Rotate(now.Add(time.Minute), r); err != nil || !changed {
		t.Fatalf("Rotate = %v, %v", changed, err)
	}
	j := newJWTPasses(t, ks, audience, now.Add(time.Minute))
	if k := ks.Signing(now.Add(time.Minute)); k.Algorithm != HS256 {
		t.Fatalf("signing with %s", k.Algorithm)
	}
	if _, r := j.Verify(old, "ada", now.Add(2*time.Minute)); r != Valid {
		t.Errorf("an ES256 pass after the switch: %s", r)
	}
	if _, r := j.Verify(j.Issue("ada", now, now.Add(time.Hour)), "ada", now.Add(2*time.Minute)); r != Valid {
		t.Errorf("an HS256 pass: %s", r)
	}
	for _, k := range ks.Keys {
		if k.Algorithm == ES256 && k.ActiveFrom.After(now.Add(time.Minute)) {
			t.Error("a next key of the old algorithm is kept")
		}
	}
	if _, err := ks.Rotate(now.Add(2*time.Hour), r); err != nil {
		t.Fatal(err)
	}
	for _, k := range ks.Keys {
		if k.Algorithm == ES256 {
			t.Error("an ES256 key outlives its passes")
		}
	}
	if at := ks.NextChange(now.Add(2*time.Hour), r); !at.After(now.Add(2 * time.Hour)) {
		t.Errorf("next change at %s", at)
	}
}

// TestHS256KeysArePrintable: an HS256 key is text a gateway's configuration can hold, with 32 random
// bytes in it.
func TestHS256KeysArePrintable(t *testing.T) {
	k, err := GenerateKey(HS256, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(string(k.Secret()))
	if err != nil || len(raw) != 32 {
		t.Errorf("HS256 key %q is not 32 bytes in base64url: %v", k.Secret(), err)
	}
}
