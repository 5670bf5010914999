package queue

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdgate/herdgate/internal/draw"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/test/testenv"
)

// drawMeasure is what one draw of a large pre-queue took, measured as the scheduler runs it: begin,
// read the arrivals a page per call, order them, place them a chunk per call.
type drawMeasure struct {
	// total is the whole draw; order the part spent ordering in Go.
	total, order time.Duration
	// longestCall is the longest single Redis call of the draw, and calls how many it made;
	// longestRead and longestPlace the longest page read and chunk placed.
	longestCall, longestRead, longestPlace time.Duration
	calls                                  int
	// durations are every call's, as the client waited for it.
	durations []time.Duration
	// polls are the latencies of the Enter and Status calls a poller made while the draw ran.
	polls []time.Duration
}

// fillPreQueue publishes a PreQueue plan and gives n visitors pre-queue places; it returns them.
func fillPreQueue(tb testing.TB, q *Queue, n int) []string {
	tb.Helper()
	if err := q.PublishPlan(context.Background(), PublishedPlan{Quota: mustQuota(tb, 14, 100*time.Millisecond), PollMin: time.Second, PollMax: 5 * time.Second,
		AbandonAfter: time.Hour, Phase: phase.PreQueue}); err != nil {
		tb.Fatal(err)
	}
	return fill(tb, q, n, anonymousID)
}

// measureDraw draws q's pre-queue with seed while a poller, on its own connection, keeps calling
// Status for pollers (pre-queue visitors) and Enter for newcomers, as proxies would meanwhile.
func measureDraw(tb testing.TB, q *Queue, poller *Queue, seed []byte, pollers []string) drawMeasure {
	tb.Helper()
	ctx := context.Background()
	var m drawMeasure
	timed := func(longest *time.Duration, f func() error) {
		start := time.Now()
		if err := f(); err != nil {
			tb.Fatal(err)
		}
		took := time.Since(start)
		m.durations = append(m.durations, took)
		m.longestCall = max(m.longestCall, took)
		if longest != nil {
			*longest = max(*longest, took)
		}
		m.calls++
	}
	start := time.Now()
	opensAt := time.UnixMilli(start.UnixMilli())
	var st DrawState
	timed(nil, func() (err error) { st, err = q.BeginDraw(ctx, opensAt, phase.Open); return err })
	// The poller starts once the draw has begun: a newcomer entering before would take a pre-queue
	// place and be drawn too.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			var err error
			if i%2 == 0 {
				_, err = poller.Status(ctx, pollers[i/2%len(pollers)], time.Hour)
			} else {
				_, err = poller.Enter(ctx, anonymousID(), time.Hour)
			}
			if err != nil {
				tb.Error(err)
				return
			}
			m.polls = append(m.polls, time.Since(start))
		}
	})

	var arrivals []int64
	for after := int64(0); ; {
		var page []int64
		timed(&m.longestRead, func() (err error) { page, err = q.DrawArrivals(ctx, after); return err })
		arrivals = append(arrivals, page...)
		if len(page) < DrawPage {
			break
		}
		after = page[len(page)-1]
	}
	orderStart := time.Now()
	draw.Order(seed, arrivals)
	m.order = time.Since(orderStart)
	for from := 0; from < len(arrivals); from += MaxPlaceChunk {
		timed(&m.longestPlace, func() (err error) {
			st, err = q.PlaceDrawn(ctx, st, arrivals[from:min(from+MaxPlaceChunk, len(arrivals))], time.Hour, phase.Open)
			return err
		})
	}
	m.total = time.Since(start)
	close(stop)
	wg.Wait()
	if !st.Done || st.Placed != int64(len(arrivals)) {
		tb.Fatalf("the draw ended as %+v, want all %d placed", st, len(arrivals))
	}
	return m
}

