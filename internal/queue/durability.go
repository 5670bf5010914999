package queue

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis replicates asynchronously: a write it answered may be lost in a failover. A Replicated queue
// waits, after the calls that take places and admit, until a replica holds them (WAIT 1), for at most
// a bounded time. That narrows the window a failover loses; it does not close it: a replica that does
// not answer in time leaves the write as it is (docs/guides/redis.md).

// DefaultReplicaWait bounds the wait for a replica of a Replicated queue.
const DefaultReplicaWait = 100 * time.Millisecond

// durability is a queue's: the most to wait for a replica after a write, 0 for none.
type durability struct {
	wait atomic.Int64 // nanoseconds
	// unacknowledged counts the writes no replica acknowledged within the wait.
	unacknowledged atomic.Int64
}

// SetReplicated makes the queue wait up to wait for a replica after the calls that take places and
// admit; 0 makes it asynchronous again (the default).
func (q *Queue) SetReplicated(wait time.Duration) { q.durability.wait.Store(int64(max(0, wait))) }

// Unacknowledged counts the writes of a Replicated queue that no replica acknowledged in time.
func (q *Queue) Unacknowledged() int64 { return q.durability.unacknowledged.Load() }

// replicate waits, for a Replicated queue, until a replica holds every write the queue's server took
// so far. WAIT covers what its own connection wrote: the call writes a mark on the queue's server and
// waits on that connection, and the server's replication stream, being one, carries the earlier
// writes of every connection before the mark.
// The write stands either way: a wait that fails or times out only counts as unacknowledged.
func (q *Queue) replicate(ctx context.Context) {
	wait := time.Duration(q.durability.wait.Load())
	if wait <= 0 {
		return
	}
	if q.waitForReplica(ctx, wait) < 1 {
		q.durability.unacknowledged.Add(1)
	}
}

// waitForReplica returns how many replicas acknowledged the queue's server's writes within wait.
func (q *Queue) waitForReplica(ctx context.Context, wait time.Duration) int64 {
	var node redis.Cmdable = q.rdb
	if c, ok := q.rdb.(*redis.ClusterClient); ok {
		n, err := c.MasterForKey(ctx, q.keys.totals)
		if err != nil {
			return 0
		}
		node = n
	}
	var acked *redis.Cmd
	if _, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HIncrBy(ctx, q.keys.totals, "replicaWaits", 1)
		acked = p.Do(ctx, "WAIT", 1, max(1, wait.Milliseconds()))
		return nil
	}); err != nil {
		return 0
	}
	n, _ := acked.Int64()
	return n
}
