package admission

import (
	"context"
	"net/http"
	"time"

	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/queue"
)

// maxNotOpenRetry bounds how long a visitor who came before the pre-queue is told to wait before
// asking again, so that a schedule moved earlier reaches the page in time.
const maxNotOpenRetry = 5 * time.Minute

// standing is what the proxy knows of the room's state: the plan ticks run (the scheduler's, published,
// or the spec's until it has published one; an Adaptive rate is the scheduler's to choose), the room's
// phase, and the timings it hands visitors, which are its own config's. The gate judges by it alone;
// the visitor API reads an outlook, which adds what only waits and poll times need.
type standing struct {
	abandonAfter, pollMin, pollMax time.Duration
	plan                           capacity.Plan
	phase                          phase.Phase
	// known says the phase is the one the scheduler published for this config's schedule. Without
	// it the phase comes from the proxy's clock, and a room the clock calls open is Opening: only the
	// scheduler knows when the draw is done.
	known bool
}

// outlook is the room as the visitor API tells waits and poll times by: its standing, the
// scheduler's latest measure of the room's queues while fresh (estimate.go), and the last change of
// plan this replica saw.
type outlook struct {
	standing
	// forecast is nil when the scheduler published none, or one older than forecastMaxAge.
	forecast *queue.Forecast
	// planBefore is the plan before the last change this replica saw, at planChangedAt (zero when
	// it saw none): a visitor told when to poll under it is held to what it was told.
	planBefore    capacity.Plan
	planChangedAt time.Time
}

// shared is the outlook of one queue of the room, which takes percent of every tick's batch.
func (r outlook) shared(percent int64) outlook {
	r.plan, r.planBefore = r.plan.Share(percent), r.planBefore.Share(percent)
	return r
}

// capacityChangedSince says the plan's rate changed since a visitor's previous poll, at
// previousPoll: this replica saw the change after it.
func (r outlook) capacityChangedSince(previousPoll time.Time) bool {
	// The queue keeps a poll's time to the millisecond: a poll in the very millisecond this replica
	// learnt of the change is one after it.
	return !previousPoll.IsZero() && previousPoll.Before(r.planChangedAt.Truncate(time.Millisecond)) && r.plan.PerSecond() != r.planBefore.PerSecond()
}

// timedUnderPlanBefore says a visitor whose previous poll was at previousPoll may have been told
// its next under the plan before the last change: another replica may have seen the change up to
// a plan cache's TTL later than this one.
func (r outlook) timedUnderPlanBefore(previousPoll time.Time) bool {
	return !previousPoll.IsZero() && !r.planChangedAt.IsZero() && previousPoll.Before(r.planChangedAt.Add(planTTL))
}

// standings tells a room's standing: it reads the plan the scheduler published (cached for
// planTTL) and tells the room's phase from it.
type standings struct {
	plans *queue.PlanCache
	now   func() time.Time
}

// of is the room's standing under cfg.
func (s *standings) of(ctx context.Context, cfg *Config) standing {
	r, _, _, _ := s.read(ctx, cfg)
	return r
}

// outlookOf is the room's outlook under cfg: its standing, and the forecast and plan change read
// with it.
func (s *standings) outlookOf(ctx context.Context, cfg *Config) outlook {
	r, published, change, err := s.read(ctx, cfg)
	o := outlook{standing: r, planBefore: change.Before, planChangedAt: change.At}
	if f := published.Forecast; err == nil && f != nil && s.now().Sub(f.At) <= forecastMaxAge {
		o.forecast = f
	}
	return o
}

// read is the room's standing under cfg, with what the plan cache answered: the published plan (the
// last good one after an error), the last change of plan it saw, and the error of its last read.
func (s *standings) read(ctx context.Context, cfg *Config) (standing, queue.PublishedPlan, queue.PlanChange, error) {
	r := standing{abandonAfter: cfg.AbandonAfter, pollMin: cfg.PollMin, pollMax: cfg.PollMax, plan: cfg.Quota, phase: phase.Open, known: true}
	published, change, err := s.plans.Read(ctx)
	if err == nil {
		r.plan = published.Quota
	}
	sc := cfg.Schedule
	if sc == nil {
		return r, published, change, err
	}
	// A plan of Redis is good for the phase, even stale after an error, once it is of this schedule.
	if !published.OpensAt.IsZero() && published.OpensAt.UnixMilli() == sc.OpensAt.UnixMilli() {
		r.phase = published.Phase
		if r.phase == "" {
			r.phase = phase.Open
		}
		return r, published, change, err
	}
	r.known = false
	r.phase = cfg.phaseAt(s.now())
	if r.phase == phase.Open {
		r.phase = phase.Opening
	}
	return r, published, change, err
}

