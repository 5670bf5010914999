package scheduler

import (
	"time"

	"github.com/herdgate/herdgate/internal/queue"
)

// applyDurability makes the queue's admissions wait for a replica when the room is Replicated
// (spec.redis.durability), and counts the writes no replica acknowledged since the last tick.
func (st *tickState) applyDurability(cfg *Room) {
	var wait time.Duration
	if cfg.Replicated {
		wait = queue.DefaultReplicaWait
	}
	st.q.SetReplicated(wait)
	if n := st.q.Unacknowledged(); n > st.unacknowledged {
		st.metrics.unacknowledged.Add(float64(n - st.unacknowledged))
		st.unacknowledged = n
	}
}
