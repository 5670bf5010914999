package queue

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestTickMakesItsCallsInOrder: Tick admits, publishes the plan and then reads counters that include
// the admission, also on a Redis that lost its scripts; a failing plan does not undo the admission,
// and an invalid admission makes no call at all.
func TestTickMakesItsCallsInOrder(t *testing.T) {
	ctx := context.Background()
	rdb := startClient(t)
	q := newQueue(t, rdb)
	enterAll(t, q, "a", "b", "c", "d", "e")
	plan := PublishedPlan{Quota: mustQuota(t, 14, 100*time.Millisecond), PollMin: time.Second, PollMax: 5 * time.Second, AbandonAfter: time.Hour}
	admit := func(tick int64) AdmitRequest {
		return AdmitRequest{TickID: tick, Limit: 2, PassTTL: time.Minute, AbandonAfter: time.Hour}
	}

	check := func(what string, tick int64, wantDepth, wantActive int64) {
		t.Helper()
		got := q.Tick(ctx, TickCalls{Admit: admit(tick), Plan: &plan, Observe: &ObserveRequest{ProxyMaxAge: time.Minute}})
		if got.AdmitErr != nil || got.PlanErr != nil || got.ObserveErr != nil {
			t.Fatalf("%s: errors %v, %v, %v", what, got.AdmitErr, got.PlanErr, got.ObserveErr)
		}
		if len(got.Admit.Admitted) != 2 {
			t.Errorf("%s: admitted %+v, want 2", what, got.Admit.Admitted)
		}
		if s := got.Observation.Stats; s.Depth != wantDepth || s.Active != wantActive {
			t.Errorf("%s: read depth %d and active %d, want %d and %d: the reads must follow the admission", what, s.Depth, s.Active, wantDepth, wantActive)
		}
		read, err := q.ReadPlan(ctx)
		if err != nil || read.Quota != plan.Quota || read.PollMax != plan.PollMax {
			t.Errorf("%s: plan read back %+v, %v; want %+v", what, read, err, plan)
		}
	}
	check("scripts loaded", 1, 3, 2)
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, q.keys.plan).Err(); err != nil {
		t.Fatal(err)
	}
	check("after SCRIPT FLUSH", 2, 1, 4)

	enterAll(t, q, "f", "g")
	bad := plan
	bad.Phase = "Sideways"
	got := q.Tick(ctx, TickCalls{Admit: admit(3), Plan: &bad, Observe: &ObserveRequest{ProxyMaxAge: time.Minute}})
	if got.AdmitErr != nil || len(got.Admit.Admitted) != 2 || got.ObserveErr != nil || got.Observation.Stats.Active != 6 {
		t.Errorf("with a bad plan: admission %+v, %v and reads %+v, %v; want 2 admitted and 6 active", got.Admit, got.AdmitErr, got.Observation.Stats, got.ObserveErr)
	}
	if got.PlanErr == nil || !strings.Contains(got.PlanErr.Error(), "Sideways") {
		t.Errorf("with a bad plan: plan error %v, want one naming the phase", got.PlanErr)
	}

	invalid := admit(4)
	invalid.PassTTL = 0
	got = q.Tick(ctx, TickCalls{Admit: invalid, Observe: &ObserveRequest{ProxyMaxAge: time.Minute}})
	if got.AdmitErr == nil || got.Observation.Stats.Now != (time.Time{}) {
		t.Errorf("with an invalid admission: %+v, want an error and no reads", got)
	}
	if s, err := q.Stats(ctx); err != nil || s.Depth != 1 {
		t.Errorf("after an invalid admission: depth %d, %v; want 1 still waiting", s.Depth, err)
	}

	// Without a plan or reads, Tick is Admit.
	got = q.Tick(ctx, TickCalls{Admit: admit(5)})
	if got.AdmitErr != nil || len(got.Admit.Admitted) != 1 || got.Observation.Stats.Now != (time.Time{}) {
		t.Errorf("admission alone: %+v", got)
	}
}