// TestADrawOfAHundredThousand draws a pre-queue of 10^5 in bounded calls while Enter and Status
// go on: every place is the seed's, a visitor's position is its drawn place, and the polls were
// answered between the draw's calls.
func TestADrawOfAHundredThousand(t *testing.T) {
	const n = 100_000
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	pollRDB := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = pollRDB.Close() })
	q, err := New(rdb, "scale", "draw")
	if err != nil {
		t.Fatal(err)
	}
	poller, err := New(pollRDB, "scale", "draw")
	if err != nil {
		t.Fatal(err)
	}
	ids := fillPreQueue(t, q, n)
	seed := []byte("a seed of thirty-two bytes, ok!!")
	m := measureDraw(t, q, poller, seed, ids[:1000])
	const drawn = n + 1 // fill enters one visitor of its own first
	if m.calls != 1+drawn/DrawPage+1+(drawn+MaxPlaceChunk-1)/MaxPlaceChunk {
		t.Errorf("the draw made %d Redis calls", m.calls)
	}
	if len(m.polls) == 0 {
		t.Fatal("no poll was answered while the draw ran")
	}

	results, err := q.ReadDrawRecord(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != drawn {
		t.Fatalf("the record has %d places, want %d", len(results), drawn)
	}
	if err := draw.Verify(seed, draw.Commitment(seed), results); err != nil {
		t.Fatal(err)
	}
	// fill entered ids in order after one visitor of its own: ids[i] holds arrival i+2.
	place := map[int64]int64{}
	for _, r := range results {
		place[r.Arrival] = r.Place
	}
	for _, i := range []int{0, 1, n / 2, n - 1} {
		p, err := q.Status(context.Background(), ids[i], time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if p.State != Waiting || p.Position != place[int64(i+2)] {
			t.Errorf("visitor %d (arrival %d): %v at %d, want Waiting at its drawn place %d", i, i+2, p.State, p.Position, place[int64(i+2)])
		}
	}
	slices.Sort(m.polls)
	t.Logf("10^5 drawn in %s (ordering %s), %d Redis calls, the longest %s (read %s, place %s); %d polls meanwhile, p99 %s",
		m.total.Round(time.Millisecond), m.order.Round(time.Millisecond), m.calls, m.longestCall.Round(10*time.Microsecond),
		m.longestRead.Round(10*time.Microsecond), m.longestPlace.Round(10*time.Microsecond),
		len(m.polls), m.polls[len(m.polls)*99/100].Round(10*time.Microsecond))
}

// BenchmarkDrawPreQueue draws a pre-queue of 10^6 and reports the longest single Redis call of the
// draw beside the poll latency during the draw and before it (the baseline: the same poller with
// nothing else running).
func BenchmarkDrawPreQueue(b *testing.B) {
	const n = 1_000_000
	srv, rdb := benchRedis(b)
	pollRDB := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { _ = pollRDB.Close() })
	for i := 0; i < b.N; i++ {
		q := benchQueue(b, rdb, "draw")
		poller, err := New(pollRDB, "bench", "draw")
		if err != nil {
			b.Fatal(err)
		}
		ids := fillPreQueue(b, q, n)
		idle := make([]time.Duration, 0, 2000)
		for j := range 2000 {
			start := time.Now()
			if _, err := poller.Status(context.Background(), ids[j], time.Hour); err != nil {
				b.Fatal(err)
			}
			idle = append(idle, time.Since(start))
		}
		seed, _ := draw.NewSeed()
		// Redis' own clock of the longest calls: every command of over a millisecond goes to the slow
		// log while the draw runs (the draw's calls and page reads; no single command a script runs).
		ctx := context.Background()
		for _, kv := range [][2]string{{"slowlog-max-len", "1000000"}, {"slowlog-log-slower-than", "1000"}} {
			if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
				b.Fatal(err)
			}
		}
		rdb.Do(ctx, "SLOWLOG", "RESET")
		m := measureDraw(b, q, poller, seed, ids[2000:4000])
		entries, err := rdb.SlowLogGet(ctx, -1).Result()
		if err != nil {
			b.Fatal(err)
		}
		rdb.ConfigSet(ctx, "slowlog-log-slower-than", "10000")
		var place, read time.Duration
		over := 0
		for _, e := range entries {
			switch {
			case len(e.Args) > 1 && strings.EqualFold(e.Args[0], "evalsha") && e.Args[1] == drawScript.Hash():
				place = max(place, e.Duration)
				over++
			case len(e.Args) > 1 && strings.EqualFold(e.Args[0], "zrange") && e.Args[1] == q.keys.pre:
				read = max(read, e.Duration)
				over++
			}
		}
		b.ReportMetric(micros(place), "redis-longest-draw-call-µs")
		b.ReportMetric(micros(read), "redis-longest-read-µs")
		b.ReportMetric(float64(over), "calls-over-1ms")
		reportPercentiles(b, m.durations, "call-")
		b.ReportMetric(m.total.Seconds(), "draw-s")
		b.ReportMetric(m.order.Seconds(), "order-s")
		b.ReportMetric(float64(m.calls), "calls")
		b.ReportMetric(micros(m.longestCall), "longest-call-µs")
		b.ReportMetric(micros(m.longestRead), "longest-read-µs")
		b.ReportMetric(micros(m.longestPlace), "longest-place-µs")
		reportPercentiles(b, m.polls, "poll-")
		reportPercentiles(b, idle, "idle-poll-")
		slices.Sort(m.polls)
		b.ReportMetric(micros(m.polls[len(m.polls)-1]), "poll-max-µs")
	}
}
