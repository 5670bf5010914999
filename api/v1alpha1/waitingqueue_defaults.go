package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The accessors below return a field's value, or its default when the field is unset. The API server
// fills the defaults in on every write, so an unset field is only seen on objects built in Go.

// EffectiveTick returns spec.tick.
func (s *WaitingQueueSpec) EffectiveTick() time.Duration {
	return durationOr(s.Tick, DefaultTick)
}

// EffectiveUtilizationPercent returns spec.capacity.utilizationPercent.
func (s *WaitingQueueSpec) EffectiveUtilizationPercent() int32 {
	if s.Capacity.UtilizationPercent == nil {
		return DefaultUtilizationPercent
	}
	return *s.Capacity.UtilizationPercent
}

// EffectiveJitterMode returns spec.jitter.mode.
func (s *WaitingQueueSpec) EffectiveJitterMode() JitterMode {
	if s.Jitter == nil || s.Jitter.Mode == "" {
		return JitterUniform
	}
	return s.Jitter.Mode
}

// EffectiveJitterWindow returns the window over which one tick's admissions are spread: zero when
// jitter is off, spec.jitter.window when set, else the tick.
func (s *WaitingQueueSpec) EffectiveJitterWindow() time.Duration {
	if s.EffectiveJitterMode() == JitterNone {
		return 0
	}
	if s.Jitter != nil && s.Jitter.Window != nil {
		return s.Jitter.Window.Duration
	}
	return s.EffectiveTick()
}

// EffectivePassTTL returns spec.pass.ttl.
func (s *WaitingQueueSpec) EffectivePassTTL() time.Duration {
	if s.Pass == nil {
		return DefaultPassTTL
	}
	return durationOr(s.Pass.TTL, DefaultPassTTL)
}

// DefaultPreQueue is how long before opensAt the pre-queue opens when spec.schedule.preQueueFrom is unset.
const DefaultPreQueue = 15 * time.Minute

// EffectivePreQueueFrom returns spec.schedule.preQueueFrom; the zero time without a schedule.
func (s *WaitingQueueSpec) EffectivePreQueueFrom() time.Time {
	if s.Schedule == nil {
		return time.Time{}
	}
	// A zero time is written as null, which the API server reads as unset.
	if s.Schedule.PreQueueFrom != nil && !s.Schedule.PreQueueFrom.IsZero() {
		return s.Schedule.PreQueueFrom.Time
	}
	return s.Schedule.OpensAt.Add(-DefaultPreQueue)
}

// DefaultMaxSession is spec.pass.maxSession's default.
const DefaultMaxSession = time.Hour

// EffectivePassRenewal returns spec.pass.renewal.
func (s *WaitingQueueSpec) EffectivePassRenewal() PassRenewal {
	if s.Pass == nil || s.Pass.Renewal == "" {
		return RenewalFixed
	}
	return s.Pass.Renewal
}

// DefaultKeyRotation is spec.pass.keyRotation's default.
const DefaultKeyRotation = 7 * 24 * time.Hour

// EffectiveEnforcement returns spec.enforcement.
func (s *WaitingQueueSpec) EffectiveEnforcement() Enforcement {
	if s.Enforcement == "" {
		return EnforcementProxy
	}
	return s.Enforcement
}

// EffectivePassFormat returns spec.pass.format.
func (s *WaitingQueueSpec) EffectivePassFormat() PassFormat {
	if s.Pass == nil || s.Pass.Format == "" {
		return PassFormatHMAC
	}
	return s.Pass.Format
}

// EffectivePassAlgorithm returns spec.pass.algorithm; empty for HMAC passes.
func (s *WaitingQueueSpec) EffectivePassAlgorithm() PassAlgorithm {
	switch {
	case s.EffectivePassFormat() != PassFormatJWT:
		return ""
	case s.Pass.Algorithm == "":
		return PassAlgorithmES256
	}
	return s.Pass.Algorithm
}

// EffectiveKeyRotation returns spec.pass.keyRotation.
func (s *WaitingQueueSpec) EffectiveKeyRotation() time.Duration {
	if s.Pass == nil {
		return DefaultKeyRotation
	}
	return durationOr(s.Pass.KeyRotation, DefaultKeyRotation)
}

// EffectiveMaxSession returns spec.pass.maxSession, at least the pass's ttl.
func (s *WaitingQueueSpec) EffectiveMaxSession() time.Duration {
	d := DefaultMaxSession
	if s.Pass != nil && s.Pass.MaxSession != nil {
		d = s.Pass.MaxSession.Duration
	}
	return max(d, s.EffectivePassTTL())
}

// EffectiveMaxActive returns spec.capacity.maxActive, 0 when unset (no cap).
func (s *WaitingQueueSpec) EffectiveMaxActive() int64 {
	if s.Capacity.MaxActive == nil {
		return 0
	}
	return int64(*s.Capacity.MaxActive)
}

// EffectivePolling returns spec.polling.minInterval and spec.polling.maxInterval.
func (s *WaitingQueueSpec) EffectivePolling() (minInterval, maxInterval time.Duration) {
	if s.Polling == nil {
		return DefaultPollMinInterval, DefaultPollMaxInterval
	}
	return durationOr(s.Polling.MinInterval, DefaultPollMinInterval), durationOr(s.Polling.MaxInterval, DefaultPollMaxInterval)
}

