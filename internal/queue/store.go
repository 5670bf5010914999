package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrStoreClosed is returned by calls made after Store.Close.
var ErrStoreClosed = errors.New("queue store closed")

// StoreOptions tune how a Store batches calls.
type StoreOptions struct {
	// Pipelines is how many round trips may be in flight at once; 0 means 2. With two, Redis runs
	// one batch while the reply of the other travels back and the next one is gathered, so it is
	// not left idle between batches; more only make the batches smaller.
	Pipelines int
	// MaxBatch is the most visitor calls one round trip carries; 0 means 256.
	MaxBatch int
	// RoundTripTimeout bounds one round trip, dials included, and a caller's wait is bounded by
	// twice it (one round trip in flight before its own); 0 means DefaultRoundTripTimeout. Without
	// it a Redis that went away holds every visitor for the client's dial retries (tens of seconds)
	// where they should be told 503 and come back.
	RoundTripTimeout time.Duration
	// Failovers is the watch the client was built with (ClientOptions.Failovers), for the store's
	// users to learn of failovers; nil when the client has none.
	Failovers *FailoverWatch
}

// DefaultRoundTripTimeout bounds a round trip of a store's visitor calls.
const DefaultRoundTripTimeout = 2 * time.Second

// Store is one Redis (a server or a cluster) holding any number of queues. Its queues coalesce
// concurrent Enter and Status calls: the calls that arrive while the round trips in flight are busy
// travel together in the next one, as one script call per queue. An idle store sends each call at
// once, so batching adds no latency; a busy one spends one network round trip and one script
// invocation on many polls, which is what lets a proxy under a herd answer polls at about the rate
// Redis answers single commands.
type Store struct {
	rdb      redis.UniversalClient
	queue    chan *visitorCall
	maxBatch int
	timeout  time.Duration
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	roundTrips, calls atomic.Int64

	wakes Wakes
	// ticks carries TickTogether's calls to sendTicks.
	ticks                     chan *togetherTick
	tickRoundTrips, ticksSent atomic.Int64

	// ping is the latest check of Redis its rooms share (Queue.PingFor).
	pingMu    sync.Mutex
	ping      *sharedPing
	pingsSent atomic.Int64

	failovers *FailoverWatch
}

// NewStore starts a store over rdb. Close it to stop its round trips; rdb stays the caller's.
func NewStore(rdb redis.UniversalClient, opts StoreOptions) *Store {
	s := &Store{
		rdb:       rdb,
		queue:     make(chan *visitorCall),
		ticks:     make(chan *togetherTick),
		maxBatch:  opts.MaxBatch,
		stop:      make(chan struct{}),
		failovers: opts.Failovers,
	}
	s.wakes.rdb = rdb
	if s.maxBatch <= 0 {
		s.maxBatch = 256
	}
	s.timeout = cmp.Or(opts.RoundTripTimeout, DefaultRoundTripTimeout)
	pipelines := opts.Pipelines
	if pipelines <= 0 {
		pipelines = 2
	}
	for range pipelines {
		s.wg.Go(s.pipeline)
	}
	s.wg.Go(s.sendTicks)
	return s
}

// Failovers is the store's failover watch; nil when its client has none (Last answers the zero
// Failover then).
func (s *Store) Failovers() *FailoverWatch { return s.failovers }

// Client is the Redis client the store runs on.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// Queue returns the queue namespace/name of this store.
func (s *Store) Queue(namespace, name string) (*Queue, error) {
	q, err := New(s.rdb, namespace, name)
	if err != nil {
		return nil, err
	}
	q.store = s
	return q, nil
}

// Close stops the store after the round trips in flight; later calls fail with ErrStoreClosed.
func (s *Store) Close() {
	s.stopOnce.Do(func() { close(s.stop) })
	s.wg.Wait()
	s.wakes.close()
}

// Wakes are the wake-ups of the sleeping rooms on the store's Redis.
func (s *Store) Wakes() *Wakes { return &s.wakes }

// PipelineStats reports how many round trips the store made and how many visitor calls they carried.
func (s *Store) PipelineStats() (roundTrips, calls int64) {
	return s.roundTrips.Load(), s.calls.Load()
}

// visitorCall is one Enter or Status waiting for a round trip.
type visitorCall struct {
	q       *Queue
	op      visitorOp
	abandon int64 // ms
	limit   EntryLimit
	visitor string
	done    chan visitorReply // buffered: the round trip never waits for a caller that gave up
}

type visitorReply struct {
	reply []int64
	// lanes are the queue's lanes the call was made with, by which its reply names a lane.
	lanes []string
	err   error
}

