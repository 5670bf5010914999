package pass

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Algorithm is the JWS algorithm of a JWT pass.
type Algorithm string

// The algorithms a JWT pass is signed with.
const (
	// ES256 (ECDSA on P-256): gateways verify with the published public key and cannot sign.
	ES256 Algorithm = "ES256"
	// HS256 (HMAC-SHA256): faster, but every gateway that verifies holds the key that signs.
	HS256 Algorithm = "HS256"
)

// hs256KeyBytes is the size of an HS256 key: as long as the MAC.
const hs256KeyBytes = 32

// Key is one signing key of a queue's JWT passes. It signs from ActiveFrom until the next key's
// ActiveFrom, and verifies until every pass it signed has expired.
type Key struct {
	ID         string
	Algorithm  Algorithm
	ActiveFrom time.Time
	ecdsa      *ecdsa.PrivateKey
	secret     []byte
}

// KeySet is a queue's JWT pass keys, oldest first: retired keys still verifying, the current one,
// and the next one, published ahead of its ActiveFrom so that every gateway knows it before the
// first pass it signs. It is kept in the queue's Secret (Marshal, ParseKeySet).
type KeySet struct {
	Keys []Key
}

// GenerateKey makes a fresh key of the algorithm that signs from activeFrom.
func GenerateKey(alg Algorithm, activeFrom time.Time) (Key, error) {
	var id [9]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Key{}, err
	}
	k := Key{ID: base64.RawURLEncoding.EncodeToString(id[:]), Algorithm: alg, ActiveFrom: activeFrom.UTC().Truncate(time.Second)}
	switch alg {
	case ES256:
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return Key{}, err
		}
		k.ecdsa = priv
	case HS256:
		// 32 random bytes, written in base64url: the key is the text, so that a gateway that takes
		// the secret as a string in its configuration (HAProxy's jwt_verify) can hold it.
		raw := make([]byte, hs256KeyBytes)
		if _, err := rand.Read(raw); err != nil {
			return Key{}, err
		}
		k.secret = []byte(base64.RawURLEncoding.EncodeToString(raw))
	default:
		return Key{}, fmt.Errorf("unknown pass algorithm %q", alg)
	}
	return k, nil
}

// storedKey is a key as kept in the Secret: the private key as PKCS #8 DER, or the HS256 secret.
type storedKey struct {
	ID         string    `json:"kid"`
	Algorithm  Algorithm `json:"alg"`
	ActiveFrom time.Time `json:"activeFrom"`
	Key        []byte    `json:"key"`
}

type storedKeySet struct {
	Keys []storedKey `json:"keys"`
}

// Marshal is the key set as kept in the queue's Secret, private keys included.
func (ks *KeySet) Marshal() ([]byte, error) {
	out := storedKeySet{Keys: make([]storedKey, 0, len(ks.Keys))}
	for _, k := range ks.Keys {
		sk := storedKey{ID: k.ID, Algorithm: k.Algorithm, ActiveFrom: k.ActiveFrom}
		switch k.Algorithm {
		case ES256:
			der, err := x509.MarshalPKCS8PrivateKey(k.ecdsa)
			if err != nil {
				return nil, err
			}
			sk.Key = der
		case HS256:
			sk.Key = k.secret
		}
		out.Keys = append(out.Keys, sk)
	}
	return json.Marshal(out)
}

// ParseKeySet reads a key set Marshal wrote; an error says which key is unfit.
func ParseKeySet(data []byte) (*KeySet, error) {
	var in storedKeySet
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("pass keys: %w", err)
	}
	ks := &KeySet{}
	for i, sk := range in.Keys {
		k := Key{ID: sk.ID, Algorithm: sk.Algorithm, ActiveFrom: sk.ActiveFrom}
		if k.ID == "" {
			return nil, fmt.Errorf("pass keys: key %d has no kid", i)
		}
		switch sk.Algorithm {
		case ES256:
			parsed, err := x509.ParsePKCS8PrivateKey(sk.Key)
			if err != nil {
				return nil, fmt.Errorf("pass keys: key %s: %w", k.ID, err)
			}
			priv, ok := parsed.(*ecdsa.PrivateKey)
			if !ok || priv.Curve != elliptic.P256() {
				return nil, fmt.Errorf("pass keys: key %s is not a P-256 key", k.ID)
			}
			k.ecdsa = priv
		case HS256:
			if len(sk.Key) < hs256KeyBytes {
				return nil, fmt.Errorf("pass keys: key %s is shorter than %d bytes", k.ID, hs256KeyBytes)
			}
			k.secret = sk.Key
		default:
			return nil, fmt.Errorf("pass keys: key %s has unknown algorithm %q", k.ID, sk.Algorithm)
		}
		ks.Keys = append(ks.Keys, k)
	}
	slices.SortStableFunc(ks.Keys, func(a, b Key) int { return a.ActiveFrom.Compare(b.ActiveFrom) })
	return ks, nil
}

// Signing is the key that signs at now: the last one active by then, or nil when none is.
func (ks *KeySet) Signing(now time.Time) *Key {
	for i := len(ks.Keys) - 1; i >= 0; i-- {
		if !ks.Keys[i].ActiveFrom.After(now) {
			return &ks.Keys[i]
		}
	}
	return nil
}