// before says the room has not opened: visitors without a pass do not reach the protected routes,
// and nobody is admitted.
func (r standing) beforeOpening() bool {
	return r.phase == phase.Scheduled || r.phase == phase.PreQueue
}

// scheduleTimes are the schedule's instants as the JSON contract states them; nil without one.
// OpensInMs is how long until opensAt by the proxy's clock, while the room has not opened: a page
// counts down from it, whatever its own clock says.
type scheduleTimes struct {
	PreQueueFrom *time.Time `json:"preQueueFrom,omitempty"`
	OpensAt      *time.Time `json:"opensAt,omitempty"`
	ClosesAt     *time.Time `json:"closesAt,omitempty"`
	OpensInMs    int64      `json:"opensInMs,omitempty"`
}

// scheduleTimesOf are c's schedule's instants at now.
func scheduleTimesOf(c *Config, now time.Time) scheduleTimes {
	sc := c.Schedule
	if sc == nil {
		return scheduleTimes{}
	}
	utc := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		t = t.UTC()
		return &t
	}
	st := scheduleTimes{PreQueueFrom: utc(sc.PreQueueFrom), OpensAt: utc(sc.OpensAt), ClosesAt: utc(sc.ClosesAt)}
	if left := sc.OpensAt.Sub(now); left > 0 {
		st.OpensInMs = max(1, left.Milliseconds())
	}
	return st
}

// phaseAt is the schedule's phase at t; Open without a schedule.
func (c *Config) phaseAt(t time.Time) phase.Phase { return c.Schedule.PhaseAt(t) }

// fromEarlierOpening says a pass was issued before the schedule's pre-queue, for an opening that is
// over: it opens nothing (settings.Schedule.PassesFrom).
func (c *Config) fromEarlierOpening(p pass.Pass) bool {
	return p.NotBefore.Before(c.Schedule.PassesFrom())
}

// notOpen answers a visitor who came before the room opened, at now: 403 not_open, with the
// schedule, and, once the pre-queue is open, where to take a place (enter). Before the pre-queue it
// says when to ask again: at preQueueFrom, spread (by spread, 0 to 1) over the shortest poll
// interval so that the pages of a crowd do not all come in the same millisecond.
func notOpen(cfg *Config, r standing, class string, now time.Time, spread float64, enter string) answer {
	body := notOpenBody{Error: "not_open", Phase: r.phase, scheduleTimes: scheduleTimesOf(cfg, now)}
	var wait time.Duration
	if r.phase == phase.PreQueue {
		body.Message = "the room opens at opensAt; take a pre-queue place now: the order of the pre-queue is drawn at opening, arriving early wins nothing"
		body.Enter = enter
	} else {
		body.Message = "the room opens at opensAt; the pre-queue opens at preQueueFrom"
		wait = cfg.Schedule.PreQueueFrom.Sub(now) + time.Duration(spread*float64(r.pollMin))
		wait = min(max(wait, r.pollMin), maxNotOpenRetry)
		body.RetryAfterMs = wait.Milliseconds()
	}
	return jsonAnswer(http.StatusForbidden, body).retry(wait).counted(class, "not_open")
}

// notOpenBody is the 403 of a room that has not opened.
type notOpenBody struct {
	Error        string      `json:"error"`
	Message      string      `json:"message"`
	Phase        phase.Phase `json:"phase"`
	Enter        string      `json:"enter,omitempty"`
	RetryAfterMs int64       `json:"retryAfterMs,omitempty"`
	scheduleTimes
}

// scheduleClosed answers a newcomer after closesAt: 503 closed. The room does not reopen by itself,
// so the Retry-After every 503 carries is the longest the proxy tells anyone to wait: a schedule moved
// or a next launch reaches the client by then.
func scheduleClosed(cfg *Config, class string, now time.Time) answer {
	return jsonAnswer(http.StatusServiceUnavailable, notOpenBody{Error: "closed", Phase: phase.Closed, scheduleTimes: scheduleTimesOf(cfg, now),
		RetryAfterMs: maxNotOpenRetry.Milliseconds(),
		Message:      "the waiting room closed at closesAt and takes no new visitors; those already in the queue are still admitted"}).
		retry(maxNotOpenRetry).counted(class, "closed")
}

// closed answers a request the closed room turns away: 503, to try again after the longest poll
// interval.
func closed(cfg *Config, class string) answer {
	return errorAnswer(http.StatusServiceUnavailable, errorBody{Error: "closed", Phase: phase.Closed,
		Message: "the waiting room is closed for now; places already taken are kept"}).retry(cfg.PollMax).counted(class, "closed")
}
