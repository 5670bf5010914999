package scheduler

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/phase"
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
