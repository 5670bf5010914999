package scheduler

import (
	"github.com/prometheus/client_golang/prometheus"

	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/queue"
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
	pollBudgetHoldsGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herdgate_poll_budget_holds",
		Help: "1 while spec.polling.budget holds the waiting visitors' polls at the queue's depth (condition WithinPollBudget), 0 when the queue is deeper than it holds, as of the last stats read (every 2 s).",
	}, []string{"namespace", "name"})
	proxiesReportingGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herdgate_proxies_reporting",
		Help: "Proxy replicas that reported the config they serve to Redis within the last 30 s, as of the last stats read (every 2 s).",
	}, []string{"namespace", "name"})
	gatewayChecksGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herdgate_gateway_checks_per_second",
		Help: "Gateway rooms with HMAC passes only (spec.enforcement Gateway; a gateway may verify JWT passes without asking): the checks per second the gateways asked the proxy replicas about requests outside /.herdgate/, summed over their last reports (every 10 s). 0 while visitors are admitted means no gateway asks: condition GatewayChecking.",
	}, []string{"namespace", "name"})
	waitHistogram = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "herdgate_wait_seconds",
		Help: "How long admitted visitors waited: from entering (to within a tick) to their pass's not-before time; 0 for those admitted at once on entering. A drawn pre-queue's visitors wait from the opening.",
		// From a tick to three hours, with the steps a wait-time objective is written in.
		Buckets: []float64{0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 900, 1200, 1800, 2700, 3600, 5400, 7200, 10800},
	}, []string{"namespace", "name"})
	tickDurationHistogram = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herdgate_tick_duration_seconds",
		Help:    "Duration of one scheduler tick: its round trip to Redis (the admission, and the plan and counters when due).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 15), // 100 µs … 1.6 s
	}, []string{"namespace", "name"})
	preQueueDepthGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herdgate_pre_queue_depth",
		Help: "Pre-queue places of a scheduled opening not drawn yet, as of the last stats read (every 2 s).",
	}, []string{"namespace", "name"})
	phaseGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herdgate_phase",
		Help: "1 for the room's phase at the last tick (Scheduled, PreQueue, Opening, Open or Closed), 0 for the others.",
	}, []string{"namespace", "name", "phase"})
	drawCallHistogram = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herdgate_draw_call_duration_seconds",
		Help:    "Duration of one Redis call of the pre-queue's draw at opening: beginning it, reading a page of the pre-queue, placing a chunk.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 15),
	}, []string{"namespace", "name"})
	admissionRateGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herdgate_admission_rate",
		Help: "Admissions per second the ticks run at: the plan's, or the adaptive controller's choice (spec.capacity.mode Adaptive).",
	}, []string{"namespace", "name"})
	plannedRateGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herdgate_planned_admission_rate",
		Help: "Admissions per second of the room's plan, as its spec declares them (herdgate_admission_rate is what the ticks run at).",
	}, []string{"namespace", "name"})
	maxActiveGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herdgate_max_active",
		Help: "The room's cap on active passes (spec.capacity.maxActive); 0 when it has none.",
	}, []string{"namespace", "name"})
	adaptiveReasonGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herdgate_adaptive_reason",
		Help: "1 for the adaptive controller's reason for its rate at the last tick (Declared, NoReports, LatencyAboveDeclared, InFlightAboveTarget, UpstreamErrors, NoShows, Recovering, Floor), 0 for the others.",
	}, []string{"namespace", "name", "reason"})
	reportingGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herdgate_workload_reporting_replicas",
		Help: "Proxy replicas whose workload reports are fresh.",
	}, []string{"namespace", "name"})
	inFlightGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herdgate_workload_in_flight",
		Help: "Mean protected requests in flight upstream over the last read, summed over the proxy replicas.",
	}, []string{"namespace", "name"})
	latencyGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herdgate_workload_latency_seconds",
		Help: "Upstream latency of protected requests over the last 5 s, merged over the proxy replicas (the bucket's upper bound, within 10 %).",
	}, []string{"namespace", "name", "quantile"})
	errorRatioGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herdgate_workload_error_ratio",
		Help: "Share of protected requests the upstream failed over the last 5 s (5xx, timeouts, refused or closed connections).",
	}, []string{"namespace", "name"})
	noShowRatioGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herdgate_workload_no_show_ratio",
		Help: "Share of the admitted visitors who never used their pass, over the last judged seconds.",
	}, []string{"namespace", "name"})
	tickLagHistogram = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herdgate_tick_lag_seconds",
		Help:    "How late a scheduler tick started after its scheduled time; the tick that wakes a sleeping room is not counted.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 15),
	}, []string{"namespace", "name"})
	failoversCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herdgate_redis_failovers_total",
		Help: "Failovers of the room's Redis (a replica promoted, or a primary that started afresh) after which the scheduler paused the room's admissions.",
	}, []string{"namespace", "name"})
	unacknowledgedCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herdgate_redis_unacknowledged_writes_total",
		Help: "Writes of a Replicated room (spec.redis.durability) that no replica acknowledged within the wait; they stand, and a failover may lose them.",
	}, []string{"namespace", "name"})
	laneDepthGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herdgate_lane_depth",
		Help: "Visitors waiting in each lane of a room with lanes (spec.lanes), the main queue as lane main, as of the last stats read (every 2 s).",
	}, []string{"namespace", "name", "lane"})
	laneAdmittedCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herdgate_lane_admitted_total",
		Help: "Visitors the ticks admitted from each lane of a room with lanes (spec.lanes), the main queue as lane main, as read from Redis.",
	}, []string{"namespace", "name", "lane"})
	shadowDepthGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herdgate_shadow_depth",
		Help: "Places held in the shadow queue (spec.entry.shadowQueue), which never admits and which herdgate_queue_depth leaves out, as of the last stats read (every 2 s).",
	}, []string{"namespace", "name"})
	shadowedCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herdgate_shadowed_total",
		Help: "Places given in the shadow queue (spec.entry.shadowQueue), by reason: challenge_failed or over_entry_limit, as read from Redis.",
	}, []string{"namespace", "name", "reason"})
	ticksMissedCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herdgate_ticks_missed_total",
		Help: "Grid points that passed while the scheduler was late or away: outcome made_up for those a later tick admitted for (up to 10 at once), dropped for those beyond.",
	}, []string{"namespace", "name", "outcome"})
)

