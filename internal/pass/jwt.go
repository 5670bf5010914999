package pass

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Issuer is the iss claim of every JWT pass.
const Issuer = "herdgate"

// MaxJWTLength bounds the JWT passes read; anything longer is refused unread.
const MaxJWTLength = 2048

// Passes issues and verifies a queue's passes: the HMAC pass of Signer or the JWT pass of JWTPasses.
type Passes interface {
	// Issue signs a pass for visitor valid from notBefore to expiry.
	Issue(visitor string, notBefore, expiry time.Time) string
	// Verify checks a pass at time now. When visitor is not empty the pass must be that visitor's.
	Verify(token, visitor string, now time.Time) (Pass, Result)
}

// JWTPasses issues and verifies JWT passes (RFC 7519) a gateway can verify on its own: signed with
// the queue's current key, kid naming it, iss herdgate, aud the queue, sub the visitor, nbf, exp
// and a unique jti. A signature is checked once per replica: the verified claims are kept, so the
// protected path costs a keyed hash and a map lookup. It is safe for concurrent use.
type JWTPasses struct {
	audience string
	keys     *KeySet
	byID     map[string]*Key
	parser   *jwt.Parser
	now      func() time.Time

	mu       sync.RWMutex
	seed     maphash.Seed
	verified map[uint64]verifiedPass
}

// verifiedPass is a pass whose signature verified, found by a keyed hash of the whole token. A hit
// must also carry the same signature, so a token made to collide with a kept one would need its
// signature too.
type verifiedPass struct {
	Pass
	signature string
}

// maxVerified bounds the verified passes kept; when it is reached they are forgotten and verified
// anew, which costs signatures, never admissions.
const maxVerified = 1 << 16

// NewJWTPasses returns the JWT passes of the queue named audience ("namespace/name"), signed and
// verified with keys; now tells which key signs.
func NewJWTPasses(audience string, keys *KeySet, now func() time.Time) (*JWTPasses, error) {
	if len(keys.Keys) == 0 {
		return nil, errors.New("pass keys: the set is empty")
	}
	j := &JWTPasses{audience: audience, keys: keys, byID: map[string]*Key{}, now: now, seed: maphash.MakeSeed(), verified: map[uint64]verifiedPass{}}
	var algs []string
	for i := range keys.Keys {
		k := &keys.Keys[i]
		j.byID[k.ID] = k
		if len(algs) == 0 || algs[len(algs)-1] != string(k.Algorithm) {
			algs = append(algs, string(k.Algorithm))
		}
	}
	// Claims are checked by Verify with its own clock, so that it reports why a pass is refused.
	j.parser = jwt.NewParser(jwt.WithValidMethods(algs), jwt.WithoutClaimsValidation())
	return j, nil
}

// Keys is the key set the passes are signed and verified with.
func (j *JWTPasses) Keys() *KeySet { return j.keys }

// claims are a pass's claims. aud is one string, not a list, so that a gateway reads it as a plain
// value (HAProxy's json_query, for one).
type claims struct {
	Issuer    string           `json:"iss"`
	Subject   string           `json:"sub"`
	Audience  string           `json:"aud"`
	NotBefore *jwt.NumericDate `json:"nbf"`
	Expiry    *jwt.NumericDate `json:"exp"`
	IssuedAt  *jwt.NumericDate `json:"iat"`
	ID        string           `json:"jti"`
}

func (c *claims) GetExpirationTime() (*jwt.NumericDate, error) { return c.Expiry, nil }
func (c *claims) GetIssuedAt() (*jwt.NumericDate, error)       { return c.IssuedAt, nil }
func (c *claims) GetNotBefore() (*jwt.NumericDate, error)      { return c.NotBefore, nil }
func (c *claims) GetIssuer() (string, error)                   { return c.Issuer, nil }
func (c *claims) GetSubject() (string, error)                  { return c.Subject, nil }
func (c *claims) GetAudience() (jwt.ClaimStrings, error)       { return jwt.ClaimStrings{c.Audience}, nil }

// Issue signs a pass with the key that signs now. JWT times are whole seconds: not-before is rounded
// up, so that no gateway lets the pass in before the tick's jitter says, and the expiry down.
func (j *JWTPasses) Issue(visitor string, notBefore, expiry time.Time) string {
	k := j.keys.Signing(j.now())
	if k == nil {
		k = &j.keys.Keys[0] // the clock is behind the first key's turn: sign with it all the same
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	c := &claims{
		Issuer: Issuer, Subject: visitor, Audience: j.audience,
		NotBefore: jwt.NewNumericDate(notBefore.Add(time.Second - 1).Truncate(time.Second)),
		Expiry:    jwt.NewNumericDate(expiry.Truncate(time.Second)),
		IssuedAt:  jwt.NewNumericDate(j.now().Truncate(time.Second)),
		ID:        base64.RawURLEncoding.EncodeToString(id[:]),
	}
	t := jwt.NewWithClaims(jwt.GetSigningMethod(string(k.Algorithm)), c)
	t.Header["kid"] = k.ID
	var key any = k.ecdsa
	if k.Algorithm == HS256 {
		key = k.secret
	}
	s, err := t.SignedString(key)
	if err != nil {
		panic(err) // the keys were checked when the set was read
	}
	return s
}

// Verify checks a JWT pass at time now: its signature by a key of the set, its issuer and audience
// (another queue's pass is Tampered), its visitor and its times.
func (j *JWTPasses) Verify(token, visitor string, now time.Time) (Pass, Result) {
	switch {
	case token == "":
		return Pass{}, Missing
	case len(token) > MaxJWTLength:
		return Pass{}, Oversized
	}
	sum := maphash.String(j.seed, token)
	j.mu.RLock()
	v, ok := j.verified[sum]
	j.mu.RUnlock()
	p := v.Pass
	if !ok || !strings.HasSuffix(token, v.signature) {
		var r Result
		if p, r = j.verifySignature(token); r != Valid {
			return p, r
		}
		j.mu.Lock()
		if len(j.verified) >= maxVerified {
			clear(j.verified)
		}
		j.verified[sum] = verifiedPass{Pass: p, signature: strings.Clone(token[strings.LastIndexByte(token, '.'):])}
		j.mu.Unlock()
	}
	switch {
	case visitor != "" && p.Visitor != visitor:
		return p, WrongVisitor
	case !now.Before(p.Expiry):
		return p, Expired
	case now.Add(passLeeway).Before(p.NotBefore):
		return p, NotYetValid
	}
	return p, Valid
}

func (j *JWTPasses) verifySignature(token string) (Pass, Result) {
	c := &claims{}
	_, err := j.parser.ParseWithClaims(token, c, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		k := j.byID[kid]
		switch {
		case k == nil:
			return nil, errors.New("unknown kid")
		case t.Method.Alg() != string(k.Algorithm):
			return nil, errors.New("algorithm is not the key's")
		case k.Algorithm == HS256:
			return k.secret, nil
		}
		return &k.ecdsa.PublicKey, nil
	})
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return Pass{}, Malformed
	case err != nil:
		return Pass{}, Tampered
	case c.Issuer != Issuer || c.Audience != j.audience:
		return Pass{}, Tampered
	case c.NotBefore == nil || c.Expiry == nil || c.Subject == "" || len(c.Subject) > MaxVisitorLength:
		return Pass{}, Malformed
	}
	return Pass{Visitor: c.Subject, NotBefore: c.NotBefore.Time, Expiry: c.Expiry.Time}, Valid
}
