package queue

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdgate/herdgate/test/testenv"
)

// The benchmarks share one redis-server so that the engine and redis-benchmark meet the same server
// in the same run. benchConcurrency is the number of concurrent clients on both sides.
const benchConcurrency = 32

var (
	benchOnce   sync.Once
	benchServer *testenv.Redis
	benchErr    error
)

func benchRedis(b *testing.B) (*testenv.Redis, redis.UniversalClient) {
	b.Helper()
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "herdgate-bench-redis-")
		if err != nil {
			benchErr = err
			return
		}
		benchServer, benchErr = testenv.NewRedis(dir)
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	rdb, err := NewClient(benchServer.URL(), ClientOptions{PoolSize: benchConcurrency})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rdb.Close() })
	return benchServer, rdb
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchServer != nil {
		benchServer.Stop()
		_ = os.RemoveAll(benchServer.Dir)
	}
	os.Exit(code)
}

// anonymousID returns a 128-bit random visitor ID as the proxy mints them: 22 base64url characters.
func anonymousID() string {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

func hexID() string {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	return hex.EncodeToString(raw[:])
}

// fill enters n visitors with pipelined script calls and returns their IDs.
func fill(b testing.TB, q *Queue, n int, id func() string) []string {
	b.Helper()
	ctx := context.Background()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = id()
	}
	// Load the script once; the pipelines below then use EVALSHA.
	if _, err := q.Enter(ctx, id(), time.Hour); err != nil {
		b.Fatal(err)
	}
	const batch = 2000
	for start := 0; start < n; start += batch {
		pipe := q.rdb.Pipeline()
		for _, v := range ids[start:min(n, start+batch)] {
			enterScript.EvalSha(ctx, pipe, q.keysFor(opEnter, nil, nil), q.argsFor(opEnter, time.Hour.Milliseconds(), EntryLimit{}, nil, []string{v}, nil)...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return ids
}

var benchSizes = []int{0, 10_000, 1_000_000}

func benchQueue(b *testing.B, rdb redis.UniversalClient, name string) *Queue {
	b.Helper()
	return benchQueueOn(b, nil, rdb, name)
}

// benchQueueOn returns an empty queue, batched through store when it is set.
func benchQueueOn(b *testing.B, store *Store, rdb redis.UniversalClient, name string) *Queue {
	b.Helper()
	q, err := New(rdb, "bench", name)
	if store != nil {
		q, err = store.Queue("bench", name)
	}
	if err != nil {
		b.Fatal(err)
	}
	if err := q.Delete(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = q.Delete(context.Background()) })
	return q
}

// reportPercentiles reports the p50 and p99 of latencies in µs, as <prefix>p50-µs and <prefix>p99-µs.
func reportPercentiles(b *testing.B, latencies []time.Duration, prefix string) {
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds()), prefix+"p50-µs")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds()), prefix+"p99-µs")
}

// engineRun is what a timed run of engine calls achieved: calls per second, and the CPU time Redis
// spent per call, which moves less than the rate with whatever else the machine runs.
type engineRun struct {
	ops      float64
	redisCPU time.Duration
}

// startRun starts measuring a run of b.N engine calls; the function it returns reports the run.
func startRun(srv *testenv.Redis) func(b *testing.B) engineRun {
	start, cpu0 := time.Now(), srv.CPU()
	return func(b *testing.B) engineRun {
		r := engineRun{ops: float64(b.N) / time.Since(start).Seconds(), redisCPU: (srv.CPU() - cpu0) / time.Duration(b.N)}
		b.ReportMetric(r.ops, "ops/s")
		b.ReportMetric(micros(r.redisCPU), "redis-cpu-µs/op")
		return r
	}
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// pollModes are the two ways a proxy can send polls: one call per round trip, or batched by a Store.
var pollModes = []string{"direct", "batched"}

func storeFor(b *testing.B, mode string, rdb redis.UniversalClient) *Store {
	if mode != "batched" {
		return nil
	}
	s := NewStore(rdb, StoreOptions{})
	b.Cleanup(s.Close)
	return s
}

func BenchmarkEnter(b *testing.B) {
	srv, rdb := benchRedis(b)
	for _, mode := range pollModes {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/waiting=%d", mode, size), func(b *testing.B) {
				q := benchQueueOn(b, storeFor(b, mode, rdb), rdb, fmt.Sprintf("enter-%d", size))
				fill(b, q, size, anonymousID)
				ctx := context.Background()
				b.SetParallelism(max(1, benchConcurrency/runtime.GOMAXPROCS(0)))
				b.ReportAllocs()
				b.ResetTimer()
				run := startRun(srv)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := q.Enter(ctx, anonymousID(), time.Hour); err != nil {
							b.Error(err)
							return
						}
					}
				})
				engine := run(b)
				b.StopTimer()
				reportBaseline(b, srv, rdb, engine, "ZADD", size)
			})
		}
	}
}

