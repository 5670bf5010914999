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
	MaxNotOpenRetry = maxNotOpenRetry
	PlanTTL         = planTTL
	TooEarlyShare   = tooEarlyShare
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

func (p *Room) AfterUpstream(d Decision, status int, release string) {
	p.gate.afterUpstream(d, status, release)
}
func (p *Room) SyncSessions(ctx context.Context) error { return p.runtime.SyncSessions(ctx) }
func (p *Room) KeepSessions(ctx context.Context)       { p.runtime.KeepSessions(ctx) }
func (p *Room) RefreshFar(ctx context.Context)         { p.runtime.RefreshFar(ctx) }
func (p *Room) KeepFarPositions(ctx context.Context)   { p.runtime.KeepFarPositions(ctx) }
func (p *Room) ReportWorkload(ctx context.Context)     { p.runtime.ReportWorkload(ctx) }
func (p *Room) ReportConfig(ctx context.Context)       { p.runtime.ReportConfig(ctx) }

// ReportAt is the report the replica would send at now (the checks' rate measured since the last).
func (p *Room) ReportAt(now time.Time) queue.ProxyReport { return p.report.At(now) }
func (p *Room) Sessions() *replica.Sessions              { return p.runtime.Sessions }
func (p *Room) FarPositions() *replica.FarPositions      { return p.runtime.Far }
func (p *Room) WorkloadMeter() *replica.WorkloadMeter    { return p.runtime.Workload }

// ReadPlansFresh makes the proxy read the published plan at every request.
func (p *Room) ReadPlansFresh(engine queue.PlanReader) {
	p.standing.plans = queue.NewPlanCache(engine, 0)
}

func (p *Room) RedisDown() bool { return p.redis.isDown() }

// MustRefuse is what the gate makes of the reply it wrote for a request it did not let through.
func MustRefuse(r Reply) Reply {
	r.mustRefuse()
	return r
}
