package admission_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/builder"
)

// TestRoutesForOneHostThroughGateways: a room protecting a path on one host alone and another path
// on every host, through herdgate's own proxy and each real gateway configured as the guide says.
// The host counts without its port, a final dot or letter case; the path on another host is open
// and reaches the workload. A visitor who names another host in X-Forwarded-Host, X-Original-Host
// or Forwarded is judged on the host it asked.
func TestRoutesForOneHostThroughGateways(t *testing.T) {
	hosted := func(wq *herdgatev1alpha1.WaitingQueue) {
		*wq = *builder.From(wq).Routes(builder.RouteOn("shop.example", "/checkout", true, "GET", "POST"),
			builder.Route("/api/v1/orders", false, "POST")).Obj()
	}
	run := func(t *testing.T, base string, workloadSaw func() int) {
		ask := func(method, host, path string, header ...string) (int, string) {
			t.Helper()
			req, err := http.NewRequest(method, base+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = host
			req.Header.Set("Accept", "application/json")
			for i := 0; i+1 < len(header); i += 2 {
				req.Header.Add(header[i], header[i+1])
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			return res.StatusCode, string(body)
		}
		for _, c := range []struct {
			method, host, path string
			protected          bool
		}{
			{"GET", "shop.example", "/checkout/cart", true},
			{"POST", "Shop.Example:8443", "/checkout", true},
			{"GET", "shop.example.", "/CHECKOUT/cart", true},
			{"POST", "tickets.example", "/api/v1/orders", true},
			{"POST", "shop.example", "/api/v1/orders", true},
			{"GET", "tickets.example", "/checkout/cart", false},
			{"GET", "www.shop.example", "/checkout/cart", false},
		} {
			before := workloadSaw()
			code, body := ask(c.method, c.host, c.path)
			switch {
			case c.protected && (code != http.StatusForbidden || !strings.Contains(body, `"error":"pass_required"`) || workloadSaw() != before):
				t.Errorf("%s %s on %s: %d %q; want the contract's 403, and nothing upstream", c.method, c.path, c.host, code, body)
			case !c.protected && (code != http.StatusOK || workloadSaw() != before+1):
				t.Errorf("%s %s on %s: %d %q; want the workload's answer", c.method, c.path, c.host, code, body)
			}
			if !c.protected {
				continue
			}
			// The visitor's own word for the host is not the gateway's: a protected path on
			// shop.example stays protected when the request names tickets.example, where it is open.
			for _, spoof := range [][]string{{"X-Forwarded-Host", "tickets.example"}, {"X-Original-Host", "tickets.example"},
				{"Forwarded", "host=tickets.example"}, {"X-Forwarded-Host", "tickets.example", "X-Original-Host", "tickets.example"}} {
				before := workloadSaw()
				if code, body := ask(c.method, c.host, c.path, spoof...); code != http.StatusForbidden || workloadSaw() != before {
					t.Errorf("%s %s on %s, the visitor naming another host (%q): %d %q; want the contract's 403, and nothing upstream",
						c.method, c.path, c.host, spoof, code, body)
				}
			}
		}
	}
	t.Run("herdgate-proxy", func(t *testing.T) {
		h := newMemoryHarness(t, hosted)
		run(t, h.server.URL, func() int { return len(h.upstream.all()) })
	})
	for name, gw := range gateways {
		if name == "caddy" {
			gw = caddyForEveryHost(gw)
		}
		t.Run(name, func(t *testing.T) {
			h, base := throughGateway(t, gw, hosted)
			run(t, base, func() int { return len(h.upstream.all()) })
		})
	}
}

// caddyForEveryHost is the Caddy gateway with its site on every host name, as the generated site is
// on its default address (":80"): the test's site names 127.0.0.1, which Caddy matches against the
// Host header and answers every other host itself. It still listens on loopback alone.
func caddyForEveryHost(gw gateway) gateway {
	start := gw.start
	gw.start = func(t *testing.T, dir string, block func(string) string, fill func(string) string) func() {
		return start(t, dir, func(lang string) string {
			site := block(lang)
			if lang == "caddyfile" {
				site = strings.Replace(strings.Replace(site, "\tadmin off\n", "\tadmin off\n\tdefault_bind 127.0.0.1\n", 1), "http://127.0.0.1:", "http://:", 1)
			}
			return site
		}, fill)
	}
	return gw
}
