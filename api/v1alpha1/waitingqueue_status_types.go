package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PlanSource says where a plan's batch size comes from.
// +kubebuilder:validation:Enum=Derived;Override
type PlanSource string

const (
	// PlanDerived means the batch size was derived from capacity.
	PlanDerived PlanSource = "Derived"
	// PlanOverride means capacity.batchSizeOverride set the batch size.
	PlanOverride PlanSource = "Override"
)

// PlanStatus is the admission plan in force.
type PlanStatus struct {
	// batchSize is the whole number of visitors admitted per tick. When the exact quota per tick is
	// fractional, the remainder is carried from tick to tick, so some ticks admit one more.
	// +optional
	BatchSize int64 `json:"batchSize"`

	// admissionsPerSecond is the plan's exact long-run admission rate as a decimal string, truncated
	// to three decimals, or to three significant digits below 1: for example "140", "1.4" or
	// "0.0000166".
	// +optional
	AdmissionsPerSecond string `json:"admissionsPerSecond,omitempty"`

	// source is Derived (from capacity) or Override (from capacity.batchSizeOverride).
	// +optional
	Source PlanSource `json:"source,omitempty"`

	// tickLimit, when set, is the most visitors one tick admits, below what the plan asks for: the
	// work of a tick in Redis is bounded whatever the plan. Ticks then admit tickLimit visitors and
	// the Admitting condition says so (reason TickLimited). A shorter tick admits more per second.
	// +optional
	TickLimit *int64 `json:"tickLimit,omitempty"`

	// effectiveAdmissionsPerSecond is the plan's rate as ticks can run it: admissionsPerSecond, or
	// tickLimit per tick when the plan asks for more. A decimal string, for example "140" or
	// "0.0000166". With an Adaptive capacity it is the ceiling of status.workload.admissionsPerSecond.
	// +optional
	EffectiveAdmissionsPerSecond string `json:"effectiveAdmissionsPerSecond,omitempty"`
}

// LaneStatus is one lane as the scheduler last read it.
type LaneStatus struct {
	// name is the lane's, or main for the main queue.
	// +required
	Name string `json:"name"`

	// depth is the number of visitors waiting in the lane.
	// +optional
	Depth int64 `json:"depth"`

	// admittedPerSecond is the lane's admissions per second over the last 10 seconds, as a decimal
	// string.
	// +optional
	AdmittedPerSecond string `json:"admittedPerSecond,omitempty"`
}

// ProxyStatus reports the admission proxy Deployment.
type ProxyStatus struct {
	// readyReplicas is the number of proxy pods ready to serve.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
}

