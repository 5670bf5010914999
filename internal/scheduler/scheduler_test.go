package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/settings"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

// schedulerHarness drives a Scheduler on a fake clock against a real Redis: each step moves time and
// waits for the tick it causes.
type schedulerHarness struct {
	t       *testing.T
	clock   *clocktesting.FakeClock
	s       *Scheduler
	reports chan TickReport
	redis   *testenv.Redis
}

// gridStart is aligned to every tick the tests use.
var gridStart = time.Unix(1_800_000_000, 0)

// newHarness runs a scheduler on a fake clock whose rooms tick on the multiples of their tick
// (WithAlignedGrid), plus opts.
func newHarness(t *testing.T, opts ...Option) *schedulerHarness {
	t.Helper()
	h := &schedulerHarness{t: t, clock: clocktesting.NewFakeClock(gridStart), reports: make(chan TickReport, 100), redis: testenv.StartRedis(t)}
	h.s = New(&queue.Pool{}, append([]Option{WithAlignedGrid(), WithClock(h.clock), WithRand(func() RandSource { return rand.New(rand.NewPCG(1, 2)) }),
		WithTickObserver(func(r TickReport) { h.reports <- r })}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = h.s.Start(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if n := h.s.Pool().Len(); n != 0 {
			t.Errorf("%d Redis clients still open after the scheduler stopped", n)
		}
	})
	return h
}

// queue runs b's queue, named name in the namespace test, on the harness's Redis; its jitter window is
// its tick, its passes last a minute and nobody is dropped for silence.
func (h *schedulerHarness) queue(name string, b *builder.QueueBuilder) Room {
	h.t.Helper()
	wq := b.Obj()
	s := builder.Queue("test", name).UID(types.UID(name)).Generation(max(1, wq.Generation)).
		Polling(500*time.Millisecond, 5*time.Second).PassTTL(time.Minute).AbandonAfter(time.Hour).Obj()
	s.Spec.Capacity, s.Spec.Tick, s.Spec.Suspend, s.Spec.Schedule = wq.Spec.Capacity, wq.Spec.Tick, wq.Spec.Suspend, wq.Spec.Schedule
	s.Spec.Redis, s.Spec.Events, s.Spec.Lanes, s.Spec.Entry = wq.Spec.Redis, wq.Spec.Events, wq.Spec.Lanes, wq.Spec.Entry
	s.Spec.Draw = wq.Spec.Draw
	derived, err := settings.Derive(s)
	if err != nil {
		h.t.Fatal(err)
	}
	// The harness's ticks carry no lead, so that not-before times read as offsets from the tick.
	derived.Lead = 0
	return Room{Settings: derived, RedisURL: h.redis.URL()}
}

func (h *schedulerHarness) fill(name string, n int) {
	h.t.Helper()
	q := h.engine(name)
	for i := range n {
		if _, err := q.Enter(context.Background(), fmt.Sprintf("v%05d", i), time.Hour); err != nil {
			h.t.Fatal(err)
		}
	}
}

// runFilled runs the queue name with the harness's settings and n visitors waiting in it.
func (h *schedulerHarness) runFilled(name string, n int) Room {
	h.t.Helper()
	h.fill(name, n)
	q := h.queue(name, builder.Queue("", ""))
	h.s.Ensure(q)
	return q
}

// engine is the queue name on the harness's Redis, as a proxy sees it.
func (h *schedulerHarness) engine(name string) *queue.Queue {
	h.t.Helper()
	rdb, err := queue.NewClient(h.redis.URL(), queue.ClientOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = rdb.Close() })
	q, err := queue.New(rdb, "test", name)
	if err != nil {
		h.t.Fatal(err)
	}
	return q
}

// move waits until the queue goroutine waits on its timer (it is not in the middle of a tick), then
// moves the clock by d.
func (h *schedulerHarness) move(d time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !h.clock.HasWaiters() {
		if time.Now().After(deadline) {
			h.t.Fatal("the scheduler never waited for its next tick")
		}
		time.Sleep(time.Millisecond)
	}
	h.clock.Step(d)
}

