package gatewayconfig

import (
	"fmt"
	"regexp"
	"time"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// The second line: beside the check, each gateway's own cap on the requests in flight to the
// workload. Admissions keep the plan, but a gateway that answers checks late lets the admitted
// visitors through together; the cap keeps what reaches the workload at once within its pool
// (docs/guides/gateways.md, "The second line").

// WorkloadCap is the cap on requests in flight to the workload that each of replicas gateway
// instances keeps: the room's pool (spec.capacity.poolSize) shared out, so that together they
// never send more than the pool. An instance's cap is its own: gateways do not share one.
func WorkloadCap(wq *herdgatev1alpha1.WaitingQueue, replicas int) (int64, error) {
	if replicas < 1 {
		return 0, fmt.Errorf("--gateway-replicas %d: the gateway runs at least one instance", replicas)
	}
	pool := int64(wq.Spec.Capacity.PoolSize)
	if int64(replicas) > pool {
		return 0, fmt.Errorf("--gateway-replicas %d exceeds spec.capacity.poolSize %d: each instance needs a slot of the pool", replicas, pool)
	}
	return pool / int64(replicas), nil
}

// workloadRate is the rate at which an instance whose cap is limit lets requests on to the workload
// where the gateway paces rather than counts (nginx's limit_req): the cap's worth every
// spec.capacity.requestLatency, in nginx's notation (whole requests per second, or per minute
// below ten a second).
func workloadRate(wq *herdgatev1alpha1.WaitingQueue, limit int64) string {
	latency := wq.Spec.Capacity.RequestLatency.Duration
	if perSecond := float64(limit) * float64(time.Second) / float64(latency); perSecond >= 10 {
		return fmt.Sprintf("%dr/s", int64(perSecond))
	}
	return fmt.Sprintf("%dr/m", max(1, int64(float64(limit)*float64(time.Minute)/float64(latency))))
}

// busyPath is where a gateway sends a request its cap refused: herdgate answers it with the room's
// 503 and Retry-After, and counts it (route_class gateway, outcome workload_busy).
const busyPath = "/.herdgate/busy"

// busyBody is the refusal of a gateway that answers it itself (Envoy Gateway), in the shape of
// herdgate's own.
const busyBody = `{"error":"workload_busy","message":"the site is at its limit for a moment; your pass stays valid: try again after Retry-After","retryAfterMs":1000}`

// nameOf is the room's namespace and name as one identifier of a gateway's configuration language.
func nameOf(wq *herdgatev1alpha1.WaitingQueue) string {
	return notIdentifier.ReplaceAllString(wq.Namespace+"_"+wq.Name, "_")
}

var notIdentifier = regexp.MustCompile(`[^A-Za-z0-9_]`)
