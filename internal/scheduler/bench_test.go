package scheduler

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	k8stypes "k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

var benchDuration = flag.Duration("scheduler.duration", 30*time.Second, "how long BenchmarkSchedulerTenQueues runs the scheduler")

// BenchmarkSchedulerTenQueues runs ten reference queues (14 per 100 ms tick) on one Redis for
// -scheduler.duration on the real clock and reports how exactly they admitted and how late ticks ran.
func BenchmarkSchedulerTenQueues(b *testing.B) {
	const queues = 10
	// The suite's logger is set up by Ginkgo, which a benchmark run skips; without one,
	// controller-runtime prints a warning and a stack trace at the scheduler's first log line.
	logf.SetLogger(logr.Discard())
	srv := testenv.StartRedis(b)
	rdb, err := queue.NewClient(srv.URL(), queue.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer rdb.Close()
	// Enough visitors that no queue runs dry: 140/s for the whole run, plus a margin.
	perQueue := int(benchDuration.Seconds()*140) + 2000
	for i := range queues {
		q, err := queue.New(rdb, "bench", fmt.Sprintf("q%d", i))
		if err != nil {
			b.Fatal(err)
		}
		_ = q.Delete(context.Background())
		for start := 0; start < perQueue; start += 1000 {
			var wg sync.WaitGroup
			for j := start; j < min(perQueue, start+1000); j++ {
				wg.Go(func() {
					if _, err := q.Enter(context.Background(), fmt.Sprintf("v%06d", j), time.Hour); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
		}
	}

	for range b.N {
		var mu sync.Mutex
		reports := map[string][]TickReport{}
		s := New(&queue.Pool{}, WithTickObserver(func(r TickReport) {
			mu.Lock()
			reports[r.Key.Name] = append(reports[r.Key.Name], r)
			mu.Unlock()
		}))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Start(ctx) }()
		for i := range queues {
			name := fmt.Sprintf("q%d", i)
			wq := builder.Queue("bench", name).UID(k8stypes.UID(name)).Generation(1).PassTTL(time.Minute).AbandonAfter(time.Hour)
			s.Ensure(Room{Settings: wq.Settings(), RedisURL: srv.URL()})
		}
		b.ResetTimer()
		time.Sleep(*benchDuration)
		cancel()
		<-done
		b.StopTimer()

		var admitted, target int64
		var lags []time.Duration
		for name, rs := range reports {
			var ok []TickReport
			for _, r := range rs {
				if r.Err != nil {
					b.Errorf("queue %s: tick failed: %v", name, r.Err)
					continue
				}
				ok = append(ok, r)
				lags = append(lags, r.Started.Sub(r.Scheduled))
			}
			// Target: 14 for every grid point from the first tick to the last.
			span := ok[len(ok)-1].Scheduled.Sub(ok[0].Scheduled)
			target += 14 * (int64(span/(100*time.Millisecond)) + 1)
			for _, r := range ok {
				admitted += int64(len(r.Result.Admitted))
			}
		}
		slices.Sort(lags)
		b.ReportMetric(float64(admitted)/float64(target), "admitted/target")
		b.ReportMetric(float64(admitted), "admitted")
		b.ReportMetric(float64(lags[len(lags)/2].Microseconds())/1000, "lag-p50-ms")
		b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds())/1000, "lag-p99-ms")
		b.ReportMetric(float64(lags[len(lags)-1].Microseconds())/1000, "lag-max-ms")
	}
}

var (
	idleRooms    = flag.Int("scheduler.idle-rooms", 300, "how many rooms BenchmarkIdleRooms runs")
	idleDuration = flag.Duration("scheduler.idle-duration", 10*time.Second, "how long BenchmarkIdleRooms measures each way")
)

// BenchmarkIdleRooms runs -scheduler.idle-rooms reference rooms with nobody waiting on one Redis, on
// the real clock, first ticking every tick as a room that never sleeps, then sleeping while idle, and
// reports for each the Redis commands per second, Redis' CPU and the scheduler's CPU (this process),
// and the ratios.
func BenchmarkIdleRooms(b *testing.B) {
	logf.SetLogger(logr.Discard())
	srv := testenv.StartRedis(b)
	rdb, err := queue.NewClient(srv.URL(), queue.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer rdb.Close()
	commands := func() int64 {
		info, err := rdb.InfoMap(context.Background(), "stats").Result()
		if err != nil {
			b.Fatal(err)
		}
		n, err := strconv.ParseInt(info["Stats"]["total_commands_processed"], 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	type cost struct{ commandsPerSecond, redisCPU, schedulerCPU float64 }
	measure := func(opts ...Option) cost {
		s := New(&queue.Pool{}, opts...)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Start(ctx) }()
		for i := range *idleRooms {
			name := fmt.Sprintf("idle-%04d", i)
			wq := builder.Queue("bench", name).UID(k8stypes.UID(name)).Generation(1).PassTTL(time.Minute).AbandonAfter(time.Hour)
			s.Ensure(Room{Settings: wq.Settings(), RedisURL: srv.URL()})
		}
		time.Sleep(3 * time.Second) // every room has ticked, and those that sleep sleep
		cmds, redisCPU, own := commands(), srv.CPU(), processCPU()
		time.Sleep(*idleDuration)
		c := cost{
			commandsPerSecond: float64(commands()-cmds) / idleDuration.Seconds(),
			redisCPU:          100 * (srv.CPU() - redisCPU).Seconds() / idleDuration.Seconds(),
			schedulerCPU:      100 * (processCPU() - own).Seconds() / idleDuration.Seconds(),
		}
		cancel()
		<-done
		return c
	}
	for range b.N {
		ticking := measure(WithIdleSleep(0))
		sleeping := measure()
		b.ReportMetric(ticking.commandsPerSecond, "ticking-redis-cmds/s")
		b.ReportMetric(sleeping.commandsPerSecond, "sleeping-redis-cmds/s")
		b.ReportMetric(ticking.redisCPU, "ticking-redis-cpu-%")
		b.ReportMetric(sleeping.redisCPU, "sleeping-redis-cpu-%")
		b.ReportMetric(ticking.schedulerCPU, "ticking-scheduler-cpu-%")
		b.ReportMetric(sleeping.schedulerCPU, "sleeping-scheduler-cpu-%")
		b.ReportMetric(sleeping.commandsPerSecond/ticking.commandsPerSecond, "commands-ratio")
		b.ReportMetric(sleeping.schedulerCPU/ticking.schedulerCPU, "scheduler-cpu-ratio")
	}
}

// processCPU is the CPU time this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var (
	busyRooms    = flag.Int("scheduler.busy-rooms", 100, "how many busy rooms BenchmarkBusyAmongIdleRooms runs")
	idleBeside   = flag.Int("scheduler.idle-beside", 900, "how many idle rooms BenchmarkBusyAmongIdleRooms runs beside the busy ones")
	busyDuration = flag.Duration("scheduler.busy-duration", 20*time.Second, "how long BenchmarkBusyAmongIdleRooms measures each way")
)

// busyVisitorsPad is how many visitors each busy room holds beyond 140 a second for the whole run,
// so that none runs dry.
const busyVisitorsPad = 3000

// BenchmarkBusyAmongIdleRooms runs -scheduler.busy-rooms reference rooms with a long line beside
// -scheduler.idle-beside idle ones on one Redis, on the real clock, without an API server: first with
// every room on the aligned grid (all call Redis at the same instant of each tick), then with each
// room at its grid phase, as the manager runs them. It reports the busy rooms' admitted/target and
// tick lag for each, and the ratio of the lags.
func BenchmarkBusyAmongIdleRooms(b *testing.B) {
	logf.SetLogger(logr.Discard())
	srv := testenv.StartRedis(b)
	rdb, err := queue.NewClient(srv.URL(), queue.ClientOptions{PoolSize: 64})
	if err != nil {
		b.Fatal(err)
	}
	defer rdb.Close()
	fill := func(run string) {
		perRoom := int(busyDuration.Seconds()*140) + busyVisitorsPad
		for i := range *busyRooms {
			q, err := queue.New(rdb, "bench", fmt.Sprintf("%s-busy-%03d", run, i))
			if err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			for j := range perRoom {
				wg.Go(func() {
					if _, err := q.Enter(context.Background(), fmt.Sprintf("v%06d", j), time.Hour); err != nil {
						b.Error(err)
					}
				})
				if j%500 == 499 {
					wg.Wait()
				}
			}
			wg.Wait()
		}
	}
	type result struct {
		ratio    float64
		p99, max time.Duration
	}
	measure := func(run string, opts ...Option) result {
		var mu sync.Mutex
		var lags []time.Duration
		var admitted int64
		measuring := false
		s := New(&queue.Pool{}, append(opts, WithTickObserver(func(r TickReport) {
			mu.Lock()
			defer mu.Unlock()
			if measuring && strings.Contains(r.Key.Name, "-busy-") && r.Err == nil {
				lags = append(lags, r.Started.Sub(r.Scheduled))
				admitted += int64(len(r.Result.Admitted))
			}
		}))...)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Start(ctx) }()
		ensure := func(name string) {
			wq := builder.Queue("bench", name).UID(k8stypes.UID(name)).Generation(1).PassTTL(time.Minute).AbandonAfter(time.Hour)
			s.Ensure(Room{Settings: wq.Settings(), RedisURL: srv.URL()})
		}
		for i := range *idleBeside {
			ensure(fmt.Sprintf("%s-idle-%04d", run, i))
		}
		for i := range *busyRooms {
			ensure(fmt.Sprintf("%s-busy-%03d", run, i))
		}
		time.Sleep(3 * time.Second) // every room has ticked, the idle ones sleep
		mu.Lock()
		measuring = true
		mu.Unlock()
		time.Sleep(*busyDuration)
		mu.Lock()
		measuring = false
		ticks, n := len(lags), admitted
		slices.Sort(lags)
		mu.Unlock()
		cancel()
		<-done
		if ticks == 0 {
			b.Fatalf("%s: no busy room ticked", run)
		}
		// Each tick is one grid point of one room, or makes up for missed ones: what the ticks
		// admitted against 14 per grid point of the window, for every busy room.
		target := 14 * float64(*busyRooms) * (busyDuration.Seconds() / 0.1)
		return result{ratio: float64(n) / target, p99: lags[ticks*99/100], max: lags[ticks-1]}
	}
	for range b.N {
		fill("aligned")
		aligned := measure("aligned", WithAlignedGrid())
		fill("phased")
		phased := measure("phased")
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(aligned.ratio, "aligned-admitted/target")
		b.ReportMetric(phased.ratio, "phased-admitted/target")
		b.ReportMetric(ms(aligned.p99), "aligned-lag-p99-ms")
		b.ReportMetric(ms(phased.p99), "phased-lag-p99-ms")
		b.ReportMetric(ms(aligned.max), "aligned-lag-max-ms")
		b.ReportMetric(ms(phased.max), "phased-lag-max-ms")
		b.ReportMetric(float64(phased.p99)/float64(max(aligned.p99, time.Microsecond)), "lag-p99-ratio")
	}
}
