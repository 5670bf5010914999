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
	// Observe, when set, says what is read after the plan, so the counters include the admission.
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
	pipe := q.rdb.Pipeline()
	c := q.queueTick(ctx, pipe, calls)
	if c.queued {
		// Each call carries its own error; Exec's is the first of them.
		_, _ = pipe.Exec(ctx)
	}
	return q.tickReplies(ctx, c)
}

// tickCmds are a tick's calls queued on a pipeline.
type tickCmds struct {
	calls    TickCalls
	out      TickReplies // the errors found before anything was sent
	queued   bool
	keys     []string
	args     []any
	planArgs []any
	admit    *redis.Cmd
	plan     *redis.Cmd
	reads    observeReads
}

// queueTick checks calls and queues them on pipe.
func (q *Queue) queueTick(ctx context.Context, pipe redis.Pipeliner, calls TickCalls) *tickCmds {
	c := &tickCmds{calls: calls}
	var err error
	if c.keys, c.args, err = q.admitCall(calls.Admit); err != nil {
		c.out.AdmitErr = err
		return c
	}
	if calls.Plan != nil {
		if c.planArgs, c.out.PlanErr = q.planArgs(*calls.Plan); c.out.PlanErr != nil {
			c.calls.Plan = nil
		}
	}
	c.queued = true
	c.admit = admitScript.EvalSha(ctx, pipe, c.keys, c.args...)
	if c.calls.Plan != nil {
		c.plan = planScript.EvalSha(ctx, pipe, q.planKeys(), c.planArgs...)
	}
	if calls.Observe != nil {
		c.reads = q.queueReads(ctx, pipe, *calls.Observe)
	}
	return c
}

// tickReplies reads the replies of the calls queueTick queued, once the pipeline ran.
func (q *Queue) tickReplies(ctx context.Context, c *tickCmds) TickReplies {
	out := c.out
	if !c.queued {
		return out
	}
	admit := c.admit
	if noScript(admit.Err()) {
		admit = admitScript.Run(ctx, q.rdb, c.keys, c.args...)
	}
	if raw, err := admit.Slice(); err != nil {
		out.AdmitErr = fmt.Errorf("admitting from queue %s: %w", q.prefix, err)
	} else {
		out.Admit, out.AdmitErr = parseAdmitReply(raw)
		if out.AdmitErr == nil && len(out.Admit.Admitted) > 0 {
			q.replicate(ctx)
		}
	}
	if plan := c.plan; plan != nil {
		if noScript(plan.Err()) {
			plan = planScript.Run(ctx, q.rdb, q.planKeys(), c.planArgs...)
		}
		if err := plan.Err(); err != nil {
			out.PlanErr = fmt.Errorf("publishing plan of queue %s: %w", q.prefix, err)
		}
	}
	if c.calls.Observe != nil {
		switch err := c.reads.err(); {
		case noScript(err):
			out.Observation, out.ObserveErr = q.observeOneByOne(ctx, *c.calls.Observe)
		case err != nil:
			out.ObserveErr = fmt.Errorf("observing queue %s: %w", q.prefix, err)
		default:
			out.Observation, out.ObserveErr = q.parseReads(c.reads, *c.calls.Observe)
		}
	}
	return out
}

func noScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}
