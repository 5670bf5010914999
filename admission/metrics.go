package admission

import (
	"time"

	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/queue"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the proxy's Prometheus series, served on their own port.
type metrics struct {
	// roomRegistry holds the room's series; a proxy of its own serves them with the process's own
	// (process), a Set each room's with a label naming it.
	roomRegistry  *prometheus.Registry
	process       *prometheus.Registry
	requests      *prometheus.CounterVec
	verifications *prometheus.CounterVec
	tooEarly      prometheus.Counter
	// refusedInMemory counts the polls refused without a call to Redis, by reason.
	refusedInMemory *prometheus.CounterVec
	failOpen        prometheus.Counter
	redisUp         prometheus.Gauge
	upstream        *prometheus.HistogramVec
	// The config in force and refusals of newer ones.
	configGeneration, configRefused prometheus.Gauge
	configRefusals                  prometheus.Counter
	// releases counts the sessions this replica ended and told Redis of.
	releases prometheus.Counter
	// bypassed counts the requests each bypass rule let through; difficulty is the proof of work's
	// difficulty of the last challenge issued.
	bypassed   *prometheus.CounterVec
	difficulty prometheus.Gauge
	// inFlight counts requests waiting for the upstream's response headers, upstreamErrors the
	// upstream's failures by kind: what an adaptive plan will feed on, and what an operator watches.
	inFlight       *prometheus.GaugeVec
	upstreamErrors *prometheus.CounterVec
	// farSigns counts far visitors' signs of life recorded in batches, farSnapshots the counts of
	// the queue taken for their positions (far.go).
	farSigns, farSnapshots prometheus.Counter
	// firstUse times how long admitted visitors took to come: from a pass's not-before time to its
	// first use on this replica.
	firstUse prometheus.Histogram
	// estimateError is how far off the first wait told to each admitted visitor was (estimate.go).
	estimateError prometheus.Histogram
	// reclaimed counts the passes written back after a failover of Redis, reclaimedWaiting those of
	// visitors the new primary still had waiting (replica.Reclaims).
	reclaimed, reclaimedWaiting prometheus.Counter

	// The hot path's series, looked up once.
	protectedForwarded, openForwarded prometheus.Counter
	protectedUpstream, openUpstream   prometheus.Observer
	validPasses                       prometheus.Counter
	protectedInFlight, openInFlight   prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{
		roomRegistry: prometheus.NewRegistry(), process: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herdgate_proxy_requests_total",
			Help: "Requests by route class (protected, open, enter, status, page, internal) and outcome.",
		}, []string{"route_class", "outcome"}),
		firstUse: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "herdgate_proxy_pass_first_use_delay_seconds",
			Help: "From a pass's not-before time to its first use on this replica, for first uses within a minute of it.",
			// The replica tells a first use apart for a minute (replica.WorkloadMeter.Used).
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 45, 60},
		}),
		estimateError: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "herdgate_proxy_wait_estimate_error_ratio",
			Help:    "How far off the first wait told to each visitor this replica admitted was, as a share of the wait it had: |told − had| ÷ had, for waits of 5 s or more.",
			Buckets: queue.EstimateErrorBounds,
		}),
		verifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herdgate_proxy_pass_verifications_total",
			Help: "Pass verifications on protected routes by result.",
		}, []string{"result"}),
		tooEarly: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herdgate_proxy_too_early_total",
			Help: "Status polls refused with 429 because they came sooner than the poll interval allowed.",
		}),
		refusedInMemory: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herdgate_proxy_polls_refused_in_memory_total",
			Help: "Status polls this replica refused with 429 without a call to Redis: too_early (sooner than it told the visitor) or client_rate (the client's polls past spec.entry.perClient.pollsPerSecond).",
		}, []string{"reason"}),
		failOpen: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herdgate_proxy_fail_open_total",
			Help: "Protected requests let through without a pass because Redis was unreachable (FailOpen).",
		}),
		redisUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "herdgate_proxy_redis_up",
			Help: "1 when the last Redis call succeeded, 0 when it failed.",
		}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "herdgate_proxy_upstream_duration_seconds",
			Help:    "Time from forwarding a request upstream to its response headers, by route class.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5 ms … 16 s
		}, []string{"route_class"}),
		configGeneration: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "herdgate_proxy_config_generation",
			Help: "WaitingQueue generation of the config in force; 0 before the first valid one.",
		}),
		configRefused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "herdgate_proxy_config_refused",
			Help: "1 while the newest WaitingQueue generation seen could not be applied (the config in force is older), else 0.",
		}),
		releases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herdgate_proxy_sessions_released_total",
			Help: "Sessions the workload ended through this replica (release header or completion route), sent to Redis.",
		}),
		bypassed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herdgate_proxy_bypass_requests_total",
			Help: "Requests to protected routes let through without a pass by a spec.bypass rule, by rule.",
		}, []string{"rule"}),
		difficulty: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "herdgate_proxy_challenge_difficulty",
			Help: "Leading zero bits asked by the last proof-of-work challenge this replica issued (raised under load when configured).",
		}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herdgate_proxy_upstream_in_flight",
			Help: "Requests forwarded upstream and waiting for its response headers, by route class.",
		}, []string{"route_class"}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herdgate_proxy_upstream_errors_total",
			Help: "Upstream failures by route class and kind: refused, timeout, closed (before answering), other, and status_5xx answers.",
		}, []string{"route_class", "kind"}),
		farSigns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herdgate_proxy_far_signs_of_life_total",
			Help: "Signs of life of visitors answered far from the front (status outcome waiting_far), recorded in Redis in one call per tick.",
		}),
		farSnapshots: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herdgate_proxy_far_snapshots_total",
			Help: "Counts of the queue taken to bound the positions of visitors far from the front.",
		}),
		reclaimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herdgate_proxy_passes_written_back_total",
			Help: "Passes visitors hold that this replica wrote back to Redis after a failover, which may have lost their admissions.",
		}),
		reclaimedWaiting: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herdgate_proxy_second_admissions_prevented_total",
			Help: "Visitors holding a pass whom the new primary still had waiting after a failover, taken out of the queue so that they are not admitted a second time.",
		}),
		configRefusals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herdgate_proxy_config_refusals_total",
			Help: "WaitingQueue changes that did not make a valid config and were not applied.",
		}),
	}
	m.protectedForwarded = m.requests.WithLabelValues("protected", "forwarded")
	m.openForwarded = m.requests.WithLabelValues("open", "forwarded")
	m.protectedUpstream = m.upstream.WithLabelValues("protected")
	m.openUpstream = m.upstream.WithLabelValues("open")
	m.validPasses = m.verifications.WithLabelValues(string(pass.Valid))
	m.protectedInFlight = m.inFlight.WithLabelValues("protected")
	m.openInFlight = m.inFlight.WithLabelValues("open")
	m.roomRegistry.MustRegister(m.requests, m.verifications, m.tooEarly, m.refusedInMemory, m.failOpen, m.redisUp, m.upstream,
		m.configGeneration, m.configRefused, m.configRefusals, m.releases, m.bypassed, m.difficulty,
		m.inFlight, m.upstreamErrors, m.farSigns, m.farSnapshots, m.firstUse, m.estimateError, m.reclaimed, m.reclaimedWaiting)
	m.process.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// forwarded counts one request forwarded upstream and the time to its response headers.
func (m *metrics) forwarded(class string, d time.Duration) {
	switch class {
	case "protected":
		m.protectedForwarded.Inc()
		m.protectedUpstream.Observe(d.Seconds())
		return
	case "open":
	default:
		m.requests.WithLabelValues(class, "forwarded").Inc()
		m.upstream.WithLabelValues(class).Observe(d.Seconds())
		return
	}
	m.openForwarded.Inc()
	m.openUpstream.Observe(d.Seconds())
}

// verified counts one pass verification.
func (m *metrics) verified(result pass.Result) {
	if result == pass.Valid {
		m.validPasses.Inc()
		return
	}
	m.verifications.WithLabelValues(string(result)).Inc()
}

// upstreamGauge is the in-flight gauge of a route class.
func (m *metrics) upstreamGauge(class string) prometheus.Gauge {
	switch class {
	case "protected":
		return m.protectedInFlight
	case "open":
		return m.openInFlight
	}
	return m.inFlight.WithLabelValues(class)
}

// answered counts an upstream answer of status: a 5xx is an upstream error too.
func (m *metrics) answered(class string, status int) {
	if status >= 500 {
		m.upstreamErrors.WithLabelValues(class, "status_5xx").Inc()
	}
}
