package replica

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herdgate/herdgate/internal/pass"
)

// BenchmarkWorkloadMeter is what measuring one protected request costs the gate (begin, end and the
// pass's use, from both cores at once), beside BenchmarkInFlightGauge, the in-flight gauge every
// forwarded request already moves.
func BenchmarkWorkloadMeter(b *testing.B) {
	m := NewWorkloadMeter()
	p := pass.Pass{Visitor: "visitor-1", NotBefore: time.Now(), Expiry: time.Now().Add(time.Minute)}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			now := time.Now()
			m.Used(p, now)
			m.End(m.Begin(), false)
		}
	})
}

func BenchmarkInFlightGauge(b *testing.B) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "bench"})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = time.Now()
			g.Inc()
			g.Dec()
		}
	})
}
