package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/herdgate/herdgate/internal/gatewayconfig"
	"github.com/herdgate/herdgate/test/testenv"
)

const (
	caddyName       = "Caddy + forward_auth, a connection a check"
	caddyPooledName = "Caddy + forward_auth, pooled checks"
)

// startCaddies starts Caddy asking herdgate-proxy's check with forward_auth, as `herd
// gateway-config --target caddy` prints it, and the same site with its checks on pooled
// connections: what a connection a check costs, side by side
// (docs/guides/gateways.md, "Caddy: a check a connection").
func startCaddies(dir string, backendPort, proxyPort int) ([]target, func(), error) {
	var procs processes
	stop := procs.stop
	backend := fmt.Sprintf("127.0.0.1:%d", backendPort)
	wq := gatewayQueue(backend).Obj()
	// The pooled site is the one generated for a Caddy with the fix (--caddy-version 2.11.5): the
	// same site, but for the check's transport. This Caddy has no fix, which costs nothing here.
	var targets []target
	for _, site := range []struct{ name, release string }{{caddyName, ""}, {caddyPooledName, "2.11.5"}} {
		name := site.name
		config, err := gatewayconfig.Render(wq, gatewayconfig.Options{Target: "caddy", Listen: "LISTEN_ADDRESS",
			HerdgateAddress: fmt.Sprintf("127.0.0.1:%d", proxyPort), WorkloadAddress: backend, CaddyVersion: site.release})
		if err != nil {
			return nil, stop, err
		}
		port := freePort()
		caddyfile := strings.Replace(string(config), "LISTEN_ADDRESS", fmt.Sprintf("127.0.0.1:%d", port), 1)
		p, err := testenv.StartCaddy(filepath.Join(dir, strings.NewReplacer(" ", "-", "+", "", ",", "").Replace(name)), caddyfile)
		if err != nil {
			return nil, stop, err
		}
		procs = append(procs, p)
		if err := waitHTTP(fmt.Sprintf("http://127.0.0.1:%d/.herdgate/healthz", port)); err != nil {
			return nil, stop, fmt.Errorf("%s: %w", name, err)
		}
		targets = append(targets, target{name: name, url: fmt.Sprintf("http://127.0.0.1:%d/api/v1/orders", port), pgid: p.PGID(), check: true})
	}
	return targets, stop, nil
}

// caddyReport compares Caddy's checks on a connection of their own with pooled ones.
func caddyReport(b *strings.Builder, saturating map[string]wrkResult) {
	own, pooled := saturating[caddyName], saturating[caddyPooledName]
	perReq := func(r wrkResult, cpu time.Duration) time.Duration {
		return perRequest(cpu, r.requests).Round(100 * time.Nanosecond)
	}
	fmt.Fprintf(b, "Caddy, a connection a check ÷ pooled checks: %.2f× req/s, p99 %s and %s; CPU per request of Caddy %s and %s (%.2f×), of herdgate's check %s and %s (%.2f×)\n",
		own.rps/pooled.rps, own.p99.Round(time.Microsecond), pooled.p99.Round(time.Microsecond),
		perReq(own, own.gatewayCPU), perReq(pooled, pooled.gatewayCPU), ratioPerRequest(own, pooled, func(r wrkResult) time.Duration { return r.gatewayCPU }),
		perReq(own, own.checkCPU), perReq(pooled, pooled.checkCPU), ratioPerRequest(own, pooled, func(r wrkResult) time.Duration { return r.checkCPU }))
}
