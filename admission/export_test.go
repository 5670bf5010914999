package admission

import (
	"context"
	"time"

	"github.com/herdgate/herdgate/admission/replica"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/queue"
)

// Doors into the package for its tests, which speak to it from outside (package admission_test) as
// the fronts do, and reach inside only through here.

type PositionBody = positionBody

const (
	RedisRetryAfterError = redisRetryAfterError
	MaxNotOpenRetry      = maxNotOpenRetry
	PlanTTL              = planTTL
	TooEarlyShare        = tooEarlyShare
)

var SafeReturn = safeReturn

// ForwardingOf is how a request of canonical path goes to cfg's upstream.
func ForwardingOf(cfg *Config, canonical, clientIP string, in Inbound) Forwarding {
	return forwardingOf(cfg, canonical, clientIP, in)
}

// Values are the Secret values a file config carries.
func (fc *FileConfig) Values() SecretValues { return fc.values() }

// PassDecision is a protected request's decision with a valid pass.
func PassDecision(p pass.Pass) Decision { return Decision{class: "protected", pass: p, hasPass: true} }

func (r *Room) AfterUpstream(d Decision, status int, release string) {
	r.gate.afterUpstream(d, status, release)
}
func (r *Room) SyncSessions(ctx context.Context) error { return r.runtime.SyncSessions(ctx) }
func (r *Room) KeepSessions(ctx context.Context)       { r.runtime.KeepSessions(ctx) }
func (r *Room) RefreshFar(ctx context.Context)         { r.runtime.RefreshFar(ctx) }
func (r *Room) KeepFarPositions(ctx context.Context)   { r.runtime.KeepFarPositions(ctx) }
func (r *Room) ReportWorkload(ctx context.Context)     { r.runtime.ReportWorkload(ctx) }
func (r *Room) ReportConfig(ctx context.Context)       { r.runtime.ReportConfig(ctx) }

// ReportAt is the report the replica would send at now (the checks' rate measured since the last).
func (r *Room) ReportAt(now time.Time) queue.ProxyReport { return r.report.At(now) }
func (r *Room) Sessions() *replica.Sessions              { return r.runtime.Sessions }
func (r *Room) FarPositions() *replica.FarPositions      { return r.runtime.Far }
func (r *Room) WorkloadMeter() *replica.WorkloadMeter    { return r.runtime.Workload }

// ReadPlansFresh makes the proxy read the published plan at every request.
func (r *Room) ReadPlansFresh(engine queue.PlanReader) {
	r.standing.plans = queue.NewPlanCache(plansThroughHealth{engine: engine, redis: r.redis}, 0)
}

func (r *Room) RedisDown() bool { return r.redis.isDown() }

// MustRefuse is what the gate makes of the reply it wrote for a request it did not let through.
func MustRefuse(r Reply) Reply {
	r.mustRefuse()
	return r
}
