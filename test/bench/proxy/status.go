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

// statusPoller is a proxy whose status polls are measured, with the room it serves and its signer.
type statusPoller struct {
	port, pid int
	room      string
	signer    *pass.Signer
}

// statusVersusZrank enters visitors in each poller's room, then polls their status through its
// proxy with wrk, the pollers in turn in each round, and runs redis-benchmark ZRANK on a sorted set
// of the same size, at the same concurrency; it returns the median run of each poller and of ZRANK,
// with the CPU that Redis, the proxy and the load generator spent in it. Each room's plan carries a
// forecast of its queue, written again while the polls run as a scheduler writes it, so that the
// polls take the path of a live room's estimates. A room of its own for each poller keeps them from
// polling each other's visitors too soon (which they would answer 429).
func statusVersusZrank(dir string, server *testenv.Redis, pollers []statusPoller, conns, rounds int, d time.Duration, profile func(string) func() error) (polls []wrkResult, zrank wrkResult, err error) {
	const visitors = 100_000
	ctx := context.Background()
	rdb, err := queue.NewClient(server.URL(), queue.ClientOptions{})
	if err != nil {
		return nil, wrkResult{}, err
	}
	defer rdb.Close()
	store := queue.NewStore(rdb, queue.StoreOptions{})
	defer store.Close()
	quota14, err := capacity.FromQuota(14, 1, 100*time.Millisecond, false)
	if err != nil {
		return nil, wrkResult{}, err
	}
	var queues []*queue.Queue
	scripts := make([]string, len(pollers))
	for k, p := range pollers {
		q, err := store.Queue("bench", p.room)
		if err != nil {
			return nil, wrkResult{}, err
		}
		queues = append(queues, q)
		cookies := make([]string, visitors)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for w := range 64 {
			wg.Go(func() {
				for i := w; i < visitors; i += 64 {
					id, cookie := p.signer.NewVisitorCookie()
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
			return nil, wrkResult{}, err
		}
		// Visitors are polled in an order shuffled once: in arrival order, each poll would find its
		// neighbour's records in Redis' caches, which redis-benchmark's random members do not.
		mathrand.Shuffle(len(cookies), func(i, j int) { cookies[i], cookies[j] = cookies[j], cookies[i] })
		scripts[k] = filepath.Join(dir, fmt.Sprintf("status-%d.lua", k))
		if err := writeStatusScript(scripts[k], p.room, cookies); err != nil {
			return nil, wrkResult{}, err
		}
		// A tick that admits nobody leaves each queue's front for the estimates.
		if _, err := q.Admit(ctx, queue.AdmitRequest{TickID: 1, Limit: 0, PassTTL: time.Minute, AbandonAfter: time.Hour}); err != nil {
			return nil, wrkResult{}, err
		}
	}
	// The shortest poll interval the API allows, so that pollers are refused as rarely as possible.
	// The forecast tells of places gone quiet and of a front younger than abandonAfter, so that every
	// estimate walks the places ahead by their age (capacity.AheadAging), its dearest path.
	quiet := capacity.Quiet{SeqsPerPlace: 1, Share: 0.3, Silences: [5]float64{0.5, 0.8, 1, 1, 1}}
	publish := func() error {
		for _, q := range queues {
			plan := queue.PublishedPlan{Quota: quota14, PollMin: 100 * time.Millisecond, PollMax: 100 * time.Millisecond, AbandonAfter: time.Hour,
				Forecast: &queue.Forecast{At: time.Now(), Queues: map[string]queue.LaneForecast{
					queue.MainLane: {Advance: capacity.Advance{SeqsPerAdmission: 1.25, Quiet: quiet}, Waiting: visitors, ArrivalsPerSecond: 50,
						Counted: 10 * time.Second, Line: queue.ForecastLine{FrontSeq: 1, FrontAge: 5 * time.Second, LastSeq: visitors}},
				}}}
			if err := q.PublishPlan(ctx, plan); err != nil {
				return err
			}
		}
		return nil
	}
	if err := publish(); err != nil {
		return nil, wrkResult{}, err
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
	// The same server, a sorted set of the same size, ZRANK of random members. The members are named
	// as redis-benchmark names __rand_int__ (12 zero-padded digits), so that every ZRANK finds one.
	pipe := rdb.Pipeline()
	for i := range visitors {
		pipe.ZAdd(ctx, "zrank-baseline", redis.Z{Score: float64(i), Member: fmt.Sprintf("%012d", i)})
		if i%5000 == 4999 {
			if _, err := pipe.Exec(ctx); err != nil {
				return nil, wrkResult{}, err
			}
			pipe = rdb.Pipeline()
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, wrkResult{}, err
	}
	runs := make([][]wrkResult, len(pollers))
	var zrankRuns []wrkResult
	for round := 1; round <= rounds; round++ {
		// The pollers take turns going first: the slot a build runs in moves its figures by a few
		// percent (the same build in both measured 0.96× in the second), which would read as the
		// builds' difference.
		order := make([]int, len(pollers))
		for i := range order {
			order[i] = i
			if round%2 == 0 {
				order[i] = len(pollers) - 1 - i
			}
		}
		for _, k := range order {
			p := pollers[k]
			fmt.Fprintf(os.Stderr, "[bench-proxy] round %d/%d: status polls through proxy %d of %d\n", round, rounds, k+1, len(pollers))
			profiled := notProfiled
			if round == 1 && k == 0 {
				profiled = profile("status")
			}
			redis0, proxy0 := server.CPU(), processCPU(p.pid)
			polls, err := wrk(fmt.Sprintf("http://127.0.0.1:%d/.herdgate/status", p.port), scripts[k], conns, d)
			if err != nil {
				return nil, wrkResult{}, err
			}
			polls.redisCPU, polls.proxyCPU = server.CPU()-redis0, processCPU(p.pid)-proxy0
			if err := profiled(); err != nil {
				return nil, wrkResult{}, err
			}
			runs[k] = append(runs[k], polls)
		}
		fmt.Fprintf(os.Stderr, "[bench-proxy] round %d/%d: redis-benchmark ZRANK\n", round, rounds)
		n := max(int(runs[0][len(runs[0])-1].rps*d.Seconds()), 100_000)
		redis0 := server.CPU()
		cmd := exec.Command("redis-benchmark", "-h", "127.0.0.1", "-p", strconv.Itoa(server.Port), "-c", strconv.Itoa(conns),
			"-n", strconv.Itoa(n), "-r", strconv.Itoa(visitors), "--csv", "ZRANK", "zrank-baseline", "__rand_int__")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return nil, wrkResult{}, fmt.Errorf("redis-benchmark: %w\n%s", err, out)
		}
		rate, err := testenv.RedisBenchmarkRate(out)
		if err != nil {
			return nil, wrkResult{}, err
		}
		zrankRuns = append(zrankRuns, wrkResult{rps: rate, requests: int64(n), redisCPU: server.CPU() - redis0, loadCPU: ownCPU(cmd)})
	}
	rps := func(r wrkResult) float64 { return r.rps }
	for _, r := range runs {
		polls = append(polls, medianBy(r, rps))
	}
	return polls, medianBy(zrankRuns, rps), nil
}

// writeStatusScript writes wrk's script that polls the status of the visitors of cookies in room,
// each thread walking its own share of them round and round.
func writeStatusScript(script, room string, cookies []string) error {
	f, err := os.Create(script)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "local cookies = {")
	for _, c := range cookies {
		fmt.Fprintf(w, "%q,\n", admission.CookieNamesOf("bench", room).Visitor+"="+c)
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
