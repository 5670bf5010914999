package route

import (
	"strings"
	"testing"
)

// FuzzNormalize checks the property the gate relies on: the path forwarded upstream, normalised
// again, is the path that was matched; and a normalised path has no spelling tricks left.
func FuzzNormalize(f *testing.F) {
	for _, seed := range []string{
		"/api/v1/orders", "//api/v1/orders", "/api/v1/orders/", "/api/v1/./orders", "/api/v1/x/../orders",
		"/api%2Fv1%2Forders", "/api/v1/orders;jsessionid=1", "/api/v1/orders%3Bx", "/api\\v1\\orders",
		"/%2e%2e/%2e%2e/etc", "/a/%252F/b", "", "/", "relative", "/%zz", "/%00", "/.herdgate/enter", "/a;b/c;d",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := Normalize(in)
		if err != nil {
			return
		}
		if !strings.HasPrefix(p, "/") || strings.Contains(p, "//") || strings.ContainsAny(p, ";\\\x00") {
			t.Fatalf("Normalize(%q) = %q is not canonical", in, p)
		}
		for _, seg := range strings.Split(p, "/")[1:] {
			if seg == "." || seg == ".." || (seg == "" && p != "/") {
				t.Fatalf("Normalize(%q) = %q keeps a dot or empty segment", in, p)
			}
		}
		again, err := Normalize(Escape(p))
		if err != nil || again != p {
			t.Fatalf("forwarded %q (from %q) normalises to %q, %v; want the matched path", Escape(p), in, again, err)
		}
	})
}
