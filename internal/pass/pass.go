// Package pass issues and verifies the admission proxy's signed passes and visitor cookies: in
// memory, with no Redis call, so the protected path costs a MAC and admitted visitors keep working
// through a Redis outage.
package pass

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A pass is base64url(version | notBefore ms | expiry ms | len | visitor | HMAC-SHA256), the MAC taken
// over the queue UID and everything before it. It is checked in memory: no Redis call on the
// protected path.
// MaxVisitorLength is the longest visitor a pass, a place or a session names: the queue's own bound on a
// visitor ID (queue.MaxVisitorIDLength, which the package's tests hold it to), kept here so that what
// verifies a pass needs nothing of the queue.
const MaxVisitorLength = 128

const (
	passVersion = 1
	passHeader  = 1 + 8 + 8 + 1
	macSize     = sha256.Size
	// MaxLength is the longest encoded pass accepted; anything longer is refused unread.
	MaxLength = (passHeader + MaxVisitorLength + macSize + 2) / 3 * 4
	// passLeeway tolerates a proxy clock slightly behind Redis' at the not-before time. A visitor only
	// learns its pass from a status answer given at or after not-before, so this opens nothing early.
	passLeeway = time.Second
)

// Result is the outcome of a pass verification, also the label of the verification metric.
type Result string

// The outcomes of Verify.
const (
	Valid       Result = "valid"
	Missing     Result = "missing"
	Oversized   Result = "oversized"
	Malformed   Result = "malformed"
	Tampered    Result = "tampered" // also another queue's pass: its MAC does not verify here
	Expired     Result = "expired"
	NotYetValid Result = "not_yet_valid"
	// Released is not Verify's: the gate says it of a valid pass whose session the workload ended.
	Released Result = "released"
	// EarlierOpening is not Verify's either: the gate says it of a valid pass issued before the
	// current schedule's pre-queue, for an opening that is over.
	EarlierOpening Result = "earlier_opening"
	WrongVisitor   Result = "wrong_visitor"
)

// Pass is a verified pass.
type Pass struct {
	Visitor   string
	NotBefore time.Time
	Expiry    time.Time
}

// Signer issues and verifies passes and visitor cookies for one queue. It is safe for concurrent use.
type Signer struct {
	// passPrefix and visitorPrefix open every MAC: a domain byte (so a pass MAC never verifies as a
	// cookie MAC) and the queue UID (so another queue's pass never verifies here).
	passPrefix, visitorPrefix, placePrefix, sessionPrefix, estimatePrefix []byte
	scratch                                                               sync.Pool // of *macScratch
}

// macScratch is one verification's working memory, pooled so that the protected path allocates
// (almost) nothing.
type macScratch struct {
	h   hash.Hash
	buf [passHeader + MaxVisitorLength + macSize + 3]byte
	sum [macSize]byte
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
	s := &Signer{
		passPrefix:     append(append([]byte{domainPass}, queueUID...), 0),
		visitorPrefix:  append(append([]byte{domainVisitor}, queueUID...), 0),
		placePrefix:    append(append([]byte{domainPlace}, queueUID...), 0),
		sessionPrefix:  append(append([]byte{domainSession}, queueUID...), 0),
		estimatePrefix: append(append([]byte{domainEstimate}, queueUID...), 0),
	}
	s.scratch.New = func() any { return &macScratch{h: hmac.New(sha256.New, k)} }
	return s, nil
}

// sumInto computes the MAC of prefix | data into sc.sum.
func (sc *macScratch) sumInto(prefix, data []byte) []byte {
	sc.h.Reset()
	sc.h.Write(prefix)
	sc.h.Write(data)
	return sc.h.Sum(sc.sum[:0])
}

// Domains keep a pass MAC from ever verifying as a cookie MAC and the other way round.
const (
	domainPass    = 'P'
	domainVisitor = 'V'
	domainPlace   = 'Q'
	domainSession = 'S'
	// domainEstimate signs the first wait a visitor was told (Estimate).
	domainEstimate = 'E'
)

// Issue signs a pass for visitor valid from notBefore to expiry.
func (s *Signer) Issue(visitor string, notBefore, expiry time.Time) string {
	buf := make([]byte, 0, passHeader+len(visitor)+macSize)
	buf = append(buf, passVersion)
	buf = binary.BigEndian.AppendUint64(buf, uint64(notBefore.UnixMilli()))
	buf = binary.BigEndian.AppendUint64(buf, uint64(expiry.UnixMilli()))
	buf = append(buf, byte(len(visitor)))
	buf = append(buf, visitor...)
	sc := s.scratch.Get().(*macScratch)
	buf = append(buf, sc.sumInto(s.passPrefix, buf)...)
	s.scratch.Put(sc)
	return base64.RawURLEncoding.EncodeToString(buf)
}