func init() {
	metrics.Registry.MustRegister(queueDepthGauge, activeVisitorsGauge, admittedCounter, admittedAtOnceCounter, releasedCounter, abandonedCounter,
		tickDurationHistogram, tickLagHistogram, waitHistogram, pollBudgetHoldsGauge, proxiesReportingGauge, gatewayChecksGauge, preQueueDepthGauge, phaseGauge, drawCallHistogram,
		admissionRateGauge, plannedRateGauge, maxActiveGauge, adaptiveReasonGauge, reportingGauge, inFlightGauge, latencyGauge, errorRatioGauge, noShowRatioGauge, ticksMissedCounter, failoversCounter, unacknowledgedCounter,
		laneDepthGauge, laneAdmittedCounter, shadowDepthGauge, shadowedCounter)
}

// queueMetrics are one queue's series, looked up once when its goroutine starts: a lookup hashes the
// label values, and thousands of rooms ticking would spend a good part of the scheduler's time on
// lookups. The phase and the adaptive reason are written when they change, not at every tick.
type queueMetrics struct {
	namespace, name                                 string
	tickLag, tickDuration, wait                     prometheus.Observer
	admitted, admittedAtOnce, released, abandoned   prometheus.Counter
	ticksMadeUp, ticksDropped                       prometheus.Counter
	failovers, unacknowledged                       prometheus.Counter
	depth, preQueueDepth, active                    prometheus.Gauge
	pollBudgetHolds, proxiesReporting               prometheus.Gauge
	admissionRate, reporting, inFlight              prometheus.Gauge
	plannedRate, maxActive                          prometheus.Gauge
	latencyP50, latencyP95, errorRatio, noShowRatio prometheus.Gauge
	phase                                           phase.Phase
	phaseSet                                        bool
	reason                                          string
	reasonSet                                       bool
	// laneTotals are the lanes' admission totals last read.
	laneTotals map[string]int64
	// shadowTotals are the shadow queue's totals last read, by reason; nil before the first read.
	shadowTotals map[string]int64
}

