package pass

import (
	"crypto/hmac"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// Told is the first wait a visitor was told for a place: when it entered and the wait it was told,
// to the millisecond, kept by the visitor so that whichever replica admits it can tell how far off
// the wait was.
type Told struct {
	// Seq is the place's arrival: a new place is told anew.
	Seq     int64
	Entered time.Time
	Wait    time.Duration
}

// Estimate signs t for visitor, "seq.enteredMs.waitMs.mac".
func (s *Signer) Estimate(visitor string, t Told) string {
	text := strconv.FormatInt(t.Seq, 10) + "." + strconv.FormatInt(t.Entered.UnixMilli(), 10) + "." + strconv.FormatInt(t.Wait.Milliseconds(), 10)
	sc := s.scratch.Get().(*macScratch)
	defer s.scratch.Put(sc)
	return text + "." + base64.RawURLEncoding.EncodeToString(sc.sumInto(s.estimatePrefix, placeData(visitor, text))[:16])
}

// VerifyEstimate returns the wait told that a token this signer made for visitor says, or false.
func (s *Signer) VerifyEstimate(token, visitor string) (Told, bool) {
	const macLen = 22 // base64url of 16 bytes
	if len(token) < 1+1+1+1+1+1+1+macLen || len(token) > 3*(19+1)+macLen {
		return Told{}, false
	}
	text := token[:len(token)-macLen-1]
	if token[len(text)] != '.' {
		return Told{}, false
	}
	parts := strings.Split(text, ".")
	if len(parts) != 3 {
		return Told{}, false
	}
	var nums [3]int64
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 || strconv.FormatInt(n, 10) != p {
			return Told{}, false
		}
		nums[i] = n
	}
	if nums[0] == 0 || nums[1] == 0 {
		return Told{}, false
	}
	var got [17]byte
	if n, ok := decodeBase64URL(got[:], token[len(text)+1:]); !ok || n != 16 {
		return Told{}, false
	}
	sc := s.scratch.Get().(*macScratch)
	defer s.scratch.Put(sc)
	if !hmac.Equal(sc.sumInto(s.estimatePrefix, placeData(visitor, text))[:16], got[:16]) {
		return Told{}, false
	}
	return Told{Seq: nums[0], Entered: time.UnixMilli(nums[1]), Wait: time.Duration(nums[2]) * time.Millisecond}, true
}
