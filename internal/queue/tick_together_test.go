package queue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestTicksTogetherShareRoundTrips: rooms of one store that tick at the same moment share round
// trips, and each gets its own admission, plan and reads; a queue without a store ticks alone.
func TestTicksTogetherShareRoundTrips(t *testing.T) {
	ctx := context.Background()
	rdb := startClient(t)
	store := NewStore(rdb, StoreOptions{})
	t.Cleanup(store.Close)
	const rooms = 100
	queues := make([]*Queue, rooms)
	for i := range queues {
		q, err := store.Queue("together", fmt.Sprintf("room-%03d", i))
		if err != nil {
			t.Fatal(err)
		}
		queues[i] = q
		enterAll(t, q, "a", "b", "c")
	}
	plan := PublishedPlan{Quota: mustQuota(t, 14, 100*time.Millisecond), PollMin: time.Second, PollMax: 5 * time.Second, AbandonAfter: time.Hour}

	// Redis holds the first round trip while the other rooms' ticks come, so they all wait for the
	// next one.
	if err := rdb.Do(ctx, "CLIENT", "PAUSE", "300", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	replies := make([]TickReplies, rooms)
	var wg sync.WaitGroup
	for i, q := range queues {
		wg.Go(func() {
			callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			replies[i] = q.TickTogether(callCtx, TickCalls{
				Admit: AdmitRequest{TickID: 1, Limit: 1, PassTTL: time.Minute, AbandonAfter: time.Hour},
				Plan:  &plan, Observe: &ObserveRequest{ProxyMaxAge: time.Minute},
			})
		})
	}
	wg.Wait()
	for i, r := range replies {
		if r.AdmitErr != nil || r.PlanErr != nil || r.ObserveErr != nil {
			t.Fatalf("room %d: %v, %v, %v", i, r.AdmitErr, r.PlanErr, r.ObserveErr)
		}
		if len(r.Admit.Admitted) != 1 || r.Admit.Admitted[0].ID != "a" || r.Observation.Stats.Depth != 2 || r.Observation.Stats.Active != 1 {
			t.Errorf("room %d: admitted %+v and read %+v; want a admitted, 2 waiting and 1 active", i, r.Admit.Admitted, r.Observation.Stats)
		}
		if p, err := queues[i].ReadPlan(ctx); err != nil || p.Quota != plan.Quota {
			t.Errorf("room %d: plan %+v, %v", i, p, err)
		}
	}
	roundTrips, ticks := store.TickRoundTrips()
	if ticks != rooms || roundTrips > 3 {
		t.Errorf("%d ticks took %d round trips, want %d ticks in at most 3", ticks, roundTrips, rooms)
	}

	// An invalid tick fails alone; a valid one after it goes through.
	bad := queues[0].TickTogether(ctx, TickCalls{Admit: AdmitRequest{TickID: 2, Limit: 1}})
	good := queues[1].TickTogether(ctx, TickCalls{Admit: AdmitRequest{TickID: 2, Limit: 1, PassTTL: time.Minute, AbandonAfter: time.Hour}})
	if bad.AdmitErr == nil || good.AdmitErr != nil || len(good.Admit.Admitted) != 1 {
		t.Errorf("invalid tick: %v; valid one: %+v, %v", bad.AdmitErr, good.Admit, good.AdmitErr)
	}

	alone := newQueue(t, rdb)
	enterAll(t, alone, "x")
	if r := alone.TickTogether(ctx, TickCalls{Admit: AdmitRequest{TickID: 1, Limit: 1, PassTTL: time.Minute, AbandonAfter: time.Hour}}); r.AdmitErr != nil || len(r.Admit.Admitted) != 1 {
		t.Errorf("a queue without a store: %+v", r)
	}

	store.Close()
	if r := queues[2].TickTogether(ctx, TickCalls{Admit: AdmitRequest{TickID: 3, Limit: 1, PassTTL: time.Minute, AbandonAfter: time.Hour}}); r.AdmitErr == nil {
		t.Error("a closed store took a tick")
	}
}