func newQueueMetrics(namespace, name string) *queueMetrics {
	l := []string{namespace, name}
	return &queueMetrics{
		namespace: namespace, name: name,
		tickLag: tickLagHistogram.WithLabelValues(l...), tickDuration: tickDurationHistogram.WithLabelValues(l...),
		wait:            waitHistogram.WithLabelValues(l...),
		pollBudgetHolds: pollBudgetHoldsGauge.WithLabelValues(l...), proxiesReporting: proxiesReportingGauge.WithLabelValues(l...),
		admitted: admittedCounter.WithLabelValues(l...), admittedAtOnce: admittedAtOnceCounter.WithLabelValues(l...),
		released: releasedCounter.WithLabelValues(l...), abandoned: abandonedCounter.WithLabelValues(l...),
		depth: queueDepthGauge.WithLabelValues(l...), preQueueDepth: preQueueDepthGauge.WithLabelValues(l...),
		active:        activeVisitorsGauge.WithLabelValues(l...),
		admissionRate: admissionRateGauge.WithLabelValues(l...), reporting: reportingGauge.WithLabelValues(l...),
		plannedRate: plannedRateGauge.WithLabelValues(l...), maxActive: maxActiveGauge.WithLabelValues(l...),
		inFlight:   inFlightGauge.WithLabelValues(l...),
		latencyP50: latencyGauge.WithLabelValues(namespace, name, "0.5"), latencyP95: latencyGauge.WithLabelValues(namespace, name, "0.95"),
		errorRatio: errorRatioGauge.WithLabelValues(l...), noShowRatio: noShowRatioGauge.WithLabelValues(l...),
		ticksMadeUp:  ticksMissedCounter.WithLabelValues(namespace, name, "made_up"),
		ticksDropped: ticksMissedCounter.WithLabelValues(namespace, name, "dropped"),
		failovers:    failoversCounter.WithLabelValues(l...), unacknowledged: unacknowledgedCounter.WithLabelValues(l...),
	}
}

// lane sets the series of one lane: its depth, and its admissions since the total last read.
func (m *queueMetrics) lane(name string, depth, admittedTotal int64) {
	laneDepthGauge.WithLabelValues(m.namespace, m.name, name).Set(float64(depth))
	if m.laneTotals == nil {
		m.laneTotals = map[string]int64{}
	}
	if last, ok := m.laneTotals[name]; ok && admittedTotal > last {
		laneAdmittedCounter.WithLabelValues(m.namespace, m.name, name).Add(float64(admittedTotal - last))
	} else if !ok {
		laneAdmittedCounter.WithLabelValues(m.namespace, m.name, name) // the series starts at 0
	}
	m.laneTotals[name] = admittedTotal
}

// shadow sets the shadow queue's series from a stats read: its depth, and the places given since the
// totals last read. A room that has no shadow queue and never had a shadow place has none.
func (m *queueMetrics) shadow(configured bool, depth, challengeFailedTotal, overLimitTotal int64) {
	if !configured && m.shadowTotals == nil && depth == 0 && challengeFailedTotal == 0 && overLimitTotal == 0 {
		return
	}
	shadowDepthGauge.WithLabelValues(m.namespace, m.name).Set(float64(depth))
	first := m.shadowTotals == nil
	if first {
		m.shadowTotals = map[string]int64{}
	}
	for reason, total := range map[string]int64{"challenge_failed": challengeFailedTotal, "over_entry_limit": overLimitTotal} {
		c := shadowedCounter.WithLabelValues(m.namespace, m.name, reason) // the series starts at 0
		if last := m.shadowTotals[reason]; !first && total > last {
			c.Add(float64(total - last))
		}
		m.shadowTotals[reason] = total
	}
}

// gatewayChecks sets the checks per second the proxies reported, for a room whose gateway must ask
// (Gateway enforcement, HMAC passes); other rooms have no series, so that an alert on 0 sees only
// rooms where 0 means trouble.
func (m *queueMetrics) gatewayChecks(gateway bool, proxies []queue.ProxyReport) {
	if !gateway {
		gatewayChecksGauge.DeleteLabelValues(m.namespace, m.name)
		return
	}
	gatewayChecksGauge.WithLabelValues(m.namespace, m.name).Set(ChecksPerSecond(proxies))
}