func BenchmarkStatus(b *testing.B) {
	srv, rdb := benchRedis(b)
	for _, mode := range pollModes {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/waiting=%d", mode, size), func(b *testing.B) {
				q := benchQueueOn(b, storeFor(b, mode, rdb), rdb, fmt.Sprintf("status-%d", size))
				// With nobody else waiting, the pollers are the queue.
				ids := fill(b, q, max(size, benchConcurrency*4), anonymousID)
				ctx := context.Background()
				var next atomic.Int64
				b.SetParallelism(max(1, benchConcurrency/runtime.GOMAXPROCS(0)))
				b.ReportAllocs()
				b.ResetTimer()
				run := startRun(srv)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						id := ids[int(next.Add(7919))%len(ids)]
						p, err := q.Status(ctx, id, time.Hour)
						if err != nil || p.State != Waiting {
							b.Errorf("Status = %+v, %v", p, err)
							return
						}
					}
				})
				engine := run(b)
				b.StopTimer()
				reportBaseline(b, srv, rdb, engine, "ZRANK", size)
			})
		}
	}
}

// BenchmarkAdmit14 runs the reference tick (14 admissions, jitter over 100 ms) back to back, one
// scheduler at a time as in production, and reports the latency percentiles of a tick beside those
// of a bare PING sent between the ticks: the round trip that any tick pays on this machine.
func BenchmarkAdmit14(b *testing.B) {
	_, rdb := benchRedis(b)
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("waiting=%d", size), func(b *testing.B) {
			q := benchQueue(b, rdb, fmt.Sprintf("admit-%d", size))
			fill(b, q, size, anonymousID)
			ctx := context.Background()
			// Each tick takes 14 visitors; as many new ones enter after it (outside the measured
			// time), so that the queue keeps its size instead of draining after size/14 ticks.
			topUp := make([]string, 14)
			lat, pings := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
			runtime.GC() // the fill's garbage must not be collected during the ticks
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if _, err := q.Admit(ctx, AdmitRequest{TickID: int64(i + 1), Limit: 14, Window: 100 * time.Millisecond, Seed: int64(i), PassTTL: 5 * time.Minute, AbandonAfter: time.Hour}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				b.StopTimer()
				if size > 0 {
					for j := range topUp {
						topUp[j] = anonymousID()
					}
					// EVAL, not EVALSHA: redis-µs below counts the ticks' script calls alone.
					if err := enterScript.Eval(ctx, rdb, q.keysFor(opEnter, nil, nil), q.argsFor(opEnter, time.Hour.Milliseconds(), EntryLimit{}, nil, topUp, nil)...).Err(); err != nil {
						b.Fatal(err)
					}
				}
				// The baseline: a bare PING's round trip to the same server, between the same ticks.
				t0 = time.Now()
				if err := rdb.Ping(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				pings = append(pings, time.Since(t0))
				b.StartTimer()
			}
			b.StopTimer()
			reportPercentiles(b, lat, "")
			reportPercentiles(b, pings, "ping-")
			b.ReportMetric(scriptMicros(b, rdb), "redis-µs")
		})
	}
}

// scriptMicros is the time Redis spent per script call since the last CONFIG RESETSTAT.
func scriptMicros(b *testing.B, rdb redis.UniversalClient) float64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:"); ok {
			for _, kv := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(kv, "usec_per_call="); ok {
					f, err := strconv.ParseFloat(v, 64)
					if err != nil {
						b.Fatal(err)
					}
					return f
				}
			}
		}
	}
	return 0
}

