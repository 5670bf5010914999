package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Observation is what the scheduler reads of a room besides its tick: its counters, its proxy
// replicas' reports and, when asked for, their workload reports.
type Observation struct {
	Stats   Stats
	Proxies []ProxyReport
	// Workload is nil unless ObserveRequest.Workload asked for it.
	Workload *WorkloadReading
}

// ObserveRequest says what a tick reads after its admission (TickCalls.Observe).
type ObserveRequest struct {
	// ProxyMaxAge is ProxyReports' maxAge.
	ProxyMaxAge time.Duration
	// Workload asks for ReadWorkload(WorkloadMaxAge, UsedSeconds) too.
	Workload       bool
	WorkloadMaxAge time.Duration
	UsedSeconds    []int64
}

// observeReads are the reads of Stats, ProxyReports and, when asked, ReadWorkload, queued on one
// pipeline.
type observeReads struct {
	stats, proxies, workload *redis.Cmd
	// lanes are the queue's lanes the stats were read with.
	lanes []string
}

// queueReads queues the reads req asks for on pipe.
func (q *Queue) queueReads(ctx context.Context, pipe redis.Pipeliner, req ObserveRequest) observeReads {
	lanes := q.Lanes()
	r := observeReads{
		lanes:   lanes,
		stats:   statsScript.EvalSha(ctx, pipe, q.statsKeys(lanes), statsArgs(lanes)...),
		proxies: proxiesScript.EvalSha(ctx, pipe, []string{q.keys.proxies}, "read", req.ProxyMaxAge.Milliseconds()),
	}
	if req.Workload {
		r.workload = workloadScript.EvalSha(ctx, pipe, q.readWorkloadKeys(req.UsedSeconds), "read", req.WorkloadMaxAge.Milliseconds())
	}
	return r
}

// err is the first error of the calls.
func (r observeReads) err() error {
	for _, c := range []*redis.Cmd{r.stats, r.proxies, r.workload} {
		if c != nil && c.Err() != nil {
			return c.Err()
		}
	}
	return nil
}

// parseReads reads the replies of the calls queueReads queued.
func (q *Queue) parseReads(r observeReads, req ObserveRequest) (Observation, error) {
	var out Observation
	res, err := r.stats.Int64Slice()
	if err != nil {
		return out, fmt.Errorf("reading stats of queue %s: %w", q.prefix, err)
	}
	if out.Stats, err = parseStats(res, r.lanes); err != nil {
		return out, err
	}
	raw, err := r.proxies.Slice()
	if err != nil {
		return out, fmt.Errorf("reading proxy reports of queue %s: %w", q.prefix, err)
	}
	if out.Proxies, err = parseProxyReports(raw); err != nil {
		return out, err
	}
	if r.workload != nil {
		raw, err := r.workload.Slice()
		if err != nil {
			return out, fmt.Errorf("reading the workload reports of queue %s: %w", q.prefix, err)
		}
		reading, err := q.parseWorkload(raw, req.UsedSeconds)
		if err != nil {
			return out, err
		}
		out.Workload = &reading
	}
	return out, nil
}

func (q *Queue) observeOneByOne(ctx context.Context, req ObserveRequest) (Observation, error) {
	var out Observation
	var err error
	if out.Stats, err = q.Stats(ctx); err != nil {
		return out, err
	}
	if out.Proxies, err = q.ProxyReports(ctx, req.ProxyMaxAge); err != nil {
		return out, err
	}
	if req.Workload {
		reading, err := q.ReadWorkload(ctx, req.WorkloadMaxAge, req.UsedSeconds)
		if err != nil {
			return out, err
		}
		out.Workload = &reading
	}
	return out, nil
}