// WaitingQueueStatus is the observed state of a WaitingQueue.
type WaitingQueueStatus struct {
	// observedGeneration is the generation of the spec that this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// plan is the admission plan derived from the spec.
	// +optional
	Plan *PlanStatus `json:"plan,omitempty"`

	// queueDepth is the number of visitors waiting.
	// +optional
	// +kubebuilder:default=0
	QueueDepth int64 `json:"queueDepth"`

	// activeVisitors is the number of admitted visitors whose pass has not expired or been released.
	// +optional
	// +kubebuilder:default=0
	ActiveVisitors int64 `json:"activeVisitors"`

	// preQueueDepth is the number of pre-queue places (spec.schedule) not drawn yet.
	// +optional
	PreQueueDepth int64 `json:"preQueueDepth,omitempty"`

	// liveFiguresTime is when the scheduler read the live figures of this status from Redis:
	// queueDepth, activeVisitors, preQueueDepth, the rates and the lanes'. A busy room reads them
	// every 2 seconds and writes them at most every 10; a room nobody waits in reads them when it
	// wakes, at least every 10 seconds. Figures read again unchanged are not written again, so
	// this is when they last changed: a room at rest keeps the time it came to rest, and its
	// figures hold as long as RedisAvailable is True. Whether anybody waits, holds a pass or sits
	// in the pre-queue is written as soon as it changes; a room that drains shows queueDepth 0 at
	// once.
	// +optional
	LiveFiguresTime *metav1.Time `json:"liveFiguresTime,omitempty"`

	// event names the event of the room's calendar in force (spec.events), as the scheduler last
	// ticked it; unset outside every event. plan, the Open condition and the draw's seed are then the
	// event's.
	// +optional
	Event string `json:"event,omitempty"`

	// lanes are, for a room with lanes (spec.lanes), the main queue (named main) and each lane: how
	// many wait in it and how many it admits per second. queueDepth counts the main queue alone.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=9
	Lanes []LaneStatus `json:"lanes,omitempty"`

	// maxActive is the cap on activeVisitors in force (spec.capacity.maxActive); unset without one.
	// +optional
	MaxActive *int64 `json:"maxActive,omitempty"`

	// admittedPerSecond is the observed admission rate over the last 10 seconds, as a decimal string
	// rounded to three significant digits, with no decimals from 100 up: for example "139", "48.9" or
	// "0.0123". It averages the 10 seconds before liveFiguresTime, and a busy room's figures are
	// written every 10 seconds, so it describes up to 20 seconds back: while admissions ramp up it
	// shows less than the plan. The metrics herdgate_admitted_total (the scheduler's) and
	// herdgate_admitted_at_once_total (the proxies', on entering) count every admission.
	// +optional
	AdmittedPerSecond string `json:"admittedPerSecond,omitempty"`

	// lastBusy is the room's last busy spell: its ticks admitted visitors with no pause of 10 seconds
	// or more between them. admittedPerSecond averages the last 10 seconds, so after a herd of a few
	// seconds it shows part of it and then falls to 0; lastBusy keeps what the room did under it, and
	// while visitors wait it is the spell under way. Unset until a tick admits anyone.
	// +optional
	LastBusy *BusySpellStatus `json:"lastBusy,omitempty"`

	// releasedPerSecond is the observed rate of sessions the workload ended (passes released) over
	// the last 10 seconds, as a decimal string rounded like admittedPerSecond.
	// +optional
	ReleasedPerSecond string `json:"releasedPerSecond,omitempty"`

	// gatewayChecksPerSecond is, for a room the gateway enforces (spec.enforcement Gateway), how
	// many checks per second the gateways asked the admission proxies about requests outside
	// /.herdgate/, summed over the replicas' last reports (every 10 seconds), rounded like
	// admittedPerSecond. "0" while visitors are admitted means no gateway asks: see the
	// GatewayChecking condition. Unset for a room the proxy enforces.
	// +optional
	GatewayChecksPerSecond string `json:"gatewayChecksPerSecond,omitempty"`

	// workload is what the admission proxies measured of the protected requests, and the rate an
	// Adaptive capacity chose from it; unset before any proxy replica reported.
	// +optional
	Workload *WorkloadStatus `json:"workload,omitempty"`

	// polling says what the queue's status polls cost under spec.polling.budget at its depth.
	// +optional
	Polling *PollingStatus `json:"polling,omitempty"`

	// proxy reports the admission proxy Deployment.
	// +optional
	Proxy *ProxyStatus `json:"proxy,omitempty"`

	// seedCommitment is the SHA-256, in hex, of the seed that draws the pre-queue's order at opening
	// (spec.schedule). It is published as soon as the queue has a schedule, before the pre-queue
	// opens, so that nobody, the operator included, can pick the draw afterwards. A new opensAt after
	// a reveal gets a new seed, and a new commitment.
	// +optional
	SeedCommitment string `json:"seedCommitment,omitempty"`

	// seed is that seed, in hex, revealed once the draw began at opening: with the draw's record
	// anyone can recompute every drawn place (herd verify-shuffle) and check it against
	// seedCommitment.
	// +optional
	Seed string `json:"seed,omitempty"`

	// draw says where the seed of the next draw comes from, or of the last once it began: for a
	// room whose draw takes a beacon's round (spec.draw), the round it committed to, the chain that
	// checks it and, once the draw began, the round's signature and the source the draw used.
	// +optional
	Draw *DrawStatus `json:"draw,omitempty"`

	// conditions are the latest observations of the queue's state: Ready, Accepted, Programmed,
	// RedisAvailable, Admitting, ProxyAvailable, Open, WithinPollBudget, with an Adaptive capacity Adapted,
	// and in Gateway enforcement GatewayChecking.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// WorkloadStatus is what the admission proxies measured of the protected requests over the last
// few seconds, merged over the replicas, and what the adaptive rate made of it.
type WorkloadStatus struct {
	// reportingReplicas is how many proxy replicas reported lately.
	// +optional
	ReportingReplicas int32 `json:"reportingReplicas"`

	// latencyP50 is the median upstream latency of protected requests (to the response headers),
	// from a histogram: the upper bound of its bucket, within 10 %, rounded to three significant
	// digits (for example 252ms).
	// +optional
	LatencyP50 *metav1.Duration `json:"latencyP50,omitempty"`

	// latencyP95 is the 95th percentile of the same latency, read the same way.
	// +optional
	LatencyP95 *metav1.Duration `json:"latencyP95,omitempty"`

	// inFlight is the mean number of protected requests in flight upstream, as a decimal string.
	// +optional
	InFlight string `json:"inFlight,omitempty"`

	// targetInFlight is what the pool is sized for: poolSize × utilizationPercent ÷ 100.
	// +optional
	TargetInFlight string `json:"targetInFlight,omitempty"`

	// errorPercent is the share of protected requests that failed upstream (5xx, timeouts, refused
	// or closed connections).
	// +optional
	ErrorPercent int32 `json:"errorPercent"`

	// noShowPercent is the share of admitted visitors who never sent a protected request with their
	// pass, judged a few seconds after their pass became valid.
	// +optional
	NoShowPercent int32 `json:"noShowPercent"`

	// admissionsPerSecond is the rate ticks run at: the plan's effectiveAdmissionsPerSecond in
	// Declared mode, the adaptive controller's choice in Adaptive mode. A decimal string.
	// +optional
	AdmissionsPerSecond string `json:"admissionsPerSecond,omitempty"`

	// reason says why an Adaptive rate differs from the plan: Declared (it does not), NoReports,
	// LatencyAboveDeclared, InFlightAboveTarget, UpstreamErrors, NoShows, Recovering or Floor.
	// +optional
	Reason string `json:"reason,omitempty"`

	// waitEstimatesJudged is how many visitors admitted over the last 5 minutes had their first
	// estimated wait (of 5 s or more) compared with the wait they had.
	// +optional
	WaitEstimatesJudged int64 `json:"waitEstimatesJudged,omitempty"`

	// waitEstimateErrorP90Percent is the 90th percentile of how far off those first estimates were,
	// relative to the waits had, in percent: the upper bound of its histogram bucket (2, 5, 10, 15,
	// 20, 30, 50, 100 or 200), or ">200". Unset while none were judged. The proxies' metric
	// herdgate_proxy_wait_estimate_error_ratio holds the whole histogram.
	// +optional
	WaitEstimateErrorP90Percent string `json:"waitEstimateErrorP90Percent,omitempty"`
}

// PollingStatus is what the poll budget does at the queue's depth.
type PollingStatus struct {
	// farInterval is the poll interval (before its random spread) of the visitors far from the front:
	// maxInterval, or longer where the budget needs it.
	// +optional
	FarInterval *metav1.Duration `json:"farInterval,omitempty"`

	// expectedPollsPerSecond is what the waiting visitors' polls cost at this depth, at most, on
	// average, as a decimal string.
	// +optional
	ExpectedPollsPerSecond string `json:"expectedPollsPerSecond,omitempty"`

	// supportedDepth is the deepest queue the budget holds without telling anyone to poll less often
	// than half of abandonAfter; a deeper queue costs more than the budget (the WithinPollBudget
	// condition says so).
	// +optional
	SupportedDepth int64 `json:"supportedDepth,omitempty"`
}

// DrawStatus is where the seed of a draw comes from.
type DrawStatus struct {
	// opensAt names the opening the draw is for.
	// +optional
	OpensAt *metav1.Time `json:"opensAt,omitempty"`

	// seedSource is the source of the draw's seed: Beacon while it is to come from the beacon, and
	// once it did; CommitReveal when the room has no beacon, or fell back to its committed secret
	// alone (fallbackReason says why).
	// +optional
	SeedSource DrawSeedSource `json:"seedSource,omitempty"`

	// fallbackReason says why a draw meant to take a beacon's round drew with the committed secret
	// alone: the round did not come, or did not verify, within maxWait; or the pre-queue was empty,
	// and no round was taken.
	// +optional
	FallbackReason string `json:"fallbackReason,omitempty"`

	// beacon is the beacon's chain and the round the draw committed to.
	// +optional
	Beacon *BeaconStatus `json:"beacon,omitempty"`
}

// BeaconStatus is a beacon's chain, as its info answer described it, and the round a draw committed
// to: everything kubectl herdgate draw verify needs to check the draw offline.
type BeaconStatus struct {
	// chainHash names the chain; the fields below hash to it.
	ChainHash string `json:"chainHash"`

	// round is the round the draw committed to: the first the chain publishes after the pre-queue
	// freezes at opening.
	// +optional
	Round int64 `json:"round,omitempty"`

	// roundAt is when the chain publishes that round.
	// +optional
	RoundAt *metav1.Time `json:"roundAt,omitempty"`

	// publicKey is the chain's public key, hex, which checks its rounds.
	PublicKey string `json:"publicKey"`

	// scheme is the chain's signature scheme, for example bls-unchained-g1-rfc9380.
	Scheme string `json:"scheme"`

	// periodSeconds is the time between the chain's rounds.
	// +optional
	PeriodSeconds int64 `json:"periodSeconds,omitempty"`

	// genesisTime is when the chain published round 1, in Unix seconds.
	// +optional
	GenesisTime int64 `json:"genesisTime,omitempty"`

	// genesisSeed is the chain's genesis seed, hex; with the fields above and beaconID it hashes to
	// chainHash.
	// +optional
	GenesisSeed string `json:"genesisSeed,omitempty"`

	// beaconID names the chain among those of its group; empty for the group's default chain.
	// +optional
	BeaconID string `json:"beaconID,omitempty"`

	// randomness is the round's randomness, hex, once the draw took it: SHA-256 of its signature.
	// +optional
	Randomness string `json:"randomness,omitempty"`

	// signature is the round's BLS signature, hex, as the beacon served it.
	// +optional
	Signature string `json:"signature,omitempty"`

	// previousSignature is the previous round's signature, hex, which a chained scheme's round
	// signs too; empty for unchained schemes.
	// +optional
	PreviousSignature string `json:"previousSignature,omitempty"`
}

// BusySpellStatus is a spell of the room's ticks admitting visitors (status.lastBusy).
type BusySpellStatus struct {
	// start is the first tick of the spell that admitted anyone.
	Start metav1.Time `json:"start"`

	// end is the last tick of the spell that admitted anyone.
	End metav1.Time `json:"end"`

	// ongoing says visitors still waited after the spell's last tick.
	// +optional
	Ongoing bool `json:"ongoing,omitempty"`

	// admitted is how many visitors the spell's ticks admitted; visitors admitted at once on
	// entering, with nobody waiting, are not counted.
	Admitted int64 `json:"admitted"`

	// admittedPerSecond is admitted over the spell's ticks (from start to end, and one tick), rounded
	// like the room's admittedPerSecond.
	AdmittedPerSecond string `json:"admittedPerSecond"`

	// peakDepth is the most visitors that waited at a tick of the spell.
	PeakDepth int64 `json:"peakDepth"`
}