// BenchmarkMemoryPerWaitingVisitor fills a queue with 10^6 visitors and reports the Redis memory per
// visitor: MEMORY USAGE summed over every key of the queue, and the growth of used_memory.
func BenchmarkMemoryPerWaitingVisitor(b *testing.B) {
	_, rdb := benchRedis(b)
	for _, form := range []struct {
		name string
		id   func() string
	}{{"id=base64url22", anonymousID}, {"id=hex32", hexID}} {
		b.Run(form.name, func(b *testing.B) {
			const n = 1_000_000
			ctx := context.Background()
			q := benchQueue(b, rdb, "memory-"+form.name[3:])
			for i := 0; i < b.N; i++ {
				_ = q.Delete(ctx)
				before := usedMemory(b, rdb)
				fill(b, q, n, form.id)
				grown := usedMemory(b, rdb) - before
				var usage int64
				iter := rdb.Scan(ctx, 0, q.prefix+":*", 1000).Iterator()
				for iter.Next(ctx) {
					usage += rdb.MemoryUsage(ctx, iter.Val(), 0).Val()
				}
				if err := iter.Err(); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(usage)/n, "usage-B/visitor")
				b.ReportMetric(float64(grown)/n, "used_memory-B/visitor")
			}
		})
	}
}

// usedMemory reads used_memory once Redis has freed what UNLINK handed to its background thread.
func usedMemory(b *testing.B, rdb redis.UniversalClient) int64 {
	b.Helper()
	return testenv.UsedMemory(b, func() (string, error) { return rdb.Info(context.Background(), "memory").Result() })
}

// reportBaseline runs redis-benchmark on the same server right after an engine benchmark, at the same
// concurrency and for about as many requests, and reports its rate and the engine's ratio to it, and
// the same ratio in Redis CPU time per call. Measured minutes apart, the two rates drift on a shared
// machine more than the ratio differs; the CPU ratio moves less.
// test is ZADD (compared with Enter) or ZRANK (compared with Status), on a sorted set of size members.
func reportBaseline(b *testing.B, srv *testenv.Redis, rdb redis.UniversalClient, engine engineRun, test string, size int) {
	b.Helper()
	if b.N < 100 {
		return // the probing run that sizes b.N; only the final run's metrics are printed
	}
	if _, err := exec.LookPath("redis-benchmark"); err != nil {
		b.Skip("redis-benchmark not found (Debian package redis-tools)")
	}
	ctx := context.Background()
	key := "baseline"
	if err := rdb.Del(ctx, key).Err(); err != nil {
		b.Fatal(err)
	}
	defer rdb.Del(context.Background(), key)
	// As many members as the engine's queue, named as redis-benchmark names __rand_int__ (12
	// zero-padded digits below -r): every ZRANK finds its member and walks the skip list, as a poll
	// does, instead of missing in the member index.
	keyspace := max(size, benchConcurrency*4)
	for start := 0; start < keyspace; start += 10_000 {
		members := make([]redis.Z, 0, 10_000)
		for i := start; i < min(keyspace, start+10_000); i++ {
			members = append(members, redis.Z{Score: float64(i), Member: fmt.Sprintf("%012d", i)})
		}
		if err := rdb.ZAdd(ctx, key, members...).Err(); err != nil {
			b.Fatal(err)
		}
	}
	var cmd []string
	switch test {
	case "ZADD":
		cmd = []string{"ZADD", key, "NX", "__rand_int__", "m__rand_int__"} // new members, as Enter adds
	case "ZRANK":
		cmd = []string{"ZRANK", key, "__rand_int__"}
	}
	args := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(srv.Port), "-c", strconv.Itoa(benchConcurrency),
		"-n", strconv.Itoa(b.N), "-r", strconv.Itoa(keyspace), "--csv"}, cmd...)
	cpu0 := srv.CPU()
	out, err := exec.Command("redis-benchmark", args...).CombinedOutput()
	if err != nil {
		b.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	redisCPU := (srv.CPU() - cpu0) / time.Duration(b.N)
	rps, err := testenv.RedisBenchmarkRate(out)
	if err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	unit := strings.ToLower(test)
	b.ReportMetric(rps, unit+"-ops/s")
	b.ReportMetric(engine.ops/rps, "x-"+unit)
	// Where Redis is the limit (one thread, 10^6 waiting), this is the ratio of the rates it allows.
	b.ReportMetric(micros(redisCPU), unit+"-redis-cpu-µs/op")
	if engine.redisCPU > 0 {
		b.ReportMetric(float64(redisCPU)/float64(engine.redisCPU), "x-"+unit+"-redis-cpu")
	}
}

