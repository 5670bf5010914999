package queue

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herdgate/herdgate/internal/capacity"
)

// stuckReader is a Redis that never answers: each read waits for its context.
type stuckReader struct{ calls int }

func (r *stuckReader) ReadPlan(ctx context.Context) (PublishedPlan, error) {
	r.calls++
	<-ctx.Done()
	return PublishedPlan{}, ctx.Err()
}

// A Redis that does not answer must not hold every request on the cache's lock: a read is bounded,
// and after a failure the cache answers the last plan (and the error) without reading for a while.
func TestPlanCacheBoundsItsReadsAndPausesAfterAFailure(t *testing.T) {
	r := &stuckReader{}
	c := NewPlanCache(r, time.Second)
	now := time.Unix(1_800_000_000, 0)
	c.now = func() time.Time { return now }
	if _, err := c.Get(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read of a Redis that does not answer: %v, want the deadline", err)
	}
	for range 100 {
		if _, err := c.Get(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("during the pause: %v, want the last error", err)
		}
	}
	if r.calls != 1 {
		t.Fatalf("%d reads during the pause after a failure, want 1", r.calls)
	}
	now = now.Add(PlanRetryAfterError)
	_, _ = c.Get(context.Background())
	if r.calls != 2 {
		t.Fatalf("%d reads after the pause, want 2", r.calls)
	}
}

// fourteenAndSeven are the reference quota, 14 a 100 ms tick, and half of it.
func fourteenAndSeven(t *testing.T) (fourteen, seven capacity.Plan) {
	t.Helper()
	fourteen, err := capacity.FromQuota(14, 1, 100*time.Millisecond, false)
	if err != nil {
		t.Fatal(err)
	}
	if seven, err = capacity.FromQuota(7, 1, 100*time.Millisecond, false); err != nil {
		t.Fatal(err)
	}
	return fourteen, seven
}

// fixedReader answers the plan it holds.
type fixedReader struct{ plan PublishedPlan }

func (r *fixedReader) ReadPlan(context.Context) (PublishedPlan, error) { return r.plan, nil }

// A cache tells the last change of the quota it read: the quota before and when it saw the new one,
// which the proxy holds a poll timed under the quota before to.
func TestPlanCacheTellsTheLastChangeOfTheQuota(t *testing.T) {
	fourteen, seven := fourteenAndSeven(t)
	r := &fixedReader{PublishedPlan{Quota: fourteen}}
	c := NewPlanCache(r, time.Second)
	now := time.Unix(1_800_000_000, 0)
	c.now = func() time.Time { return now }
	if _, change, _ := c.Read(context.Background()); !change.At.IsZero() {
		t.Fatalf("the first plan read is a change: %+v", change)
	}
	// A plan read again that did not change is none either, nor is a forecast.
	now = now.Add(time.Second)
	r.plan.Forecast = &Forecast{At: now}
	if _, change, _ := c.Read(context.Background()); !change.At.IsZero() {
		t.Fatalf("a plan read again is a change: %+v", change)
	}
	r.plan = PublishedPlan{Quota: seven}
	now = now.Add(time.Second)
	p, change, err := c.Read(context.Background())
	if err != nil || p.Quota != seven || change.Before != fourteen || !change.At.Equal(now) {
		t.Fatalf("after a cut: %+v, %+v, %v; want 14 a tick before, seen now", p, change, err)
	}
	now = now.Add(time.Second)
	if _, later, _ := c.Read(context.Background()); later != change {
		t.Fatalf("the change is forgotten: %+v", later)
	}
}

// gatedReader is a Redis whose every read waits until the test lets it answer: entered says a read
// has begun, and each value sent on answers ends one read with it.
type gatedReader struct {
	calls   atomic.Int32
	entered chan struct{}
	answers chan gatedAnswer
}

type gatedAnswer struct {
	plan PublishedPlan
	err  error
}

func newGatedReader() *gatedReader {
	return &gatedReader{entered: make(chan struct{}, 16), answers: make(chan gatedAnswer, 1)}
}

func (r *gatedReader) ReadPlan(ctx context.Context) (PublishedPlan, error) {
	r.calls.Add(1)
	r.entered <- struct{}{}
	select {
	case a := <-r.answers:
		return a.plan, a.err
	case <-ctx.Done():
		return PublishedPlan{}, ctx.Err()
	}
}

// readInBackground starts a read of c and returns where its result arrives.
func readInBackground(c *PlanCache, ctx context.Context) <-chan gatedAnswer {
	done := make(chan gatedAnswer, 1)
	go func() {
		p, _, err := c.Read(ctx)
		done <- gatedAnswer{p, err}
	}()
	return done
}

