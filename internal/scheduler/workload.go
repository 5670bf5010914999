package scheduler

import (
	"context"
	"math"
	"math/big"
	"time"

	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
)

const (
	// workloadReadInterval is how often a Declared queue's workload reports are read: for the status
	// only. An Adaptive queue reads them every tick.
	workloadReadInterval = statsInterval
	// minWorkloadMaxAge is the least a replica's last workload report counts for; replicas report
	// every tick of an Adaptive queue, every second otherwise, and one silent for longer is gone.
	minWorkloadMaxAge = 3 * time.Second
	// statusWindow is the stretch the latency quantiles and shares in status cover.
	statusWindow = 5 * time.Second
	// useJudged is how many judged seconds of admissions the no-show share is taken over.
	useJudged = 5
	// estimateWindow is the stretch the wait estimates' accuracy in status covers: long enough to
	// judge a slow room's admissions, short enough to show a change within minutes.
	estimateWindow = 5 * time.Minute
)

// Workload is what the proxy replicas measured of a queue's protected requests, merged, and the
// rate admissions run at.
type Workload struct {
	// Reporting is how many replicas reported lately.
	Reporting int
	// LatencyP50 and LatencyP95 are the upstream latency quantiles over the last few seconds (the
	// upper bound of their histogram bucket); zero without requests.
	LatencyP50, LatencyP95 time.Duration
	// InFlight is the mean of the protected requests in flight upstream over the last read, to a
	// tenth; TargetInFlight what the pool is sized for.
	InFlight, TargetInFlight float64
	// ErrorPercent and NoShowPercent are the shares of failed requests and of admitted visitors
	// who never used their pass, over the last few seconds.
	ErrorPercent, NoShowPercent int32
	// AdmissionsPerSecond is the rate ticks run at, as a decimal string; Reason the adaptive
	// controller's reason for it, empty for a Declared queue.
	AdmissionsPerSecond string
	Reason              string
	// EstimatesJudged is how many admitted visitors' first wait estimates the proxies judged over
	// the last estimateWindow, and EstimateErrorP90 the 90th percentile of their relative error (the
	// upper bound of its histogram bucket; +Inf beyond the last), when any were.
	EstimatesJudged  int64
	EstimateErrorP90 float64
}

// workloadState is what a queue's goroutine keeps between reads of the workload reports.
type workloadState struct {
	replicas map[string]replicaSeen
	readAt   time.Time
	// admitted counts the admissions of this scheduler by their passes' not-before second, until
	// the second is judged.
	admitted map[int64]int64
	// judged are the last judged seconds' admissions and uses.
	judged []useCount
	ticks  []workloadTick
	// estimates are the reads' merged estimate error counts, kept over estimateWindow.
	estimates []estimateTick

	controller *capacity.Controller
	limits     capacity.AdaptiveLimits
	rate       float64 // the controller's last rate; 0 while the declared plan runs
	reason     string
	plan       capacity.Plan // the rate as a plan, quantised
}

type replicaSeen struct {
	report   queue.WorkloadReport
	inFlight float64 // mean over its last interval
}

type useCount struct{ admitted, used int64 }

// workloadTick is one read's merged differences, kept over statusWindow for the status.
type workloadTick struct {
	at               time.Time
	requests, errors int64
	buckets          []int64
}

// estimateTick is one read's merged estimate error counts.
type estimateTick struct {
	at     time.Time
	counts []int64
}

// recordAdmitted notes the tick's admissions for the no-show share.
func (w *workloadState) recordAdmitted(res queue.AdmitResult) {
	if w.admitted == nil {
		w.admitted = map[int64]int64{}
	}
	for _, a := range res.Admitted {
		w.admitted[a.Pass.NotBefore.Unix()]++
	}
}

// useGrace is how long after its not-before second a pass's use is waited for: visitors learn of
// their admission at a poll before the pass is valid, and go on at once (the waiting page does).
func useGrace(cfg *Room) time.Duration {
	return 2*time.Second + 2*cfg.PollMin
}

// adaptive tells whether the queue's rate follows its workload now.
func adaptive(cfg *Room) bool { return cfg.Adaptive != nil && cfg.Admits() }

// quota is the plan this tick's admissions run on: the declared one, or the adaptive controller's.
func (st *tickState) quota(cfg *Room) capacity.Plan {
	if adaptive(cfg) && st.workload.controller != nil && st.workload.plan.Tick() == cfg.Effective.Tick() {
		return st.workload.plan
	}
	return cfg.Effective
}

// readWorkload reads and merges the replicas' reports, steps the adaptive controller, and updates
// the snapshot and the metrics. An Adaptive queue does it before every tick; a Declared one every
// workloadReadInterval, mostly with the counters after its tick (dueAfterTick).
func (r *runner) readWorkload(ctx context.Context, st *tickState, cfg *Room, now time.Time) error {
	read, due := st.workloadRead(cfg, now)
	if !due {
		return nil
	}
	callCtx, cancel := context.WithTimeout(ctx, max(cfg.Effective.Tick(), time.Second))
	reading, err := st.q.ReadWorkload(callCtx, read.maxAge, read.seconds)
	cancel()
	if err != nil {
		return err
	}
	r.applyWorkload(st, cfg, now, read.seconds, reading)
	return nil
}

