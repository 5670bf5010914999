package replica

import (
	"hash/maphash"
	"sync"
	"time"
)

// A poll that comes sooner than it was told is refused, and the refusal used to cost the room's Redis
// as much as an answer: the previous poll's time lives there. NextPolls is a replica's own memory of
// when it told each visitor to come back, so that it refuses such a poll without a call to Redis
// (docs/guides/entry-control.md, "Polls that come too soon"). It is a memory, not the rule: a visitor
// it does not know (another replica answered it, or it was forgotten) is checked by Redis, as before.

const (
	// nextPollShards spreads the visitors over locks, so that a replica's connections do not queue
	// on one.
	nextPollShards = 16
	// nextPollsPerShard bounds a generation of a shard: a replica remembers at most
	// 2 × nextPollShards × nextPollsPerShard visitors of a room.
	nextPollsPerShard = 4096
	// nextPollGeneration is how long a generation lasts at the most: a visitor is remembered at least
	// this long after its last answer, longer than any poll interval but the deepest queues' (which
	// Redis then checks).
	nextPollGeneration = time.Minute
)

// NextPoll is what a replica told a visitor at its last answer.
type NextPoll struct {
	// NotBefore is the earliest a poll is answered; Allowed how long after an early poll the next one
	// is, since an early poll counts as one (the rule the queue's status script keeps).
	NotBefore time.Time
	Allowed   time.Duration
	// Position and Depth are the visitor's place and its queue's depth as last told, which a refusal
	// repeats.
	Position, Depth int64
	// heard is when Redis last heard of the visitor: when it was told (Told).
	heard time.Time
}

// NextPolls remembers, per visitor, the NextPoll it was told last by this replica. The zero value is
// ready to use; it is safe for concurrent use.
type NextPolls struct {
	seedOnce sync.Once
	seed     maphash.Seed
	shards   [nextPollShards]nextPollShard
}

type nextPollShard struct {
	mu   sync.Mutex
	told generations[string, NextPoll]
}

func (n *NextPolls) shard(visitor string) *nextPollShard {
	n.seedOnce.Do(func() { n.seed = maphash.MakeSeed() })
	return &n.shards[maphash.String(n.seed, visitor)%nextPollShards]
}

// Told records what visitor was told at now, by an answer Redis gave or a poll Redis refused.
func (n *NextPolls) Told(visitor string, now time.Time, told NextPoll) {
	told.heard = now
	s := n.shard(visitor)
	s.mu.Lock()
	s.put(visitor, now, told)
	s.mu.Unlock()
}

// Early says whether a poll of visitor at now comes sooner than it was told, and if so counts it as
// the visitor's poll: the next one is allowed Allowed after now. It returns what the refusal tells.
// A visitor Redis has not heard of for keepAlive is never early: its poll goes to Redis, which keeps
// its place alive (an early poll counts as a sign of life there) and, once it is admitted, hands it
// its pass, however hastily it polls.
func (n *NextPolls) Early(visitor string, now time.Time, keepAlive time.Duration) (NextPoll, bool) {
	s := n.shard(visitor)
	s.mu.Lock()
	defer s.mu.Unlock()
	told, ok := s.told.get(visitor)
	if !ok || !now.Before(told.NotBefore) || now.Sub(told.heard) >= keepAlive {
		return NextPoll{}, false
	}
	told.NotBefore = now.Add(told.Allowed)
	s.put(visitor, now, told)
	return told, true
}

// Forget drops visitor: its next poll goes to Redis.
func (n *NextPolls) Forget(visitor string) {
	s := n.shard(visitor)
	s.mu.Lock()
	s.told.drop(visitor)
	s.mu.Unlock()
}

// Len is how many visitors the replica remembers, for its tests and metrics.
func (n *NextPolls) Len() int {
	total := 0
	for i := range n.shards {
		s := &n.shards[i]
		s.mu.Lock()
		total += s.told.len()
		s.mu.Unlock()
	}
	return total
}

func (s *nextPollShard) put(visitor string, now time.Time, told NextPoll) {
	s.told.put(visitor, told, now, nextPollsPerShard, nextPollGeneration)
}
