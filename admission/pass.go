package admission

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash"
	"sync"
	"time"

	"github.com/herdgate/herdgate/internal/queue"
)

// A pass is base64url(version | notBefore ms | expiry ms | len | visitor | HMAC-SHA256), the MAC taken
// over the queue UID and everything before it. It is checked in memory: no Redis call on the
// protected path.
const (
	passVersion = 1
	passHeader  = 1 + 8 + 8 + 1
	macSize     = sha256.Size
	// MaxPassLength is the longest encoded pass accepted; anything longer is refused unread.
	MaxPassLength = (passHeader + queue.MaxVisitorIDLength + macSize + 2) / 3 * 4
	// passLeeway tolerates a proxy clock slightly behind Redis' at the not-before time. A visitor only
	// learns its pass from a status answer given at or after not-before, so this opens nothing early.
	passLeeway = time.Second
)

// PassResult is the outcome of a pass verification, also the label of the verification metric.
type PassResult string

// The outcomes of Verify.
const (
	PassValid        PassResult = "valid"
	PassMissing      PassResult = "missing"
	PassOversized    PassResult = "oversized"
	PassMalformed    PassResult = "malformed"
	PassTampered     PassResult = "tampered" // also another queue's pass: its MAC does not verify here
	PassExpired      PassResult = "expired"
	PassNotYetValid  PassResult = "not_yet_valid"
	PassWrongVisitor PassResult = "wrong_visitor"
)

// Pass is a verified pass.
type Pass struct {
	Visitor   string
	NotBefore time.Time
	Expiry    time.Time
}

// Signer issues and verifies passes and visitor cookies for one queue. It is safe for concurrent use.
type Signer struct {
	queueUID []byte
	macs     sync.Pool // of hash.Hash (HMAC-SHA256 keyed for this queue)
}

// NewSigner returns a signer for the queue with the given UID and HMAC key (at least 32 bytes).
func NewSigner(queueUID string, key []byte) (*Signer, error) {
	if len(key) < 32 {
		return nil, errors.New("HMAC key must be at least 32 bytes")
	}
	if queueUID == "" {
		return nil, errors.New("queue UID is empty")
	}
	k := append([]byte(nil), key...)
	s := &Signer{queueUID: []byte(queueUID)}
	s.macs.New = func() any { return hmac.New(sha256.New, k) }
	return s, nil
}

func (s *Signer) mac(domain byte, parts ...[]byte) [macSize]byte {
	h := s.macs.Get().(hash.Hash)
	h.Reset()
	h.Write([]byte{domain})
	h.Write(s.queueUID)
	h.Write([]byte{0})
	for _, p := range parts {
		h.Write(p)
	}
	var sum [macSize]byte
	h.Sum(sum[:0])
	s.macs.Put(h)
	return sum
}

// Domains keep a pass MAC from ever verifying as a cookie MAC and the other way round.
const (
	domainPass    = 'P'
	domainVisitor = 'V'
)

// Issue signs a pass for visitor valid from notBefore to expiry.
func (s *Signer) Issue(visitor string, notBefore, expiry time.Time) string {
	buf := make([]byte, 0, passHeader+len(visitor)+macSize)
	buf = append(buf, passVersion)
	buf = binary.BigEndian.AppendUint64(buf, uint64(notBefore.UnixMilli()))
	buf = binary.BigEndian.AppendUint64(buf, uint64(expiry.UnixMilli()))
	buf = append(buf, byte(len(visitor)))
	buf = append(buf, visitor...)
	sum := s.mac(domainPass, buf)
	buf = append(buf, sum[:]...)
	return base64.RawURLEncoding.EncodeToString(buf)
}

// Verify checks a pass at time now. When visitor is not empty the pass must be that visitor's.
func (s *Signer) Verify(token, visitor string, now time.Time) (Pass, PassResult) {
	switch {
	case token == "":
		return Pass{}, PassMissing
	case len(token) > MaxPassLength:
		return Pass{}, PassOversized
	}
	var raw [passHeader + queue.MaxVisitorIDLength + macSize + 3]byte
	n, err := base64.RawURLEncoding.Decode(raw[:], []byte(token))
	if err != nil || n < passHeader+macSize || raw[0] != passVersion {
		return Pass{}, PassMalformed
	}
	vlen := int(raw[passHeader-1])
	if n != passHeader+vlen+macSize {
		return Pass{}, PassMalformed
	}
	body := raw[:passHeader+vlen]
	want := s.mac(domainPass, body)
	if !hmac.Equal(want[:], raw[passHeader+vlen:n]) {
		return Pass{}, PassTampered
	}
	p := Pass{
		Visitor:   string(body[passHeader:]),
		NotBefore: time.UnixMilli(int64(binary.BigEndian.Uint64(raw[1:9]))),
		Expiry:    time.UnixMilli(int64(binary.BigEndian.Uint64(raw[9:17]))),
	}
	switch {
	case visitor != "" && visitor != p.Visitor:
		return p, PassWrongVisitor
	case !now.Before(p.Expiry):
		return p, PassExpired
	case now.Add(passLeeway).Before(p.NotBefore):
		return p, PassNotYetValid
	}
	return p, PassValid
}

// visitorIDBytes is the entropy of an anonymous visitor ID.
const visitorIDBytes = 16

// NewVisitorCookie mints an anonymous visitor ID and its signed cookie value "id.mac".
func (s *Signer) NewVisitorCookie() (id, cookie string) {
	var raw [visitorIDBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	id = base64.RawURLEncoding.EncodeToString(raw[:])
	return id, s.visitorCookie(id)
}

func (s *Signer) visitorCookie(id string) string {
	sum := s.mac(domainVisitor, []byte(id))
	return id + "." + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// VerifyVisitorCookie returns the visitor ID of a cookie value this signer made, or false.
func (s *Signer) VerifyVisitorCookie(cookie string) (string, bool) {
	const idLen, macLen = 22, 22 // base64url of 16 bytes
	if len(cookie) != idLen+1+macLen || cookie[idLen] != '.' {
		return "", false
	}
	id := cookie[:idLen]
	var got [17]byte
	if n, err := base64.RawURLEncoding.Decode(got[:], []byte(cookie[idLen+1:])); err != nil || n != 16 {
		return "", false
	}
	want := s.mac(domainVisitor, []byte(id))
	if !hmac.Equal(want[:16], got[:16]) {
		return "", false
	}
	return id, true
}