// BenchmarkAdmitLimit runs ticks that admit as many as a tick may (MaxAdmitPerTick) from a queue
// deep enough never to run dry, and ticks of the same limit on an empty queue, beside the reference
// tick of 14. It reports Redis' time per call (redis-µs): how long one tick holds Redis, and so the
// most one queue's tick can delay any other call on the same server.
func BenchmarkAdmitLimit(b *testing.B) {
	_, rdb := benchRedis(b)
	for _, tc := range []struct {
		limit, waiting int
	}{{14, 0}, {MaxAdmitPerTick, 0}, {14, 100_000}, {MaxAdmitPerTick, 100_000}} {
		b.Run(fmt.Sprintf("limit=%d/waiting=%d", tc.limit, tc.waiting), func(b *testing.B) {
			q := benchQueue(b, rdb, fmt.Sprintf("admit-limit-%d-%d", tc.limit, tc.waiting))
			fill(b, q, tc.waiting, anonymousID)
			ctx := context.Background()
			topUp := make([]string, tc.limit)
			lat := make([]time.Duration, 0, b.N)
			runtime.GC()
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				res, err := q.Admit(ctx, AdmitRequest{TickID: int64(i + 1), Limit: tc.limit, Window: 100 * time.Millisecond, Seed: int64(i),
					PassTTL: 5 * time.Minute, AbandonAfter: time.Hour})
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				if tc.waiting > 0 && len(res.Admitted) != tc.limit {
					b.Fatalf("admitted %d, want %d", len(res.Admitted), tc.limit)
				}
				b.StopTimer()
				if tc.waiting > 0 {
					for j := range topUp {
						topUp[j] = anonymousID()
					}
					// EVAL, not EVALSHA: redis-µs below counts the ticks' script calls alone.
					if err := enterScript.Eval(ctx, rdb, q.keysFor(opEnter, nil, nil), q.argsFor(opEnter, time.Hour.Milliseconds(), EntryLimit{}, nil, topUp, nil)...).Err(); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
			}
			b.StopTimer()
			reportPercentiles(b, lat, "")
			b.ReportMetric(scriptMicros(b, rdb), "redis-µs")
		})
	}
}

// BenchmarkSignsOfLife records the signs of life of visitors a proxy answered without a status call
// each, 1,000 a call (a proxy's tick at 10,000 polls a second), in a queue of 10⁶, and reports
// Redis' CPU per visitor beside a status call's (BenchmarkStatus).
func BenchmarkSignsOfLife(b *testing.B) {
	srv, rdb := benchRedis(b)
	q := benchQueue(b, rdb, "seen")
	fill(b, q, 1_000_000, anonymousID)
	ctx := context.Background()
	members, err := rdb.ZRangeWithScores(ctx, q.keys.wait, 0, -1).Result()
	if err != nil {
		b.Fatal(err)
	}
	const batch = 1000
	b.ResetTimer()
	start, cpu0 := time.Now(), srv.CPU()
	for i := range b.N {
		visitors := make([]SeenVisitor, batch)
		for j := range visitors {
			m := members[(i*batch+j)*7919%len(members)]
			visitors[j] = SeenVisitor{Visitor: m.Member.(string), Seq: int64(m.Score)}
		}
		res, err := q.SeenBatch(ctx, visitors, time.Hour)
		if err != nil || len(res.Gone) != 0 {
			b.Fatalf("SeenBatch: %d gone, %v", len(res.Gone), err)
		}
	}
	b.StopTimer()
	n := float64(b.N * batch)
	b.ReportMetric(micros((srv.CPU()-cpu0))/n, "redis-cpu-µs/visitor")
	b.ReportMetric(n/time.Since(start).Seconds(), "visitors/s")
}

// BenchmarkRankSnapshot counts a queue of 10⁶ at RankBoundaries, 200 boundaries a call, and
// reports Redis' CPU per snapshot and the longest call.
func BenchmarkRankSnapshot(b *testing.B) {
	srv, rdb := benchRedis(b)
	q := benchQueue(b, rdb, "ranks")
	fill(b, q, 1_000_000, anonymousID)
	ctx := context.Background()
	b.ResetTimer()
	cpu0 := time.Now()
	cpu := srv.CPU()
	for range b.N {
		s, err := q.RankSnapshot(ctx, 200)
		if err != nil || len(s.Counts) < 400 {
			b.Fatalf("snapshot: %d boundaries, %v", len(s.Counts), err)
		}
	}
	b.StopTimer()
	_ = cpu0
	b.ReportMetric(micros(srv.CPU()-cpu)/float64(b.N)/1000, "redis-cpu-ms/snapshot")
	b.ReportMetric(scriptMicros(b, rdb)/1000, "ms/call")
}
