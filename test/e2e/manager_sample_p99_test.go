package e2e

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestHistogramP99ReadsWithinTheBucket checks the reading of the manager's tick histograms on the
// scheduler's doubling buckets: only the observations between two samples count, and the value is
// placed within its bucket, not at its upper bound.
func TestHistogramP99ReadsWithinTheBucket(t *testing.T) {
	registry := prometheus.NewRegistry()
	lag := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herdgate_tick_lag_seconds",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 15),
	}, []string{"namespace", "name"})
	registry.MustRegister(lag)
	sample := func() managerSample {
		families, err := registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		s := managerSample{families: map[string]*dto.MetricFamily{}}
		for _, f := range families {
			s.families[f.GetName()] = f
		}
		return s
	}
	override := lag.WithLabelValues("load", "override")
	// Before the phase: slow ticks that must not count.
	for range 10 {
		override.Observe(0.9)
	}
	before := sample()
	// In the phase: 79 ticks of 1 ms and one of 26 ms, just above the bucket bound of 25.6 ms.
	for range 79 {
		override.Observe(0.001)
	}
	override.Observe(0.026)
	got := histogramP99(sample(), before, "herdgate_tick_lag_seconds", "override")
	// The 99th percentile is the 79.2nd observation: a fifth of the way into (25.6 ms, 51.2 ms].
	if want := 30720 * time.Microsecond; got != want {
		t.Errorf("p99 = %s, want %s", got, want)
	}
	if empty := histogramP99(sample(), sample(), "herdgate_tick_lag_seconds", "override"); empty != 0 {
		t.Errorf("p99 of no observations = %s, want 0", empty)
	}
}
