package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/testenv"
)

// A flood of early polls (docs/guides/entry-control.md, "Polls that come too soon"): one client
// address with wrk's connections walks the cookies of the room's waiting visitors, each polled again
// long before it was told to, while a few faithful visitors, each from an address of its own, poll
// as told. What it costs Redis per poll refused is what the flood can make the room spend.

const (
	floodVisitors = 10_000
	faithfulCount = 20
	floodClient   = "198.51.100.7"
	// floodWarmUp lets the proxy meet every visitor once before the measured run: the first poll of a
	// visitor a replica never answered is Redis's to judge, as a faithful visitor's is.
	floodWarmUp = 2 * time.Second
)

// floodRoom is one proxy and room that a flood runs against.
type floodRoom struct {
	name string
	// bin is the herdgate-proxy binary; pollsPerSecond, when set, bounds the client's polls
	// (spec.entry.perClient.pollsPerSecond), which a build before it does not know.
	bin            string
	pollsPerSecond int
}

// floodResult is what one flood cost.
type floodResult struct {
	room floodRoom
	// flood is wrk's run: its polls, and those answered other than 2xx (refused).
	flood wrkResult
	// redisCommands and redisCPU are what Redis ran during the run, whoever asked (the faithful
	// visitors and the proxy's own loops too); proxyCPU is the proxy's.
	redisCommands      int64
	redisCPU, proxyCPU time.Duration
	// warmUpCommands are the commands of the warm-up walk, which meets each visitor for the first
	// time.
	warmUpCommands int64
	// faithfulPolls and faithfulAnswered count the faithful visitors' polls during the run, and those
	// answered with their place or their pass.
	faithfulPolls, faithfulAnswered int64
}

// refused is how many of the flood's polls were refused: too early, or past the client's rate.
func (r floodResult) refused() int64 { return r.flood.answers["tooEarly"] + r.flood.answers["tooMany"] }

