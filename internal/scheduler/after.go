package scheduler

import (
	"cmp"
	"time"

	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/queue"
)

// afterTick is what a tick's round trip carries besides the admission: the plan, when it is due
// to be published, and the reads, when the counters are due.
type afterTick struct {
	plan    *queue.PublishedPlan
	observe *queue.ObserveRequest
	// workload is what a Declared room's reads ask of its workload reports.
	workload workloadReadArgs
}

// dueAfterTick says what the tick at now publishes and reads after its admission.
func (r *runner) dueAfterTick(st *tickState, cfg *Room, phase phase.Phase, now time.Time) afterTick {
	a := afterTick{plan: st.planDue(cfg, phase, now)}
	if !now.Before(st.statsAt) {
		// The counters and the proxy replicas' reports, and a Declared queue's workload reports
		// when they are due.
		req := queue.ObserveRequest{ProxyMaxAge: proxyReportMaxAge}
		if !adaptive(cfg) {
			a.workload, req.Workload = st.workloadRead(cfg, now)
			req.WorkloadMaxAge, req.UsedSeconds = a.workload.maxAge, a.workload.seconds
		}
		a.observe = &req
	}
	return a
}

// planDue is the plan ticks run, when it changed or is due to be written again, so that proxies
// estimate waits from the rate visitors get; nil otherwise.
func (st *tickState) planDue(cfg *Room, phase phase.Phase, now time.Time) *queue.PublishedPlan {
	p := queue.PublishedPlan{Quota: st.estimatePlan(cfg), PollMin: cfg.PollMin, PollMax: cfg.PollMax, AbandonAfter: cfg.AbandonAfter, Suspended: !cfg.Admits(), Phase: phase}
	if sc := cfg.Schedule; sc != nil {
		// To the millisecond, as Redis keeps them, so that an unchanged plan compares equal.
		p.PreQueueFrom, p.OpensAt = sc.PreQueueFrom.Truncate(time.Millisecond), sc.OpensAt.Truncate(time.Millisecond)
		if !sc.ClosesAt.IsZero() {
			p.ClosesAt = sc.ClosesAt.Truncate(time.Millisecond)
		}
	}
	forecast := st.fronts.due(now)
	if forecast != nil && cfg.MaxActive > 0 {
		slots := st.slots.Slots(cfg.MaxActive)
		forecast.Slots = &slots
	}
	if st.published != nil && st.published.SameDecision(p) && now.Before(st.publishAt) && forecast == nil {
		return nil
	}
	p.Forecast = forecast
	return &p
}

// takeAfterTick takes in what the tick's plan and reads answered; the error is the first that
// failed.
func (r *runner) takeAfterTick(st *tickState, cfg *Room, now time.Time, a afterTick, replies queue.TickReplies) error {
	if a.plan != nil && replies.PlanErr == nil {
		// Each publication writes every field, the forecast's too.
		st.published, st.publishAt = a.plan, now.Add(planRepublish)
		if a.plan.Forecast != nil {
			st.fronts.publishedAt = now
		}
	}
	if a.observe != nil && replies.ObserveErr == nil {
		r.takeObservation(st, cfg, now, a.workload, replies.Observation)
	}
	return cmp.Or(replies.PlanErr, replies.ObserveErr)
}
