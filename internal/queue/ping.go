package queue

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// sharedPing is one PING whose answer the rooms of a store share.
type sharedPing struct {
	moment time.Time
	done   chan struct{}
	err    error
}

// PingFor checks that the queue's Redis answers, for a check due at moment. The rooms of a store on
// one server whose checks are due at the same moment share one PING, sent at or after that moment:
// a proxy serving a hundred rooms pings its Redis once a check, not a hundred times. A zero moment,
// or a cluster, whose rooms ping the node that holds their keys, shares nothing.
func (q *Queue) PingFor(ctx context.Context, moment time.Time) error {
	_, cluster := q.rdb.(*redis.ClusterClient)
	if moment.IsZero() || q.store == nil || cluster {
		return q.ping(ctx)
	}
	s := q.store
	s.pingMu.Lock()
	if p := s.ping; p != nil && !p.moment.Before(moment) {
		// A check due at this moment, or a later one, is on its way or answered.
		s.pingMu.Unlock()
		select {
		case <-p.done:
			return p.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p := &sharedPing{moment: moment, done: make(chan struct{})}
	s.ping = p
	s.pingMu.Unlock()
	s.pingsSent.Add(1)
	// The rooms that share it wait for its answer: the end of this caller's context, one room
	// stopping, must not cut theirs short; its deadline holds for them too.
	pingCtx, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	if deadline, ok := ctx.Deadline(); ok {
		pingCtx, cancel = context.WithDeadline(pingCtx, deadline)
	}
	p.err = q.ping(pingCtx)
	cancel()
	close(p.done)
	return p.err
}

// PingsSent is how many PINGs the store's rooms sent for their shared checks (Queue.PingFor).
func (s *Store) PingsSent() int64 { return s.pingsSent.Load() }

// ping sends the queue's Redis a PING.
func (q *Queue) ping(ctx context.Context) error {
	if cc, ok := q.rdb.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, q.keys.wait)
		if err != nil {
			return err
		}
		return node.Ping(ctx).Err()
	}
	return q.rdb.Ping(ctx).Err()
}
