package replica

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// A client that floods the status path with visitors' polls costs Redis one status call each, unless
// the replica refuses them first (docs/guides/entry-control.md, "Polls that come too soon").
// ClientPolls holds a token bucket per client (an address cut to spec.entry.perClient's prefix) for
// the polls a replica sends on to Redis, in memory and bounded.

const (
	// clientPollShards spreads the clients over locks.
	clientPollShards = 16
	// clientPollsPerShard bounds a generation of a shard: at most 2 × clientPollShards ×
	// clientPollsPerShard clients are remembered, the ones seen longest ago forgotten first.
	clientPollsPerShard = 4096
	// clientPollGeneration is how long a generation lasts at the most: a bucket idle longer than it
	// has filled up anyway.
	clientPollGeneration = time.Minute
)

// ClientPolls bounds each client's polls to PerSecond a second, with bursts of twice as many. It is
// safe for concurrent use; the zero value refuses nothing until SetRate.
type ClientPolls struct {
	// mu serialises changes of the rate; perSecond is read at every poll without it.
	mu        sync.Mutex
	perSecond atomic.Int64
	shards    [clientPollShards]clientPollShard
}

type clientPollShard struct {
	mu      sync.Mutex
	buckets generations[netip.Prefix, *rate.Limiter]
}

// SetRate sets the polls a second each client may send; buckets start over when it changes.
func (c *ClientPolls) SetRate(perSecond int) {
	if c.perSecond.Load() == int64(perSecond) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.perSecond.Store(int64(perSecond))
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		s.buckets.reset()
		s.mu.Unlock()
	}
}

// Allow takes one poll from client's bucket at now; when the bucket is empty it returns false and
// how long until it holds one again.
func (c *ClientPolls) Allow(client netip.Prefix, now time.Time) (retry time.Duration, ok bool) {
	perSecond := int(c.perSecond.Load())
	if perSecond <= 0 {
		return 0, true
	}
	s := &c.shards[shardOfPrefix(client)]
	s.mu.Lock()
	defer s.mu.Unlock()
	lim := s.limiter(client, now, perSecond)
	if lim.AllowN(now, 1) {
		return 0, true
	}
	missing := 1 - lim.TokensAt(now)
	return max(time.Millisecond, time.Duration(missing/float64(perSecond)*float64(time.Second))), false
}

// Len is how many clients the replica remembers.
func (c *ClientPolls) Len() int {
	total := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		total += s.buckets.len()
		s.mu.Unlock()
	}
	return total
}

func (s *clientPollShard) limiter(client netip.Prefix, now time.Time, perSecond int) *rate.Limiter {
	lim, ok := s.buckets.get(client)
	if !ok {
		// A new bucket is full.
		lim = rate.NewLimiter(rate.Limit(perSecond), 2*perSecond)
	}
	s.buckets.put(client, lim, now, clientPollsPerShard, clientPollGeneration)
	return lim
}

// shardOfPrefix spreads prefixes over the shards by their address's last bytes.
func shardOfPrefix(p netip.Prefix) int {
	b := p.Addr().As16()
	return int(b[15]^b[13]^b[11]^b[7]) % clientPollShards
}
