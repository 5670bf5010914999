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