// step moves the clock by d and returns the report of the tick that follows; false when the goroutine
// went back to waiting without a tick.
func (h *schedulerHarness) step(d time.Duration) (TickReport, bool) {
	h.t.Helper()
	h.move(d)
	for {
		select {
		case r := <-h.reports:
			return r, true
		case <-time.After(20 * time.Millisecond):
			if h.clock.HasWaiters() && len(h.reports) == 0 {
				return TickReport{}, false
			}
		}
	}
}

// publishedPlan reads the queue's published plan until done says it is the one expected, for at
// most 5 s, and returns the last read. A tick is reported when its admission is done and publishes
// the plan right after, so a plan read at once may be the one before.
func publishedPlan(q *queue.Queue, done func(queue.PublishedPlan) bool) (queue.PublishedPlan, error) {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		p, err := q.ReadPlan(context.Background())
		if (err == nil && done(p)) || time.Now().After(deadline) {
			return p, err
		}
	}
}

func (h *schedulerHarness) mustStep(d time.Duration) TickReport {
	h.t.Helper()
	r, ok := h.step(d)
	if !ok {
		h.t.Fatalf("no tick after moving the clock by %s", d)
	}
	if r.Err != nil {
		h.t.Fatalf("tick failed: %v", r.Err)
	}
	return r
}

func TestSchedulerCarriesAFractionalQuota(t *testing.T) {
	h := newHarness(t)
	h.fill("slow", 100)
	// 2 slots × 70 % ÷ 1 s = 1.4/s: 0.14 per 100 ms tick.
	h.s.Ensure(h.queue("slow", builder.Queue("", "").Capacity(2, time.Second, 70)))
	total := 0
	for i := range 100 {
		r := h.mustStep(100 * time.Millisecond)
		if want := gridStart.Add(time.Duration(i+1) * 100 * time.Millisecond); !r.Scheduled.Equal(want) {
			t.Fatalf("tick %d scheduled at %s, want %s", i, r.Scheduled, want)
		}
		if r.Quota > 1 {
			t.Fatalf("tick %d had quota %d; 0.14 per tick never rounds above 1", i, r.Quota)
		}
		total += len(r.Result.Admitted)
	}
	if total != 14 {
		t.Fatalf("100 ticks at 1.4/s admitted %d, want exactly 14", total)
	}
}

