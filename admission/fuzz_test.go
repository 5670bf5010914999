package admission

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
	f.Add(strings.Repeat("A", MaxPassLength), "")
	f.Add("!!", "x")
	f.Fuzz(func(t *testing.T, token, visitor string) {
		p, result := signer.Verify(token, visitor, now)
		if result == PassValid {
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
			if got, r := signer.Verify(fresh, visitor, now); r != PassValid || got.Visitor != visitor {
				t.Fatalf("a fresh pass for %q did not verify: %s", visitor, r)
			}
		}
		if _, ok := signer.VerifyVisitorCookie(token); ok && !strings.Contains(token, ".") {
			t.Fatalf("accepted a visitor cookie without a MAC: %q", token)
		}
	})
}

// FuzzNormalizePath checks the property the gate relies on: the path forwarded upstream, normalised
// again, is the path that was matched; and a normalised path has no spelling tricks left.
func FuzzNormalizePath(f *testing.F) {
	for _, seed := range []string{
		"/api/v1/orders", "//api/v1/orders", "/api/v1/orders/", "/api/v1/./orders", "/api/v1/x/../orders",
		"/api%2Fv1%2Forders", "/api/v1/orders;jsessionid=1", "/api/v1/orders%3Bx", "/api\\v1\\orders",
		"/%2e%2e/%2e%2e/etc", "/a/%252F/b", "", "/", "relative", "/%zz", "/%00", "/.herdgate/enter", "/a;b/c;d",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := NormalizePath(in)
		if err != nil {
			return
		}
		if !strings.HasPrefix(p, "/") || strings.Contains(p, "//") || strings.ContainsAny(p, ";\\\x00") {
			t.Fatalf("NormalizePath(%q) = %q is not canonical", in, p)
		}
		for _, seg := range strings.Split(p, "/")[1:] {
			if seg == "." || seg == ".." || (seg == "" && p != "/") {
				t.Fatalf("NormalizePath(%q) = %q keeps a dot or empty segment", in, p)
			}
		}
		again, err := NormalizePath(escapePath(p))
		if err != nil || again != p {
			t.Fatalf("forwarded %q (from %q) normalises to %q, %v; want the matched path", escapePath(p), in, again, err)
		}
	})
}
