package queue

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

var (
	//go:embed lua/workload.lua
	workloadLua    string
	workloadScript = newScript(workloadLua)
)

// LatencyBuckets are the upper bounds of the latency histogram every replica keeps, in
// microseconds: 1 ms to about 66 s, each 10 % above the one before, so that a quantile read from
// it is within 10 % and replicas' histograms add up. A latency beyond the last lands in it.
var LatencyBuckets = func() []int64 {
	var b []int64
	for v := 1000.0; v < 70e6; v *= 1.1 {
		b = append(b, int64(v))
	}
	return b
}()

// LatencyBucket is the index of the bucket a latency falls in.
func LatencyBucket(d time.Duration) int {
	us := d.Microseconds()
	i, _ := slices.BinarySearch(LatencyBuckets, us)
	return min(i, len(LatencyBuckets)-1)
}

// EstimateErrorBounds are the upper bounds of the histogram of how far off the first wait told to
// an admitted visitor was, relative to the wait it had, that every replica keeps; an error beyond
// the last lands in one more bucket. They match the proxy's metric
// herdgate_proxy_wait_estimate_error_ratio, so that the status and the dashboard read alike.
var EstimateErrorBounds = []float64{0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2}

// EstimateErrorBucket is the index of the bucket a relative error falls in, len(EstimateErrorBounds)
// beyond the last bound.
func EstimateErrorBucket(ratio float64) int {
	i, _ := slices.BinarySearch(EstimateErrorBounds, ratio)
	return i
}

// UseRecordTTL is how long the record of which admitted visitors used their pass lives, per second
// of not-before times: long enough for the scheduler to count it after the grace it gives visitors.
const UseRecordTTL = 2 * time.Minute

// WorkloadReport is one proxy replica's running totals of the protected requests it forwarded since
// it started: the scheduler takes the differences between two reports.
type WorkloadReport struct {
	// Replica names the proxy replica (its pod).
	Replica string `json:"-"`
	// Epoch is random per replica process: totals start from zero with a new one.
	Epoch string `json:"e"`
	// Elapsed is the replica's own monotonic time since its epoch began, when it took the totals.
	ElapsedMicros int64 `json:"t"`
	// Requests answered or failed upstream, and Errors of them (5xx, timeouts, refused or closed
	// connections).
	Requests int64 `json:"n"`
	Errors   int64 `json:"x"`
	// LatencyMicros is the sum of their latencies, to the response headers.
	LatencyMicros int64 `json:"l"`
	// FlightMicros is the integral of the requests in flight upstream over time, in request·µs.
	FlightMicros int64 `json:"f"`
	// Buckets are the running counts of the latency histogram over LatencyBuckets, trailing zeros cut.
	Buckets []int64 `json:"b,omitempty"`
	// EstimateErrors are the running counts of the histogram of the first waits told to the visitors
	// it admitted, by their relative error (EstimateErrorBucket), trailing zeros cut.
	EstimateErrors []int64 `json:"w,omitempty"`
}

// PassUse is a pass used for the first time: its not-before time's Unix second and an id of the
// pass (the same on every replica).
type PassUse struct {
	Second int64
	ID     string
}

