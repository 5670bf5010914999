package v1alpha1

// Condition types of a WaitingQueue.
const (
	// ConditionReady is True when the queue admits visitors through a working proxy: Accepted,
	// Programmed, RedisAvailable, Admitting (or suspended on purpose) and ProxyAvailable all hold.
	ConditionReady = "Ready"
	// ConditionAccepted is True when the manager's checks, which the admission proxy runs too, accept
	// the spec's generation. False means the generation is not applied anywhere: the scheduler and the
	// proxies keep the last accepted one, and the message names the field.
	ConditionAccepted = "Accepted"
	// ConditionProgrammed is True when the manager applied the queue's objects (the proxy's
	// Deployment, Service and access) for this generation and no proxy replica reports that it cannot
	// apply it. False carries the API server's message (reason ApplyFailed) or the replica's
	// (reason ProxyRefusedConfig).
	ConditionProgrammed = "Programmed"
	// ConditionRedisAvailable is True when the queue's Redis answered the last scheduler tick.
	ConditionRedisAvailable = "RedisAvailable"
	// ConditionAdmitting is True while the scheduler admits visitors at the planned rate.
	ConditionAdmitting = "Admitting"
	// ConditionProxyAvailable is True when at least one admission proxy pod is ready.
	ConditionProxyAvailable = "ProxyAvailable"
	// ConditionOpen says whether the protected routes are open, and its reason is the room's phase,
	// shown in kubectl get wq: Scheduled (before the pre-queue), PreQueue (visitors take pre-queue
	// places), Opening (the pre-queue is being drawn), Open (visitors queue and pass with a pass),
	// Passthrough (no pass needed) or Closed (closed to new visitors, or to everyone in mode Closed).
	ConditionOpen = "Open"
	// ConditionAdapted is set with spec.capacity.mode Adaptive: True while the admission rate differs
	// from the declared plan, its reason the adaptive controller's (LatencyAboveDeclared,
	// InFlightAboveTarget, UpstreamErrors, NoShows, Recovering, Floor) and its message the measured
	// numbers; False (reason Declared, or NoReports when no proxy replica measures) at the plan.
	ConditionAdapted = "Adapted"
	// ConditionWithinPollBudget is True while the queue's waiting visitors can be told to poll within
	// spec.polling.budget; False (reason DepthBeyondBudget) when the queue is deeper than the budget
	// holds with spec.abandonAfter: raise either.
	ConditionWithinPollBudget = "WithinPollBudget"
	// ConditionGatewayChecking is set in Gateway enforcement: True (reason Checking) while the
	// gateways ask the check about requests; False (reason NoChecks) when visitors have been admitted
	// for a while and no gateway asked, which is what a gateway that lost its auth_request or
	// ForwardAuth looks like: it lets everyone through. Unknown when nothing tells yet (reasons
	// AwaitingChecks, NoVisitors, NoProxyReports, or JWTPasses: a gateway may verify JWT passes
	// without asking). False makes Ready False.
	ConditionGatewayChecking = "GatewayChecking"
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
	ReasonAccepted           = "Accepted"
	ReasonInvalidSpec        = "InvalidSpec"
	ReasonProgrammed         = "Programmed"
	ReasonNotAccepted        = "NotAccepted"
	ReasonApplyFailed        = "ApplyFailed"
	ReasonProxyRefusedConfig = "ProxyRefusedConfig"
	// ReasonSecretValueMissing: a Secret or key the spec refers to cannot be read; the proxies keep
	// the value copied last, or refuse the spec until it comes.
	ReasonSecretValueMissing = "SecretValueMissing"
	// ReasonSecretValueInvalid: a value the spec refers to cannot serve (an invitation key shorter
	// than 32 bytes, a bypass value shorter than 16); it is not copied, and the proxies keep the value
	// copied last, or refuse the spec until a good one comes.
	ReasonSecretValueInvalid = "SecretValueInvalid"
	// ReasonPageTemplateInvalid: spec.page.template does not render; the page in force stays.
	ReasonPageTemplateInvalid = "PageTemplateInvalid"
	// Reasons of WithinPollBudget.
	ReasonWithinBudget      = "WithinBudget"
	ReasonDepthBeyondBudget = "DepthBeyondBudget"
	// ReasonNotAdmitting (on Adapted): the mode or spec.suspend admits nobody.
	ReasonNotAdmitting = "NotAdmitting"
	// ReasonTickLimited (on Admitting) says that the plan asks for more per tick than one tick admits.
	ReasonTickLimited = "TickLimited"
	// Reasons of the Open condition: the room's phase.
	ReasonScheduled   = "Scheduled"
	ReasonPreQueue    = "PreQueue"
	ReasonOpening     = "Opening"
	ReasonOpen        = "Open"
	ReasonPassthrough = "Passthrough"
	ReasonClosed      = "Closed"
	// Reasons of GatewayChecking.
	ReasonChecking       = "Checking"
	ReasonNoChecks       = "NoChecks"
	ReasonAwaitingChecks = "AwaitingChecks"
	ReasonNoVisitors     = "NoVisitors"
	ReasonNoProxyReports = "NoProxyReports"
	ReasonJWTPasses      = "JWTPasses"
)