// A read of the plan on its way holds nobody: the others are answered what the cache last read, or
// its last failure, and none of them reads too; the read's answer is everyone's once it comes.
func TestPlanCacheHoldsNobodyWhileItReads(t *testing.T) {
	fourteen, seven := fourteenAndSeven(t)
	r := newGatedReader()
	c := NewPlanCache(r, time.Second)
	now := time.Unix(1_800_000_000, 0)
	var clock sync.Mutex
	c.now = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
	advance := func(d time.Duration) { clock.Lock(); now = now.Add(d); clock.Unlock() }

	first := readInBackground(c, context.Background())
	<-r.entered
	r.answers <- gatedAnswer{plan: PublishedPlan{Quota: fourteen}}
	if a := <-first; a.err != nil || a.plan.Quota != fourteen {
		t.Fatalf("first read: %+v", a)
	}

	advance(time.Second)
	due := readInBackground(c, context.Background())
	<-r.entered
	for i := range 100 {
		p, _, err := c.Read(context.Background())
		if err != nil || p.Quota != fourteen {
			t.Fatalf("read %d while the plan is being read again: %+v, %v; want the plan read last", i, p.Quota, err)
		}
	}
	if n := r.calls.Load(); n != 2 {
		t.Fatalf("%d reads of Redis, want 2: the others must not read while one does", n)
	}
	r.answers <- gatedAnswer{plan: PublishedPlan{Quota: seven}}
	if a := <-due; a.err != nil || a.plan.Quota != seven {
		t.Fatalf("the read that found the plan due: %+v, want the new plan", a)
	}
	if p, change, err := c.Read(context.Background()); err != nil || p.Quota != seven || change.Before != fourteen {
		t.Fatalf("after the read: %+v, %+v, %v; want the new plan and the change", p.Quota, change, err)
	}

	// A read that fails, then one after the pause on its way: meanwhile the others get the failure.
	advance(time.Second)
	failing := readInBackground(c, context.Background())
	<-r.entered
	r.answers <- gatedAnswer{err: errors.New("connection reset")}
	if a := <-failing; a.err == nil || a.plan.Quota != seven {
		t.Fatalf("a failed read: %+v, want the last plan with the error", a)
	}
	advance(PlanRetryAfterError)
	retry := readInBackground(c, context.Background())
	<-r.entered
	for i := range 10 {
		if p, _, err := c.Read(context.Background()); err == nil || p.Quota != seven {
			t.Fatalf("read %d while the retry is on its way: %+v, %v; want the last plan with the last error", i, p.Quota, err)
		}
	}
	r.answers <- gatedAnswer{plan: PublishedPlan{Quota: seven}}
	if a := <-retry; a.err != nil {
		t.Fatalf("the retry: %+v", a)
	}
	if n := r.calls.Load(); n != 4 {
		t.Fatalf("%d reads of Redis, want 4", n)
	}
}

// Before any plan was read, those who come while the first read is on its way wait for it, or for
// their own context, and share what it answers: Redis is read once.
func TestPlanCacheSharesItsFirstRead(t *testing.T) {
	r := newGatedReader()
	c := NewPlanCache(r, time.Second)
	first := readInBackground(c, context.Background())
	<-r.entered
	var waiting []<-chan gatedAnswer
	for range 5 {
		waiting = append(waiting, readInBackground(c, context.Background()))
	}
	gone, cancel := context.WithCancel(context.Background())
	leaving := readInBackground(c, gone)
	cancel()
	if a := <-leaving; !errors.Is(a.err, context.Canceled) {
		t.Fatalf("a caller that goes away while the first read is on its way: %+v, want its context's error", a)
	}
	r.answers <- gatedAnswer{err: ErrNoPlan}
	for i, w := range append(waiting, first) {
		if a := <-w; !errors.Is(a.err, ErrNoPlan) {
			t.Fatalf("reader %d: %+v, want the first read's answer", i, a)
		}
	}
	if n := r.calls.Load(); n != 1 {
		t.Fatalf("%d reads of Redis, want 1", n)
	}
}

// The read is the cache's, not its caller's: a caller that goes away (a client that closed its
// connection) does not make the read fail for everyone after it.
func TestPlanCacheReadOutlivesItsCaller(t *testing.T) {
	fourteen, _ := fourteenAndSeven(t)
	r := newGatedReader()
	c := NewPlanCache(r, time.Second)
	gone, cancel := context.WithCancel(context.Background())
	read := readInBackground(c, gone)
	<-r.entered
	cancel()
	r.answers <- gatedAnswer{plan: PublishedPlan{Quota: fourteen}}
	if a := <-read; a.err != nil || a.plan.Quota != fourteen {
		t.Fatalf("the read of a caller gone meanwhile: %+v, want the plan", a)
	}
	if p, _, err := c.Read(context.Background()); err != nil || p.Quota != fourteen {
		t.Fatalf("after it: %+v, %v", p.Quota, err)
	}
}
