package pass

import (
	"strings"
	"testing"
	"time"
)

// FuzzVerifyPass feeds the pass parser arbitrary tokens: it must never panic, and it must accept only
// what the signer issued.
func FuzzVerifyPass(f *testing.F) {
	signer, err := NewSigner("uid-fuzz", []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		f.Fatal(err)
	}
	now := time.UnixMilli(1_800_000_000_000)
	issued := map[string]bool{}
	for _, v := range []string{"a", "visitor-1", strings.Repeat("x", 128), "Zm9vYmFyYmF6cXV4cXV1dXV1"} {
		token := signer.Issue(v, now.Add(-time.Second), now.Add(time.Minute))
		issued[token] = true
		f.Add(token, v)
		f.Add(token[:len(token)-1], v)
		f.Add(token+"A", v)
	}
	f.Add("", "")
	f.Add("AQAAAAAAAAAAAAAAAAAAAAAA", "")
	f.Add(strings.Repeat("A", MaxLength), "")
	f.Add("!!", "x")
	f.Fuzz(func(t *testing.T, token, visitor string) {
		p, result := signer.Verify(token, visitor, now)
		if result == Valid {
			if !issued[token] {
				t.Fatalf("accepted a token the signer never issued: %q", token)
			}
			if visitor != "" && p.Visitor != visitor {
				t.Fatalf("accepted %q's pass for %q", p.Visitor, visitor)
			}
		}
		// Round trip: whatever visitor ID fits, a fresh pass for it verifies.
		if len(visitor) > 0 && len(visitor) <= 128 {
			fresh := signer.Issue(visitor, now.Add(-time.Second), now.Add(time.Minute))
			if got, r := signer.Verify(fresh, visitor, now); r != Valid || got.Visitor != visitor {
				t.Fatalf("a fresh pass for %q did not verify: %s", visitor, r)
			}
		}
		if _, ok := signer.VerifyVisitorCookie(token); ok && !strings.Contains(token, ".") {
			t.Fatalf("accepted a visitor cookie without a MAC: %q", token)
		}
	})
}
