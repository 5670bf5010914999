package queue

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// TickCalls are the calls of one scheduler tick: its admission and, when they are due, the plan to
// publish and the reads to make after it.
type TickCalls struct {
	Admit AdmitRequest
	// Plan, when set, is published after the admission (PublishPlan).
	Plan *PublishedPlan
	// Observe, when set, is read after the plan (Observe), so the counters include the admission.
	Observe *ObserveRequest
}

// TickReplies are the answers to TickCalls, each with its own error: the visitors an admission let
// in count even when a call after it failed. Plan and reads are only made when the admission's
// request is valid.
type TickReplies struct {
	Admit    AdmitResult
	AdmitErr error
	// PlanErr is the plan's error, nil when no plan was asked for.
	PlanErr error
	// Observation is valid when reads were asked for and ObserveErr is nil.
	Observation Observation
	ObserveErr  error
}

// Tick makes a tick's calls in one round trip, in order. A sleeping room makes all three at every
// wake-up, and at a thousand rooms the round trips, not Redis' work, are most of what the scheduler
// spends (docs/performance.md, "Idle rooms"). A call that meets a Redis which lost its scripts is
// made again on its own, which loads the script.
func (q *Queue) Tick(ctx context.Context, calls TickCalls) TickReplies {
	var out TickReplies
	keys, args, err := q.admitCall(calls.Admit)
	if err != nil {
		out.AdmitErr = err
		return out
	}
	var planArgs []any
	if calls.Plan != nil {
		if planArgs, out.PlanErr = q.planArgs(*calls.Plan); out.PlanErr != nil {
			calls.Plan = nil
		}
	}
	pipe := q.rdb.Pipeline()
	admit := admitScript.EvalSha(ctx, pipe, keys, args...)
	var plan *redis.Cmd
	if calls.Plan != nil {
		plan = planScript.EvalSha(ctx, pipe, q.planKeys(), planArgs...)
	}
	var reads observeReads
	if calls.Observe != nil {
		reads = q.queueReads(ctx, pipe, *calls.Observe)
	}
	// Each call carries its own error; Exec's is the first of them.
	_, _ = pipe.Exec(ctx)

	if noScript(admit.Err()) {
		admit = admitScript.Run(ctx, q.rdb, keys, args...)
	}
	if raw, err := admit.Slice(); err != nil {
		out.AdmitErr = fmt.Errorf("admitting from queue %s: %w", q.prefix, err)
	} else {
		out.Admit, out.AdmitErr = parseAdmitReply(raw)
	}
	if plan != nil {
		if noScript(plan.Err()) {
			plan = planScript.Run(ctx, q.rdb, q.planKeys(), planArgs...)
		}
		if err := plan.Err(); err != nil {
			out.PlanErr = fmt.Errorf("publishing plan of queue %s: %w", q.prefix, err)
		}
	}
	if calls.Observe != nil {
		switch err := reads.err(); {
		case noScript(err):
			out.Observation, out.ObserveErr = q.observeOneByOne(ctx, *calls.Observe)
		case err != nil:
			out.ObserveErr = fmt.Errorf("observing queue %s: %w", q.prefix, err)
		default:
			out.Observation, out.ObserveErr = q.parseReads(reads, *calls.Observe)
		}
	}
	return out
}

func noScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}
