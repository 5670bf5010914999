package queue

import (
	"context"
	"errors"
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
	now = now.Add(planRetryAfterError)
	_, _ = c.Get(context.Background())
	if r.calls != 2 {
		t.Fatalf("%d reads after the pause, want 2", r.calls)
	}
}

// fixedReader answers the plan it holds.
type fixedReader struct{ plan PublishedPlan }

func (r *fixedReader) ReadPlan(context.Context) (PublishedPlan, error) { return r.plan, nil }

// A cache tells the last change of the quota it read: the quota before and when it saw the new one,
// which the proxy holds a poll timed under the quota before to.
func TestPlanCacheTellsTheLastChangeOfTheQuota(t *testing.T) {
	fourteen, err := capacity.FromQuota(14, 1, 100*time.Millisecond, false)
	if err != nil {
		t.Fatal(err)
	}
	seven, err := capacity.FromQuota(7, 1, 100*time.Millisecond, false)
	if err != nil {
		t.Fatal(err)
	}
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
