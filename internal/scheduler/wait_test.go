package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
)

func TestTheArrivalClockBoundsWhenAVisitorEntered(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var c arrivalClock
	if _, ok := c.entered(1); ok {
		t.Fatal("a clock without readings timed a visitor")
	}
	c.mark(10, at(0))
	c.mark(10, at(100)) // nobody entered: no new mark
	c.mark(25, at(200))
	c.mark(40, at(300))
	for _, tc := range []struct {
		arrival int64
		want    time.Time
		ok      bool
	}{
		{5, time.Time{}, false}, // entered before the first reading
		{10, time.Time{}, false},
		{11, at(200), true},
		{25, at(200), true},
		{26, at(300), true},
		{40, at(300), true},
		{41, time.Time{}, false}, // no reading includes it yet
	} {
		if got, ok := c.entered(tc.arrival); ok != tc.ok || !got.Equal(tc.want) {
			t.Errorf("entered(%d) = %s, %t; want %s, %t", tc.arrival, got, ok, tc.want, tc.ok)
		}
	}

	// Admitting arrival 30 leaves the mark below it as the lower bound of the rest.
	c.forgetBefore(30)
	if len(c.marks) != 2 {
		t.Errorf("after forgetting below 30: %d marks, want the two at and above 25", len(c.marks))
	}
	if got, ok := c.entered(31); !ok || !got.Equal(at(300)) {
		t.Errorf("after forgetting below 30: entered(31) = %s, %t; want %s", got, ok, at(300))
	}

	// Redis lost its sequence: the clock starts over from the new reading.
	c.mark(3, at(400))
	if _, ok := c.entered(3); ok {
		t.Error("a visitor of the restarted sequence up to the new first reading was timed")
	}
	c.mark(8, at(500))
	if got, ok := c.entered(4); !ok || !got.Equal(at(500)) {
		t.Errorf("after the restart: entered(4) = %s, %t; want %s", got, ok, at(500))
	}
}

// A long wait thins the marks, but every arrival stays bounded by a reading at or after it, and
// within 1/256 of the span and a tick of the truth.
func TestTheArrivalClockStaysBoundedOverALongWait(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	var c arrivalClock
	const ticks = 36_000 // an hour of 100 ms ticks, a visitor entering at each
	for i := range ticks + 1 {
		c.mark(int64(i), t0.Add(time.Duration(i)*100*time.Millisecond))
	}
	if len(c.marks) > maxArrivalMarks {
		t.Fatalf("%d marks kept, want at most %d", len(c.marks), maxArrivalMarks)
	}
	span := time.Duration(ticks) * 100 * time.Millisecond
	for _, arrival := range []int64{1, 2, 17, 1000, 18_000, 35_999, ticks} {
		truth := t0.Add(time.Duration(arrival) * 100 * time.Millisecond)
		got, ok := c.entered(arrival)
		if limit := span/256 + 100*time.Millisecond; !ok || got.Before(truth) || got.Sub(truth) > limit {
			t.Errorf("entered(%d) = %s, %t; want within %s after %s", arrival, got, ok, limit, truth)
		}
	}
}

// TestAdmittedVisitorsWaitsAreMeasured: the ticks' readings of the arrival sequence time each admitted
// visitor from entering to its pass, and those admitted on entering count as no wait.
func TestAdmittedVisitorsWaitsAreMeasured(t *testing.T) {
	h := newHarness(t, WithIdleSleep(0))
	t.Cleanup(func() { forgetQueueMetrics("test", "waits") })
	h.s.Ensure(h.queue("waits", builder.Queue("", "")))
	h.mustStep(100 * time.Millisecond)

	// Nobody waits: the first tick left 14 to admit at once; the other 86 wait.
	h.fill("waits", 100)
	if r := h.mustStep(100 * time.Millisecond); len(r.Result.Admitted) != 14 {
		t.Fatalf("second tick admitted %d, want 14", len(r.Result.Admitted))
	}
	got := waitsOf(t, "waits")
	if got.GetSampleCount() != 14 || cumulative(got, 0.1) != 14 {
		t.Fatalf("after the visitors' first tick: %d waits, %d of them up to 0.1 s; want 14 within the tick's window",
			got.GetSampleCount(), cumulative(got, 0.1))
	}
	time.Sleep(1200 * time.Millisecond) // Redis' clock times the waits
	if r := h.mustStep(100 * time.Millisecond); len(r.Result.Admitted) != 14 {
		t.Fatalf("third tick admitted %d, want 14", len(r.Result.Admitted))
	}
	got = waitsOf(t, "waits")
	if got.GetSampleCount() != 28 || cumulative(got, 1) != 14 || cumulative(got, 5) != 28 {
		t.Fatalf("after a tick 1.2 s later: %d waits, %d up to 1 s and %d up to 5 s; want 28, 14 and 28",
			got.GetSampleCount(), cumulative(got, 1), cumulative(got, 5))
	}

	// The stats read every 2 s finds the 14 admitted at once, and the replicas that report.
	for _, replica := range []string{"proxy-a", "proxy-b"} {
		if err := h.engine("waits").ReportProxy(context.Background(), queue.ProxyReport{Replica: replica, Generation: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		h.mustStep(100 * time.Millisecond)
	}
	if got := waitsOf(t, "waits").GetSampleCount(); got != 100 {
		t.Fatalf("after the queue drained: %d waits timed, want all 100 (86 waited, 14 at once)", got)
	}
	if got := gaugeValue(t, proxiesReportingGauge.WithLabelValues("test", "waits")); got != 2 {
		t.Fatalf("herdgate_proxies_reporting = %v, want the 2 replicas that reported", got)
	}
	if got := gaugeValue(t, pollBudgetHoldsGauge.WithLabelValues("test", "waits")); got != 1 {
		t.Fatalf("herdgate_poll_budget_holds = %v with nobody waiting, want 1", got)
	}
}

// A scheduler that takes over a room does not know when its waiting visitors entered: it times none
// of them rather than a wrong wait.
func TestWaitsBeforeTheFirstReadingAreNotTimed(t *testing.T) {
	h := newHarness(t, WithIdleSleep(0))
	t.Cleanup(func() { forgetQueueMetrics("test", "before") })
	h.fill("before", 30)
	h.s.Ensure(h.queue("before", builder.Queue("", "")))
	if r := h.mustStep(100 * time.Millisecond); len(r.Result.Admitted) != 14 {
		t.Fatalf("first tick admitted %d, want 14", len(r.Result.Admitted))
	}
	h.fill("before", 31) // v00000 … v00029 wait already: one more enters
	h.mustStep(100 * time.Millisecond)
	h.mustStep(100 * time.Millisecond)
	if got := waitsOf(t, "before").GetSampleCount(); got != 1 {
		t.Fatalf("%d waits timed, want only the visitor who entered after the first reading", got)
	}
}

func waitsOf(t *testing.T, name string) *dto.Histogram {
	t.Helper()
	m := &dto.Metric{}
	if err := waitHistogram.WithLabelValues("test", name).(prometheus.Metric).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram()
}

// cumulative is how many observations of h fall up to the bucket bound le.
func cumulative(h *dto.Histogram, le float64) uint64 {
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == le {
			return b.GetCumulativeCount()
		}
	}
	return 0
}