// runFloods is the bench of the floods alone (--flood-only), on a Redis of its own.
func runFloods(proxyBin, baselineBin string, d time.Duration, conns int) (string, error) {
	if _, err := exec.LookPath("wrk"); err != nil {
		return "", fmt.Errorf("wrk not found; run 'make toolchain'")
	}
	dir, err := os.MkdirTemp("", "herdgate-bench-flood-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	server, err := testenv.NewRedis(dir)
	if err != nil {
		return "", err
	}
	defer server.Stop()
	floods, err := floodsOfEarlyPolls(dir, server, proxyBin, baselineBin, conns, d)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	floodReport(&b, floods, conns, d)
	return b.String(), nil
}

// floodsOfEarlyPolls runs the flood against the baseline, when there is one, and against proxyBin
// with and without a bound on the client's polls.
func floodsOfEarlyPolls(dir string, server *testenv.Redis, proxyBin, baselineBin string, conns int, d time.Duration) ([]floodResult, error) {
	rooms := []floodRoom{{name: "flood", bin: proxyBin}, {name: "flood-per-client", bin: proxyBin, pollsPerSecond: 50}}
	if baselineBin != "" {
		rooms = append([]floodRoom{{name: "flood-baseline", bin: baselineBin}}, rooms...)
	}
	var out []floodResult
	for _, room := range rooms {
		r, err := floodOfEarlyPolls(dir, server, room, conns, d)
		if err != nil {
			return nil, fmt.Errorf("flood of early polls, %s: %w", room.name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// floodOfEarlyPolls runs the flood against a proxy of room.bin serving a room of its own on server.
func floodOfEarlyPolls(dir string, server *testenv.Redis, room floodRoom, conns int, d time.Duration) (floodResult, error) {
	res := floodResult{room: room}
	ctx := context.Background()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return res, err
	}
	perClient := ""
	if room.pollsPerSecond > 0 {
		// An entry limit the crowd's one address never reaches.
		perClient = fmt.Sprintf("\n      perClient: {burst: 100000, perMinute: 600000, pollsPerSecond: %d}", room.pollsPerSecond)
	}
	cfgPath := filepath.Join(dir, "flood-"+room.name+".yaml")
	// The default poll intervals, so that a poll a quarter of a second after the last is too early.
	cfg := fmt.Sprintf(`redisURL: %s
hmacKey: %s
waitingQueue:
  metadata: {namespace: bench, name: %s}
  spec:
    capacity: {poolSize: 40, requestLatency: 200ms}
    abandonAfter: 1h
    entry:
      trustedProxies: [127.0.0.0/8]%s
    upstream: {url: "http://127.0.0.1:1"}
    protectedRoutes:
      - {methods: [POST], path: /api/v1/orders}
`, server.URL(), base64.StdEncoding.EncodeToString(key), room.name, perClient)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return res, err
	}
	port := freePort()
	proxy := exec.Command(room.bin, "--config="+cfgPath, fmt.Sprintf("--listen=127.0.0.1:%d", port), "--metrics-listen=", "--pprof=false", "--drain-delay=0s", "--zap-log-level=error")
	proxy.Stderr = os.Stderr
	if err := proxy.Start(); err != nil {
		return res, err
	}
	defer func() { _ = proxy.Process.Kill(); _ = proxy.Wait() }()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := waitHTTP(base + "/.herdgate/healthz"); err != nil {
		return res, fmt.Errorf("herdgate-proxy (%s): %w", room.name, err)
	}

	rdb, err := queue.NewClient(server.URL(), queue.ClientOptions{})
	if err != nil {
		return res, err
	}
	defer rdb.Close()
	store := queue.NewStore(rdb, queue.StoreOptions{})
	defer store.Close()
	q, err := store.Queue("bench", room.name)
	if err != nil {
		return res, err
	}
	quota, err := capacity.FromQuota(14, 1, 100*time.Millisecond, false)
	if err != nil {
		return res, err
	}
	if err := q.PublishPlan(ctx, queue.PublishedPlan{Quota: quota, PollMin: 500 * time.Millisecond, PollMax: 5 * time.Second, AbandonAfter: time.Hour}); err != nil {
		return res, err
	}
	signer, err := pass.NewSigner("file:bench/"+room.name, key)
	if err != nil {
		return res, err
	}
	// The faithful visitors enter first, at the front, where polls come every half second, and poll as
	// told through the warm-up and the run.
	faithfulCtx, stopFaithful := context.WithCancel(ctx)
	var faithful sync.WaitGroup
	defer func() {
		stopFaithful()
		faithful.Wait()
	}()
	var polls, answered, entered atomic.Int64
	var counting atomic.Bool
	for i := range faithfulCount {
		faithful.Go(func() {
			pollAsTold(faithfulCtx, base, fmt.Sprintf("203.0.113.%d", i+1), &entered, &counting, &polls, &answered)
		})
	}
	for deadline := time.Now().Add(10 * time.Second); entered.Load() < faithfulCount; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%d of the %d faithful visitors entered", entered.Load(), faithfulCount)
		}
	}
	cookies := make([]string, floodVisitors)
	for i := range cookies {
		id, cookie := signer.NewVisitorCookie()
		cookies[i] = cookie
		if _, err := q.Enter(ctx, id, time.Hour); err != nil {
			return res, err
		}
	}
	script := filepath.Join(dir, "flood-"+room.name+".lua")
	if err := writeFloodScript(script, room.name, cookies); err != nil {
		return res, err
	}
	// The entries are older than any poll interval: the flood's first poll of each is in time.
	time.Sleep(time.Second)
	fmt.Fprintf(os.Stderr, "[bench-proxy] flood of early polls, %s: warm-up walk\n", room.name)
	warm0, err := commandsProcessed(ctx, rdb)
	if err != nil {
		return res, err
	}
	if _, err := wrk(base+"/.herdgate/status", script, conns, floodWarmUp); err != nil {
		return res, err
	}
	warm1, err := commandsProcessed(ctx, rdb)
	if err != nil {
		return res, err
	}
	res.warmUpCommands = warm1 - warm0

	fmt.Fprintf(os.Stderr, "[bench-proxy] flood of early polls, %s: %d connections from one client, %d faithful visitors, %s\n", room.name, conns, faithfulCount, d)
	redis0, proxy0 := server.CPU(), processCPU(proxy.Process.Pid)
	cmds0, err := commandsProcessed(ctx, rdb)
	if err != nil {
		return res, err
	}
	counting.Store(true)
	res.flood, err = wrk(base+"/.herdgate/status", script, conns, d)
	counting.Store(false)
	if err == nil && (res.flood.answers == nil || res.flood.answers["other"] > 0) {
		err = fmt.Errorf("the flood's polls were answered %v: want only places (200) and refusals (429)", res.flood.answers)
	}
	cmds1, cmdErr := commandsProcessed(ctx, rdb)
	res.redisCPU, res.proxyCPU = server.CPU()-redis0, processCPU(proxy.Process.Pid)-proxy0
	if err != nil {
		return res, err
	}
	if cmdErr != nil {
		return res, cmdErr
	}
	res.redisCommands = cmds1 - cmds0
	res.faithfulPolls, res.faithfulAnswered = polls.Load(), answered.Load()
	return res, nil
}

// pollAsTold is a faithful visitor from client: it enters (and counts itself in entered), then polls
// as each answer tells it until ctx ends; while counting, it counts its polls and those answered
// with its place or its pass.
func pollAsTold(ctx context.Context, base, client string, entered *atomic.Int64, counting *atomic.Bool, polls, answered *atomic.Int64) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 5 * time.Second}
	method, path := http.MethodPost, "/.herdgate/enter"
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, method, base+path, nil)
		req.Header.Set("X-Forwarded-For", client)
		wait := time.Second
		res, err := c.Do(req)
		if err == nil {
			var body struct {
				NextPollMs   int64 `json:"nextPollMs"`
				RetryAfterMs int64 `json:"retryAfterMs"`
			}
			_ = json.NewDecoder(res.Body).Decode(&body)
			res.Body.Close()
			if method == http.MethodGet && counting.Load() {
				polls.Add(1)
				if res.StatusCode == http.StatusOK {
					answered.Add(1)
				}
			}
			if res.StatusCode == http.StatusOK && method == http.MethodPost {
				entered.Add(1)
				method, path = http.MethodGet, "/.herdgate/status"
			}
			wait = time.Duration(max(body.NextPollMs, body.RetryAfterMs, 50)) * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// commandsProcessed is Redis' count of the commands it ran.
func commandsProcessed(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	info, err := rdb.Info(ctx, "stats").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO stats without total_commands_processed")
}

// writeFloodScript writes wrk's script of the flood: every thread walks its share of the visitors'
// cookies in room round and round, all from one client address.
func writeFloodScript(script, room string, cookies []string) error {
	f, err := os.Create(script)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "local cookies = {")
	for _, c := range cookies {
		fmt.Fprintf(w, "%q,\n", admission.CookieNamesOf("bench", room).Visitor+"="+c)
	}
	fmt.Fprintf(w, `}
local threads = {}
function setup(thread)
  threads[#threads + 1] = thread
  thread:set("id", #threads)
end
local requests, last = {}, 0
function init(args)
  for i = id, #cookies, %d do
    requests[#requests + 1] = wrk.format("GET", "/.herdgate/status", { Cookie = cookies[i], ["X-Forwarded-For"] = %q })
  end
end
request = function()
  last = last %% #requests + 1
  return requests[last]
end
-- What the polls were answered, by status.
answered, tooEarly, tooMany, other = 0, 0, 0, 0
response = function(status, headers, body)
  if status == 200 then
    answered = answered + 1
  elseif status == 429 and string.find(body, "too_early", 1, true) then
    tooEarly = tooEarly + 1
  elseif status == 429 and string.find(body, "too_many_polls", 1, true) then
    tooMany = tooMany + 1
  else
    other = other + 1
  end
end
done = function(summary, latency, requests)
  for _, name in ipairs({ "answered", "tooEarly", "tooMany", "other" }) do
    local n = 0
    for _, t in ipairs(threads) do
      n = n + t:get(name)
    end
    io.write(string.format("answers %%s: %%d\n", name, n))
  end
end
`, wrkThreads, floodClient)
	return w.Flush()
}

