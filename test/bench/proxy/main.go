// Command bench-proxy measures herdgate-proxy beside nginx and a direct connection, in one run, all on
// loopback: a tiny backend (nginx returning 200), nginx proxy_pass with upstream keep-alive in front
// of it, and herdgate-proxy in front of it with a valid pass on a protected POST. It also compares
// status polls through the proxy with redis-benchmark ZRANK on the same Redis, and what a flood of early
// polls from one client costs Redis (flood.go; --flood-only runs that alone). The machine is shared
// and noisy, so every load runs several rounds, interleaved across the paths, and the median round
// is reported. Run it with `make bench-proxy`; it needs wrk, nginx and redis-tools (Debian packages).
package main

import (
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/herdgate/herdgate/internal/pass"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/test/testenv"
)

func main() {
	duration := flag.Duration("duration", 5*time.Second, "length of each run")
	rounds := flag.Int("rounds", 3, "rounds of every load, interleaved across the paths; the median is reported")
	connections := flag.Int("connections", 64, "concurrent connections of every load")
	proxyBin := flag.String("proxy", "", "herdgate-proxy binary (required)")
	gateway := flag.Bool("gateway", false, "also run the gateway mode: nginx with auth_request to herdgate-proxy's check, HAProxy alone and verifying JWT passes, and the gRPC check at load")
	baselineBin := flag.String("baseline", "", "another herdgate-proxy binary (an earlier build) to run beside --proxy in the same rounds, for before/after ratios")
	out := flag.String("out", "", "also write the report to this file")
	floodOnly := flag.Bool("flood-only", false, "run only the flood of early polls (and its baseline)")
	profileDir := flag.String("cpu-profile-dir", "", "write herdgate-proxy's CPU profiles of the first forward and status runs to this directory (profiling slows the proxy: read the numbers of such a run with care)")
	flag.Parse()
	if *proxyBin == "" {
		fmt.Fprintln(os.Stderr, "flag --proxy is required")
		os.Exit(2)
	}
	if *rounds < 1 {
		fmt.Fprintln(os.Stderr, "flag --rounds must be at least 1")
		os.Exit(2)
	}
	run := run
	if *floodOnly {
		run = func(proxyBin, baselineBin string, _ bool, d time.Duration, conns, _ int, _ string) (string, error) {
			return runFloods(proxyBin, baselineBin, d, conns)
		}
	}
	report, err := run(*proxyBin, *baselineBin, *gateway, *duration, *connections, *rounds, *profileDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-proxy:", err)
		os.Exit(1)
	}
	fmt.Print(report)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(report), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench-proxy:", err)
			os.Exit(1)
		}
	}
}