// workloadReadArgs are what a read of the workload reports asks Redis for.
type workloadReadArgs struct {
	maxAge  time.Duration
	seconds []int64 // the seconds whose passes had their time to be used
}

// workloadRead says whether the workload is due to be read at now, and with what; when it is, the
// next read is due workloadReadInterval later.
func (st *tickState) workloadRead(cfg *Room, now time.Time) (workloadReadArgs, bool) {
	w := &st.workload
	if !adaptive(cfg) && now.Before(w.readAt) {
		return workloadReadArgs{}, false
	}
	w.readAt = now.Add(workloadReadInterval)
	cutoff := now.Add(-useGrace(cfg)).Unix() - 1
	var seconds []int64
	for s := range w.admitted {
		if s <= cutoff {
			seconds = append(seconds, s)
		}
	}
	return workloadReadArgs{maxAge: max(minWorkloadMaxAge, 10*cfg.Effective.Tick()), seconds: seconds}, true
}

// applyWorkload takes in a reading of the workload reports made for seconds.
func (r *runner) applyWorkload(st *tickState, cfg *Room, now time.Time, seconds []int64, reading queue.WorkloadReading) {
	w := &st.workload
	m := w.merge(reading, now)
	for _, s := range seconds {
		if m.Reporting > 0 {
			w.judged = append(w.judged, useCount{admitted: w.admitted[s], used: min(reading.Used[s], w.admitted[s])})
		}
		delete(w.admitted, s)
	}
	if len(w.judged) > useJudged {
		w.judged = w.judged[len(w.judged)-useJudged:]
	}
	for _, j := range w.judged {
		m.Admitted += j.admitted
		m.Used += j.used
	}
	if m.Reporting == 0 {
		w.judged = nil
	}

	declared, _ := cfg.Effective.Rate().Float64()
	w.reason = ""
	if adaptive(cfg) {
		if w.controller == nil || w.limits != *cfg.Adaptive {
			w.controller, w.limits = capacity.NewController(*cfg.Adaptive), *cfg.Adaptive
		}
		w.rate, w.reason = w.controller.Step(m)
		w.plan = planAt(w.rate, declared, cfg.Effective)
	} else {
		w.controller, w.rate = nil, 0
	}
	r.publishWorkload(st, cfg, m, declared)
}

// merge takes the differences of each replica's report since its last, and forgets replicas that
// stopped reporting. A replica seen for the first time (or restarted) gives its baseline only.
func (w *workloadState) merge(reading queue.WorkloadReading, now time.Time) capacity.Measurement {
	seen := make(map[string]replicaSeen, len(reading.Reports))
	m := capacity.Measurement{}
	t := workloadTick{at: now}
	var latencyMicros int64
	var estimates []int64
	for _, rep := range reading.Reports {
		prev, ok := w.replicas[rep.Replica]
		cur := replicaSeen{report: rep}
		switch {
		case !ok || prev.report.Epoch != rep.Epoch || rep.ElapsedMicros < prev.report.ElapsedMicros || rep.Requests < prev.report.Requests:
			// A baseline: nothing to take a difference from.
		case rep.ElapsedMicros == prev.report.ElapsedMicros:
			m.Reporting++
			cur.inFlight = prev.inFlight // no new report since the last read
			m.InFlight += cur.inFlight
		default:
			m.Reporting++
			cur.inFlight = float64(rep.FlightMicros-prev.report.FlightMicros) / float64(rep.ElapsedMicros-prev.report.ElapsedMicros)
			m.InFlight += cur.inFlight
			m.Requests += rep.Requests - prev.report.Requests
			m.Errors += rep.Errors - prev.report.Errors
			latencyMicros += rep.LatencyMicros - prev.report.LatencyMicros
			t.buckets = addBuckets(t.buckets, rep.Buckets, prev.report.Buckets)
			estimates = addBuckets(estimates, rep.EstimateErrors, prev.report.EstimateErrors)
		}
		seen[rep.Replica] = cur
	}
	w.replicas = seen
	if m.Requests > 0 && latencyMicros > 0 {
		// Little's law wants the mean.
		m.Latency = time.Duration(latencyMicros/m.Requests) * time.Microsecond
	}
	t.requests, t.errors = m.Requests, m.Errors
	w.ticks = append(w.ticks, t)
	for len(w.ticks) > 1 && now.Sub(w.ticks[0].at) > statusWindow {
		w.ticks = w.ticks[1:]
	}
	if len(estimates) > 0 {
		w.estimates = append(w.estimates, estimateTick{at: now, counts: estimates})
	}
	for len(w.estimates) > 0 && now.Sub(w.estimates[0].at) > estimateWindow {
		w.estimates = w.estimates[1:]
	}
	return m
}

