package scheduler

import (
	"math"
	"testing"
	"time"

	"github.com/herdgate/herdgate/internal/queue"
)

// TestMergingTheReplicasReports: the scheduler takes each replica's differences since its last
// report, keeps a silent replica's in-flight until its report ages out, and takes a replica seen for
// the first time, or restarted, as a baseline.
func TestMergingTheReplicasReports(t *testing.T) {
	w := &workloadState{}
	now := time.Unix(1000, 0)
	rep := func(name, epoch string, elapsedMs, requests, errs, latencyMs, flightMs int64, buckets ...int64) queue.WorkloadReport {
		return queue.WorkloadReport{Replica: name, Epoch: epoch, ElapsedMicros: elapsedMs * 1000, Requests: requests, Errors: errs,
			LatencyMicros: latencyMs * 1000, FlightMicros: flightMs * 1000, Buckets: buckets}
	}
	read := func(reports ...queue.WorkloadReport) (reporting int, requests, errs int64, inFlight float64, latency time.Duration) {
		now = now.Add(100 * time.Millisecond)
		m := w.merge(queue.WorkloadReading{Now: now, Reports: reports}, now)
		return m.Reporting, m.Requests, m.Errors, m.InFlight, m.Latency
	}
	check := func(step string, gotR int, gotN, gotE int64, gotF float64, gotL time.Duration, r int, n, e int64, f float64, l time.Duration) {
		t.Helper()
		if gotR != r || gotN != n || gotE != e || gotF != f || gotL != l {
			t.Fatalf("%s: reporting %d, requests %d, errors %d, in flight %v, latency %s; want %d, %d, %d, %v, %s",
				step, gotR, gotN, gotE, gotF, gotL, r, n, e, f, l)
		}
	}
	r, n, e, f, l := read(rep("a", "1", 1000, 100, 0, 20000, 20000), rep("b", "1", 500, 10, 0, 1000, 1000))
	check("first sight: baselines", r, n, e, f, l, 0, 0, 0, 0, 0)
	// a: 14 requests of 200 ms over 100 ms, 28 in flight; b: 10 of 400 ms, 2 failed, 40 in flight.
	r, n, e, f, l = read(rep("a", "1", 1100, 114, 0, 22800, 22800, 0, 14), rep("b", "1", 600, 20, 2, 5000, 5000, 0, 0, 10))
	check("differences", r, n, e, f, l, 2, 24, 2, 68, time.Duration(6800000/24)*time.Microsecond)
	// b sends nothing new: its in-flight stands, it adds no requests.
	r, n, e, f, l = read(rep("a", "1", 1200, 128, 0, 25600, 25600), rep("b", "1", 600, 20, 2, 5000, 5000))
	check("b silent", r, n, e, f, l, 2, 14, 0, 68, 200*time.Millisecond)
	// b restarted: a new epoch is a baseline.
	r, n, e, f, l = read(rep("a", "1", 1300, 142, 0, 28400, 28400), rep("b", "2", 10, 1, 0, 100, 100))
	check("b restarted", r, n, e, f, l, 1, 14, 0, 28, 200*time.Millisecond)
	// b aged out of Redis' reading: gone; nobody at all: nothing measured.
	r, _, _, f, _ = read(rep("a", "1", 1400, 142, 0, 28400, 28400))
	check("b gone", r, 0, 0, f, 0, 1, 0, 0, 0, 0)
	r, n, e, f, l = read()
	check("nobody", r, n, e, f, l, 0, 0, 0, 0, 0)

	// The status' quantiles come from the merged histogram's buckets.
	var buckets []int64
	buckets = addBuckets(buckets, []int64{0, 5, 0, 5}, nil)
	if p50, p95 := quantile(buckets, 0.5), quantile(buckets, 0.95); p50 != time.Duration(queue.LatencyBuckets[1])*time.Microsecond ||
		p95 != time.Duration(queue.LatencyBuckets[3])*time.Microsecond {
		t.Fatalf("p50 %s, p95 %s", p50, p95)
	}
	if quantile(nil, 0.5) != 0 {
		t.Fatal("a quantile of nothing is not zero")
	}
}

// TestTheWaitEstimatesAccuracyIsReadOverMinutes: the replicas' counts of the first estimates they
// judged are merged like their requests, and the status reads their 90th percentile over the last
// estimateWindow, beyond which a judged estimate no longer counts.
func TestTheWaitEstimatesAccuracyIsReadOverMinutes(t *testing.T) {
	w := &workloadState{}
	now := time.Unix(1000, 0)
	rep := func(name string, elapsed time.Duration, counts ...int64) queue.WorkloadReport {
		return queue.WorkloadReport{Replica: name, Epoch: "1", ElapsedMicros: elapsed.Microseconds(), EstimateErrors: counts}
	}
	read := func(at time.Duration, reports ...queue.WorkloadReport) {
		w.merge(queue.WorkloadReading{Now: now.Add(at), Reports: reports}, now.Add(at))
	}
	read(0, rep("a", time.Second, 50), rep("b", time.Second, 50))
	if judged, _ := w.estimateAccuracy(); judged != 0 {
		t.Fatalf("baselines judged %d", judged)
	}
	// 80 within 2 %, 10 within 10 % and 10 within 15 %: the 90th percentile is 10 %.
	read(time.Second, rep("a", 2*time.Second, 100, 0, 10), rep("b", 2*time.Second, 80, 0, 0, 10))
	if judged, p90 := w.estimateAccuracy(); judged != 100 || p90 != 0.1 {
		t.Fatalf("judged %d, p90 %v; want 100 and 0.1", judged, p90)
	}
	// Later, one replica judged 50 beyond every bound: they are the 90th percentile now.
	read(2*time.Second, rep("a", 3*time.Second, 100, 0, 10, 0, 0, 0, 0, 0, 0, 50), rep("b", 3*time.Second, 80, 0, 0, 10))
	if judged, p90 := w.estimateAccuracy(); judged != 150 || !math.IsInf(p90, 1) {
		t.Fatalf("judged %d, p90 %v; want 150 and beyond the last bound", judged, p90)
	}
	// Five minutes on, what was judged then is forgotten.
	read(estimateWindow+3*time.Second, rep("a", estimateWindow, 100, 0, 10, 0, 0, 0, 0, 0, 0, 50), rep("b", estimateWindow, 81, 0, 0, 10))
	if judged, p90 := w.estimateAccuracy(); judged != 1 || p90 != 0.02 {
		t.Fatalf("judged %d, p90 %v; want the 1 judged since, within 2 %%", judged, p90)
	}
}