func run(proxyBin, baselineBin string, gateway bool, d time.Duration, conns, rounds int, profileDir string) (string, error) {
	for _, bin := range []string{"wrk", "nginx", "redis-benchmark", "redis-server"} {
		if _, err := exec.LookPath(bin); err != nil {
			return "", fmt.Errorf("%s not found; run 'make toolchain'", bin)
		}
	}
	dir, err := os.MkdirTemp("", "herdgate-bench-proxy-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	var stops []func()
	defer func() {
		for _, stop := range slices.Backward(stops) {
			stop()
		}
	}()

	redis, err := testenv.NewRedis(dir)
	if err != nil {
		return "", err
	}
	stops = append(stops, redis.Stop)

	backendPort, nginxPort, proxyPort := freePort(), freePort(), freePort()
	stopBackend, backendPID, err := startNginx(dir, "backend", fmt.Sprintf(backendServer, backendPort))
	if err != nil {
		return "", err
	}
	stops = append(stops, stopBackend)
	stopNginx, nginxPID, err := startNginx(dir, "proxy-pass", fmt.Sprintf(proxyPassServer, backendPort, nginxPort, admission.PassHeader))
	if err != nil {
		return "", err
	}
	stops = append(stops, stopNginx)

	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cfgPath := filepath.Join(dir, "proxy.yaml")
	cfg := fmt.Sprintf(`redisURL: %s
hmacKey: %s
waitingQueue:
  metadata: {namespace: bench, name: orders}
  spec:
    capacity: {poolSize: 40, requestLatency: 200ms}
    # Every poll told to come back within 100 ms, and no budget to stretch it: wrk's visitors, each
    # polled once a round of a few seconds, are never too early.
    polling: {minInterval: 100ms, maxInterval: 100ms, budget: 10000000}
    upstream: {url: "http://127.0.0.1:%d"}
    protectedRoutes:
      - {methods: [POST], path: /api/v1/orders}
`, redis.URL(), base64.StdEncoding.EncodeToString(key), backendPort)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return "", err
	}
	// The proxy's metrics port serves only the profiles, when they are asked for.
	metricsListen, pprof := "", "--pprof=false"
	profile := func(string) (wait func() error) { return notProfiled }
	if profileDir != "" {
		metricsListen, pprof = fmt.Sprintf("127.0.0.1:%d", freePort()), "--pprof"
		profile = func(name string) func() error {
			return cpuProfile("http://"+metricsListen, filepath.Join(profileDir, name+".pprof"), d)
		}
	}
	proxyArgs := []string{"--config=" + cfgPath, fmt.Sprintf("--listen=127.0.0.1:%d", proxyPort), "--metrics-listen=" + metricsListen, pprof, "--drain-delay=0s", "--zap-log-level=error"}
	extAuthzAddr := fmt.Sprintf("127.0.0.1:%d", freePort())
	if gateway {
		proxyArgs = append(proxyArgs, "--ext-authz-listen="+extAuthzAddr)
	}
	proxy := exec.Command(proxyBin, proxyArgs...)
	proxy.Stderr = os.Stderr
	if err := proxy.Start(); err != nil {
		return "", err
	}
	stops = append(stops, func() { _ = proxy.Process.Kill(); _ = proxy.Wait() })
	if err := waitHTTP(fmt.Sprintf("http://127.0.0.1:%d/.herdgate/healthz", proxyPort)); err != nil {
		return "", fmt.Errorf("herdgate-proxy: %w", err)
	}
	baselinePID, baselinePort := 0, freePort()
	if baselineBin != "" {
		baseline := exec.Command(baselineBin, "--config="+cfgPath, fmt.Sprintf("--listen=127.0.0.1:%d", baselinePort), "--metrics-listen=", "--pprof=false", "--drain-delay=0s", "--zap-log-level=error")
		baseline.Stderr = os.Stderr
		if err := baseline.Start(); err != nil {
			return "", err
		}
		stops = append(stops, func() { _ = baseline.Process.Kill(); _ = baseline.Wait() })
		if err := waitHTTP(fmt.Sprintf("http://127.0.0.1:%d/.herdgate/healthz", baselinePort)); err != nil {
			return "", fmt.Errorf("herdgate-proxy (baseline): %w", err)
		}
		baselinePID = baseline.Process.Pid
	}
	if err := waitHTTP(fmt.Sprintf("http://127.0.0.1:%d/", nginxPort)); err != nil {
		return "", fmt.Errorf("nginx: %w", err)
	}

	signer, err := pass.NewSigner("file:bench/orders", key)
	if err != nil {
		return "", err
	}
	token := signer.Issue("bench-visitor", time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	postScript := filepath.Join(dir, "post.lua")
	if err := os.WriteFile(postScript, []byte(fmt.Sprintf(`wrk.method = "POST"
wrk.body = '{"item":1}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Herdgate-Pass"] = %q
`, token)), 0o644); err != nil {
		return "", err
	}

	targets := []target{
		{name: "direct", url: fmt.Sprintf("http://127.0.0.1:%d/api/v1/orders", backendPort)},
		{name: "nginx proxy_pass", url: fmt.Sprintf("http://127.0.0.1:%d/api/v1/orders", nginxPort)},
		{name: "herdgate-proxy", url: fmt.Sprintf("http://127.0.0.1:%d/api/v1/orders", proxyPort)},
	}
	saturated := targets
	gatewayPID := 0
	if gateway {
		gatewayPort := freePort()
		stopGateway, pgid, err := startNginx(dir, "gateway", fmt.Sprintf(checkServer, proxyPort, backendPort, gatewayPort))
		if err != nil {
			return "", err
		}
		stops = append(stops, stopGateway)
		gatewayPID = pgid
		if err := waitHTTP(fmt.Sprintf("http://127.0.0.1:%d/.herdgate/healthz", gatewayPort)); err != nil {
			return "", fmt.Errorf("nginx with auth_request: %w", err)
		}
		saturated = append(slices.Clone(saturated), target{name: checkName, url: fmt.Sprintf("http://127.0.0.1:%d/api/v1/orders", gatewayPort)})
		haproxies, stop, err := startHAProxies(dir, backendPort, proxyPort)
		stops = append(stops, stop)
		if err != nil {
			return "", err
		}
		saturated = append(saturated, haproxies...)
		caddies, stop, err := startCaddies(dir, backendPort, proxyPort)
		stops = append(stops, stop)
		if err != nil {
			return "", err
		}
		saturated = append(saturated, caddies...)
	}
	if baselinePID != 0 {
		saturated = append(slices.Clone(saturated), target{name: baselineName, url: fmt.Sprintf("http://127.0.0.1:%d/api/v1/orders", baselinePort)})
	}
	runs := map[string][]wrkResult{}
	for round := 1; round <= rounds; round++ {
		for _, t := range saturated {
			fmt.Fprintf(os.Stderr, "[bench-proxy] round %d/%d: wrk %s, %d connections, %s\n", round, rounds, t.name, conns, d)
			profiled := notProfiled
			if round == 1 && t.name == "herdgate-proxy" {
				profiled = profile("forward")
			}
			groups0, proxy0, baseline0 := groupCPU(backendPID, nginxPID, gatewayPID), processCPU(proxy.Process.Pid), processCPU(baselinePID)
			script := postScript
			if t.script != "" {
				script = t.script
			}
			var own0 []time.Duration
			if t.pgid != 0 {
				own0 = groupCPU(t.pgid)
			}
			r, err := wrk(t.url, script, conns, d)
			if err != nil {
				return "", fmt.Errorf("%s: %w", t.name, err)
			}
			if err := profiled(); err != nil {
				return "", err
			}
			groups := groupCPU(backendPID, nginxPID, gatewayPID)
			r.backendCPU = groups[0] - groups0[0]
			switch t.name {
			case "nginx proxy_pass":
				r.proxyCPU = groups[1] - groups0[1]
			case "herdgate-proxy":
				r.proxyCPU = processCPU(proxy.Process.Pid) - proxy0
			case baselineName:
				r.proxyCPU = processCPU(baselinePID) - baseline0
			case checkName:
				// The gateway's nginx and the check it asks, together.
				r.gatewayCPU, r.checkCPU = groups[2]-groups0[2], processCPU(proxy.Process.Pid)-proxy0
				r.proxyCPU = r.gatewayCPU + r.checkCPU
			}
			if t.pgid != 0 {
				r.proxyCPU = groupCPU(t.pgid)[0] - own0[0]
			}
			if t.check {
				r.gatewayCPU, r.checkCPU = r.proxyCPU, processCPU(proxy.Process.Pid)-proxy0
				r.proxyCPU += r.checkCPU
			}
			if r.non2xx > 0 {
				return "", fmt.Errorf("%s: %d responses were not 2xx (is the pass accepted?)", t.name, r.non2xx)
			}
			runs[t.name] = append(runs[t.name], r)
		}
	}
	saturating := map[string]wrkResult{}
	for name, rs := range runs {
		saturating[name] = medianBy(rs, func(r wrkResult) float64 { return r.rps })
	}

	// Added latency at half of the proxy's saturating rate, against the same rate sent directly, and
	// nginx's at the same rate for scale.
	rate := saturating["herdgate-proxy"].rps / 2
	request := fmt.Sprintf("POST /api/v1/orders HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n%s: %s\r\nContent-Length: 10\r\n\r\n{\"item\":1}", admission.PassHeader, token)
	ports := map[string]int{"direct": backendPort, "nginx proxy_pass": nginxPort, "herdgate-proxy": proxyPort}
	fixedRuns := map[string][]wrkResult{}
	for round := 1; round <= rounds; round++ {
		for _, t := range targets {
			fmt.Fprintf(os.Stderr, "[bench-proxy] round %d/%d: fixed rate %.0f req/s, %s\n", round, rounds, rate, t.name)
			r, err := fixedRate(fmt.Sprintf("127.0.0.1:%d", ports[t.name]), request, rate, conns, d)
			if err != nil {
				return "", fmt.Errorf("%s: %w", t.name, err)
			}
			fixedRuns[t.name] = append(fixedRuns[t.name], r)
		}
	}
	atRate := map[string]wrkResult{}
	for name, rs := range fixedRuns {
		atRate[name] = medianBy(rs, func(r wrkResult) float64 { return float64(r.p99) })
	}

	fmt.Fprintln(os.Stderr, "[bench-proxy] status polls through the proxy and redis-benchmark ZRANK")
	pollers := []statusPoller{{port: proxyPort, pid: proxy.Process.Pid, room: "orders", signer: signer}}
	if baselineBin != "" {
		// The baseline polls a room of its own, served by a process of its own.
		p, stop, err := startStatusBaseline(dir, baselineBin, cfg, key)
		if err != nil {
			return "", err
		}
		stops = append(stops, stop)
		pollers = append(pollers, p)
	}
	all, zrank, err := statusVersusZrank(dir, redis, pollers, conns, rounds, d, profile)
	if err != nil {
		return "", err
	}
	polls, baselinePolls := all[0], wrkResult{}
	if len(all) > 1 {
		baselinePolls = all[1]
	}

	floods, err := floodsOfEarlyPolls(dir, redis, proxyBin, baselineBin, conns, d)
	if err != nil {
		return "", err
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n### Protected POST with a valid pass, %d connections, median of %d interleaved %s runs (wrk)\n\n", conns, rounds, d)
	fmt.Fprintf(&b, "| path | req/s | p50 | p99 | req/s vs nginx |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, t := range saturated {
		r := saturating[t.name]
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %.2f× |\n", t.name, r.rps, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.rps/saturating["nginx proxy_pass"].rps)
	}
	// CPU per request moves less with what else the machine runs than req/s does.
	cpuPerRequest := func(name string) (proxy, backend, load time.Duration) {
		r := saturating[name]
		return perRequest(r.proxyCPU, r.requests), perRequest(r.backendCPU, r.requests), perRequest(r.loadCPU, r.requests)
	}
	herdgatePerReq, herdgateBackend, herdgateLoad := cpuPerRequest("herdgate-proxy")
	nginxPerReq, nginxBackend, nginxLoad := cpuPerRequest("nginx proxy_pass")
	_, directBackend, directLoad := cpuPerRequest("direct")
	us := func(d time.Duration) time.Duration { return d.Round(100 * time.Nanosecond) }
	fmt.Fprintf(&b, "\nCPU per forwarded request (median run): herdgate-proxy %s, nginx proxy_pass %s; ratio %.2f× (the backend's: %s, %s, and %s direct; wrk's: %s, %s, and %s direct)\n",
		us(herdgatePerReq), us(nginxPerReq), float64(herdgatePerReq)/float64(nginxPerReq),
		us(herdgateBackend), us(nginxBackend), us(directBackend), us(herdgateLoad), us(nginxLoad), us(directLoad))
	if baselinePID != 0 {
		before, after := saturating[baselineName], saturating["herdgate-proxy"]
		baselinePerReq, _, _ := cpuPerRequest(baselineName)
		fmt.Fprintf(&b, "\nBefore and after, in the same rounds: req/s %.0f (baseline) and %.0f, ratio %.2f×; CPU per request %s and %s, ratio %.2f×; p99 %s and %s\n",
			before.rps, after.rps, after.rps/before.rps, us(baselinePerReq), us(herdgatePerReq), float64(herdgatePerReq)/float64(baselinePerReq),
			before.p99.Round(time.Microsecond), after.p99.Round(time.Microsecond))
	}
	fmt.Fprintf(&b, "\n### Fixed rate %.0f req/s (half the proxy's saturating rate), %d connections, median p99 of %d runs\n\n", rate, conns, rounds)
	fmt.Fprintf(&b, "| path | p50 | p99 | added p99 |\n| --- | ---: | ---: | ---: |\n")
	for _, t := range targets {
		r := atRate[t.name]
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.name, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), (r.p99 - atRate["direct"].p99).Round(time.Microsecond))
	}
	fmt.Fprintf(&b, "\nadded p99: herdgate-proxy %s (goal ≤ 100µs), nginx %s\n", (atRate["herdgate-proxy"].p99 - atRate["direct"].p99).Round(time.Microsecond),
		(atRate["nginx proxy_pass"].p99 - atRate["direct"].p99).Round(time.Microsecond))
	// The same path's p99 moves from round to round with whatever else the machine runs: a
	// difference smaller than this spread is not measured here.
	var directP99s []time.Duration
	for _, r := range fixedRuns["direct"] {
		directP99s = append(directP99s, r.p99)
	}
	fmt.Fprintf(&b, "direct's own p99 across the %d rounds: %s to %s\n", rounds, slices.Min(directP99s).Round(time.Microsecond), slices.Max(directP99s).Round(time.Microsecond))
	fmt.Fprintf(&b, "\n### Status polls, %d connections\n\n", conns)
	// Where each request's CPU goes, which req/s alone hides: the load generator, the proxy and
	// Redis share the machine's cores.
	perReq := func(r wrkResult, cpu time.Duration) time.Duration { return us(perRequest(cpu, r.requests)) }
	fmt.Fprintf(&b, "| load (median run) | req/s | CPU per request: load generator | herdgate-proxy | Redis |\n| --- | ---: | ---: | ---: | ---: |\n")
	fmt.Fprintf(&b, "| GET /.herdgate/status through herdgate-proxy | %.0f | %s (wrk) | %s | %s |\n", polls.rps, perReq(polls, polls.loadCPU), perReq(polls, polls.proxyCPU), perReq(polls, polls.redisCPU))
	if baselinePID != 0 {
		fmt.Fprintf(&b, "| GET /.herdgate/status through herdgate-proxy (baseline) | %.0f | %s (wrk) | %s | %s |\n", baselinePolls.rps, perReq(baselinePolls, baselinePolls.loadCPU), perReq(baselinePolls, baselinePolls.proxyCPU), perReq(baselinePolls, baselinePolls.redisCPU))
	}
	fmt.Fprintf(&b, "| redis-benchmark ZRANK | %.0f | %s (redis-benchmark) | – | %s |\n", zrank.rps, perReq(zrank, zrank.loadCPU), perReq(zrank, zrank.redisCPU))
	if baselinePID != 0 {
		fmt.Fprintf(&b, "\nStatus polls before and after, in the same rounds: req/s %.0f (baseline) and %.0f, ratio %.2f×; herdgate-proxy's CPU per poll %s and %s, ratio %.2f×; Redis' %s and %s, ratio %.2f×; answered 429 (too early): %d and %d\n",
			baselinePolls.rps, polls.rps, polls.rps/baselinePolls.rps,
			perReq(baselinePolls, baselinePolls.proxyCPU), perReq(polls, polls.proxyCPU), ratioPerRequest(polls, baselinePolls, func(r wrkResult) time.Duration { return r.proxyCPU }),
			perReq(baselinePolls, baselinePolls.redisCPU), perReq(polls, polls.redisCPU), ratioPerRequest(polls, baselinePolls, func(r wrkResult) time.Duration { return r.redisCPU }), baselinePolls.non2xx, polls.non2xx)
	}
	fmt.Fprintf(&b, "\nstatus polls ÷ ZRANK: %.2f× (goal ≥ 0.5×); %d of the polls were answered 429 (too early)\n", polls.rps/zrank.rps, polls.non2xx)
	fmt.Fprintf(&b, "herdgate-proxy ÷ nginx throughput: %.2f× (goal ≥ 0.8×)\n", saturating["herdgate-proxy"].rps/saturating["nginx proxy_pass"].rps)
	floodReport(&b, floods, conns, d)
	if gatewayPID != 0 {
		withCheck, alone := saturating[checkName], saturating["nginx proxy_pass"]
		checkPerReq, _, _ := cpuPerRequest(checkName)
		fmt.Fprintf(&b, "nginx with herdgate's check ÷ nginx alone: %.2f× req/s (goal ≥ 0.7×), p99 %s and %s; CPU per request of nginx and the check together %s, of nginx alone %s\n",
			withCheck.rps/alone.rps, withCheck.p99.Round(time.Microsecond), alone.p99.Round(time.Microsecond), us(checkPerReq), us(nginxPerReq))
		if withCheck.proxyCPU > 0 {
			gatewayShare := float64(withCheck.gatewayCPU) / float64(withCheck.proxyCPU)
			fmt.Fprintf(&b, "of that, per checked request: nginx (both of its proxyings) %s (%.0f %%), herdgate's check %s (%.0f %%)\n",
				us(perRequest(withCheck.gatewayCPU, withCheck.requests)), 100*gatewayShare, us(perRequest(withCheck.checkCPU, withCheck.requests)), 100*(1-gatewayShare))
		}
		haproxyAlone := saturating[haproxyName]
		alonePerReq, _, _ := cpuPerRequest(haproxyName)
		for _, name := range []string{haproxyES256Name, haproxyHS256Name} {
			r := saturating[name]
			perReq, _, _ := cpuPerRequest(name)
			fmt.Fprintf(&b, "%s ÷ HAProxy alone: %.2f× req/s, p99 %s and %s; CPU per request %s and %s\n",
				name, r.rps/haproxyAlone.rps, r.p99.Round(time.Microsecond), haproxyAlone.p99.Round(time.Microsecond), us(perReq), us(alonePerReq))
		}
		caddyReport(&b, saturating)
		fmt.Fprintln(os.Stderr, "[bench-proxy] the gRPC check at load")
		grpc, err := grpcCheckAtLoad(extAuthzAddr, token, conns, d)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "gRPC check (ext_authz) of a protected POST with a valid pass, %d concurrent callers: %.0f checks/s, p50 %s, p99 %s\n",
			conns, grpc.rps, grpc.p50.Round(time.Microsecond), grpc.p99.Round(time.Microsecond))
	}
	return b.String(), nil
}

