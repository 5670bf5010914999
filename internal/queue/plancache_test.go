package queue

import (
	"context"
	"errors"
	"testing"
	"time"
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