// Verify checks a pass at time now. When visitor is not empty the pass must be that visitor's.
func (s *Signer) Verify(token, visitor string, now time.Time) (Pass, Result) {
	switch {
	case token == "":
		return Pass{}, Missing
	case len(token) > MaxLength:
		return Pass{}, Oversized
	}
	sc := s.scratch.Get().(*macScratch)
	defer s.scratch.Put(sc)
	raw := sc.buf[:]
	n, ok := decodeBase64URL(raw, token)
	if !ok || n < passHeader+macSize || raw[0] != passVersion {
		return Pass{}, Malformed
	}
	vlen := int(raw[passHeader-1])
	if n != passHeader+vlen+macSize {
		return Pass{}, Malformed
	}
	body := raw[:passHeader+vlen]
	if !hmac.Equal(sc.sumInto(s.passPrefix, body), raw[passHeader+vlen:n]) {
		return Pass{}, Tampered
	}
	p := Pass{
		NotBefore: time.UnixMilli(int64(binary.BigEndian.Uint64(raw[1:9]))),
		Expiry:    time.UnixMilli(int64(binary.BigEndian.Uint64(raw[9:17]))),
	}
	owner := body[passHeader:]
	switch {
	case visitor == "":
		p.Visitor = string(owner)
	case string(owner) == visitor: // compared without a copy
		p.Visitor = visitor
	default:
		p.Visitor = string(owner)
		return p, WrongVisitor
	}
	switch {
	case !now.Before(p.Expiry):
		return p, Expired
	case now.Add(passLeeway).Before(p.NotBefore):
		return p, NotYetValid
	}
	return p, Valid
}

// decodeBase64URL decodes unpadded base64url from a string into dst without allocating; it fails on
// any other alphabet, on a length no encoder produces, and on an output longer than dst.
func decodeBase64URL(dst []byte, s string) (int, bool) {
	if len(s)%4 == 1 || len(s)/4*3+len(s)%4 > len(dst) {
		return 0, false
	}
	n := 0
	var acc uint32
	bits := 0
	for i := 0; i < len(s); i++ {
		v := base64URLValues[s[i]]
		if v == 0xff {
			return 0, false
		}
		acc = acc<<6 | uint32(v)
		bits += 6
		if bits >= 8 {
			bits -= 8
			dst[n] = byte(acc >> bits)
			n++
		}
	}
	if acc&(1<<bits-1) != 0 {
		return 0, false // non-zero padding bits: not what an encoder writes
	}
	return n, true
}

var base64URLValues = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range len(alphabet) {
		t[alphabet[i]] = byte(i)
	}
	return t
}()

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
	sc := s.scratch.Get().(*macScratch)
	defer s.scratch.Put(sc)
	return id + "." + base64.RawURLEncoding.EncodeToString(sc.sumInto(s.visitorPrefix, []byte(id))[:16])
}

// VerifyVisitorCookie returns the visitor ID of a cookie value this signer made, or false.
func (s *Signer) VerifyVisitorCookie(cookie string) (string, bool) {
	const idLen, macLen = 22, 22 // base64url of 16 bytes
	if len(cookie) != idLen+1+macLen || cookie[idLen] != '.' {
		return "", false
	}
	id := cookie[:idLen]
	sc := s.scratch.Get().(*macScratch)
	defer s.scratch.Put(sc)
	var got [17]byte
	if n, ok := decodeBase64URL(got[:], cookie[idLen+1:]); !ok || n != 16 {
		return "", false
	}
	if !hmac.Equal(sc.sumInto(s.visitorPrefix, []byte(id))[:16], got[:16]) {
		return "", false
	}
	return id, true
}

// Place signs a waiting visitor's arrival sequence, "seq.mac": with it a proxy bounds the visitor's
// position without asking Redis. It says where the visitor entered, nothing more: admission is
// Redis' alone.
func (s *Signer) Place(visitor string, seq int64) string {
	text := strconv.FormatInt(seq, 10)
	sc := s.scratch.Get().(*macScratch)
	defer s.scratch.Put(sc)
	return text + "." + base64.RawURLEncoding.EncodeToString(sc.sumInto(s.placePrefix, placeData(visitor, text))[:16])
}