// ChecksPerSecond is the gateway checks per second the proxy replicas reported, summed.
func ChecksPerSecond(proxies []queue.ProxyReport) float64 {
	total := 0.0
	for _, p := range proxies {
		total += p.ChecksPerSecond
	}
	return total
}

// forgetLane drops the series of a lane the room no longer has.
func (m *queueMetrics) forgetLane(name string) {
	labels := prometheus.Labels{"namespace": m.namespace, "name": m.name, "lane": name}
	laneDepthGauge.Delete(labels)
	laneAdmittedCounter.Delete(labels)
	delete(m.laneTotals, name)
}

// boolGauge is a gauge's value for b: 1 or 0.
func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// setPhase sets herdgate_phase when the phase changed.
func (m *queueMetrics) setPhase(phase phase.Phase) {
	if m.phaseSet && m.phase == phase {
		return
	}
	setPhaseMetric(m.namespace, m.name, phase)
	m.phase, m.phaseSet = phase, true
}

// setAdaptiveReason sets herdgate_adaptive_reason when the reason changed.
func (m *queueMetrics) setAdaptiveReason(reason string) {
	if m.reasonSet && m.reason == reason {
		return
	}
	setAdaptiveReasonMetric(m.namespace, m.name, reason)
	m.reason, m.reasonSet = reason, true
}

var phases = []phase.Phase{phase.Scheduled, phase.PreQueue, phase.Opening, phase.Open, phase.Closed}

// setPhaseMetric sets herdgate_phase: 1 for phase, 0 for the others.
func setPhaseMetric(namespace, name string, phase phase.Phase) {
	for _, p := range phases {
		v := 0.0
		if p == phase {
			v = 1
		}
		phaseGauge.WithLabelValues(namespace, name, string(p)).Set(v)
	}
}

// forgetQueueMetrics drops the series of a deleted queue.
func forgetQueueMetrics(namespace, name string) {
	labels := prometheus.Labels{"namespace": namespace, "name": name}
	for _, v := range []interface{ Delete(prometheus.Labels) bool }{
		queueDepthGauge, activeVisitorsGauge, admittedCounter, admittedAtOnceCounter, releasedCounter, abandonedCounter, tickDurationHistogram, tickLagHistogram, waitHistogram,
		pollBudgetHoldsGauge, proxiesReportingGauge, gatewayChecksGauge, failoversCounter, unacknowledgedCounter,
		preQueueDepthGauge, drawCallHistogram, admissionRateGauge, plannedRateGauge, maxActiveGauge, reportingGauge, inFlightGauge, errorRatioGauge, noShowRatioGauge,
	} {
		v.Delete(labels)
	}
	phaseGauge.DeletePartialMatch(labels)
	laneDepthGauge.DeletePartialMatch(labels)
	laneAdmittedCounter.DeletePartialMatch(labels)
	shadowDepthGauge.Delete(labels)
	shadowedCounter.DeletePartialMatch(labels)
	latencyGauge.DeletePartialMatch(labels)
	adaptiveReasonGauge.DeletePartialMatch(labels)
	ticksMissedCounter.DeletePartialMatch(labels)
}

// adaptiveReasons are the values of herdgate_adaptive_reason's reason label.
var adaptiveReasons = []string{capacity.ReasonDeclared, capacity.ReasonNoReports, capacity.ReasonLatencyAbove, capacity.ReasonInFlightAbove,
	capacity.ReasonUpstreamErrors, capacity.ReasonNoShows, capacity.ReasonRecovering, capacity.ReasonFloor}

// setAdaptiveReasonMetric sets the adaptive controller's reason; a Declared queue (reason "") has none.
func setAdaptiveReasonMetric(namespace, name, reason string) {
	if reason == "" {
		adaptiveReasonGauge.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
		return
	}
	for _, r := range adaptiveReasons {
		v := 0.0
		if r == reason {
			v = 1
		}
		adaptiveReasonGauge.WithLabelValues(namespace, name, r).Set(v)
	}
}