// run sends one visitor call with the next round trip and waits for its reply or ctx; it returns
// the reply and the lanes the call was made with.
func (s *Store) run(ctx context.Context, q *Queue, op visitorOp, abandon int64, limit EntryLimit, visitor string) ([]int64, []string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*s.timeout)
	defer cancel()
	c := &visitorCall{q: q, op: op, abandon: abandon, limit: limit, visitor: visitor, done: make(chan visitorReply, 1)}
	select {
	case s.queue <- c:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-s.stop:
		return nil, nil, ErrStoreClosed
	}
	select {
	case r := <-c.done:
		return r.reply, r.lanes, r.err
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// group is the calls of one round trip that share a script invocation.
type group struct {
	q       *Queue
	op      visitorOp
	abandon int64
	// burst, perMinute and shadowFactor of the calls' entry limit; each call names its own client.
	burst, perMinute, shadowFactor int
	calls                          []*visitorCall
	cmd                            *redis.Cmd
	// lanes are the queue's lanes as the group's call was made.
	lanes []string
}

// pipeline takes one call, adds whatever else is waiting (up to maxBatch), sends them as one script
// call per queue and operation, and hands each caller its reply.
func (s *Store) pipeline() {
	batch := make([]*visitorCall, 0, s.maxBatch)
	for {
		batch = batch[:0]
		select {
		case c := <-s.queue:
			batch = append(batch, c)
		case <-s.stop:
			return
		}
	fill:
		for len(batch) < s.maxBatch {
			select {
			case c := <-s.queue:
				batch = append(batch, c)
			default:
				break fill
			}
		}
		s.roundTrips.Add(1)
		s.calls.Add(int64(len(batch)))
		s.send(groupCalls(batch))
	}
}

func groupCalls(batch []*visitorCall) []*group {
	type key struct {
		prefix                         string
		op                             visitorOp
		abandon                        int64
		burst, perMinute, shadowFactor int
	}
	index := map[key]*group{}
	var groups []*group
	for _, c := range batch {
		k := key{c.q.prefix, c.op, c.abandon, c.limit.Burst, c.limit.PerMinute, c.limit.ShadowFactor}
		g := index[k]
		if g == nil {
			g = &group{q: c.q, op: c.op, abandon: c.abandon, burst: c.limit.Burst, perMinute: c.limit.PerMinute, shadowFactor: c.limit.ShadowFactor}
			index[k] = g
			groups = append(groups, g)
		}
		g.calls = append(g.calls, c)
	}
	return groups
}

func (s *Store) send(groups []*group) {
	// The callers' contexts only bound their own wait: one caller giving up must not fail the others
	// that share its round trip. The store's timeout bounds the round trip.
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	for _, g := range groups {
		g.lanes = g.q.Lanes()
	}
	if len(groups) == 1 {
		g := groups[0]
		v, err := g.q.runVisitors(ctx, g.q.rdb, g.op, g.abandon, g.limit(), g.lanes, visitorsOf(g.calls), entriesOf(g.calls)).Result()
		g.replicate(ctx, err)
		g.deliver(v, err)
		return
	}
	pipe := s.rdb.Pipeline()
	for _, g := range groups {
		g.cmd = g.op.script().EvalSha(ctx, pipe, g.q.keysFor(g.op, g.lanes, entriesOf(g.calls)), g.q.argsFor(g.op, g.abandon, g.limit(), g.lanes, visitorsOf(g.calls), entriesOf(g.calls))...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for _, g := range groups {
		v, err := g.cmd.Result()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// The server lost its script cache (SCRIPT FLUSH, restart, failover): Run loads it again.
			v, err = g.q.runVisitors(ctx, g.q.rdb, g.op, g.abandon, g.limit(), g.lanes, visitorsOf(g.calls), entriesOf(g.calls)).Result()
		}
		g.replicate(ctx, err)
		g.deliver(v, err)
	}
}

// replicate waits for a replica after a Replicated queue's entries, before they are answered.
func (g *group) replicate(ctx context.Context, err error) {
	if err == nil && g.op == opEnter {
		g.q.replicate(ctx)
	}
}

func (g *group) deliver(v any, err error) {
	var replies [][]int64
	if err == nil {
		replies, err = decodeReplies(v, len(g.calls))
	}
	for i, c := range g.calls {
		if err != nil {
			c.done <- visitorReply{err: err}
			continue
		}
		c.done <- visitorReply{reply: replies[i], lanes: g.lanes}
	}
}

func (g *group) limit() EntryLimit {
	return EntryLimit{Burst: g.burst, PerMinute: g.perMinute, ShadowFactor: g.shadowFactor}
}

func entriesOf(calls []*visitorCall) []entryArg {
	out := make([]entryArg, len(calls))
	for i, c := range calls {
		out[i] = entryArgOf(c.limit)
	}
	return out
}

func visitorsOf(calls []*visitorCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.visitor
	}
	return out
}

// decodeReplies splits a script reply, "n v1 .. vn" per visitor, into one list of integers per
// visitor. The lists share one backing array.
func decodeReplies(v any, n int) ([][]int64, error) {
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("unexpected script reply %v for %d visitors", v, n)
	}
	reply := s
	bad := func() ([][]int64, error) {
		return nil, fmt.Errorf("unexpected script reply %q for %d visitors", reply, n)
	}
	nums := make([]int64, 0, 6*n)
	for len(s) > 0 {
		field, rest, _ := strings.Cut(s, " ")
		x, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return bad()
		}
		nums = append(nums, x)
		s = rest
	}
	out := make([][]int64, 0, n)
	for i := 0; i < len(nums); {
		k := int(nums[i])
		if k < 0 || i+1+k > len(nums) {
			return bad()
		}
		out = append(out, nums[i+1:i+1+k:i+1+k])
		i += 1 + k
	}
	if len(out) != n {
		return bad()
	}
	return out, nil
}
