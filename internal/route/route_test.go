package route

import (
	"strings"
	"testing"
)

func TestCheckPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"/", true},
		{"/api/v1/orders", true},
		{"/.well-known/thing", true},
		{"/a b/ünï", true},
		{"/api/v1/orders/", false},
		{"api/v1/orders", false},
		{"", false},
		{"/api//orders", false},
		{"/api/./orders", false},
		{"/api/../orders", false},
		{"/api\\orders", false},
		{"/api;v=1", false},
		{"/api%2Forders", false},
		{"/api?x=1", false},
		{"/api#top", false},
		{"/api/orders\n", false},
		{"/api/\torders", false},
		{"/api/\x00", false},
		{"/api/\x7f", false},
		{"/" + strings.Repeat("a", MaxPathLength-1), true},
		{"/" + strings.Repeat("a", MaxPathLength), false},
	} {
		err := CheckPath(tc.path)
		if (err == nil) != tc.ok {
			t.Errorf("CheckPath(%q) = %v, want ok %v", tc.path, err, tc.ok)
		}
		// Whatever CheckPath accepts, a request for exactly that path matches it.
		if err == nil {
			if n, err := Normalize(tc.path); err != nil || n != tc.path {
				t.Errorf("accepted %q normalises to %q, %v", tc.path, n, err)
			}
		}
	}
}

func TestRouteMatches(t *testing.T) {
	exact, err := New("/api/orders", false, []string{"POST"})
	if err != nil {
		t.Fatal(err)
	}
	prefix, err := New("/checkout", true, []string{"GET"})
	if err != nil {
		t.Fatal(err)
	}
	root, err := New("/", true, []string{"DELETE"})
	if err != nil {
		t.Fatal(err)
	}
	exactCase, err := New("/Api/Orders", true, []string{"POST"})
	if err != nil {
		t.Fatal(err)
	}
	exactCase.ExactCase = true
	for _, tc := range []struct {
		r            Route
		method, path string
		want         bool
	}{
		{exact, "POST", "/api/orders", true},
		{exact, "GET", "/api/orders", false},
		{exact, "POST", "/api/orders/1", false},
		{prefix, "GET", "/checkout", true},
		{prefix, "HEAD", "/checkout/pay", true},
		{prefix, "GET", "/checkout-archive", false},
		{root, "DELETE", "/anything/at/all", true},
		// Whatever the letter case, by default.
		{exact, "POST", "/API/Orders", true},
		{exact, "POST", "/api/ORDERS", true},
		{prefix, "GET", "/CheckOut/Pay", true},
		{prefix, "GET", "/CHECKOUT-archive", false},
		{exact, "POST", "/api/order\u017f", true}, // the long s folds to s: "/api/orders"
		{exact, "POST", "/api/ordeRS", true},
		// Letter for letter when the route says so.
		{exactCase, "POST", "/Api/Orders/1", true},
		{exactCase, "POST", "/api/orders/1", false},
		{exactCase, "POST", "/API/ORDERS", false},
	} {
		if got := tc.r.Matches(tc.method, tc.path); got != tc.want {
			t.Errorf("%+v.Matches(%s, %s) = %v, want %v", tc.r, tc.method, tc.path, got, tc.want)
		}
	}
	if got := Fold("/api/orders"); got != "/api/orders" {
		t.Errorf("Fold of a lower-case path = %q", got)
	}
	if got := Fold("/\u212Aey/\u017Fale"); got != "/key/sale" {
		t.Errorf("Fold of the Kelvin sign and the long s = %q, want /key/sale", got)
	}
	if _, err := New("/x", false, []string{"TRACE"}); err == nil {
		t.Error("New accepted TRACE")
	}
	if _, err := New("/x", false, nil); err == nil {
		t.Error("New accepted a route without methods")
	}
}