var (
	rpsLine      = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	requestsLine = regexp.MustCompile(`(\d+) requests in `)
	latencyLine  = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
	non2xxLine   = regexp.MustCompile(`Non-2xx or 3xx responses:\s+(\d+)`)
	answersLine  = regexp.MustCompile(`(?m)^answers (\w+): (\d+)$`)
)

// wrkThreads: wrk's threads; the status script gives each its own share of the visitors.
const wrkThreads = 2

func freePort() int {
	p, err := testenv.FreePort()
	if err != nil {
		panic(err)
	}
	return p
}

func waitHTTP(url string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startStatusBaseline starts the baseline proxy on the room bench/orders-b, configured as cfg says
// for bench/orders otherwise, for the status polls.
func startStatusBaseline(dir, bin, cfg string, key []byte) (statusPoller, func(), error) {
	path := filepath.Join(dir, "proxy-b.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(cfg, "name: orders}", "name: orders-b}", 1)), 0o600); err != nil {
		return statusPoller{}, nil, err
	}
	port := freePort()
	cmd := exec.Command(bin, "--config="+path, fmt.Sprintf("--listen=127.0.0.1:%d", port), "--metrics-listen=", "--pprof=false", "--drain-delay=0s", "--zap-log-level=error")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return statusPoller{}, nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	if err := waitHTTP(fmt.Sprintf("http://127.0.0.1:%d/.herdgate/healthz", port)); err != nil {
		stop()
		return statusPoller{}, nil, fmt.Errorf("herdgate-proxy (baseline, status): %w", err)
	}
	signer, err := pass.NewSigner("file:bench/orders-b", key)
	if err != nil {
		stop()
		return statusPoller{}, nil, err
	}
	return statusPoller{port: port, pid: cmd.Process.Pid, room: "orders-b", signer: signer}, stop, nil
}

// ratioPerRequest is after's CPU per request over before's, of the CPU cpu picks.
func ratioPerRequest(after, before wrkResult, cpu func(wrkResult) time.Duration) float64 {
	a, b := perRequest(cpu(after), after.requests), perRequest(cpu(before), before.requests)
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}