// EffectiveAbandonAtTurnAfter returns spec.abandonAtTurnAfter, or abandonAfter when it is unset.
func (s *WaitingQueueSpec) EffectiveAbandonAtTurnAfter() time.Duration {
	return durationOr(s.AbandonAtTurnAfter, s.EffectiveAbandonAfter())
}

// EffectiveAbandonAfter returns spec.abandonAfter.
func (s *WaitingQueueSpec) EffectiveAbandonAfter() time.Duration {
	return durationOr(s.AbandonAfter, DefaultAbandonAfter)
}

// IsSuspended reports spec.suspend.
func (s *WaitingQueueSpec) IsSuspended() bool {
	return s.Suspend != nil && *s.Suspend
}

// EffectiveMode returns spec.mode.
func (s *WaitingQueueSpec) EffectiveMode() Mode {
	if s.Mode == "" {
		return ModeQueue
	}
	return s.Mode
}

// EffectiveProxyReplicas returns spec.proxy.replicas.
func (s *WaitingQueueSpec) EffectiveProxyReplicas() int32 {
	if s.Proxy == nil || s.Proxy.Replicas == nil {
		return DefaultProxyReplicas
	}
	return *s.Proxy.Replicas
}

// EffectiveProxyAutoscaling returns spec.proxy.autoscaling with its defaults filled in, or nil when
// the proxy runs a fixed number of replicas.
func (s *WaitingQueueSpec) EffectiveProxyAutoscaling() *ProxyAutoscaling {
	if s.Proxy == nil || s.Proxy.Autoscaling == nil {
		return nil
	}
	a := s.Proxy.Autoscaling.DeepCopy()
	if a.MinReplicas == nil {
		a.MinReplicas = ptr.To[int32](DefaultProxyMinReplicas)
	}
	if a.TargetCPUUtilizationPercentage == nil {
		a.TargetCPUUtilizationPercentage = ptr.To[int32](DefaultProxyTargetCPUPercent)
	}
	return a
}

// EffectiveFailurePolicy returns spec.proxy.failurePolicy.
func (s *WaitingQueueSpec) EffectiveFailurePolicy() FailurePolicy {
	if s.Proxy == nil || s.Proxy.FailurePolicy == "" {
		return FailClosed
	}
	return s.Proxy.FailurePolicy
}

// EffectiveMethods returns the methods of a route.
func (r *ProtectedRoute) EffectiveMethods() []HTTPMethod {
	if len(r.Methods) == 0 {
		return []HTTPMethod{"POST"}
	}
	return r.Methods
}

func durationOr(d *metav1.Duration, fallback time.Duration) time.Duration {
	if d == nil {
		return fallback
	}
	return d.Duration
}

// Defaults of spec.entry.perClient.
const (
	DefaultEntryBurst     = 10
	DefaultEntryPerMinute = 30
	// DefaultPollsPerClient is spec.entry.perClient.pollsPerSecond's default.
	DefaultPollsPerClient        = 50
	DefaultEntryIPv4PrefixLength = 32
	DefaultEntryIPv6PrefixLength = 64
)

// EffectivePerClient returns spec.entry.perClient with its defaults: burst, perMinute and the IPv4 and
// IPv6 prefix lengths; ok is false when no limit is set.
func (s *WaitingQueueSpec) EffectivePerClient() (burst, perMinute, v4Bits, v6Bits int, ok bool) {
	if s.Entry == nil || s.Entry.PerClient == nil {
		return 0, 0, 0, 0, false
	}
	l := s.Entry.PerClient
	or := func(p *int32, d int) int {
		if p == nil {
			return d
		}
		return int(*p)
	}
	return or(l.Burst, DefaultEntryBurst), or(l.PerMinute, DefaultEntryPerMinute),
		or(l.IPv4PrefixLength, DefaultEntryIPv4PrefixLength), or(l.IPv6PrefixLength, DefaultEntryIPv6PrefixLength), true
}

// EffectivePollsPerClient returns spec.entry.perClient.pollsPerSecond; ok is false without
// spec.entry.perClient.
func (s *WaitingQueueSpec) EffectivePollsPerClient() (perSecond int, ok bool) {
	if s.Entry == nil || s.Entry.PerClient == nil {
		return 0, false
	}
	if p := s.Entry.PerClient.PollsPerSecond; p != nil {
		return int(*p), true
	}
	return DefaultPollsPerClient, true
}

// EffectiveCapacityMode returns spec.capacity.mode.
func (s *WaitingQueueSpec) EffectiveCapacityMode() CapacityMode {
	if s.Capacity.Mode == "" {
		return CapacityDeclared
	}
	return s.Capacity.Mode
}

// EffectivePollBudget returns spec.polling.budget, in status polls per second.
func (s *WaitingQueueSpec) EffectivePollBudget() int32 {
	if s.Polling == nil || s.Polling.Budget == nil {
		return DefaultPollBudget
	}
	return *s.Polling.Budget
}

// EffectiveExactPositions returns spec.polling.exactPositions.
func (s *WaitingQueueSpec) EffectiveExactPositions() int32 {
	if s.Polling == nil || s.Polling.ExactPositions == nil {
		return DefaultExactPositions
	}
	return *s.Polling.ExactPositions
}

// EffectiveRedisDurability returns spec.redis.durability.
func (s *WaitingQueueSpec) EffectiveRedisDurability() RedisDurability {
	if s.Redis == nil || s.Redis.Durability == "" {
		return RedisDurabilityAsync
	}
	return s.Redis.Durability
}
