package herd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// The stand-in service must behave like a pool: orders beyond it wait, and fail after the timeout.
func TestBackendBehavesLikeAConnectionPool(t *testing.T) {
	b := NewBackend(2, 100*time.Millisecond, 150*time.Millisecond)
	srv := httptest.NewServer(b)
	defer srv.Close()
	codes := make([]int, 5)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() {
			res, err := http.Post(srv.URL+"/api/v1/orders", "application/json", nil)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			codes[i] = res.StatusCode
		})
	}
	wg.Wait()
	ok, unavailable := 0, 0
	for _, c := range codes {
		switch c {
		case http.StatusOK:
			ok++
		case http.StatusServiceUnavailable:
			unavailable++
		}
	}
	s := b.Stats()
	// Two hold 0–100 ms, two wait 100 ms and hold until 200 ms, the fifth would wait 200 ms > 150 ms.
	if ok != 4 || unavailable != 1 || s.Orders != 4 || s.Timeouts != 1 {
		t.Fatalf("5 orders on 2 connections: %d ok, %d timed out (stats %d/%d); want 4 and 1", ok, unavailable, s.Orders, s.Timeouts)
	}
	if s.PeakInFlight != 5 || s.PeakArrivals(time.Second) != 5 {
		t.Fatalf("peak in flight %d, peak arrivals %d; want 5 and 5", s.PeakInFlight, s.PeakArrivals(time.Second))
	}
	if s.PoolWaitP95 < 100*time.Millisecond {
		t.Fatalf("pool wait p95 = %s, want the waits of the queued orders", s.PoolWaitP95)
	}
	if len(s.Series) != 10 || s.Series[len(s.Series)-1].InFlight != 0 {
		t.Fatalf("in-flight series has %d points ending at %v; want 10 ending at 0", len(s.Series), s.Series[len(s.Series)-1])
	}
	b.Reset()
	if s := b.Stats(); s.Orders != 0 || len(s.Arrivals) != 0 {
		t.Fatalf("stats after Reset: %+v", s)
	}
}

// A small herd through a real proxy, scheduler and Redis: every visitor orders, within the pool.
func TestExperimentRunsAHerdThroughTheWaitingRoom(t *testing.T) {
	runs, err := Experiment(context.Background(), []RunSpec{{Test: "B", Visitors: 40, Batch: 14, Jitter: herdgatev1alpha1.JitterUniform}}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := runs[0]
	if r.Visitors.OrdersOK != 40 || r.Visitors.Failed != 0 || r.Backend.Orders != 40 {
		t.Fatalf("%d of 40 visitors ordered (%v); the service counted %d", r.Visitors.OrdersOK, r.Visitors.Errors, r.Backend.Orders)
	}
	if r.Backend.PeakInFlight > PoolSize {
		t.Fatalf("batch 14 with jitter put %d orders in the service, more than its pool of %d", r.Backend.PeakInFlight, PoolSize)
	}
	if r.Visitors.PassWaitP95 <= 0 || r.Visitors.RequestP95 <= 0 {
		t.Fatalf("visitors measured nothing: %+v", r.Visitors)
	}
}

// A small launch: the report's measures come from a real draw, proxy, scheduler and Redis.
func TestALaunchReportsTheDrawAndTheCap(t *testing.T) {
	res, err := Launch(context.Background(), LaunchSpec{PreQueued: 300, Late: 30, Trickle: 5, PreQueue: 3 * time.Second, MaxActive: 20}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if res.VerifyErr != nil || res.OrdersBeforeOpening != 0 {
		t.Fatalf("the draw: %v; %d orders before the opening", res.VerifyErr, res.OrdersBeforeOpening)
	}
	if res.RhoPreQueue < -0.25 || res.RhoPreQueue > 0.25 || res.RhoLate < 0.9 {
		t.Fatalf("ρ pre-queue %.3f (want near 0), after the opening %.3f (want near 1)", res.RhoPreQueue, res.RhoLate)
	}
	if res.PeakActive == 0 || res.PeakActive > int64(res.MaxActive) {
		t.Fatalf("peak active %d, cap %d", res.PeakActive, res.MaxActive)
	}
	if res.AtOnce != res.Trickle {
		t.Fatalf("%d of %d trickling visitors were admitted at once", res.AtOnce, res.Trickle)
	}
	if res.Draw.Size != 300 || !res.Draw.Done || res.Draw.Calls == 0 || res.Draw.LongestCall <= 0 {
		t.Fatalf("the scheduler's draw: %+v", res.Draw)
	}
	var report strings.Builder
	LaunchReport(&report, res)
	for _, want := range []string{"every place recomputed from the seed matches the record", "of `maxActive` 20", "5 of 5"} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, report.String())
		}
	}
}

