package queue

import (
	"context"
)

// maxTicksTogether bounds how many rooms' ticks one round trip carries.
const maxTicksTogether = 128

// togetherTick is a tick waiting for a shared round trip.
type togetherTick struct {
	q     *Queue
	calls TickCalls
	done  chan TickReplies
}

// TickTogether makes a tick's calls as Tick does, in one round trip shared with the ticks that other
// rooms of the queue's store make at the same moment. The scheduler wakes its sleeping rooms together
// for it: a thousand idle rooms then cost Redis and the manager about ten round trips a second
// rather than a hundred (docs/performance.md, "Idle rooms"). A queue made without a store ticks alone.
func (q *Queue) TickTogether(ctx context.Context, calls TickCalls) TickReplies {
	s := q.store
	if s == nil {
		return q.Tick(ctx, calls)
	}
	t := &togetherTick{q: q, calls: calls, done: make(chan TickReplies, 1)}
	select {
	case s.ticks <- t:
	case <-s.stop:
		return TickReplies{AdmitErr: ErrStoreClosed}
	case <-ctx.Done():
		return TickReplies{AdmitErr: ctx.Err()}
	}
	select {
	case r := <-t.done:
		return r
	case <-ctx.Done():
		// The round trip may still admit; its visitors are in Redis, where the proxies find them.
		return TickReplies{AdmitErr: ctx.Err()}
	}
}

// sendTicks sends the ticks handed to TickTogether: the first that comes, with all that wait beside
// it, in one pipeline; the ticks that come while it travels go in the next.
func (s *Store) sendTicks() {
	batch := make([]*togetherTick, 0, maxTicksTogether)
	cmds := make([]*tickCmds, 0, maxTicksTogether)
	for {
		batch, cmds = batch[:0], cmds[:0]
		select {
		case t := <-s.ticks:
			batch = append(batch, t)
		case <-s.stop:
			return
		}
	fill:
		for len(batch) < maxTicksTogether {
			select {
			case t := <-s.ticks:
				batch = append(batch, t)
			default:
				break fill
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		pipe := s.rdb.Pipeline()
		for _, t := range batch {
			cmds = append(cmds, t.q.queueTick(ctx, pipe, t.calls))
		}
		if pipe.Len() > 0 {
			// Each call carries its own error; Exec's is the first of them.
			_, _ = pipe.Exec(ctx)
			s.tickRoundTrips.Add(1)
			s.ticksSent.Add(int64(len(batch)))
		}
		for i, t := range batch {
			t.done <- t.q.tickReplies(ctx, cmds[i])
		}
		cancel()
	}
}

// TickRoundTrips are the round trips TickTogether's calls took so far, and how many ticks they
// carried.
func (s *Store) TickRoundTrips() (roundTrips, ticks int64) {
	return s.tickRoundTrips.Load(), s.ticksSent.Load()
}