// estimateAccuracy is how many first estimates were judged over estimateWindow and the 90th
// percentile of their error.
func (w *workloadState) estimateAccuracy() (judged int64, p90 float64) {
	var counts []int64
	for _, t := range w.estimates {
		counts = addBuckets(counts, t.counts, nil)
	}
	for _, c := range counts {
		judged += c
	}
	if judged == 0 {
		return 0, 0
	}
	rank := int64(math.Ceil(0.9 * float64(judged)))
	var acc int64
	for i, c := range counts {
		acc += c
		if acc >= rank {
			if i < len(queue.EstimateErrorBounds) {
				return judged, queue.EstimateErrorBounds[i]
			}
			break
		}
	}
	return judged, math.Inf(1)
}

// addBuckets adds cur − prev to sum, bucket by bucket.
func addBuckets(sum, cur, prev []int64) []int64 {
	if len(sum) < len(cur) {
		sum = append(sum, make([]int64, len(cur)-len(sum))...)
	}
	for i, c := range cur {
		if i < len(prev) {
			c -= prev[i]
		}
		sum[i] += max(0, c)
	}
	return sum
}

// quantile is the upper bound of the bucket the q-quantile falls in; zero for no requests.
func quantile(buckets []int64, q float64) time.Duration {
	var total int64
	for _, c := range buckets {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(total)))
	var acc int64
	for i, c := range buckets {
		acc += c
		if acc >= rank {
			return time.Duration(queue.LatencyBuckets[i]) * time.Microsecond
		}
	}
	return time.Duration(queue.LatencyBuckets[len(queue.LatencyBuckets)-1]) * time.Microsecond
}

// planAt is the rate as a plan on the declared plan's tick, to a thousandth of a visitor per tick.
func planAt(rate, declared float64, declaredPlan capacity.Plan) capacity.Plan {
	tick := declaredPlan.Tick()
	num := int64(math.Round(rate * tick.Seconds() * 1000))
	if rate == declared {
		return declaredPlan
	}
	p, err := capacity.FromQuota(max(0, num), 1000, tick, false)
	if err != nil {
		return declaredPlan
	}
	return p
}

// publishWorkload puts what was measured into the snapshot and the metrics.
func (r *runner) publishWorkload(st *tickState, cfg *Room, m capacity.Measurement, declared float64) {
	w := &st.workload
	var buckets []int64
	var requests, errs int64
	for _, t := range w.ticks {
		buckets = addBuckets(buckets, t.buckets, nil)
		requests += t.requests
		errs += t.errors
	}
	out := &Workload{Reporting: m.Reporting, LatencyP50: quantile(buckets, 0.5), LatencyP95: quantile(buckets, 0.95),
		InFlight: math.Round(m.InFlight*10) / 10, TargetInFlight: cfg.TargetInFlight, Reason: w.reason}
	if requests > 0 {
		out.ErrorPercent = int32(math.Round(100 * float64(errs) / float64(requests)))
	}
	if m.Admitted > 0 {
		out.NoShowPercent = int32(math.Round(100 * float64(m.Admitted-m.Used) / float64(m.Admitted)))
	}
	out.EstimatesJudged, out.EstimateErrorP90 = w.estimateAccuracy()
	rate := declared
	if adaptive(cfg) {
		rate = w.rate
	}
	out.AdmissionsPerSecond = capacity.DecimalString(new(big.Rat).SetFloat64(math.Round(rate*1000) / 1000))
	metrics := st.metrics
	metrics.admissionRate.Set(rate)
	metrics.plannedRate.Set(declared)
	metrics.maxActive.Set(float64(cfg.MaxActive))
	metrics.reporting.Set(float64(m.Reporting))
	metrics.inFlight.Set(m.InFlight)
	metrics.latencyP50.Set(out.LatencyP50.Seconds())
	metrics.latencyP95.Set(out.LatencyP95.Seconds())
	metrics.errorRatio.Set(float64(out.ErrorPercent) / 100)
	metrics.noShowRatio.Set(float64(out.NoShowPercent) / 100)
	metrics.setAdaptiveReason(w.reason)
	if m.Reporting == 0 && w.reason == "" {
		out = nil // nothing measured, nothing to say
	}
	r.update(func(s *Snapshot) { s.Workload = out })
}

func rateOf(p capacity.Plan) float64 {
	f, _ := p.Rate().Float64()
	return f
}

// estimatePlan is the plan published for the proxies' wait estimates: the one ticks run, an
// adaptive rate rounded to a twentieth of the declared one so that it is not written every tick.
func (st *tickState) estimatePlan(cfg *Room) capacity.Plan {
	if !adaptive(cfg) || st.workload.controller == nil {
		return cfg.Effective
	}
	declared := rateOf(cfg.Effective)
	step := declared / 20
	if step <= 0 {
		return cfg.Effective
	}
	return planAt(math.Max(step, math.Round(st.workload.rate/step)*step), declared, cfg.Effective)
}
