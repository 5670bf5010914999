package v1alpha1_test

import (
	"fmt"
	"strings"
	"unicode"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/settings"
)

// One validation, two enforcers: for every case the API server and settings.Derive, which the
// manager and the admission proxy run, give the same verdict. A spec the API accepts never stops a
// proxy, and a spec the proxy refuses never gets past the API.
var _ = Describe("The API server and the proxy's checks", func() {
	// verdicts creates the queue (and deletes it again) and derives its settings.
	verdicts := func(wq *herdgatev1alpha1.WaitingQueue) (apiErr, proxyErr error) {
		apiErr = k8sClient.Create(ctx, wq.DeepCopy())
		if apiErr == nil {
			Expect(k8sClient.Delete(ctx, wq)).To(Succeed())
		}
		_, proxyErr = settings.Derive(wq)
		return apiErr, proxyErr
	}
	agree := func(what string, mutate func(*herdgatev1alpha1.WaitingQueue)) (accepted bool) {
		wq := sampleQueue()
		mutate(wq)
		apiErr, proxyErr := verdicts(wq)
		Expect(apiErr == nil).To(Equal(proxyErr == nil),
			"%s: the API server says %v, the proxy's checks say %v", what, apiErr, proxyErr)
		return apiErr == nil
	}

	It("agree on route paths", func() {
		valid := []string{
			"/", "/api/v1/orders", "/.well-known/thing", "/a b", "/ünïcödé", "/a..b", "/a/.b", "/a/b.", "/a/...", "/~user",
			"/a:b", "/a@b", "/a*b", "/a+b", "/a=b&c", "/a'b", `/a"b`, "/a<b>", "/a|b", "/a`b", "/a{b}", "/a[b]",
			"/a^b", "/a!b", "/a$b", "/a,b", "/a(b)", "/a\u2028b", "/a\u0085b", "/" + strings.Repeat("a", 1023),
		}
		invalid := []string{
			"api", "/api/", "//", "/a//b", "/a/./b", "/a/../b", "/.", "/..", "/a/.", "/a/..", `/a\b`, `\a`, "/a;b",
			"/a;", "/a%2Fb", "/a%", "/a%41", "/a?b", "/a?", "/a#b", "/a\nb", "/a\n", "/a\tb", "/a\rb", "/\x00", "/a\x7f",
			"/a\x1b", "/a\x01", "/" + strings.Repeat("a", 1024),
		}
		for _, field := range []string{"path", "pathPrefix"} {
			for _, p := range append(valid, invalid...) {
				accepted := agree(fmt.Sprintf("%s %q", field, p), func(wq *herdgatev1alpha1.WaitingQueue) {
					if field == "path" {
						wq.Spec.ProtectedRoutes[0] = herdgatev1alpha1.ProtectedRoute{Path: ptr.To(herdgatev1alpha1.RoutePath(p))}
					} else {
						wq.Spec.ProtectedRoutes[0] = herdgatev1alpha1.ProtectedRoute{PathPrefix: ptr.To(herdgatev1alpha1.RoutePath(p))}
					}
				})
				want := !contains(invalid, p)
				Expect(accepted).To(Equal(want), "%s %q: both accepted it: %v; want %v", field, p, accepted, want)
			}
		}
	})

	It("agree on identity headers", func() {
		var refused []string
		for _, h := range settings.RefusedIdentityHeaders {
			refused = append(refused, h, strings.ToUpper(h), titleCase(h))
		}
		for _, p := range settings.RefusedIdentityHeaderPrefixes {
			refused = append(refused, titleCase(p)+"Thing", strings.ToUpper(p)+"X")
		}
		// The ones the issue of record names, whatever the list holds.
		refused = append(refused, "Host", "Cookie", "Authorization", "Proxy-Authorization", "Connection", "Keep-Alive",
			"Proxy-Connection", "TE", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length", "Forwarded", "X-Forwarded-Host")
		refused = append(refused, "X-Herdgate-Pass", "Herdgate-Release", "Content-Type", "X-Forwarded-For", "Sec-Fetch-Site",
			"Accept-Language", "If-None-Match", "Proxy-Authorization", "X User", "-X", "X_User", strings.Repeat("x", 129), "Hóst")
		allowed := []string{"X-User-Id", "X-Customer", "User-Id", "X-Auth-Request-User", "Remote-User", "X-Remote-User",
			"X-Amzn-Oidc-Identity", "Cf-Access-Authenticated-User-Email", "a", "1-2", "Hostname", "Cookies-Id", strings.Repeat("x", 128)}
		for _, h := range append(allowed, refused...) {
			accepted := agree(fmt.Sprintf("identity header %q", h), func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Identity = &herdgatev1alpha1.IdentitySpec{Header: h}
			})
			Expect(accepted).To(Equal(contains(allowed, h)), "identity header %q: both accepted it: %v", h, accepted)
		}
	})

	It("agree on upstream URLs", func() {
		valid := []string{
			"http://orders:8080", "https://orders.example", "http://10.0.0.7:8080/base", "http://[::1]:8080", "http://[fe80::1]",
			"http://orders:1", "http://orders:65535", "https://h/a/b/", "http://h/a%20b", "http://h:8080/base/../x", "HTTP://h",
			"http://h/@user", "http://h/a:b",
		}
		invalid := []string{
			"http://user:pw@h", "http://user@h:80", "http://@h", "http://h:0", "http://h:0080", "http://h:65536", "http://h:99999",
			"http://h:123456", "http://h:", "http://h:x", "http://h/?x", "http://h/?", "http://h?x=1", "http://h#f", "http://h/a?b=c",
			"ftp://h", "http://", "http:///path", "//h/x", "h:80", "http://exa mple", "http://h/\n", "mailto:x@y", "http:opaque",
			"http://h:8080:9090", "http://[::1", "http://h/" + strings.Repeat("a", 2048),
		}
		for _, u := range append(valid, invalid...) {
			accepted := agree(fmt.Sprintf("upstream URL %q", u), func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Upstream = herdgatev1alpha1.UpstreamSpec{URL: ptr.To(u)}
			})
			Expect(accepted).To(Equal(contains(valid, u)), "upstream URL %q: both accepted it: %v", u, accepted)
		}
	})

	It("agree on the entry's invitation, challenge and the bypass rules", func() {
		ref := func(name, key string) herdgatev1alpha1.SecretValueRef {
			return herdgatev1alpha1.SecretValueRef{Name: name, Key: key}
		}
		cases := []struct {
			what   string
			mutate func(*herdgatev1alpha1.WaitingQueue)
			valid  bool
		}{
			{"an invitation", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Invitation: &herdgatev1alpha1.InvitationSpec{KeySecretRef: ref("invites", "key")}}
			}, true},
			{"an invitation key in a Secret with a capital", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Invitation: &herdgatev1alpha1.InvitationSpec{KeySecretRef: ref("Invites", "key")}}
			}, false},
			{"an invitation key with a slash", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Invitation: &herdgatev1alpha1.InvitationSpec{KeySecretRef: ref("invites", "a/b")}}
			}, false},
			{"a proof of work of 20 bits raised to 24", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{ProofOfWork: &herdgatev1alpha1.ProofOfWorkSpec{
					Difficulty: 20, RaiseAbove: ptr.To[int32](100), MaxDifficulty: ptr.To[int32](24)}}}
			}, true},
			{"a proof of work of 25 bits", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{ProofOfWork: &herdgatev1alpha1.ProofOfWorkSpec{Difficulty: 25}}}
			}, false},
			{"a maxDifficulty below the difficulty", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{ProofOfWork: &herdgatev1alpha1.ProofOfWorkSpec{
					Difficulty: 20, RaiseAbove: ptr.To[int32](100), MaxDifficulty: ptr.To[int32](19)}}}
			}, false},
			{"a maxDifficulty without raiseAbove", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{ProofOfWork: &herdgatev1alpha1.ProofOfWorkSpec{
					Difficulty: 16, MaxDifficulty: ptr.To[int32](20)}}}
			}, false},
			{"both challenges", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{
					ProofOfWork: &herdgatev1alpha1.ProofOfWorkSpec{Difficulty: 16},
					External:    &herdgatev1alpha1.ExternalChallengeSpec{VerifyURL: "https://verify.example/siteverify", SecretKeyRef: ref("captcha", "secret")}}}
			}, false},
			{"no challenge in a challenge", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{}}
			}, false},
			{"an external challenge", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{
					External: &herdgatev1alpha1.ExternalChallengeSpec{VerifyURL: "https://verify.example/siteverify", SecretKeyRef: ref("captcha", "secret")}}}
			}, true},
			{"an external challenge on ftp", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{
					External: &herdgatev1alpha1.ExternalChallengeSpec{VerifyURL: "ftp://verify.example/siteverify", SecretKeyRef: ref("captcha", "secret")}}}
			}, false},
			{"bypass rules of every kind", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Bypass = []herdgatev1alpha1.BypassRule{
					{Name: "office", SourceCIDRs: []herdgatev1alpha1.CIDR{"192.0.2.0/24", "2001:db8::/32"}},
					{Name: "monitor", Header: &herdgatev1alpha1.BypassHeader{Name: "X-Monitor-Token", ValueSecretRef: ref("monitor", "token")}},
					{Name: "health", Path: ptr.To(herdgatev1alpha1.RoutePath("/checkout/health"))},
					{Name: "static", PathPrefix: ptr.To(herdgatev1alpha1.RoutePath("/checkout/static"))},
				}
			}, true},
			{"a bypass rule of two kinds", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Bypass = []herdgatev1alpha1.BypassRule{{Name: "two", Path: ptr.To(herdgatev1alpha1.RoutePath("/a")), SourceCIDRs: []herdgatev1alpha1.CIDR{"192.0.2.0/24"}}}
			}, false},
			{"a bypass rule of no kind", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Bypass = []herdgatev1alpha1.BypassRule{{Name: "none"}}
			}, false},
			{"a bypass rule named with a capital", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Bypass = []herdgatev1alpha1.BypassRule{{Name: "Office", Path: ptr.To(herdgatev1alpha1.RoutePath("/a"))}}
			}, false},
			{"a bypass by herdgate's pass header", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Bypass = []herdgatev1alpha1.BypassRule{{Name: "pass", Header: &herdgatev1alpha1.BypassHeader{Name: "X-Herdgate-Pass", ValueSecretRef: ref("monitor", "token")}}}
			}, false},
			{"a bypass by Host", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Bypass = []herdgatev1alpha1.BypassRule{{Name: "host", Header: &herdgatev1alpha1.BypassHeader{Name: "host", ValueSecretRef: ref("monitor", "token")}}}
			}, false},
			{"a bypass path that is not normalised", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Bypass = []herdgatev1alpha1.BypassRule{{Name: "dots", PathPrefix: ptr.To(herdgatev1alpha1.RoutePath("/a/../b"))}}
			}, false},
			{"a page message of 500 Korean characters", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Page = &herdgatev1alpha1.PageSpec{Message: strings.Repeat("가", 500)}
			}, true},
			{"a page message of 501 characters", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Page = &herdgatev1alpha1.PageSpec{Message: strings.Repeat("a", 501)}
			}, false},
			{"a page template in a ConfigMap", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Page = &herdgatev1alpha1.PageSpec{Template: &herdgatev1alpha1.ConfigMapValueRef{Name: "shop-page", Key: "page.html"}}
			}, true},
			{"a page template key with a slash", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Page = &herdgatev1alpha1.PageSpec{Template: &herdgatev1alpha1.ConfigMapValueRef{Name: "shop-page", Key: "a/b"}}
			}, false},
			{"a bypass CIDR that is none", func(wq *herdgatev1alpha1.WaitingQueue) {
				wq.Spec.Bypass = []herdgatev1alpha1.BypassRule{{Name: "bad", SourceCIDRs: []herdgatev1alpha1.CIDR{"192.0.2.300/24"}}}
			}, false},
		}
		for _, c := range cases {
			accepted := agree(c.what, c.mutate)
			Expect(accepted).To(Equal(c.valid), "%s: both accepted it: %v; want %v", c.what, accepted, c.valid)
		}
	})
})

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// titleCase writes a header name as Go's canonical form would: "x-real-ip" → "X-Real-Ip".
func titleCase(h string) string {
	b := []rune(h)
	upper := true
	for i, r := range b {
		if upper {
			b[i] = unicode.ToUpper(r)
		}
		upper = r == '-'
	}
	return string(b)
}
