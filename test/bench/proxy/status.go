package main

import (
	"bufio"
	"context"
	"fmt"
	mathrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/herdgate/herdgate/internal/pass"

	"github.com/redis/go-redis/v9"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/testenv"
)

// statusVersusZrank enters visitors, then polls their status through the proxy with wrk (and
// through the baseline proxy, when baselinePort is set, in the same rounds), and runs
// redis-benchmark ZRANK on a sorted set of the same size, at the same concurrency; it returns the
// median run of each, with the CPU that Redis, the proxy and the load generator spent in it. The
// plan carries a forecast of the queue, written again while the polls run as a scheduler writes it,
// so that the polls take the path of a live room's estimates.
func statusVersusZrank(dir string, server *testenv.Redis, signer *pass.Signer, proxyPort, proxyPID, baselinePort, baselinePID, conns, rounds int, d time.Duration, profile func(string) func() error) (polls, baselinePolls, zrank wrkResult, err error) {
	const visitors = 100_000
	ctx := context.Background()
	rdb, err := queue.NewClient(server.URL(), queue.ClientOptions{})
	if err != nil {
		return wrkResult{}, wrkResult{}, wrkResult{}, err
	}
	defer rdb.Close()
	store := queue.NewStore(rdb, queue.StoreOptions{})
	defer store.Close()
	q, err := store.Queue("bench", "orders")
	if err != nil {
		return wrkResult{}, wrkResult{}, wrkResult{}, err
	}
	quota14, err := capacity.FromQuota(14, 1, 100*time.Millisecond, false)
	if err != nil {
		return wrkResult{}, wrkResult{}, wrkResult{}, err
	}
	// The shortest poll interval the API allows, so that pollers are refused as rarely as possible.
	plan := queue.PublishedPlan{Quota: quota14, PollMin: 100 * time.Millisecond, PollMax: 100 * time.Millisecond, AbandonAfter: time.Hour}
	publish := func() error {
		plan.Forecast = &queue.Forecast{At: time.Now(), Queues: map[string]queue.LaneForecast{
			queue.MainLane: {Advance: capacity.Advance{SeqsPerAdmission: 1.25}, Waiting: visitors, ArrivalsPerSecond: 50},
		}}
		return q.PublishPlan(ctx, plan)
	}
	if err := publish(); err != nil {
		return wrkResult{}, wrkResult{}, wrkResult{}, err
	}
	// A forecast older than the proxies take is none: write it again while the polls run (a failed
	// write leaves the last one, which the next write replaces).
	forecastCtx, stopForecasts := context.WithCancel(ctx)
	var forecasts sync.WaitGroup
	forecasts.Go(func() {
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-forecastCtx.Done():
				return
			case <-tick.C:
				_ = publish()
			}
		}
	})
	defer func() {
		stopForecasts()
		forecasts.Wait()
	}()
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
		return wrkResult{}, wrkResult{}, wrkResult{}, err
	}
	// Visitors are polled in an order shuffled once: in arrival order, each poll would find its
	// neighbour's records in Redis' caches, which redis-benchmark's random members do not.
	mathrand.Shuffle(len(cookies), func(i, j int) { cookies[i], cookies[j] = cookies[j], cookies[i] })
	script := filepath.Join(dir, "status.lua")
	baselineScript := filepath.Join(dir, "status-baseline.lua")
	if baselinePort == 0 {
		if err := writeStatusScript(script, cookies); err != nil {
			return wrkResult{}, wrkResult{}, wrkResult{}, err
		}
	} else {
		// Each proxy polls visitors of its own, half the queue each, so that neither polls a visitor
		// the other just did (which it would answer 429, a cheaper answer than a place).
		var own, other []string
		for i, c := range cookies {
			if i%2 == 0 {
				own = append(own, c)
			} else {
				other = append(other, c)
			}
		}
		if err := writeStatusScript(script, own); err != nil {
			return wrkResult{}, wrkResult{}, wrkResult{}, err
		}
		if err := writeStatusScript(baselineScript, other); err != nil {
			return wrkResult{}, wrkResult{}, wrkResult{}, err
		}
	}
	// The same server, a sorted set of the same size, ZRANK of random members. The members are named
	// as redis-benchmark names __rand_int__ (12 zero-padded digits), so that every ZRANK finds one.
	pipe := rdb.Pipeline()
	for i := range visitors {
		pipe.ZAdd(ctx, "zrank-baseline", redis.Z{Score: float64(i), Member: fmt.Sprintf("%012d", i)})
		if i%5000 == 4999 {
			if _, err := pipe.Exec(ctx); err != nil {
				return wrkResult{}, wrkResult{}, wrkResult{}, err
			}
			pipe = rdb.Pipeline()
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return wrkResult{}, wrkResult{}, wrkResult{}, err
	}
	var pollRuns, baselineRuns, zrankRuns []wrkResult
	for round := 1; round <= rounds; round++ {
		if baselinePort != 0 {
			fmt.Fprintf(os.Stderr, "[bench-proxy] round %d/%d: status polls through the baseline proxy\n", round, rounds)
			redis0, proxy0 := server.CPU(), processCPU(baselinePID)
			polls, err := wrk(fmt.Sprintf("http://127.0.0.1:%d/.herdgate/status", baselinePort), baselineScript, conns, d)
			if err != nil {
				return wrkResult{}, wrkResult{}, wrkResult{}, err
			}
			polls.redisCPU, polls.proxyCPU = server.CPU()-redis0, processCPU(baselinePID)-proxy0
			baselineRuns = append(baselineRuns, polls)
		}
		fmt.Fprintf(os.Stderr, "[bench-proxy] round %d/%d: status polls through the proxy, then redis-benchmark ZRANK\n", round, rounds)
		profiled := notProfiled
		if round == 1 {
			profiled = profile("status")
		}
		redis0, proxy0 := server.CPU(), processCPU(proxyPID)
		polls, err := wrk(fmt.Sprintf("http://127.0.0.1:%d/.herdgate/status", proxyPort), script, conns, d)
		if err != nil {
			return wrkResult{}, wrkResult{}, wrkResult{}, err
		}
		polls.redisCPU, polls.proxyCPU = server.CPU()-redis0, processCPU(proxyPID)-proxy0
		if err := profiled(); err != nil {
			return wrkResult{}, wrkResult{}, wrkResult{}, err
		}
		pollRuns = append(pollRuns, polls)
		n := max(int(polls.rps*d.Seconds()), 100_000)
		redis0 = server.CPU()
		cmd := exec.Command("redis-benchmark", "-h", "127.0.0.1", "-p", strconv.Itoa(server.Port), "-c", strconv.Itoa(conns),
			"-n", strconv.Itoa(n), "-r", strconv.Itoa(visitors), "--csv", "ZRANK", "zrank-baseline", "__rand_int__")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return wrkResult{}, wrkResult{}, wrkResult{}, fmt.Errorf("redis-benchmark: %w\n%s", err, out)
		}
		zrank, err := testenv.RedisBenchmarkRate(out)
		if err != nil {
			return wrkResult{}, wrkResult{}, wrkResult{}, err
		}
		zrankRuns = append(zrankRuns, wrkResult{rps: zrank, requests: int64(n), redisCPU: server.CPU() - redis0, loadCPU: ownCPU(cmd)})
	}
	rps := func(r wrkResult) float64 { return r.rps }
	if len(baselineRuns) > 0 {
		baselinePolls = medianBy(baselineRuns, rps)
	}
	return medianBy(pollRuns, rps), baselinePolls, medianBy(zrankRuns, rps), nil
}

// writeStatusScript writes wrk's script that polls the status of the visitors of cookies, each
// thread walking its own share of them round and round.
func writeStatusScript(script string, cookies []string) error {
	f, err := os.Create(script)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "local cookies = {")
	for _, c := range cookies {
		fmt.Fprintf(w, "%q,\n", admission.CookieNamesOf("bench", "orders").Visitor+"="+c)
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
		return err
	}
	f.Close()
	return nil
}