// VerifyPlace returns the arrival sequence of a place this signer made for visitor, or false.
func (s *Signer) VerifyPlace(token, visitor string) (int64, bool) {
	const macLen = 22 // base64url of 16 bytes
	dot := strings.IndexByte(token, '.')
	if dot < 1 || dot > 19 || len(token) != dot+1+macLen {
		return 0, false
	}
	seq, err := strconv.ParseInt(token[:dot], 10, 64)
	if err != nil || seq <= 0 || strconv.FormatInt(seq, 10) != token[:dot] {
		return 0, false
	}
	var got [17]byte
	if n, ok := decodeBase64URL(got[:], token[dot+1:]); !ok || n != 16 {
		return 0, false
	}
	sc := s.scratch.Get().(*macScratch)
	defer s.scratch.Put(sc)
	if !hmac.Equal(sc.sumInto(s.placePrefix, placeData(visitor, token[:dot]))[:16], got[:16]) {
		return 0, false
	}
	return seq, true
}

// LanePlace signs the arrival sequence of a place in a metered lane, "seq.lane.mac": the visitor
// brings it back to its lane after a failover lost it (docs/guides/redis.md). It is no place for
// VerifyPlace: a lane's place is bounded by Redis, never by the main queue's ranks.
func (s *Signer) LanePlace(visitor, lane string, seq int64) string {
	text := strconv.FormatInt(seq, 10) + "." + lane
	sc := s.scratch.Get().(*macScratch)
	defer s.scratch.Put(sc)
	return text + "." + base64.RawURLEncoding.EncodeToString(sc.sumInto(s.placePrefix, placeData(visitor, text))[:16])
}

// VerifyHeldPlace returns the arrival sequence and the lane ("" for the main queue) of a place
// this signer made for visitor, by Place or LanePlace, or false.
func (s *Signer) VerifyHeldPlace(token, visitor string) (int64, string, bool) {
	const macLen = 22 // base64url of 16 bytes
	if seq, ok := s.VerifyPlace(token, visitor); ok {
		return seq, "", true
	}
	// "seq.lane.mac": a lane is 1 to 63 lower-case letters, digits and '-'.
	if len(token) < 1+1+1+1+macLen || len(token) > 19+1+63+1+macLen {
		return 0, "", false
	}
	text := token[:len(token)-macLen-1]
	dot := strings.IndexByte(text, '.')
	if dot < 1 || token[len(text)] != '.' {
		return 0, "", false
	}
	seq, err := strconv.ParseInt(text[:dot], 10, 64)
	if err != nil || seq <= 0 || strconv.FormatInt(seq, 10) != text[:dot] {
		return 0, "", false
	}
	lane := text[dot+1:]
	if lane == "" || len(lane) > 63 || strings.Trim(lane, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return 0, "", false
	}
	var got [17]byte
	if n, ok := decodeBase64URL(got[:], token[len(text)+1:]); !ok || n != 16 {
		return 0, "", false
	}
	sc := s.scratch.Get().(*macScratch)
	defer s.scratch.Put(sc)
	if !hmac.Equal(sc.sumInto(s.placePrefix, placeData(visitor, text))[:16], got[:16]) {
		return 0, "", false
	}
	return seq, lane, true
}

func placeData(visitor, seq string) []byte {
	b := make([]byte, 0, len(visitor)+1+len(seq))
	return append(append(append(b, visitor...), 0), seq...)
}

// Session is the handle of a pass's session the workload may hold: with it, and the release key,
// it ends the session (POST /.herdgate/release). It names the pass, signed in a domain of its own,
// so it never opens a protected route: handing it upstream hands over no pass.
func (s *Signer) Session(p Pass) string {
	buf := make([]byte, 0, 16+len(p.Visitor))
	buf = binary.BigEndian.AppendUint64(buf, uint64(p.NotBefore.UnixMilli()))
	buf = binary.BigEndian.AppendUint64(buf, uint64(p.Expiry.UnixMilli()))
	buf = append(buf, p.Visitor...)
	sc := s.scratch.Get().(*macScratch)
	defer s.scratch.Put(sc)
	return base64.RawURLEncoding.EncodeToString(buf) + "." + base64.RawURLEncoding.EncodeToString(sc.sumInto(s.sessionPrefix, buf))
}

// VerifySession returns the pass a session handle this signer made names, or false.
func (s *Signer) VerifySession(handle string) (Pass, bool) {
	body, mac, ok := strings.Cut(handle, ".")
	if !ok || len(handle) > 2*MaxLength {
		return Pass{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(raw) <= 16 || len(raw) > 16+MaxVisitorLength {
		return Pass{}, false
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil {
		return Pass{}, false
	}
	sc := s.scratch.Get().(*macScratch)
	defer s.scratch.Put(sc)
	if !hmac.Equal(sc.sumInto(s.sessionPrefix, raw), got) {
		return Pass{}, false
	}
	return Pass{
		NotBefore: time.UnixMilli(int64(binary.BigEndian.Uint64(raw[0:8]))),
		Expiry:    time.UnixMilli(int64(binary.BigEndian.Uint64(raw[8:16]))),
		Visitor:   string(raw[16:]),
	}, true
}
