package v1alpha1

// Condition types of a WaitingQueue.
const (
	// ConditionReady is True when the queue admits visitors through a working proxy: RedisAvailable,
	// Admitting (or suspended on purpose) and ProxyAvailable all hold.
	ConditionReady = "Ready"
	// ConditionRedisAvailable is True when the queue's Redis answered the last scheduler tick.
	ConditionRedisAvailable = "RedisAvailable"
	// ConditionAdmitting is True while the scheduler admits visitors at the planned rate.
	ConditionAdmitting = "Admitting"
	// ConditionProxyAvailable is True when at least one admission proxy pod is ready.
	ConditionProxyAvailable = "ProxyAvailable"
)

// Condition reasons of a WaitingQueue.
const (
	ReasonReady              = "Ready"
	ReasonNotReady           = "NotReady"
	ReasonRedisReachable     = "RedisReachable"
	ReasonRedisUnreachable   = "RedisUnreachable"
	ReasonRedisConfigInvalid = "RedisConfigInvalid"
	ReasonSchedulerRunning   = "SchedulerRunning"
	ReasonSchedulerPending   = "SchedulerPending"
	ReasonSuspended          = "Suspended"
	ReasonPlanInvalid        = "PlanInvalid"
	ReasonProxyReady         = "ProxyReady"
	ReasonProxyNotReady      = "ProxyNotReady"
	ReasonProxyScaledToZero  = "ProxyScaledToZero"
)
