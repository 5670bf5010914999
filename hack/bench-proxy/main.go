// Command bench-proxy measures herdgate-proxy beside nginx and a direct connection, in one run, all on
// loopback: a tiny backend (nginx returning 200), nginx proxy_pass with upstream keep-alive in front
// of it, and herdgate-proxy in front of it with a valid pass on a protected POST. It also compares
// status polls through the proxy with redis-benchmark ZRANK on the same Redis. The machine is shared
// and noisy, so every load runs several rounds, interleaved across the paths, and the median round
// is reported. Run it with `make bench-proxy`; it needs wrk, nginx and redis-tools (Debian packages).
package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/testenv"
)

func main() {
	duration := flag.Duration("duration", 5*time.Second, "length of each run")
	rounds := flag.Int("rounds", 3, "rounds of every load, interleaved across the paths; the median is reported")
	connections := flag.Int("connections", 64, "concurrent connections of every load")
	proxyBin := flag.String("proxy", "", "herdgate-proxy binary (required)")
	out := flag.String("out", "", "also write the report to this file")
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
	report, err := run(*proxyBin, *duration, *connections, *rounds, *profileDir)
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

type wrkResult struct {
	rps      float64
	requests int64
	p50, p99 time.Duration
	non2xx   int
	// proxyCPU, backendCPU and redisCPU are the CPU time the proxy under test (herdgate-proxy or
	// nginx), the backend and Redis spent during the run, when measured; loadCPU is the load
	// generator's own (wrk or redis-benchmark).
	proxyCPU, backendCPU, redisCPU, loadCPU time.Duration
}

func run(proxyBin string, d time.Duration, conns, rounds int, profileDir string) (string, error) {
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
	proxy := exec.Command(proxyBin, proxyArgs...)
	proxy.Stderr = os.Stderr
	if err := proxy.Start(); err != nil {
		return "", err
	}
	stops = append(stops, func() { _ = proxy.Process.Kill(); _ = proxy.Wait() })
	if err := waitHTTP(fmt.Sprintf("http://127.0.0.1:%d/.herdgate/healthz", proxyPort)); err != nil {
		return "", fmt.Errorf("herdgate-proxy: %w", err)
	}
	if err := waitHTTP(fmt.Sprintf("http://127.0.0.1:%d/", nginxPort)); err != nil {
		return "", fmt.Errorf("nginx: %w", err)
	}

	signer, err := admission.NewSigner("file:bench/orders", key)
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

	targets := []struct{ name, url string }{
		{"direct", fmt.Sprintf("http://127.0.0.1:%d/api/v1/orders", backendPort)},
		{"nginx proxy_pass", fmt.Sprintf("http://127.0.0.1:%d/api/v1/orders", nginxPort)},
		{"herdgate-proxy", fmt.Sprintf("http://127.0.0.1:%d/api/v1/orders", proxyPort)},
	}
	runs := map[string][]wrkResult{}
	for round := 1; round <= rounds; round++ {
		for _, t := range targets {
			fmt.Fprintf(os.Stderr, "[bench-proxy] round %d/%d: wrk %s, %d connections, %s\n", round, rounds, t.name, conns, d)
			profiled := notProfiled
			if round == 1 && t.name == "herdgate-proxy" {
				profiled = profile("forward")
			}
			groups0, proxy0 := groupCPU(backendPID, nginxPID), processCPU(proxy.Process.Pid)
			r, err := wrk(t.url, postScript, conns, d)
			if err != nil {
				return "", fmt.Errorf("%s: %w", t.name, err)
			}
			if err := profiled(); err != nil {
				return "", err
			}
			groups := groupCPU(backendPID, nginxPID)
			r.backendCPU = groups[0] - groups0[0]
			switch t.name {
			case "nginx proxy_pass":
				r.proxyCPU = groups[1] - groups0[1]
			case "herdgate-proxy":
				r.proxyCPU = processCPU(proxy.Process.Pid) - proxy0
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
	polls, zrank, err := statusVersusZrank(dir, redis, signer, proxyPort, proxy.Process.Pid, conns, rounds, d, profile)
	if err != nil {
		return "", err
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n### Protected POST with a valid pass, %d connections, median of %d interleaved %s runs (wrk)\n\n", conns, rounds, d)
	fmt.Fprintf(&b, "| path | req/s | p50 | p99 | req/s vs nginx |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, t := range targets {
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
	fmt.Fprintf(&b, "| redis-benchmark ZRANK | %.0f | %s (redis-benchmark) | – | %s |\n", zrank.rps, perReq(zrank, zrank.loadCPU), perReq(zrank, zrank.redisCPU))
	fmt.Fprintf(&b, "\nstatus polls ÷ ZRANK: %.2f× (goal ≥ 0.5×); %d of the polls were answered 429 (too early)\n", polls.rps/zrank.rps, polls.non2xx)
	fmt.Fprintf(&b, "herdgate-proxy ÷ nginx throughput: %.2f× (goal ≥ 0.8×)\n", saturating["herdgate-proxy"].rps/saturating["nginx proxy_pass"].rps)
	return b.String(), nil
}

// The backend and nginx's proxy_pass run as two nginx instances. In one instance a worker could
// answer its own upstream connection inside one event loop, where herdgate-proxy must wake another
// process for every request; two instances make both proxies cross processes to the same backend.
// nginx does the forwarding work herdgate-proxy must do: it sets the X-Forwarded-* headers and keeps
// the pass from the upstream, so the backend receives the same request from both.
const (
	backendServer = `server {
    listen 127.0.0.1:%d;
    location / { return 200 "ok\n"; }
  }`
	proxyPassServer = `upstream backend { server 127.0.0.1:%d; keepalive 256; keepalive_requests 1000000; }
  server {
    listen 127.0.0.1:%d;
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For $remote_addr;
      proxy_set_header X-Forwarded-Host $http_host;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header %s "";
    }
  }`
)

// startNginx starts an nginx serving the given server blocks from its own directory under dir, and
// returns how to stop it and its process group.
func startNginx(dir, name, servers string) (stop func(), pgid int, err error) {
	dir = filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, 0, err
	}
	conf := fmt.Sprintf(`worker_processes 2;
error_log %[1]s/nginx-error.log warn;
pid %[1]s/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  # Connections live as long as the load: no path pays for reconnects the others skip.
  keepalive_requests 1000000;
  %[2]s
}
`, dir, servers)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, 0, err
	}
	cmd := exec.Command("nginx", "-p", dir, "-c", path, "-g", "daemon off;")
	cmd.Stderr = os.Stderr
	// Its own process group, so that the workers go with the master: killed alone, the master
	// leaves its workers running, holding their ports.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	return func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) // nginx's fast shutdown: the master stops its workers
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}, cmd.Process.Pid, nil
}

var (
	rpsLine      = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	requestsLine = regexp.MustCompile(`(\d+) requests in `)
	latencyLine  = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
	non2xxLine   = regexp.MustCompile(`Non-2xx or 3xx responses:\s+(\d+)`)
)

// wrkThreads: wrk's threads; the status script gives each its own share of the visitors.
const wrkThreads = 2

func wrk(url, script string, conns int, d time.Duration) (wrkResult, error) {
	cmd := exec.Command("wrk", "-t"+strconv.Itoa(wrkThreads), "-c"+strconv.Itoa(conns), "-d"+d.String(), "--latency", "-s", script, url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk: %w\n%s", err, out)
	}
	r, err := parseWrk(string(out))
	r.loadCPU = ownCPU(cmd)
	return r, err
}

// ownCPU is the CPU time a finished command used.
func ownCPU(cmd *exec.Cmd) time.Duration {
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

func parseWrk(out string) (wrkResult, error) {
	r := wrkResult{}
	m := rpsLine.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("no Requests/sec in wrk output:\n%s", out)
	}
	r.rps, _ = strconv.ParseFloat(m[1], 64)
	if m := requestsLine.FindStringSubmatch(out); m != nil {
		r.requests, _ = strconv.ParseInt(m[1], 10, 64)
	}
	for _, l := range latencyLine.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(l[2], 64)
		unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[l[3]]
		dur := time.Duration(v * float64(unit))
		if l[1] == "50" {
			r.p50 = dur
		} else {
			r.p99 = dur
		}
	}
	if m := non2xxLine.FindStringSubmatch(out); m != nil {
		r.non2xx, _ = strconv.Atoi(m[1])
	}
	return r, nil
}

// fixedRate sends request on conns keep-alive connections at a constant rate (open loop) and
// measures latency from each request's scheduled time, so a slow response delays no measurement
// (no coordinated omission). It speaks HTTP/1.1 on raw connections: a lean client keeps its own
// cost and jitter out of the numbers on a machine it shares with what it measures.
func fixedRate(addr, request string, rate float64, conns int, d time.Duration) (wrkResult, error) {
	total := int(rate * d.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	jobs := make(chan time.Time, total)
	lat := make([]time.Duration, 0, total)
	var mu sync.Mutex
	var failed error
	var wg sync.WaitGroup
	for range conns {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return wrkResult{}, err
		}
		wg.Go(func() {
			defer conn.Close()
			br := bufio.NewReader(conn)
			mine := make([]time.Duration, 0, total/conns+1)
			var err error
			for scheduled := range jobs {
				if err != nil {
					continue // drain
				}
				if wait := time.Until(scheduled); wait > 0 {
					time.Sleep(wait)
				}
				if _, err = io.WriteString(conn, request); err != nil {
					continue
				}
				var res *http.Response
				if res, err = http.ReadResponse(br, nil); err != nil {
					continue
				}
				_, err = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if err == nil && res.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d", res.StatusCode)
				}
				mine = append(mine, time.Since(scheduled))
			}
			mu.Lock()
			if err != nil && failed == nil {
				failed = err
			}
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	start := time.Now().Add(100 * time.Millisecond)
	for i := range total {
		jobs <- start.Add(time.Duration(i) * interval)
	}
	close(jobs)
	wg.Wait()
	if failed != nil {
		return wrkResult{}, failed
	}
	slices.Sort(lat)
	return wrkResult{rps: rate, p50: lat[len(lat)/2], p99: lat[len(lat)*99/100]}, nil
}

// medianBy is the run with the median key.
func medianBy(runs []wrkResult, key func(wrkResult) float64) wrkResult {
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b wrkResult) int { return cmp.Compare(key(a), key(b)) })
	return sorted[len(sorted)/2]
}

// statusVersusZrank enters visitors, then polls their status through the proxy with wrk, and runs
// redis-benchmark ZRANK on a sorted set of the same size, at the same concurrency; it returns the
// median run of each, with the CPU that Redis, the proxy and the load generator spent in it.
func statusVersusZrank(dir string, server *testenv.Redis, signer *admission.Signer, proxyPort, proxyPID, conns, rounds int, d time.Duration, profile func(string) func() error) (wrkResult, wrkResult, error) {
	const visitors = 100_000
	ctx := context.Background()
	rdb, err := queue.NewClient(server.URL(), queue.ClientOptions{})
	if err != nil {
		return wrkResult{}, wrkResult{}, err
	}
	defer rdb.Close()
	store := queue.NewStore(rdb, queue.StoreOptions{})
	defer store.Close()
	q, err := store.Queue("bench", "orders")
	if err != nil {
		return wrkResult{}, wrkResult{}, err
	}
	quota14, err := capacity.FromQuota(14, 1, 100*time.Millisecond, false)
	if err != nil {
		return wrkResult{}, wrkResult{}, err
	}
	// The shortest poll interval the API allows, so that pollers are refused as rarely as possible.
	if err := q.PublishPlan(ctx, queue.Plan{Quota: quota14,
		PollMin: 100 * time.Millisecond, PollMax: 100 * time.Millisecond, AbandonAfter: time.Hour}); err != nil {
		return wrkResult{}, wrkResult{}, err
	}
	cookies := make([]string, visitors)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 64 {
		wg.Go(func() {
			for i := w; i < visitors; i += 64 {
				id, cookie := signer.NewVisitorCookie()
				cookies[i] = cookie
				if _, err := q.Enter(ctx, id, time.Hour); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return wrkResult{}, wrkResult{}, err
	}
	script := filepath.Join(dir, "status.lua")
	f, err := os.Create(script)
	if err != nil {
		return wrkResult{}, wrkResult{}, err
	}
	// Visitors are polled in an order shuffled once: in arrival order, each poll would find its
	// neighbour's records in Redis' caches, which redis-benchmark's random members do not.
	mathrand.Shuffle(len(cookies), func(i, j int) { cookies[i], cookies[j] = cookies[j], cookies[i] })
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "local cookies = {")
	for _, c := range cookies {
		fmt.Fprintf(w, "%q,\n", admission.VisitorCookie+"="+c)
	}
	fmt.Fprintf(w, `}
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end
local requests, last = {}, 0
function init(args)
  -- Every thread walks its own share of the visitors round and round: a visitor's next poll comes a
  -- whole round later, never sooner than the proxy allows (which it would answer 429). The requests
  -- are formatted once, so that the load generator spends its time sending, as redis-benchmark does.
  for i = id, #cookies, %d do
    requests[#requests + 1] = wrk.format("GET", "/.herdgate/status", { Cookie = cookies[i] })
  end
end
request = function()
  last = last %% #requests + 1
  return requests[last]
end
`, wrkThreads)
	if err := w.Flush(); err != nil {
		return wrkResult{}, wrkResult{}, err
	}
	f.Close()
	// The same server, a sorted set of the same size, ZRANK of random members. The members are named
	// as redis-benchmark names __rand_int__ (12 zero-padded digits), so that every ZRANK finds one.
	pipe := rdb.Pipeline()
	for i := range visitors {
		pipe.ZAdd(ctx, "zrank-baseline", redis.Z{Score: float64(i), Member: fmt.Sprintf("%012d", i)})
		if i%5000 == 4999 {
			if _, err := pipe.Exec(ctx); err != nil {
				return wrkResult{}, wrkResult{}, err
			}
			pipe = rdb.Pipeline()
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return wrkResult{}, wrkResult{}, err
	}
	var pollRuns, zrankRuns []wrkResult
	for round := 1; round <= rounds; round++ {
		fmt.Fprintf(os.Stderr, "[bench-proxy] round %d/%d: status polls through the proxy, then redis-benchmark ZRANK\n", round, rounds)
		profiled := notProfiled
		if round == 1 {
			profiled = profile("status")
		}
		redis0, proxy0 := server.CPU(), processCPU(proxyPID)
		polls, err := wrk(fmt.Sprintf("http://127.0.0.1:%d/.herdgate/status", proxyPort), script, conns, d)
		if err != nil {
			return wrkResult{}, wrkResult{}, err
		}
		polls.redisCPU, polls.proxyCPU = server.CPU()-redis0, processCPU(proxyPID)-proxy0
		if err := profiled(); err != nil {
			return wrkResult{}, wrkResult{}, err
		}
		pollRuns = append(pollRuns, polls)
		n := max(int(polls.rps*d.Seconds()), 100_000)
		redis0 = server.CPU()
		cmd := exec.Command("redis-benchmark", "-h", "127.0.0.1", "-p", strconv.Itoa(server.Port), "-c", strconv.Itoa(conns),
			"-n", strconv.Itoa(n), "-r", strconv.Itoa(visitors), "--csv", "ZRANK", "zrank-baseline", "__rand_int__")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return wrkResult{}, wrkResult{}, fmt.Errorf("redis-benchmark: %w\n%s", err, out)
		}
		zrank, err := testenv.RedisBenchmarkRate(out)
		if err != nil {
			return wrkResult{}, wrkResult{}, err
		}
		zrankRuns = append(zrankRuns, wrkResult{rps: zrank, requests: int64(n), redisCPU: server.CPU() - redis0, loadCPU: ownCPU(cmd)})
	}
	rps := func(r wrkResult) float64 { return r.rps }
	return medianBy(pollRuns, rps), medianBy(zrankRuns, rps), nil
}

// notProfiled is the wait of a run that takes no profile.
func notProfiled() error { return nil }

// cpuProfile starts fetching a CPU profile of the load about to start from the proxy's pprof
// endpoint, and returns a function that waits for it and writes it to path.
func cpuProfile(base, path string, d time.Duration) func() error {
	done := make(chan error, 1)
	go func() {
		seconds := max(1, int(d.Seconds())-1)
		resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, seconds))
		if err != nil {
			done <- fmt.Errorf("cpu profile: %w", err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			done <- fmt.Errorf("cpu profile: %s", resp.Status)
			return
		}
		f, err := os.Create(path)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		done <- errors.Join(err, f.Close())
	}()
	return func() error {
		err := <-done
		if err == nil {
			fmt.Fprintf(os.Stderr, "[bench-proxy] CPU profile: %s\n", path)
		}
		return err
	}
}

// processCPU is the CPU time a process has used so far, 0 when it cannot be read.
func processCPU(pid int) time.Duration {
	stat, _ := testenv.ReadProcStat(pid)
	return stat.CPU
}

// groupCPU is the CPU time used so far by the live processes of each process group, in the order
// given, from one pass over /proc.
func groupCPU(pgids ...int) []time.Duration {
	totals := make([]time.Duration, len(pgids))
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, ok := testenv.ReadProcStat(pid)
		if !ok {
			continue
		}
		for i, pgid := range pgids {
			if stat.PGID == pgid {
				totals[i] += stat.CPU
			}
		}
	}
	return totals
}

func perRequest(cpu time.Duration, requests int64) time.Duration {
	if requests == 0 {
		return 0
	}
	return cpu / time.Duration(requests)
}

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
