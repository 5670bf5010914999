package admission_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/front"
	"github.com/herdgate/herdgate/admission/replica"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

var (
	farDepth    = flag.Int("far.depth", 10_000_000, "visitors waiting in BenchmarkDeepQueuePolls")
	farRate     = flag.Float64("far.rate", herdgatev1alpha1.DefaultPollBudget, "status polls per second sent in BenchmarkDeepQueuePolls (the default budget)")
	farDuration = flag.Duration("far.duration", 20*time.Second, "how long each path is polled in BenchmarkDeepQueuePolls")
	farPaths    = flag.String("far.paths", "per-poll,far", "the paths BenchmarkDeepQueuePolls polls, in order: per-poll (every poll a Redis call) and far (visitors bring their places)")
)

// benchVisitor is the id of the i-th visitor: 22 characters of base64url, as an anonymous visitor's.
func benchVisitor(i int) string {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(i))
	sum := sha256.Sum256(n[:])
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// BenchmarkDeepQueuePolls builds a queue of -far.depth waiting visitors through the engine, then
// polls status through a real proxy at -far.rate for -far.duration twice, while a scheduler's
// ticks admit the reference 14 per 100 ms: once as today, every poll a Redis call (the visitors
// bring no place), and once as visitors do since they have places (far ones answered from the
// snapshot, their signs of life in batches). Each visitor polls once, long after entering, so no
// poll is too early. It reports Redis' CPU (cores) and status latency for both, Redis' memory per
// waiting visitor, and how far above ZRANK + 1 the far positions are, by depth.
func BenchmarkDeepQueuePolls(b *testing.B) {
	if b.N > 1 {
		b.Skip("run with -benchtime 1x")
	}
	ctx := context.Background()
	srv := testenv.StartRedis(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64})
	defer rdb.Close()
	store := queue.NewStore(rdb, queue.StoreOptions{})
	defer store.Close()
	q, err := store.Queue("bench", "far")
	if err != nil {
		b.Fatal(err)
	}
	const abandonAfter = 30 * time.Minute // the depth the default budget supports needs it (docs/performance.md)
	before := usedMemory(b, rdb)
	start := time.Now()
	n := *farDepth
	var entered atomic.Int64
	var wg sync.WaitGroup
	for w := range 256 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 256 {
				if _, err := q.Enter(ctx, benchVisitor(i), abandonAfter); err != nil {
					b.Error(err)
					return
				}
				if k := entered.Add(1); k%1_000_000 == 0 {
					fmt.Printf("[bench-far] %d of %d waiting (%s)\n", k, n, time.Since(start).Round(time.Second))
				}
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	key := "{hg:bench/far}:q"
	if depth := rdb.ZCard(ctx, key).Val(); depth != int64(n) {
		b.Fatalf("%d waiting, want %d", depth, n)
	}
	b.ReportMetric(float64(usedMemory(b, rdb)-before)/float64(n), "redis-B/visitor")
	fmt.Printf("[bench-far] %d waiting after %s\n", n, time.Since(start).Round(time.Second))

	wq := builder.Queue("bench", "far").UID("uid-far").UpstreamURL("http://127.0.0.1:9").Routes(builder.Route("/api", false, "POST")).Obj()
	wq.Spec.Identity = &herdgatev1alpha1.IdentitySpec{Header: "X-User-Id"}
	wq.Spec.AbandonAfter = &metav1.Duration{Duration: abandonAfter}
	// The polls arrive at the default budget's rate whatever the hints say; hints left unstretched
	// let every visitor, entered moments ago, poll without being refused as too early.
	unstretched := int32(10_000_000)
	wq.Spec.Polling = &herdgatev1alpha1.PollingSpec{Budget: &unstretched}
	cfg, err := admission.NewConfig(wq, []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		b.Fatal(err)
	}
	if err := q.PublishPlan(ctx, queue.PublishedPlan{Quota: mustQuota(14), PollMin: cfg.PollMin, PollMax: cfg.PollMax, AbandonAfter: abandonAfter}); err != nil {
		b.Fatal(err)
	}
	room, err := admission.NewRoom(cfg, store, admission.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	front := front.NewFast(room, front.FastOptions{})
	go func() { _ = front.Serve(ln) }()
	defer func() { _ = front.Shutdown(ctx) }()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go room.KeepFarPositions(runCtx)
	go func() { // the scheduler's ticks
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for tick := int64(1); ; tick++ {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
			}
			_, _ = q.Admit(runCtx, queue.AdmitRequest{TickID: tick, Limit: 14, Window: 100 * time.Millisecond, PassTTL: 5 * time.Minute, AbandonAfter: abandonAfter})
		}
	}()
	client := &fasthttp.HostClient{Addr: ln.Addr().String(), MaxConns: 512, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}

	polls := int(*farRate * farDuration.Seconds())
	// Each run polls its own visitors, spread over the whole queue.
	pick := func(run, k int) int { return int((uint64(k)*2+uint64(run))*7_368_787) % n }
	places := func(run int) []string {
		out := make([]string, polls)
		for start := 0; start < polls; start += 10_000 {
			pipe := rdb.Pipeline()
			cmds := make([]*redis.FloatCmd, 0, 10_000)
			for k := start; k < min(polls, start+10_000); k++ {
				cmds = append(cmds, pipe.ZScore(ctx, key, benchVisitor(pick(run, k))))
			}
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
				b.Fatal(err)
			}
			for j, c := range cmds { // one admitted since has no place: Redis answers it
				out[start+j] = cfg.Signer.Place(benchVisitor(pick(run, start+j)), int64(c.Val()))
			}
		}
		return out
	}
	// Entering counts as a poll: wait out the shortest interval anyone was told.
	time.Sleep(time.Duration(admission.TooEarlyShare * float64(cfg.PollMax)))
	// The proxy learns the depth from one answer, then counts the queue at its next tick.
	if _, body := benchPoll(client, benchVisitor(n-1), ""); !strings.Contains(string(body), `"position"`) {
		b.Fatalf("first poll: %s", body)
	}
	awaitSnapshot(b, room)

	for run, path := range strings.Split(*farPaths, ",") {
		if path != "per-poll" && path != "far" {
			b.Fatalf("-far.paths: unknown path %q (per-poll, far)", path)
		}
		var tokens []string
		if path == "far" {
			tokens = places(run)
		}
		fmt.Printf("[bench-far] %s: %d polls at %.0f/s\n", path, polls, *farRate)
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		res := drivePolls(client, polls, *farRate, func(k int) (string, string) {
			if tokens == nil {
				return benchVisitor(pick(run, k)), ""
			}
			return benchVisitor(pick(run, k)), tokens[k]
		}, srv)
		b.ReportMetric(res.redisCores, path+"-redis-cores")
		b.ReportMetric(res.redisCores*1e6/res.rate, path+"-redis-µs/poll")
		b.ReportMetric(res.rate, path+"-polls/s")
		b.ReportMetric(micros(res.p50), path+"-p50-µs")
		b.ReportMetric(micros(res.p99), path+"-p99-µs")
		b.ReportMetric(float64(res.far)/float64(polls), path+"-far-share")
		fmt.Printf("[bench-far] %s: %.0f polls/s, Redis %.3f cores, p50 %s p99 %s, outcomes %v\n",
			path, res.rate, res.redisCores, res.p50, res.p99, res.outcomes)
		// Where Redis' time went: the calls of the run by command (scripts are EVALSHA).
		stats, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(stats, "\r\n") {
			if strings.HasPrefix(line, "cmdstat_") {
				fmt.Printf("[bench-far] %s: %s\n", path, line)
			}
		}
	}

	// The error of far positions, the queue held still (no ticks) so that ZRANK is exact: a tenth
	// of the queue abandons here and there before the proxy counts it again and a hundredth after,
	// then a sample across the depth is polled, each answer against ZRANK + 1 right after.
	stop()
	time.Sleep(200 * time.Millisecond)
	abandon := func(share int) {
		pipe := rdb.Pipeline()
		for i := 3; i < n; i += share {
			pipe.ZRem(ctx, key, benchVisitor(i))
			if pipe.Len() == 10_000 {
				if _, err := pipe.Exec(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	abandon(10)
	room.FarPositions().SetSnapshot(queue.RankSnapshot{}, time.Time{}) // none: the next tick counts the queue
	farCtx, stopFar := context.WithCancel(ctx)
	defer stopFar()
	go room.KeepFarPositions(farCtx)
	awaitSnapshot(b, room)
	stopFar()
	abandon(97)
	bands := []int64{10_000, 100_000, 1_000_000, 10_000_000, math.MaxInt64}
	worst := make([]float64, len(bands))
	sum := make([]float64, len(bands))
	count := make([]int, len(bands))
	for k := range 3000 {
		i := pick(2, k)
		v := benchVisitor(i)
		score, err := rdb.ZScore(ctx, key, v).Result()
		if errors.Is(err, redis.Nil) {
			continue // admitted before the ticks stopped
		}
		seq := int64(score)
		status, body := benchPoll(client, v, cfg.Signer.Place(v, seq))
		if status == fasthttp.StatusTooManyRequests && n < 10*polls {
			continue // in a shallow queue the sample meets visitors the runs polled moments ago
		}
		var got admission.PositionBody
		if status != fasthttp.StatusOK || json.Unmarshal(body, &got) != nil {
			b.Fatalf("poll %d: %d %s", k, status, body)
		}
		exact := rdb.ZRank(ctx, key, v).Val() + 1
		if got.Position < exact {
			b.Fatalf("%s at %d told %d", v, exact, got.Position)
		}
		if !got.PositionIsBound {
			continue
		}
		band, _ := slices.BinarySearch(bands, exact)
		e := float64(got.Position-exact) / float64(exact)
		worst[band], sum[band], count[band] = max(worst[band], e), sum[band]+e, count[band]+1
	}
	for i, c := range count {
		if c == 0 {
			continue
		}
		name := "pos≤" + strconv.FormatInt(bands[i], 10)
		b.ReportMetric(100*worst[i], name+"-worst-%")
		b.ReportMetric(100*sum[i]/float64(c), name+"-mean-%")
		fmt.Printf("[bench-far] far positions up to %d: %d answers, worst %.3f %% above ZRANK + 1, mean %.3f %%\n", bands[i], c, 100*worst[i], 100*sum[i]/float64(c))
	}
}

// awaitSnapshot waits for the proxy to count the queue.
func awaitSnapshot(b *testing.B, room *admission.Room) {
	b.Helper()
	for deadline := time.Now().Add(time.Minute); room.FarPositions().SnapshotAge(time.Now()) > replica.FarSnapshotEvery; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the proxy took no snapshot of the queue in a minute")
		}
	}
}

// pollRun is what drivePolls saw.
type pollRun struct {
	rate, redisCores float64
	p50, p99         time.Duration
	far              int
	outcomes         map[string]int
}

// drivePolls sends n status polls at rate, open loop (each at its time, whatever the answers
// before), and measures each from its send to its answer.
func drivePolls(client *fasthttp.HostClient, n int, rate float64, who func(k int) (visitor, place string), srv *testenv.Redis) pollRun {
	var next atomic.Int64
	lat := make([]time.Duration, n)
	kinds := make([]string, n)
	start, cpu0 := time.Now(), srv.CPU()
	var wg sync.WaitGroup
	for range 384 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= n {
					return
				}
				if d := time.Until(start.Add(time.Duration(float64(k) / rate * float64(time.Second)))); d > 0 {
					time.Sleep(d)
				}
				v, place := who(k)
				t0 := time.Now()
				status, body := benchPoll(client, v, place)
				lat[k] = time.Since(t0)
				switch {
				case status == fasthttp.StatusOK && strings.Contains(string(body), `"positionIsBound":true`):
					kinds[k] = "far"
				case status == fasthttp.StatusOK:
					kinds[k] = "exact"
				default:
					kinds[k] = strconv.Itoa(status)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	out := pollRun{rate: float64(n) / elapsed.Seconds(), redisCores: (srv.CPU() - cpu0).Seconds() / elapsed.Seconds(), outcomes: map[string]int{}}
	for _, k := range kinds {
		out.outcomes[k]++
	}
	out.far = out.outcomes["far"]
	slices.Sort(lat)
	out.p50, out.p99 = lat[n/2], lat[n*99/100]
	return out
}

func benchPoll(client *fasthttp.HostClient, visitor, place string) (int, []byte) {
	req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
	req.SetRequestURI("http://bench/.herdgate/status")
	req.Header.Set("X-User-Id", visitor)
	if place != "" {
		req.Header.Set(admission.PlaceHeader, place)
	}
	if err := client.Do(req, res); err != nil {
		return 0, []byte(err.Error())
	}
	return res.StatusCode(), append([]byte(nil), res.Body()...)
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// usedMemory reads Redis' used_memory.
func usedMemory(b *testing.B, rdb redis.UniversalClient) int64 {
	b.Helper()
	return testenv.UsedMemory(b, func() (string, error) { return rdb.Info(context.Background(), "memory").Result() })
}
