package replica

import (
	"slices"
	"testing"
	"time"

	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/queue"
)

// TestTheMeterKeepsRunningTotals: requests, errors, latency and time in flight add up across takes,
// which report totals (the scheduler takes differences); a pass's first use is reported once, and a
// use given back after a failed report goes with the next.
func TestTheMeterKeepsRunningTotals(t *testing.T) {
	m := NewWorkloadMeter()
	start := m.Begin()
	second := m.Begin()
	time.Sleep(2 * time.Millisecond) // both in flight a while: the integral grows
	m.End(start, false)
	m.End(second, true)
	now := time.Now()
	nb := now.Add(-time.Second)
	p := pass.Pass{Visitor: "ada", NotBefore: nb, Expiry: nb.Add(time.Minute)}
	m.Used(p, now)
	m.Used(p, now)
	m.Used(pass.Pass{Visitor: "old", NotBefore: now.Add(-2 * useWindow), Expiry: now}, now) // too old to count
	r, uses := m.Take(now)
	if r.Requests != 2 || r.Errors != 1 || r.LatencyMicros < 2*2000 || r.FlightMicros < 2*2000 || r.Epoch == "" {
		t.Fatalf("first take: %+v", r)
	}
	if len(uses) != 1 || uses[0].Second != nb.Unix() {
		t.Fatalf("uses %v, want ada's once", uses)
	}
	if n := bucketed(r); n != 2 {
		t.Fatalf("latency buckets %v hold %d requests, want 2", r.Buckets, n)
	}
	m.GiveBack(uses)
	m.End(m.Begin(), false)
	again, uses := m.Take(time.Now())
	if again.Requests != 3 || again.Errors != 1 || again.Epoch != r.Epoch || again.ElapsedMicros < r.ElapsedMicros {
		t.Fatalf("second take: %+v, want running totals of the same epoch", again)
	}
	if len(uses) != 1 {
		t.Fatalf("a use given back was lost: %v", uses)
	}
	if _, uses := m.Take(time.Now()); len(uses) != 0 {
		t.Fatalf("a use reported twice: %v", uses)
	}
}

// TestTheMeterCountsTheJudgedEstimatesByTheirError: each judged estimate lands in the bucket of its
// relative error, one beyond the last bound for the worst, and the counts run on across takes.
func TestTheMeterCountsTheJudgedEstimatesByTheirError(t *testing.T) {
	m := NewWorkloadMeter()
	if r, _ := m.Take(time.Now()); r.EstimateErrors != nil {
		t.Fatalf("nothing judged yet, counts %v", r.EstimateErrors)
	}
	m.Judged(0.01)
	m.Judged(0.12)
	r, _ := m.Take(time.Now())
	if want := []int64{1, 0, 0, 1}; !slices.Equal(r.EstimateErrors, want) {
		t.Fatalf("counts %v, want %v", r.EstimateErrors, want)
	}
	m.Judged(5)
	r, _ = m.Take(time.Now())
	if want := []int64{1, 0, 0, 1, 0, 0, 0, 0, 0, 1}; !slices.Equal(r.EstimateErrors, want) {
		t.Fatalf("counts %v, want %v", r.EstimateErrors, want)
	}
}

// TestTheMeterCountsWhatTheWorkloadTells: a request the workload tells of at its release counts as
// one that ended here, its length in the latency and in the in-flight integral, its failure as an
// error.
func TestTheMeterCountsWhatTheWorkloadTells(t *testing.T) {
	m := NewWorkloadMeter()
	m.Told(200*time.Millisecond, false)
	m.Told(300*time.Millisecond, true)
	r, _ := m.Take(time.Now())
	if r.Requests != 2 || r.Errors != 1 || r.LatencyMicros != 500_000 || r.FlightMicros != 500_000 {
		t.Fatalf("take: %+v; want 2 requests, 1 error, 0.5 s of latency and of flight", r)
	}
	if n := bucketed(r); n != 2 {
		t.Fatalf("latency buckets %v hold %d requests, want 2", r.Buckets, n)
	}
}

// bucketed is how many requests r's latency buckets hold.
func bucketed(r queue.WorkloadReport) (n int64) {
	for _, b := range r.Buckets {
		n += b
	}
	return n
}