// ReportWorkload records r, replacing the replica's previous report, and the passes used since the
// replica's last report, in one call.
func (q *Queue) ReportWorkload(ctx context.Context, r WorkloadReport, uses []PassUse) error {
	if r.Replica == "" || len(r.Replica) > 253 {
		return fmt.Errorf("reporting to queue %s: replica name %q is empty or longer than 253 bytes", q.prefix, r.Replica)
	}
	if len(r.Buckets) > len(LatencyBuckets) {
		return fmt.Errorf("reporting to queue %s: %d latency buckets, at most %d", q.prefix, len(r.Buckets), len(LatencyBuckets))
	}
	if len(r.EstimateErrors) > len(EstimateErrorBounds)+1 {
		return fmt.Errorf("reporting to queue %s: %d estimate error buckets, at most %d", q.prefix, len(r.EstimateErrors), len(EstimateErrorBounds)+1)
	}
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	args := []any{"report", r.Replica, string(body), int64(UseRecordTTL / time.Second)}
	keys := []string{q.keys.workload}
	slices.SortFunc(uses, func(a, b PassUse) int { return int(a.Second - b.Second) })
	for i := 0; i < len(uses); {
		j := i
		for j < len(uses) && uses[j].Second == uses[i].Second {
			j++
		}
		keys = append(keys, q.usedKey(uses[i].Second))
		args = append(args, j-i)
		for _, u := range uses[i:j] {
			args = append(args, u.ID)
		}
		i = j
	}
	if err := workloadScript.Run(ctx, q.rdb, keys, args...).Err(); err != nil {
		return fmt.Errorf("reporting to queue %s: %w", q.prefix, err)
	}
	return nil
}

// WorkloadReading is what the replicas reported lately, and how many passes were used of each
// second asked for.
type WorkloadReading struct {
	// Now is Redis' clock.
	Now time.Time
	// Reports are the replicas' latest reports within the age asked for, by replica.
	Reports []WorkloadReport
	// Used counts the passes used, by not-before second.
	Used map[int64]int64
}

// ReadWorkload returns the reports of the replicas that reported within maxAge (by Redis' clock),
// deleting older ones (replicas that are gone), and how many passes of each of the seconds given
// were used.
func (q *Queue) ReadWorkload(ctx context.Context, maxAge time.Duration, seconds []int64) (WorkloadReading, error) {
	raw, err := workloadScript.Run(ctx, q.rdb, q.readWorkloadKeys(seconds), "read", maxAge.Milliseconds()).Slice()
	if err != nil {
		return WorkloadReading{}, fmt.Errorf("reading the workload reports of queue %s: %w", q.prefix, err)
	}
	return q.parseWorkload(raw, seconds)
}

// readWorkloadKeys are the keys a read of the reports and of the uses of seconds declares.
func (q *Queue) readWorkloadKeys(seconds []int64) []string {
	keys := []string{q.keys.workload}
	for _, s := range seconds {
		keys = append(keys, q.usedKey(s))
	}
	return keys
}

// usedKey is the HyperLogLog of the passes of not-before second s that were used.
func (q *Queue) usedKey(s int64) string { return q.prefix + ":used:" + strconv.FormatInt(s, 10) }

func (q *Queue) parseWorkload(raw []any, seconds []int64) (WorkloadReading, error) {
	bad := func() error { return fmt.Errorf("unexpected workload reply of queue %s: %v", q.prefix, raw) }
	if len(raw) < 2 {
		return WorkloadReading{}, bad()
	}
	now, _ := raw[0].(int64)
	n, _ := raw[1].(int64)
	if int64(len(raw)) != 2+2*n+int64(len(seconds)) {
		return WorkloadReading{}, bad()
	}
	out := WorkloadReading{Now: time.UnixMilli(now), Used: make(map[int64]int64, len(seconds))}
	for i := int64(0); i < n; i++ {
		name, _ := raw[2+2*i].(string)
		body, _ := raw[3+2*i].(string)
		r := WorkloadReport{}
		if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Buckets) > len(LatencyBuckets) {
			continue // not a report this version writes
		}
		r.Replica = name
		out.Reports = append(out.Reports, r)
	}
	for i, s := range seconds {
		c, _ := raw[2+2*n+int64(i)].(int64)
		out.Used[s] = c
	}
	slices.SortFunc(out.Reports, func(a, b WorkloadReport) int { return strings.Compare(a.Replica, b.Replica) })
	return out, nil
}

// PassUseID names a pass the same way on every replica: its visitor and not-before time.
func PassUseID(visitor string, notBefore time.Time) string {
	return visitor + "@" + strconv.FormatInt(notBefore.UnixMilli(), 36)
}
