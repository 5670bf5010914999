package scheduler

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
)

// TestARoomsSeriesFollowItsPhaseAndReason: the phase and the adaptive reason, written only when they
// change, still leave one series at 1 and the others at 0, and a Declared room no reason at all.
func TestARoomsSeriesFollowItsPhaseAndReason(t *testing.T) {
	const ns, name = "metrics-test", "drop"
	t.Cleanup(func() { forgetQueueMetrics(ns, name) })
	m := newQueueMetrics(ns, name)
	phaseIs := func(want phase.Phase) {
		t.Helper()
		for _, p := range phases {
			v := gaugeValue(t, phaseGauge.WithLabelValues(ns, name, string(p)))
			if (p == want) != (v == 1) || (v != 0 && v != 1) {
				t.Fatalf("herdgate_phase{phase=%q} = %v with the room %s", p, v, want)
			}
		}
	}
	m.setPhase(phase.PreQueue)
	phaseIs(phase.PreQueue)
	m.setPhase(phase.PreQueue)
	m.setPhase(phase.Open)
	phaseIs(phase.Open)

	reasons := func() int {
		ch := make(chan prometheus.Metric, 100)
		adaptiveReasonGauge.Collect(ch)
		close(ch)
		return len(ch)
	}
	before := reasons()
	m.setAdaptiveReason(capacity.ReasonLatencyAbove)
	if got := gaugeValue(t, adaptiveReasonGauge.WithLabelValues(ns, name, capacity.ReasonLatencyAbove)); got != 1 {
		t.Fatalf("herdgate_adaptive_reason{reason=%q} = %v, want 1", capacity.ReasonLatencyAbove, got)
	}
	m.setAdaptiveReason(capacity.ReasonFloor)
	if a, b := gaugeValue(t, adaptiveReasonGauge.WithLabelValues(ns, name, capacity.ReasonLatencyAbove)),
		gaugeValue(t, adaptiveReasonGauge.WithLabelValues(ns, name, capacity.ReasonFloor)); a != 0 || b != 1 {
		t.Fatalf("after the reason moved to %s: %v for the old one, %v for the new, want 0 and 1", capacity.ReasonFloor, a, b)
	}
	m.setAdaptiveReason("")
	if got := reasons(); got != before {
		t.Fatalf("a room back to Declared keeps %d adaptive-reason series, want %d", got-before, 0)
	}
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := g.Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// missedAre checks herdgate_ticks_missed_total of the room name in the namespace test.
func missedAre(t *testing.T, name string, madeUp, dropped float64) {
	t.Helper()
	value := func(outcome string) float64 {
		m := &dto.Metric{}
		if err := ticksMissedCounter.WithLabelValues("test", name, outcome).Write(m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	if m, d := value("made_up"), value("dropped"); m != madeUp || d != dropped {
		t.Fatalf("herdgate_ticks_missed_total: %v made up and %v dropped, want %v and %v", m, d, madeUp, dropped)
	}
}

// histogramMax is the upper bound of the highest bucket of o that holds an observation.
func histogramMax(t *testing.T, o prometheus.Observer) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := o.(prometheus.Metric).Write(m); err != nil {
		t.Fatal(err)
	}
	top, below := 0.0, uint64(0)
	for _, b := range m.GetHistogram().GetBucket() {
		if b.GetCumulativeCount() > below {
			top, below = b.GetUpperBound(), b.GetCumulativeCount()
		}
	}
	return top
}

// TestAShadowQueuesSeriesCountItsPlacesApart: a room's shadow places show in herdgate_shadow_depth
// and, from the first stats read on, in herdgate_shadowed_total by reason, never in
// herdgate_queue_depth; a room without a shadow queue has no such series.
func TestAShadowQueuesSeriesCountItsPlacesApart(t *testing.T) {
	h := newHarness(t)
	const name = "shadowed"
	t.Cleanup(func() { forgetQueueMetrics("test", name); forgetQueueMetrics("test", "plain") })
	q := h.engine(name)
	ctx := context.Background()
	shadow := func(prefix string, n int, limit queue.EntryLimit) {
		t.Helper()
		for i := range n {
			if _, err := q.EnterFrom(ctx, fmt.Sprintf("%s-%d", prefix, i), time.Hour, limit); err != nil {
				t.Fatal(err)
			}
		}
	}
	shadowed := func(reason string) float64 {
		t.Helper()
		m := &dto.Metric{}
		if err := shadowedCounter.WithLabelValues("test", name, reason).Write(m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	h.fill(name, 3)
	shadow("bot", 1, queue.EntryLimit{Shadow: true})
	wq := builder.Queue("", "").Capacity(1, time.Second, 100).ShadowQueue(false, 2).Obj()
	wq.Spec.Entry.PerClient = &herdgatev1alpha1.PerClientLimit{}
	h.s.Ensure(h.queue(name, builder.From(wq)))
	h.s.Ensure(h.queue("plain", builder.Queue("", "")))
	// Two rooms share the clock: a step may find one room back at its timer before the other's first
	// tick reports, which a loaded machine makes slow. Step until a tick reports.
	for i := 0; ; i++ {
		if r, ok := h.step(100 * time.Millisecond); ok {
			if r.Err != nil {
				t.Fatalf("tick failed: %v", r.Err)
			}
			break
		}
		if i == 50 {
			t.Fatal("no tick in 50 steps of 100ms")
		}
	}
	if c, o := shadowed("challenge_failed"), shadowed("over_entry_limit"); c != 0 || o != 0 {
		t.Fatalf("herdgate_shadowed_total at the first read: %v and %v; want both series at 0 (what came before is not this manager's)", c, o)
	}

	shadow("more", 2, queue.EntryLimit{Shadow: true})
	// One client with a burst of 1 and a factor of 2: a place, then shadow places from its second ask.
	shadow("flood", 3, queue.EntryLimit{Client: "203.0.113.7/32", Burst: 1, PerMinute: 1, ShadowFactor: 2})
	// Past the next stats read, which a loaded machine may finish a few ticks later than an idle one.
	var d, s, a float64
	for i := 0; i < 20 || (s != 5 && i < 200); i++ {
		// Two rooms share the clock: a step may see the other room back at its timer before this
		// one's tick reports. The figures below are what counts, so a step without a report is fine.
		_, _ = h.step(100 * time.Millisecond)
		admitted := &dto.Metric{}
		if err := admittedCounter.WithLabelValues("test", name).Write(admitted); err != nil {
			t.Fatal(err)
		}
		d, s, a = gaugeValue(t, queueDepthGauge.WithLabelValues("test", name)), gaugeValue(t, shadowDepthGauge.WithLabelValues("test", name)), admitted.GetCounter().GetValue()
		if i >= 20 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if a == 0 || d+a != 4 || s != 5 {
		t.Fatalf("herdgate_queue_depth %v after %v admitted, herdgate_shadow_depth %v; want the ticks to admit from the 4 real places and the 5 shadow places left", d, a, s)
	}
	if c, o := shadowed("challenge_failed"), shadowed("over_entry_limit"); c != 2 || o != 2 {
		t.Fatalf("herdgate_shadowed_total: %v for failed challenges and %v over the limit; want 2 and 2", c, o)
	}
	ch := make(chan prometheus.Metric, 100)
	shadowDepthGauge.Collect(ch)
	close(ch)
	if n := len(ch); n != 1 {
		t.Fatalf("%d herdgate_shadow_depth series; want only the room with a shadow queue's", n)
	}
}

// TestARoomMadeAnewKeepsItsSeriesWhenTheOldOneStops: a room stopped while its goroutine is still in a
// tick, and a room of the same name started before that goroutine ends (deleted and made again), share
// the series' labels. The old goroutine's end leaves the new room's series, which it made when it began
// and writes to; the last room's stop deletes them.
func TestARoomMadeAnewKeepsItsSeriesWhenTheOldOneStops(t *testing.T) {
	const name = "renewed"
	t.Cleanup(func() { forgetQueueMetrics("test", name) })
	// The old room's goroutine is held in its tick's report (generation 1) once the test says so.
	var (
		h              *schedulerHarness
		holdOld        atomic.Bool
		held, released = make(chan struct{}), make(chan struct{})
	)
	h = newHarness(t, WithTickObserver(func(r TickReport) {
		if r.Generation == 1 && holdOld.Load() {
			close(held)
			<-released
		}
		h.reports <- r
	}))
	h.fill(name, 100)
	old := h.queue(name, builder.Queue("", "").Generation(1))
	h.s.Ensure(old)
	h.mustStep(100 * time.Millisecond)
	holdOld.Store(true)
	h.move(100 * time.Millisecond)
	<-held
	oldReturned := h.s.Stop(old.UID)

	again := h.queue(name, builder.Queue("", "").Generation(2))
	renewed := *again.Settings
	renewed.UID = name + "-again"
	again.Settings = &renewed
	h.s.Ensure(again)
	// Released, the old room's second tick reports and its goroutine ends; then the new room ticks.
	close(released)
	<-oldReturned
	if r := <-h.reports; r.Generation != 1 {
		t.Fatalf("a tick of generation %d, want the old room's", r.Generation)
	}
	if r := h.mustStep(100 * time.Millisecond); r.Generation != 2 {
		t.Fatalf("a tick of generation %d, want the new room's", r.Generation)
	}

	stats, err := h.engine(name).Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := &dto.Metric{}
	if err := admittedCounter.WithLabelValues("test", name).Write(m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != float64(stats.AdmittedTotal) {
		t.Fatalf("herdgate_admitted_total of the room reads %v; the old room and the new one admitted %d", got, stats.AdmittedTotal)
	}

	<-h.s.Stop(again.UID)
	ch := make(chan prometheus.Metric, 16)
	admittedCounter.Collect(ch)
	close(ch)
	for metric := range ch {
		if err := metric.Write(m); err != nil {
			t.Fatal(err)
		}
		for _, l := range m.GetLabel() {
			if l.GetName() == "name" && l.GetValue() == name {
				t.Fatalf("the room's series stay after its last goroutine stopped: %v", m)
			}
		}
	}
}
