package queue

import (
	"context"
	"testing"
	"time"
)

// TestReclaimWritesBackHeldPasses: a visitor whose admission a failover lost leaves the waiting
// queue and counts as active with its pass; a second write-back changes nothing; a pass that has
// expired since only takes its visitor out of the queue, and a newer pass the visitor holds is kept.
func TestReclaimWritesBackHeldPasses(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t, startClient(t))
	enterAll(t, q, "lost-admission", "waiting", "newer-pass", "expired")
	now := time.Now()
	held := HeldPass{Visitor: "lost-admission", NotBefore: now.Add(-time.Second), Expiry: now.Add(time.Minute)}
	res, err := q.Reclaim(ctx, []HeldPass{
		held,
		{Visitor: "expired", NotBefore: now.Add(-2 * time.Minute), Expiry: now.Add(-time.Minute)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.LeftQueue != 2 || res.Restored != 1 {
		t.Fatalf("first write-back: %+v, want 2 out of the queue and 1 active", res)
	}
	if p, err := q.Status(ctx, "expired", longAbandon); err != nil || p.State != NotQueued {
		t.Fatalf("the visitor whose pass expired after the write-back: %+v, %v; want not queued", p, err)
	}
	p, err := q.Status(ctx, "lost-admission", longAbandon)
	if err != nil {
		t.Fatal(err)
	}
	if p.State != Admitted || !p.Pass.NotBefore.Equal(held.NotBefore.Truncate(time.Millisecond)) || !p.Pass.Expiry.Equal(held.Expiry.Truncate(time.Millisecond)) {
		t.Fatalf("the visitor after the write-back: %+v, want admitted with its own pass", p)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Depth != 2 || st.Active != 1 {
		t.Fatalf("after the write-back: %d waiting and %d active, want 2 and 1", st.Depth, st.Active)
	}
	if res, err := q.Reclaim(ctx, []HeldPass{held}); err != nil || res != (ReclaimResult{}) {
		t.Fatalf("a second write-back: %+v, %v; want nothing changed", res, err)
	}

	// A visitor who holds a newer pass than the one written back keeps it.
	newer := HeldPass{Visitor: "newer-pass", NotBefore: now, Expiry: now.Add(time.Minute)}
	if _, err := q.Reclaim(ctx, []HeldPass{newer}); err != nil {
		t.Fatal(err)
	}
	older := HeldPass{Visitor: "newer-pass", NotBefore: now.Add(-30 * time.Second), Expiry: now.Add(30 * time.Second)}
	if _, err := q.Reclaim(ctx, []HeldPass{older}); err != nil {
		t.Fatal(err)
	}
	if p, err := q.Status(ctx, "newer-pass", longAbandon); err != nil || !p.Pass.NotBefore.Equal(newer.NotBefore.Truncate(time.Millisecond)) {
		t.Fatalf("after an older pass was written back: %+v, %v; want the newer pass kept", p, err)
	}
}
