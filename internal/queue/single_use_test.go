package queue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestASingleUseTokenEntersOneVisitorOnly(t *testing.T) {
	ctx := context.Background()
	rdb := startClient(t)
	store := NewStore(rdb, StoreOptions{})
	defer store.Close()
	q, err := store.Queue("test", "single-use")
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour)
	with := func(ids ...string) EntryLimit {
		l := EntryLimit{}
		for _, id := range ids {
			l.SingleUse = append(l.SingleUse, SingleUse{ID: id, Until: until})
		}
		return l
	}

	// 200 visitors race with one token, in shared round trips: exactly one enters.
	var wg sync.WaitGroup
	var mu sync.Mutex
	states := map[State]int{}
	winner := ""
	for i := range 200 {
		wg.Go(func() {
			v := fmt.Sprintf("v%03d", i)
			p, err := q.EnterFrom(ctx, v, time.Hour, with("aa01"))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			states[p.State]++
			if p.State == Waiting {
				winner = v
			}
			if p.State == TokenSpent && p.Token != 0 {
				t.Errorf("TokenSpent names token %d, want 0", p.Token)
			}
		})
	}
	wg.Wait()
	if states[Waiting] != 1 || states[TokenSpent] != 199 {
		t.Fatalf("200 visitors with one token: %v, want 1 Waiting and 199 TokenSpent", states)
	}
	st, err := q.Stats(ctx)
	if err != nil || st.Depth != 1 {
		t.Fatalf("depth %d (%v), want the one place", st.Depth, err)
	}

	// The visitor it entered may present it again: enter is idempotent.
	if p, err := q.EnterFrom(ctx, winner, time.Hour, with("aa01")); err != nil || p.State != Waiting || p.Position != 1 {
		t.Fatalf("the token's own visitor again: %+v, %v; want its place 1", p, err)
	}
	// With a second, fresh token, the first one still decides, and the fresh one is not bound.
	if p, err := q.EnterFrom(ctx, "late", time.Hour, with("bb02", "aa01")); err != nil || p.State != TokenSpent || p.Token != 1 {
		t.Fatalf("a fresh and a spent token: %+v, %v; want TokenSpent naming token 1", p, err)
	}
	if p, err := q.EnterFrom(ctx, "other", time.Hour, with("bb02")); err != nil || p.State != Waiting {
		t.Fatalf("the fresh token, refused before: %+v, %v; want a place (it was not bound)", p, err)
	}
	// The token's key expires with the token.
	ttl, err := rdb.PTTL(ctx, q.prefix+":u:aa01").Result()
	if err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("the spent token's key lives %s (%v), want until the token's expiry (an hour)", ttl, err)
	}
	// Anything but lower-case hex never reaches a key.
	for _, id := range []string{"", "AB", "a:b", "zz", string(make([]byte, 65))} {
		if _, err := q.EnterFrom(ctx, "x", time.Hour, with(id)); err == nil {
			t.Errorf("token ID %q was accepted", id)
		}
	}
}
