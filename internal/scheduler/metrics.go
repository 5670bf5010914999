package scheduler

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The scheduler's metrics, served on the manager's metrics endpoint next to controller-runtime's.
var (
	queueDepthGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herdgate_queue_depth",
		Help: "Visitors waiting in the queue, as of the last stats read (every 2 s).",
	}, []string{"namespace", "name"})
	activeVisitorsGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herdgate_active_visitors",
		Help: "Admitted visitors whose pass has not expired, as of the last stats read (every 2 s).",
	}, []string{"namespace", "name"})
	admittedCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herdgate_admitted_total",
		Help: "Visitors admitted by this manager's scheduler.",
	}, []string{"namespace", "name"})
	admittedAtOnceCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herdgate_admitted_at_once_total",
		Help: "Visitors the proxies admitted at once on entering, while nobody waited and a tick had budget left, as read from Redis.",
	}, []string{"namespace", "name"})
	releasedCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herdgate_released_total",
		Help: "Passes released because the workload ended the visitor's session, as read from Redis.",
	}, []string{"namespace", "name"})
	abandonedCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herdgate_abandoned_total",
		Help: "Waiting visitors dropped by this manager's scheduler for not polling within abandonAfter.",
	}, []string{"namespace", "name"})
	tickDurationHistogram = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herdgate_tick_duration_seconds",
		Help:    "Duration of one scheduler tick: the Admit call to Redis.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 15), // 100 µs … 1.6 s
	}, []string{"namespace", "name"})
	tickLagHistogram = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herdgate_tick_lag_seconds",
		Help:    "How late a scheduler tick started after its scheduled time.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 15),
	}, []string{"namespace", "name"})
)

func init() {
	metrics.Registry.MustRegister(queueDepthGauge, activeVisitorsGauge, admittedCounter, admittedAtOnceCounter, releasedCounter, abandonedCounter,
		tickDurationHistogram, tickLagHistogram)
}

// forgetQueueMetrics drops the series of a deleted queue.
func forgetQueueMetrics(namespace, name string) {
	labels := prometheus.Labels{"namespace": namespace, "name": name}
	for _, v := range []interface{ Delete(prometheus.Labels) bool }{
		queueDepthGauge, activeVisitorsGauge, admittedCounter, admittedAtOnceCounter, releasedCounter, abandonedCounter, tickDurationHistogram, tickLagHistogram,
	} {
		v.Delete(labels)
	}
}
