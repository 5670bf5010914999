package front

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/admissiontest"
	"github.com/herdgate/herdgate/test/builder"
)

// The fronts' own behaviour, on the in-memory engine; the contract tests in package admission run
// both fronts on a real Redis.

var testKey = admissiontest.Key

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// configOf is the config of the reference queue with its upstream at upstream.
func configOf(t *testing.T, upstream string, generation int64) *admission.Config {
	t.Helper()
	wq := builder.Queue("shop", "orders").UID("uid-1").UpstreamURL(upstream).
		Routes(builder.Route("/checkout", true, "GET")).Obj()
	wq.Generation = generation
	cfg, err := admission.NewConfig(wq, testKey)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func proxyOn(t *testing.T, cfg *admission.Config) *admission.Room {
	t.Helper()
	room, _ := admissiontest.NewRoom("shop/orders", cfg, admission.Options{})
	return room
}

// TestTheNetHTTPFrontForwardsUnderTheConfigItDecidedWith: a config swapped in between the gate's
// decision and the forward does not send the request to the new config's upstream; the decision
// carries its config.
func TestTheNetHTTPFrontForwardsUnderTheConfigItDecidedWith(t *testing.T) {
	cfgA := configOf(t, "http://orders.internal:8080", 1)
	cfgB := configOf(t, "http://elsewhere.example:9", 2)
	p := proxyOn(t, cfgA)
	in := httptest.NewRequest(http.MethodGet, "http://shop.example/open/a", nil)
	d := p.Decide(stdExchange{httptest.NewRecorder(), in}, in.URL.EscapedPath(), false)
	if d.Verdict() != admission.Forward {
		t.Fatalf("the gate's verdict on an open request: %d, want Forward", d.Verdict())
	}
	p.SetConfig(cfgB) // the swap, after the decision
	call := p.BeginUpstream(d)
	defer call.End()
	pr := &httputil.ProxyRequest{In: in.WithContext(context.WithValue(in.Context(), forwardKey{}, forward{d, call})), Out: in.Clone(context.Background())}
	rewrite(pr)
	if pr.Out.URL.Host != cfgA.Upstream.Host || pr.Out.Host != cfgA.Upstream.Host {
		t.Fatalf("forwarded to %s (Host %s), want the upstream it was judged for, %s", pr.Out.URL.Host, pr.Out.Host, cfgA.Upstream.Host)
	}
}

// TestTheNetHTTPFrontForwardsToTheUpstreamInForce: without a swap, a request goes to the upstream
// of the config in force when it came, and after a change to the new one.
func TestTheNetHTTPFrontForwardsToTheUpstreamInForce(t *testing.T) {
	p := proxyOn(t, configOf(t, "http://orders.internal:8080", 1))
	hosts := &hostRecorder{}
	h := NewNetHTTP(p, NetHTTPOptions{UpstreamTransport: hosts})
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "http://shop.example/open/a", nil))
	p.SetConfig(configOf(t, "http://orders-next.internal:8080", 2))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "http://shop.example/open/a", nil))
	if len(hosts.seen) != 2 || hosts.seen[0] != "orders.internal:8080" || hosts.seen[1] != "orders-next.internal:8080" {
		t.Fatalf("upstreams reached: %v", hosts.seen)
	}
}

type hostRecorder struct{ seen []string }

func (r *hostRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.seen = append(r.seen, req.URL.Host)
	return &http.Response{StatusCode: http.StatusNoContent, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

func TestFrontKeepsItsUpstreamClientAcrossReloads(t *testing.T) {
	f := &Fast{}
	first, reloaded, moved := mustURL("http://orders:8080/base"), mustURL("http://orders:8080/v2"), mustURL("http://orders-next:8080")
	a, b := f.client(first), f.client(reloaded)
	if a.client != b.client || b.url != reloaded {
		t.Fatalf("a reload of the same upstream made a new client (%p, %p) or kept the old URL (%v)", a.client, b.client, b.url)
	}
	if c := f.client(moved); c.client == a.client || c.client.Addr != "orders-next:8080" {
		t.Fatalf("another upstream kept the old client (%s)", c.client.Addr)
	}
}
