package admission_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/pass"
)

// TestTheGateMeasuresTheWorkload: on both fronts, the protected requests (and only they) are counted
// with their latency, their time in flight and the upstream's failures, and a pass's first use is
// recorded once however often it is used.
func TestTheGateMeasuresTheWorkload(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		const think = 40 * time.Millisecond
		workload := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/api/v1/orders/direct" {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			time.Sleep(think)
		}))
		defer workload.Close()
		h := newMemoryHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Identity = &herdgatev1alpha1.IdentitySpec{Header: "X-User-Id"}
			wq.Spec.Upstream = herdgatev1alpha1.UpstreamSpec{URL: &workload.URL}
		})
		now := time.Now()
		notBefore := now.Add(-time.Second)
		token := h.room.Config().Signer.Issue("user-1", notBefore, now.Add(time.Minute))
		v := h.visitor()
		v.header.Set("X-User-Id", "user-1")

		before, _ := h.room.WorkloadMeter().Take(time.Now())
		for range 3 {
			if r := v.do(http.MethodPost, "/api/v1/orders", nil, admission.PassHeader, token); r.StatusCode != http.StatusOK {
				t.Fatalf("an order with the pass: %d %s", r.StatusCode, r.body)
			}
		}
		if r := v.do(http.MethodPost, "/api/v1/orders/direct", nil, admission.PassHeader, token); r.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("the failing route: %d", r.StatusCode)
		}
		if r := v.do(http.MethodGet, "/open", nil); r.StatusCode != http.StatusOK {
			t.Fatalf("an open route: %d", r.StatusCode)
		}
		// A protected request without a pass never reaches the upstream: nothing to measure.
		if r := h.visitor().do(http.MethodPost, "/api/v1/orders", nil, "X-User-Id", "user-2"); r.StatusCode != http.StatusForbidden {
			t.Fatalf("no pass: %d", r.StatusCode)
		}
		after, uses := h.room.WorkloadMeter().Take(time.Now())

		if n, e := after.Requests-before.Requests, after.Errors-before.Errors; n != 4 || e != 1 {
			t.Fatalf("measured %d protected requests, %d failed; want 4 and 1", n, e)
		}
		latency := time.Duration(after.LatencyMicros-before.LatencyMicros) * time.Microsecond
		flight := time.Duration(after.FlightMicros-before.FlightMicros) * time.Microsecond
		if latency < 3*think {
			t.Fatalf("latency sum %s, want at least three times %s", latency, think)
		}
		// One request at a time: the integral of requests in flight is the sum of their latencies.
		if d := flight - latency; d < -time.Millisecond || d > time.Millisecond {
			t.Fatalf("time in flight %s against latency %s", flight, latency)
		}
		var counted int64
		for i, c := range after.Buckets {
			if i < len(before.Buckets) {
				c -= before.Buckets[i]
			}
			counted += c
		}
		if counted != 4 {
			t.Fatalf("the latency histogram counted %d requests, want 4", counted)
		}
		if len(uses) != 1 || uses[0].Second != notBefore.Unix() || !strings.HasPrefix(uses[0].ID, "user-1@") {
			t.Fatalf("pass uses %+v, want user-1's once, in the second of its not-before", uses)
		}
		if _, again := h.room.WorkloadMeter().Take(time.Now()); len(again) != 0 {
			t.Fatalf("uses taken twice: %+v", again)
		}
	})
}

// TestAReplicaReportsItsWorkloadToRedis: a named replica writes its totals and pass uses to Redis on
// its own, every tick of an Adaptive queue.
func TestAReplicaReportsItsWorkloadToRedis(t *testing.T) {
	h := newHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.Capacity.Mode = herdgatev1alpha1.CapacityAdaptive
	})
	room, err := admission.NewRoom(h.room.Config(), h.store, admission.Options{Replica: "proxy-7"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); room.ReportWorkload(ctx) }()
	defer func() { cancel(); <-done }()
	nb := time.Now().Add(-time.Second)
	room.WorkloadMeter().Used(pass.Pass{Visitor: "user-1", NotBefore: nb, Expiry: nb.Add(time.Minute)}, time.Now())
	start := room.WorkloadMeter().Begin()
	room.WorkloadMeter().End(start, true)

	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := h.q.ReadWorkload(context.Background(), time.Minute, []int64{nb.Unix()})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Reports) == 1 && got.Reports[0].Replica == "proxy-7" && got.Reports[0].Errors == 1 && got.Used[nb.Unix()] == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis holds %+v; want proxy-7's report with one error and one use", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