// Slots are the keys a gateway must accept at now: the key before the signing one (its passes may
// still live), the signing key and the next one (a replica whose clock runs ahead signs with it).
// A slot with no key of its own holds the signing key, so that every slot always holds a key.
func (ks *KeySet) Slots(now time.Time) (previous, current, next *Key) {
	i := len(ks.Keys) - 1
	for i > 0 && ks.Keys[i].ActiveFrom.After(now) {
		i--
	}
	previous, current, next = &ks.Keys[i], &ks.Keys[i], &ks.Keys[i]
	if i > 0 {
		previous = &ks.Keys[i-1]
	}
	if i+1 < len(ks.Keys) {
		next = &ks.Keys[i+1]
	}
	return previous, current, next
}

// The names of the slots, as Slots orders them.
const (
	SlotPrevious = "previous"
	SlotCurrent  = "current"
	SlotNext     = "next"
)

// PublicPEMs are the ES256 slots' public keys in PEM by slot name (Slots), as HAProxy's jwt_verify
// reads them from files named after the slots; empty for HS256 keys.
func (ks *KeySet) PublicPEMs(now time.Time) (map[string][]byte, error) {
	previous, current, next := ks.Slots(now)
	out := map[string][]byte{}
	for slot, k := range map[string]*Key{SlotPrevious: previous, SlotCurrent: current, SlotNext: next} {
		pem, err := k.PublicPEM()
		if err != nil {
			return nil, err
		}
		if pem != nil {
			out[slot] = pem
		}
	}
	return out, nil
}

// Rotation says how a key set changes with time.
type Rotation struct {
	// Algorithm signs new passes; keys of another algorithm are retired at once.
	Algorithm Algorithm
	// Every is how long a key signs. The next key is published this long ahead of its turn.
	Every time.Duration
	// Keep is how long a retired key still verifies: at least the longest a pass lives.
	Keep time.Duration
}

// Rotate brings the key set to what it must hold at now: a signing key of the algorithm, the next
// key, published ahead, and the retired keys whose passes may still be alive, no older. It reports
// whether anything changed.
func (ks *KeySet) Rotate(now time.Time, r Rotation) (bool, error) {
	if r.Every <= 0 {
		return false, errors.New("the rotation period must be positive")
	}
	now = now.UTC()
	changed := false
	add := func(activeFrom time.Time) error {
		k, err := GenerateKey(r.Algorithm, activeFrom)
		if err == nil {
			ks.Keys = append(ks.Keys, k)
			changed = true
		}
		return err
	}
	// A signing key of the algorithm, from now when there is none (a new queue, or a new algorithm).
	if cur := ks.Signing(now); cur == nil || cur.Algorithm != r.Algorithm {
		for i := range ks.Keys { // a next key of the old algorithm never signs
			if ks.Keys[i].ActiveFrom.After(now) {
				ks.Keys = ks.Keys[:i]
				break
			}
		}
		if err := add(now.Add(-time.Second)); err != nil {
			return false, err
		}
	}
	// The next key, a period after the current one, or a period from now when that is past.
	if last := ks.Keys[len(ks.Keys)-1]; !last.ActiveFrom.After(now) {
		next := last.ActiveFrom.Add(r.Every)
		if !next.After(now) {
			next = now.Add(r.Every)
		}
		if err := add(next); err != nil {
			return false, err
		}
	}
	// A retired key goes once its successor has signed for Keep: every pass it signed has expired.
	for len(ks.Keys) > 1 && !ks.Keys[1].ActiveFrom.Add(r.Keep).After(now) {
		ks.Keys = ks.Keys[1:]
		changed = true
	}
	return changed, nil
}

// NextChange is when, after now, Rotate next has something to do: the next key's turn, or the end
// of the oldest retired key. The controller requeues for it.
func (ks *KeySet) NextChange(now time.Time, r Rotation) time.Time {
	var at time.Time
	consider := func(t time.Time) {
		if t.After(now) && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	for _, k := range ks.Keys {
		consider(k.ActiveFrom)
	}
	if len(ks.Keys) > 1 {
		consider(ks.Keys[1].ActiveFrom.Add(r.Keep))
	}
	return at
}

// PublicJWKS is the key set gateways verify ES256 passes with (RFC 7517): public keys only; HS256
// keys are left out.
func (ks *KeySet) PublicJWKS() ([]byte, error) { return ks.jwks(false) }

// SecretJWKS is the key set with the HS256 keys' secrets too: publish it only where a Secret would
// be kept.
func (ks *KeySet) SecretJWKS() ([]byte, error) { return ks.jwks(true) }

func (ks *KeySet) jwks(secrets bool) ([]byte, error) {
	set := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, 0, len(ks.Keys))}
	for _, k := range ks.Keys {
		jwk := jose.JSONWebKey{KeyID: k.ID, Algorithm: string(k.Algorithm), Use: "sig"}
		switch {
		case k.Algorithm == ES256:
			jwk.Key = &k.ecdsa.PublicKey
		case secrets:
			jwk.Key = k.secret
		default:
			continue
		}
		set.Keys = append(set.Keys, jwk)
	}
	return json.Marshal(set)
}

// PublicPEM is an ES256 key's public key in PEM (SubjectPublicKeyInfo), as HAProxy's jwt_verify
// reads it; nil for an HS256 key.
func (k *Key) PublicPEM() ([]byte, error) {
	if k.Algorithm != ES256 {
		return nil, nil
	}
	der, err := x509.MarshalPKIXPublicKey(&k.ecdsa.PublicKey)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// Secret is an HS256 key's secret; nil for an ES256 key.
func (k *Key) Secret() []byte { return k.secret }
