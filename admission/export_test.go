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
func (p *Room) SyncSessions(ctx context.Context) error { return p.runtime.syncSessions(ctx) }
func (p *Room) KeepSessions(ctx context.Context)       { p.runtime.keepSessions(ctx) }
func (p *Room) RefreshFar(ctx context.Context)         { p.runtime.refreshFar(ctx) }
func (p *Room) KeepFarPositions(ctx context.Context)   { p.runtime.keepFarPositions(ctx) }
func (p *Room) ReportWorkload(ctx context.Context)     { p.runtime.reportWorkload(ctx) }
func (p *Room) ReportConfig(ctx context.Context)       { p.runtime.reportConfig(ctx) }

// ReportAt is the report the replica would send at now (the checks' rate measured since the last).
func (p *Room) ReportAt(now time.Time) queue.ProxyReport { return p.state.report(now) }
func (p *Room) Sessions() *replica.Sessions              { return p.runtime.sessions }
func (p *Room) FarPositions() *replica.FarPositions      { return p.runtime.farPositions }
func (p *Room) WorkloadMeter() *replica.WorkloadMeter    { return p.runtime.workload }

// ReadPlansFresh makes the proxy read the published plan at every request.
func (p *Room) ReadPlansFresh(engine queue.PlanReader) {
	p.standing.plans = queue.NewPlanCache(engine, 0)
}

func (p *Room) RedisDown() bool { return p.redis.isDown() }

// Reclaimer is the proxy's write-back of passes after a failover.
type Reclaimer = reclaimer

func (r *reclaimer) Saw(p pass.Pass, now time.Time) { r.saw(p, now) }

func (r *reclaimer) Start(at time.Time, lifetime time.Duration, recent []queue.HeldPass) {
	r.start(at, lifetime, recent)
}

func (r *reclaimer) Take(now time.Time) []queue.HeldPass { return r.take(now) }

// MustRefuse is what the gate makes of the reply it wrote for a request it did not let through.
func MustRefuse(r Reply) Reply {
	r.mustRefuse()
	return r
}
