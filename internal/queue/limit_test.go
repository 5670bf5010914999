package queue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestEntryLimitBoundsThePlacesOfOneClient(t *testing.T) {
	ctx := context.Background()
	rdb := startClient(t)
	store := NewStore(rdb, StoreOptions{})
	defer store.Close()
	q, err := store.Queue("test", "limited")
	if err != nil {
		t.Fatal(err)
	}
	// One place a minute earned back: nothing refills while the test runs.
	limit := func(client string) EntryLimit { return EntryLimit{Client: client, Burst: 10, PerMinute: 1} }

	// 1,000 entries at once from one client, batched into shared round trips: the burst takes places.
	var wg sync.WaitGroup
	var mu sync.Mutex
	states := map[State]int{}
	var retry time.Duration
	for i := range 1000 {
		wg.Go(func() {
			p, err := q.EnterFrom(ctx, fmt.Sprintf("a%04d", i), time.Hour, limit("203.0.113.7/32"))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			states[p.State]++
			if p.State == RateLimited {
				retry = p.RetryAfter
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if states[Waiting] != 10 || states[RateLimited] != 990 {
		t.Fatalf("1,000 entries from one client: %v, want 10 Waiting and 990 RateLimited", states)
	}
	if retry <= 0 || retry > time.Minute {
		t.Fatalf("RetryAfter %s, want up to a minute (one place a minute)", retry)
	}
	st, err := q.Stats(ctx)
	if err != nil || st.Depth != 10 {
		t.Fatalf("depth %d (%v), want the 10 places taken", st.Depth, err)
	}

	// A visitor who holds a place keeps it: entering again takes no token and is not refused.
	var holder string
	for i := range 1000 {
		id := fmt.Sprintf("a%04d", i)
		if p, err := q.Status(ctx, id, time.Hour); err == nil && p.State == Waiting {
			holder = id
			break
		}
	}
	if p, err := q.EnterFrom(ctx, holder, time.Hour, limit("203.0.113.7/32")); err != nil || p.State != Waiting {
		t.Fatalf("a place holder entering again: %+v, %v", p, err)
	}

	// Another client has its own bucket; no limit means no bucket.
	if p, err := q.EnterFrom(ctx, "b0001", time.Hour, limit("198.51.100.0/24")); err != nil || p.State != Waiting {
		t.Fatalf("another client: %+v, %v", p, err)
	}
	if p, err := q.Enter(ctx, "c0001", time.Hour); err != nil || p.State != Waiting {
		t.Fatalf("no limit: %+v, %v", p, err)
	}

	// Tokens come back at the rate: at 600 a minute, one every 100 ms.
	fast := EntryLimit{Client: "2001:db8::/64", Burst: 1, PerMinute: 600}
	if p, _ := q.EnterFrom(ctx, "d0001", time.Hour, fast); p.State != Waiting {
		t.Fatalf("first entry of a fresh bucket: %v", p.State)
	}
	p, _ := q.EnterFrom(ctx, "d0002", time.Hour, fast)
	if p.State != RateLimited || p.RetryAfter > 100*time.Millisecond {
		t.Fatalf("second entry at once: %v after %s, want RateLimited within 100 ms", p.State, p.RetryAfter)
	}
	time.Sleep(p.RetryAfter + 10*time.Millisecond)
	if p, _ := q.EnterFrom(ctx, "d0002", time.Hour, fast); p.State != Waiting {
		t.Fatalf("after RetryAfter: %v, want a place", p.State)
	}

	if _, err := q.EnterFrom(ctx, "e0001", time.Hour, EntryLimit{Client: "x y", Burst: 1, PerMinute: 1}); err == nil {
		t.Fatal("a client name that is no address prefix was accepted")
	}
}