// TestLanesKeepTheirSharesThroughAnEvent: a short herd into a room with two metered lanes and an
// event of more capacity in the middle: every window admits each lane its share, within 2 %, at the
// window's plan, and every visitor orders.
func TestLanesKeepTheirSharesThroughAnEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("a herd of 1,000 visitors")
	}
	res, err := Lanes(context.Background(), LanesSpec{Main: 500, Members: 200, Presale: 300, MembersPercent: 20, PresalePercent: 30,
		Before: 2 * time.Second, Event: 2 * time.Second, After: 2 * time.Second, EventUtilization: 100}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var report strings.Builder
	LanesReport(&report, res)
	t.Log("\n" + report.String())
	if res.Failed != 0 {
		t.Fatalf("%d visitors did not order: %v", res.Failed, res.Errors)
	}
	for i, want := range []int64{14, 20, 14} {
		w := res.Windows[i]
		if w.Unfinished || w.PerTick != want || w.Ticks < 19 {
			t.Fatalf("window %q: %d ticks of %d (unfinished %t); want about 20 of %d, every lane busy", w.Name, w.Ticks, w.PerTick, w.Unfinished, want)
		}
	}
	if e := res.ShareError(); e > 0.02 {
		t.Fatalf("a lane's share is %.2f %% off its plan; want within 2 %%", 100*e)
	}
}

// TestAVisitorOrdersAgainWhenTheGatewaysCapRefusesIt: an order refused with the room's busy answer
// (503, workload_busy, Retry-After) is sent again with the same pass after Retry-After, and
// counted; any other 503 of the workload's is a failed order.
func TestAVisitorOrdersAgainWhenTheGatewaysCapRefusesIt(t *testing.T) {
	var orders atomic.Int64
	busyFor := int64(1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.herdgate/enter":
			fmt.Fprint(w, `{"admitted":true,"pass":"p"}`)
		case "/api/v1/orders":
			if r.Header.Get("X-Herdgate-Pass") != "p" {
				w.WriteHeader(http.StatusForbidden)
				return
			}
			if orders.Add(1) <= busyFor {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprint(w, `{"error":"workload_busy"}`)
				return
			}
			fmt.Fprint(w, `{}`)
		case "/api/v1/orders/unavailable":
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":"database_down"}`)
		}
	}))
	defer srv.Close()
	res := Run(context.Background(), Scenario{Visitors: 1, Target: srv.URL, OrderPath: "/api/v1/orders", GiveUp: 10 * time.Second})
	if res.OrdersOK != 1 || res.Busy != 1 || orders.Load() != 2 {
		t.Errorf("a busy order: %d ok, %d busy, %d sent; want it sent again once and served", res.OrdersOK, res.Busy, orders.Load())
	}
	res = Run(context.Background(), Scenario{Visitors: 1, Target: srv.URL, OrderPath: "/api/v1/orders/unavailable", GiveUp: 10 * time.Second})
	if res.OrdersOK != 0 || res.Busy != 0 {
		t.Errorf("a workload's own 503: %d ok, %d busy; want a failed order, not tried again", res.OrdersOK, res.Busy)
	}
}
