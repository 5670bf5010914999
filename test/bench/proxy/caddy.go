package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/gatewayconfig"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

const (
	caddyName       = "Caddy + forward_auth, a connection a check"
	caddyPooledName = "Caddy + forward_auth, pooled checks"
)

// checkKeepAliveOff is the block `herd gateway-config --target caddy` puts in forward_auth so that
// no check rides a pooled connection (docs/guides/gateways.md, "Caddy"); the pooled site is the
// same configuration without it.
const checkKeepAliveOff = "\t\t\t\ttransport http {\n\t\t\t\t\tkeepalive off\n\t\t\t\t}\n"

// startCaddies starts Caddy asking herdgate-proxy's check with forward_auth, as `herd
// gateway-config --target caddy` prints it, and the same site with its checks on pooled
// connections: what a connection a check costs, side by side.
func startCaddies(dir string, backendPort, proxyPort int) ([]target, func(), error) {
	var procs []*testenv.Caddy
	stop := func() {
		for _, p := range procs {
			p.Stop()
		}
	}
	backend := fmt.Sprintf("127.0.0.1:%d", backendPort)
	wq := builder.Queue("bench", "orders").UpstreamURL("http://" + backend).Routes(builder.Route("/api/v1/orders", false, "POST")).
		Enforcement(herdgatev1alpha1.EnforcementGateway).Obj()
	config, err := gatewayconfig.Render(wq, gatewayconfig.Options{Target: "caddy", Listen: "LISTEN_ADDRESS",
		HerdgateAddress: fmt.Sprintf("127.0.0.1:%d", proxyPort), WorkloadAddress: backend})
	if err != nil {
		return nil, stop, err
	}
	generated := string(config)
	if !strings.Contains(generated, checkKeepAliveOff) {
		return nil, stop, fmt.Errorf("the generated Caddy site no longer turns off keep-alive on its checks; update the bench")
	}
	sites := map[string]string{caddyName: generated, caddyPooledName: strings.Replace(generated, checkKeepAliveOff, "", 1)}
	var targets []target
	for _, name := range []string{caddyName, caddyPooledName} {
		port := freePort()
		site := strings.Replace(sites[name], "LISTEN_ADDRESS", fmt.Sprintf("127.0.0.1:%d", port), 1)
		p, err := testenv.StartCaddy(filepath.Join(dir, strings.NewReplacer(" ", "-", "+", "", ",", "").Replace(name)), site)
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