func TestSchedulerBoundsATickByWhomItCanAdmit(t *testing.T) {
	h := newHarness(t)
	// The largest plan the API accepts: a million slots held 1 ms each, admitted every 10 s, and
	// nobody waiting. The tick asks Redis for the engine's limit, never for billions of slots.
	largest := h.queue("largest", builder.Queue("", "").Capacity(1_000_000, time.Millisecond, 100).Tick(10*time.Second))
	h.s.Ensure(largest)
	r := h.mustStep(10 * time.Second)
	if r.Quota != queue.MaxAdmitPerTick || r.Limit != queue.MaxAdmitPerTick || len(r.Result.Admitted) != 0 {
		t.Fatalf("idle tick of the largest plan: quota %d, limit %d, admitted %d; want %d, %d, 0",
			r.Quota, r.Limit, len(r.Result.Admitted), queue.MaxAdmitPerTick, queue.MaxAdmitPerTick)
	}
	// Proxies estimate waits from the rate ticks really run.
	rdb, err := queue.NewClient(h.redis.URL(), queue.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	q, err := queue.New(rdb, "test", "largest")
	if err != nil {
		t.Fatal(err)
	}
	published, err := publishedPlan(q, func(p queue.PublishedPlan) bool { num, _ := p.Quota.PerTick(); return num == queue.MaxAdmitPerTick })
	if err != nil {
		t.Fatal(err)
	}
	if num, den := published.Quota.PerTick(); num != queue.MaxAdmitPerTick || den != 1 {
		t.Fatalf("published quota %d/%d per tick, want the capped %d/1", num, den, queue.MaxAdmitPerTick)
	}
	h.s.Remove(largest.UID)

	// The largest batch override with more waiting than one tick may admit: ticks take the limit
	// each, in order, until the queue is empty, and a late tick makes up for nothing beyond it.
	h.fill("override", 2*queue.MaxAdmitPerTick+100)
	h.s.Ensure(h.queue("override", builder.Queue("", "").BatchSizeOverride(1_000_000).Tick(10*time.Millisecond)))
	var admitted []int
	for range 3 {
		r := h.mustStep(30 * time.Millisecond)
		if r.Limit != queue.MaxAdmitPerTick {
			t.Fatalf("tick limit %d, want %d", r.Limit, queue.MaxAdmitPerTick)
		}
		admitted = append(admitted, len(r.Result.Admitted))
	}
	if !slices.Equal(admitted, []int{queue.MaxAdmitPerTick, queue.MaxAdmitPerTick, 100}) {
		t.Fatalf("three ticks admitted %v, want %d, %d and the last 100", admitted, queue.MaxAdmitPerTick, queue.MaxAdmitPerTick)
	}
}

func TestSchedulerMakesUpForLateTicks(t *testing.T) {
	h := newHarness(t)
	t.Cleanup(func() { forgetQueueMetrics("test", "late") })
	h.fill("late", 1000)
	h.s.Ensure(h.queue("late", builder.Queue("", "")))
	if r := h.mustStep(100 * time.Millisecond); r.Quota != 14 || len(r.Result.Admitted) != 14 {
		t.Fatalf("first tick: quota %d, admitted %d; want 14", r.Quota, len(r.Result.Admitted))
	}
	// 350 ms late: the tick at +200 runs at +450 and makes up for +300 and +400.
	r := h.mustStep(350 * time.Millisecond)
	if r.Quota != 42 || len(r.Result.Admitted) != 42 || !r.Scheduled.Equal(gridStart.Add(400*time.Millisecond)) {
		t.Fatalf("late tick: quota %d, admitted %d, scheduled %s; want 42 for the grid point +400ms", r.Quota, len(r.Result.Admitted), r.Scheduled)
	}
	// The metrics tell how late it was from the grid point it was due at (+200), not the last one.
	if got := histogramMax(t, tickLagHistogram.WithLabelValues("test", "late")); got < 0.25 {
		t.Fatalf("herdgate_tick_lag_seconds: the late tick falls in a bucket up to %vs, want at least 0.25", got)
	}
	missedAre(t, "late", 2, 0)
	// The next tick keeps the grid: +500.
	if r := h.mustStep(100 * time.Millisecond); !r.Scheduled.Equal(gridStart.Add(500*time.Millisecond)) || r.Quota != 14 {
		t.Fatalf("tick after the late one: scheduled %s, quota %d; want +500ms and 14", r.Scheduled, r.Quota)
	}
	// Five seconds late: the missed admissions beyond ten ticks are dropped, not released at once.
	if r := h.mustStep(5 * time.Second); r.Quota != 14*(maxCatchUpTicks+1) {
		t.Fatalf("very late tick: quota %d, want %d", r.Quota, 14*(maxCatchUpTicks+1))
	}
	// +600 … +5,400 passed: ten made up, the other 39 dropped.
	missedAre(t, "late", 2+maxCatchUpTicks, 49-maxCatchUpTicks)
}

// A scheduler that takes a queue over (a new leader, a restarted manager) carries on from the last
// tick in Redis: the grid points nobody ran are made up for, within a late tick's bound, and the
// tick the old one ran is not run again.
func TestSchedulerTakesOverFromTheLastTick(t *testing.T) {
	h := newHarness(t)
	q := h.runFilled("takeover", 2000)
	h.mustStep(100 * time.Millisecond)
	if r := h.mustStep(100 * time.Millisecond); !r.Scheduled.Equal(gridStart.Add(200 * time.Millisecond)) {
		t.Fatalf("second tick scheduled %s", r.Scheduled)
	}
	h.s.Remove(q.UID)
	// Nobody ticks for +300 … +700; a new runner starts and its first tick is +800.
	h.clock.Step(550 * time.Millisecond)
	h.s.Ensure(q)
	r := h.mustStep(100 * time.Millisecond)
	if !r.Scheduled.Equal(gridStart.Add(800*time.Millisecond)) || r.Quota != 14*6 || len(r.Result.Admitted) != 14*6 {
		t.Fatalf("first tick after the takeover: scheduled %s, quota %d, admitted %d; want +800ms making up five ticks: 84",
			r.Scheduled, r.Quota, len(r.Result.Admitted))
	}
	if r := h.mustStep(100 * time.Millisecond); r.Quota != 14 {
		t.Fatalf("the tick after: quota %d, want 14", r.Quota)
	}
	stats, err := h.engine("takeover").Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Ticks +100, +200, +300 … +800 (made up) and +900: nine ticks of 14, exactly the plan's rate.
	if stats.AdmittedTotal != 9*14 {
		t.Fatalf("admitted %d over nine grid points, want %d", stats.AdmittedTotal, 9*14)
	}

	// A takeover after a long gap makes up no more than a late tick does.
	h.s.Remove(q.UID)
	h.clock.Step(time.Minute)
	h.s.Ensure(q)
	if r := h.mustStep(100 * time.Millisecond); r.Quota != 14*(maxCatchUpTicks+1) {
		t.Fatalf("takeover after a minute: quota %d, want %d", r.Quota, 14*(maxCatchUpTicks+1))
	}
}

func TestSchedulerDrawsJitterFromItsSource(t *testing.T) {
	h := newHarness(t)
	h.fill("jitter", 20)
	h.s.Ensure(h.queue("jitter", builder.Queue("", "")))
	r := h.mustStep(100 * time.Millisecond)
	// The seed comes from the scheduler's source, and Redis draws the offsets from it.
	if seed := rand.New(rand.NewPCG(1, 2)).Int64N(1 << 62); r.Seed != seed {
		t.Fatalf("tick seed %d, want the source's first draw %d", r.Seed, seed)
	}
	want := queue.JitterOffsets(r.Seed, len(r.Result.Admitted), 100*time.Millisecond)
	if len(want) != 14 || !slices.IsSorted(want) {
		t.Fatalf("offsets of 14 admissions: %v", want)
	}
	for i, a := range r.Result.Admitted {
		if got := a.Pass.NotBefore.Sub(r.Result.Now); got != want[i].Truncate(time.Millisecond) {
			t.Fatalf("visitor %d not-before = now + %s, want now + %s", i, got, want[i].Truncate(time.Millisecond))
		}
	}
}

func TestSchedulerSuspendAndConfigChanges(t *testing.T) {
	h := newHarness(t)
	h.fill("edit", 1000)
	cfg := h.queue("edit", builder.Queue("", ""))
	h.s.Ensure(cfg)
	h.mustStep(100 * time.Millisecond)

	h.s.Ensure(h.queue("edit", builder.Queue("", "").Suspend(true).Generation(2)))
	for range 3 {
		if r := h.mustStep(100 * time.Millisecond); r.Quota != 0 || len(r.Result.Admitted) != 0 || r.Generation != 2 {
			t.Fatalf("suspended tick: quota %d, admitted %d, generation %d", r.Quota, len(r.Result.Admitted), r.Generation)
		}
	}
	// Resume with a 200 ms tick: the next tick admits 28 and the grid moves to 200 ms.
	h.s.Ensure(h.queue("edit", builder.Queue("", "").Tick(200*time.Millisecond).Generation(3)))
	r := h.mustStep(100 * time.Millisecond) // the tick at +500 on the old grid
	if r.Quota != 28 || !r.Scheduled.Equal(gridStart.Add(500*time.Millisecond)) {
		t.Fatalf("first tick after the change: quota %d at %s, want 28 at +500ms", r.Quota, r.Scheduled)
	}
	if r := h.mustStep(100 * time.Millisecond); r.Quota != 28 || !r.Scheduled.Equal(gridStart.Add(600*time.Millisecond)) {
		t.Fatalf("second tick after the change: quota %d at %s, want 28 at +600ms", r.Quota, r.Scheduled)
	}
	if _, ok := h.step(100 * time.Millisecond); ok {
		t.Fatal("a tick ran 100 ms after the last on a 200 ms cadence")
	}
	if r, ok := h.step(100 * time.Millisecond); !ok || !r.Scheduled.Equal(gridStart.Add(800*time.Millisecond)) {
		t.Fatalf("no tick at +800ms on the 200 ms grid (got %v at %s)", ok, r.Scheduled)
	}

	h.s.Remove(cfg.UID)
	if _, ok := h.s.Snapshot(cfg.UID); ok {
		t.Fatal("a removed queue still has a snapshot")
	}
	if n := h.s.Pool().Len(); n != 0 {
		t.Fatalf("%d Redis clients open after the only queue was removed", n)
	}
}

func TestSchedulerBacksOffFromAnUnreachableRedis(t *testing.T) {
	h := newHarness(t)
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cfg := h.queue("down", builder.Queue("", ""))
	cfg.RedisURL = fmt.Sprintf("redis://127.0.0.1:%d", port)
	h.s.Ensure(cfg)
	r, ok := h.step(100 * time.Millisecond)
	if !ok || r.Err == nil {
		t.Fatalf("tick against nothing: reported %v, error %v; want a failed tick", ok, r.Err)
	}
	snap, _ := h.s.Snapshot(cfg.UID)
	if snap.RedisError == "" || snap.RedisErrorSince.IsZero() {
		t.Fatalf("snapshot after a failed tick = %+v, want the Redis error", snap)
	}
	// Backoff doubles from 100 ms to 5 s: over 20 s of ticks the calls thin out instead of hammering.
	for range 200 {
		h.move(100 * time.Millisecond)
	}
	h.move(0)
	attempts := 1 + len(h.reports)
	for range len(h.reports) {
		if r := <-h.reports; r.Err == nil {
			t.Fatal("a tick against nothing succeeded")
		}
	}
	// 100, 200, 400, 800, 1600, 3200 ms, then every 5 s: 9 attempts within 20 s.
	if attempts < 7 || attempts > 11 {
		t.Fatalf("%d attempts in 20 s of ticks, want about 9 with the backoff", attempts)
	}
}

// TestSchedulerStopsAQueueWithoutWaitingForItsRedis: Stop returns while the queue's tick waits on a
// Redis that does not answer (a deleted room's reconcile must not wait for it); the goroutine begins
// no tick after, and returned closes once the tick on its way has ended.
func TestSchedulerStopsAQueueWithoutWaitingForItsRedis(t *testing.T) {
	h := newHarness(t)
	q := h.runFilled("stopped", 2000)
	h.mustStep(100 * time.Millisecond)

	resume, err := h.redis.Pause()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(resume)
	// The next tick goes to the paused Redis; the goroutine leaves the clock for it.
	h.move(100 * time.Millisecond)
	for h.clock.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	returned := h.s.Stop(q.UID)
	select {
	case <-returned:
		t.Fatal("Stop waited for the tick on the paused Redis")
	default:
	}
	if n := h.s.Len(); n != 0 {
		t.Fatalf("the scheduler still runs %d queues after Stop", n)
	}

	resume()
	<-returned
	admitted := func() int64 {
		stats, err := h.engine("stopped").Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return stats.AdmittedTotal
	}
	before := admitted()
	h.clock.Step(time.Second)
	time.Sleep(200 * time.Millisecond)
	if after := admitted(); after != before {
		t.Fatalf("admitted %d after the queue was stopped", after-before)
	}
}