func TestHostOfAndMatchesHost(t *testing.T) {
	for raw, want := range map[string]string{
		"shop.example": "shop.example", "Shop.Example": "shop.example", "shop.example:8443": "shop.example",
		"SHOP.EXAMPLE.:443": "shop.example", "shop.example.": "shop.example", "[::1]:8080": "[::1]", "[::1]": "[::1]",
		"10.0.0.7:80": "10.0.0.7", "": "",
	} {
		if got := HostOf(raw); got != want {
			t.Errorf("HostOf(%q) = %q, want %q", raw, got, want)
		}
	}
	r, err := New("/checkout", true, []string{"POST"})
	if err != nil {
		t.Fatal(err)
	}
	if !r.MatchesHost("anything.example") || !r.MatchesHost("") {
		t.Error("a route without a host matches only some hosts")
	}
	r.Host = "shop.example"
	for host, want := range map[string]bool{"shop.example": true, "": true, "tickets.example": false, "shop.example.evil": false, "evil.shop.example": false} {
		if got := r.MatchesHost(host); got != want {
			t.Errorf("a route for shop.example MatchesHost(%q) = %v, want %v (an unknown host gets every route)", host, got, want)
		}
	}
}

func TestCheckHost(t *testing.T) {
	for h, ok := range map[string]bool{
		"shop.example": true, "a": true, "1.2.3.4": true, "xn--bcher-kva.example": true,
		"Shop.example": false, "shop.example:443": false, "shop.example.": false, "-a.example": false, "a..b": false, "": false,
		"*.shop.example": false, "shop_1.example": false, strings.Repeat("a.", 126) + "a": true, strings.Repeat("a.", 126) + "ab": false,
	} {
		if err := CheckHost(h); (err == nil) != ok {
			t.Errorf("CheckHost(%q) = %v, want ok %v", h, err, ok)
		}
	}
}

// The most specific route for one request ranks highest: a longer path, an exact path over a
// prefix of the same path, a route for the host over one for any host.
func TestSpecificity(t *testing.T) {
	mk := func(p string, prefix bool, host string) Route {
		r, err := New(p, prefix, []string{"GET"})
		if err != nil {
			t.Fatal(err)
		}
		r.Host = host
		return r
	}
	ordered := []Route{
		mk("/", true, ""), mk("/", true, "shop.example"), mk("/tickets", true, ""), mk("/tickets", true, "shop.example"),
		mk("/tickets", false, ""), mk("/tickets", false, "shop.example"), mk("/tickets/sale", true, ""), mk("/tickets/sale", false, ""),
	}
	for i := 1; i < len(ordered); i++ {
		if ordered[i-1].Specificity() >= ordered[i].Specificity() {
			t.Errorf("%+v ranks at or above %+v", ordered[i-1], ordered[i])
		}
	}
}

func TestSame(t *testing.T) {
	mk := func(p string, prefix bool, host string, exactCase bool, methods ...string) Route {
		r, err := New(p, prefix, methods)
		if err != nil {
			t.Fatal(err)
		}
		r.Host, r.ExactCase = host, exactCase
		return r
	}
	a := mk("/tickets", true, "shop.example", false, "GET", "POST")
	for _, tc := range []struct {
		other Route
		same  bool
	}{
		{mk("/tickets", true, "shop.example", false, "POST"), true},
		{mk("/Tickets", true, "shop.example", false, "POST"), true},
		{mk("/tickets", true, "shop.example", false, "HEAD"), true}, // GET protects HEAD
		{mk("/tickets", true, "shop.example", false, "PUT"), false},
		{mk("/tickets", false, "shop.example", false, "POST"), false},
		{mk("/tickets", true, "", false, "POST"), false},
		{mk("/tickets", true, "other.example", false, "POST"), false},
		{mk("/tickets", true, "shop.example", true, "POST"), false},
	} {
		if got := a.Same(tc.other); got != tc.same {
			t.Errorf("Same(%+v) = %v, want %v", tc.other, got, tc.same)
		}
	}
}