// floodReport is the flood's section of the report.
func floodReport(b *strings.Builder, results []floodResult, conns int, d time.Duration) {
	fmt.Fprintf(b, "\n### A flood of early polls: one client, %d connections, walking %d waiting visitors' cookies; %d faithful visitors polling as told; %s\n\n",
		conns, floodVisitors, faithfulCount, d)
	fmt.Fprintf(b, "| proxy | polls/s | answered | refused: too early | too many polls | Redis commands per refused poll | Redis CPU per refused poll | proxy CPU per poll | first walk: Redis commands per visitor | faithful polls answered |\n")
	fmt.Fprintf(b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range results {
		refused := r.refused()
		perRefused, cpuPerRefused := "–", "–"
		if refused > 0 {
			perRefused = fmt.Sprintf("%.3f", float64(r.redisCommands)/float64(refused))
			cpuPerRefused = perRequest(r.redisCPU, refused).Round(10 * time.Nanosecond).String()
		}
		fmt.Fprintf(b, "| %s | %.0f | %d | %d | %d | %s | %s | %s | %.2f | %d of %d |\n", r.room.name, r.flood.rps,
			r.flood.answers["answered"], r.flood.answers["tooEarly"], r.flood.answers["tooMany"],
			perRefused, cpuPerRefused, perRequest(r.proxyCPU, r.flood.requests).Round(100*time.Nanosecond),
			float64(r.warmUpCommands)/floodVisitors, r.faithfulAnswered, r.faithfulPolls)
	}
	fmt.Fprintf(b, "\nRedis commands per refused poll count everything Redis ran during the run (the commands inside its scripts, the faithful visitors' polls and the proxy's own loops too) over the flood's refused polls (goal ≤ 0.05).\n")
}
