// Package scheduler admits the visitors of every WaitingQueue: one goroutine per queue ticks on the
// queue's plan and runs one Lua call per tick on the queue's Redis. It runs only on the elected
// leader, beside the reconciler, which hands it each queue's settings and learns of what it observed
// through the notification function it hands in.
package scheduler

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/settings"
)

// Room is what the scheduler runs one WaitingQueue with: its settings and the Redis that holds it.
type Room struct {
	*settings.Settings
	RedisURL string
	// DrawSeed draws the pre-queue's order at opening (internal/draw); a scheduled queue needs one.
	DrawSeed []byte
	// calendar, for the settings of an event, is the room's own, which hold its events.
	calendar *settings.Settings
}

// at is q as it runs at t: with the settings of the event in force then (spec.events), or its own.
func (q *Room) at(t time.Time) *Room {
	s := q.At(t)
	if s == q.Settings {
		return q
	}
	return &Room{Settings: s, RedisURL: q.RedisURL, DrawSeed: q.DrawSeed, calendar: q.calendarOf()}
}

// calendarOf is the settings that hold the room's events.
func (q *Room) calendarOf() *settings.Settings {
	if q.calendar != nil {
		return q.calendar
	}
	return q.Settings
}

// nextEdge is the first edge of an event after t, zero when none is left: the room's settings
// change there, so a room sleeps no longer.
func (q *Room) nextEdge(t time.Time) time.Time { return q.calendarOf().NextEdge(t) }

// Key names the queue's WaitingQueue.
func (q Room) Key() types.NamespacedName {
	return types.NamespacedName{Namespace: q.Namespace, Name: q.Name}
}

// Snapshot is what the scheduler last observed of one queue.
type Snapshot struct {
	// Generation is the WaitingQueue generation of the settings in force.
	Generation int64
	// HaveStats is true once Depth, Active and AdmittedPerSecond were read from Redis, at StatsAt.
	// A tick that leaves nobody waiting sets Depth to 0 at once, without a read.
	HaveStats bool
	StatsAt   time.Time
	Depth     int64
	Active    int64
	// PreQueued is the number of pre-queue places not drawn yet.
	PreQueued int64
	// Phase is the room's phase at the last tick: its schedule's, Opening while the draw runs.
	Phase phase.Phase
	// Event is the event of the room's calendar the last tick ran (spec.events), "" for none.
	Event string
	// Draw is the latest draw of the pre-queue this scheduler saw; nil before any. DrawError says
	// why the draw cannot run, when it cannot.
	Draw      *DrawProgress
	DrawError string
	// AdmittedPerSecond and ReleasedPerSecond are the admission and release rates over the last
	// 10 s, as decimal strings.
	AdmittedPerSecond, ReleasedPerSecond string
	// LastBusy is the room's current or last busy spell; nil before a tick admitted anyone.
	LastBusy *BusySpell
	// RedisError is the last Redis failure, empty after a success.
	RedisError string
	// RedisErrorSince is when Redis started failing.
	RedisErrorSince time.Time
	// LastTick is when the last tick reached Redis.
	LastTick time.Time
	// Proxies are the reports of the proxy replicas that reported lately, by replica; nil when none.
	Proxies []queue.ProxyReport
	// Polling is what the waiting visitors' polls cost at the last stats read.
	Polling Polling
	// Workload is what the replicas measured of the protected requests and the rate ticks run at;
	// nil before any replica reported.
	Workload *Workload
	// Lanes are the main queue and the room's lanes, when it has lanes (spec.lanes).
	Lanes []LaneSnapshot
}

// Polling is what a queue's status polls cost under its budget (capacity.PollBudget).
type Polling struct {
	// FarInterval is the base poll interval of the visitors far from the front; Fits says the
	// budget holds at this depth; SupportedDepth is the deepest queue it holds (0: any).
	FarInterval    time.Duration
	Fits           bool
	SupportedDepth int64
	// Budget and Expected are the budget and the expected polls per second at this depth.
	Budget, Expected float64
}

// TickReport describes one tick of one queue.
type TickReport struct {
	Key types.NamespacedName
	// Generation is the WaitingQueue generation of the settings the tick ran with.
	Generation int64
	// Scheduled is the tick's place on the grid (its id is Scheduled in Unix milliseconds); Started
	// is when it ran.
	Scheduled, Started time.Time
	// Quota is how many visitors the plan gives the tick (ticks made up for included), and Limit how
	// many it asked Redis to admit at most: Quota, capped at queue.MaxAdmitPerTick.
	Quota, Limit int64
	// Rate is the admissions per second the tick's quota came from: the plan's, or the adaptive
	// controller's.
	Rate float64
	// Window is the jitter window of the tick; Lead the constant ahead of it; Seed drew the offsets
	// (queue.JitterOffsets).
	Window, Lead time.Duration
	Seed         int64
	// Phase is the room's phase at the tick.
	Phase  phase.Phase
	Result queue.AdmitResult
	Err    error
}

// RandSource draws jitter seeds; *math/rand/v2.Rand satisfies it.
type RandSource interface {
	Int64N(n int64) int64
}

// Option changes how a Scheduler runs; tests and benchmarks use them to watch and steer it.
type Option func(*Scheduler)

// WithClock makes the scheduler tick on c instead of the real clock.
func WithClock(c clock.Clock) Option { return func(s *Scheduler) { s.clock = c } }

// WithRand gives each queue the jitter source newRand returns instead of a randomly seeded PCG.
func WithRand(newRand func() RandSource) Option { return func(s *Scheduler) { s.newRand = newRand } }

// WithTickObserver calls observe after every tick that reached Redis (or failed to), from the
// queue's goroutine.
func WithTickObserver(observe func(TickReport)) Option {
	return func(s *Scheduler) { s.observe = observe }
}

// WithIdleSleep sets how long a room nobody waits in sleeps between ticks (a multiple of its tick;
// 0 keeps every room ticking). The default is ten seconds (docs/architecture.md, "Idle rooms").
func WithIdleSleep(d time.Duration) Option { return func(s *Scheduler) { s.idleSleep = d } }

// WithWakeSlot sets the slot on which sleeping rooms wake together: a sleep ends at the first
// multiple of d (on the Unix epoch) after its length, and the rooms that wake in one slot share
// their round trips to Redis (queue.TickTogether). 0 wakes each room at its own grid point. The
// default is 100 ms (docs/architecture.md, "Idle rooms").
func WithWakeSlot(d time.Duration) Option { return func(s *Scheduler) { s.wakeSlot = d } }

// WithAlignedGrid puts every room's grid points on the multiples of its tick (GridPhase 0), which
// tests that follow one room's ticks read more easily.
func WithAlignedGrid() Option {
	return func(s *Scheduler) { s.gridPhase = func(types.NamespacedName, time.Duration) time.Duration { return 0 } }
}

// WithNotify calls notify with a queue whose Snapshot changed, at most every 2 s per queue, from
// the queue's goroutine. notify must not block: it returns false when it cannot take the
// notification now, and the scheduler tries again at the next change.
func WithNotify(notify func(types.NamespacedName) bool) Option {
	return func(s *Scheduler) { s.notify = notify }
}

// Scheduler admits visitors of every WaitingQueue: one goroutine per queue, each ticking on the
// queue's plan. It runs only on the elected leader, so that a single scheduler admits at a time;
// tick ids in Redis make an overlap during a leader handover harmless anyway.
type Scheduler struct {
	pool    *queue.Pool
	clock   clock.Clock
	newRand func() RandSource
	observe func(TickReport)
	notify  func(types.NamespacedName) bool
	// idleSleep is how long an idle room sleeps between ticks.
	idleSleep time.Duration
	// wakeSlot is the slot sleeping rooms wake together on (WithWakeSlot).
	wakeSlot time.Duration
	// gridPhase places a room's grid within its tick (GridPhase).
	gridPhase func(types.NamespacedName, time.Duration) time.Duration
	// beaconHTTP calls the beacons of draws (spec.draw).
	beaconHTTP *http.Client

	mu      sync.Mutex
	ctx     context.Context // from Start; nil before
	runners map[types.UID]*runner
}

var _ interface {
	Start(context.Context) error
	NeedLeaderElection() bool
} = (*Scheduler)(nil)

// New returns a scheduler drawing Redis clients from pool.
func New(pool *queue.Pool, opts ...Option) *Scheduler {
	s := &Scheduler{pool: pool, clock: clock.RealClock{}, runners: map[types.UID]*runner{}, idleSleep: defaultIdleSleep, wakeSlot: defaultWakeSlot, gridPhase: GridPhase,
		beaconHTTP: defaultBeaconHTTP}
	s.newRand = func() RandSource { return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())) }
	for _, o := range opts {
		o(s)
	}
	return s
}

// Pool is where the scheduler takes its Redis clients from.
func (s *Scheduler) Pool() *queue.Pool { return s.pool }

// NeedLeaderElection makes the manager run the scheduler only on the leader.
func (s *Scheduler) NeedLeaderElection() bool { return true }

// Start runs the queues' goroutines until ctx ends, then stops them and waits for them.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.ctx != nil {
		s.mu.Unlock()
		return errors.New("scheduler already started")
	}
	s.ctx = ctx
	for _, r := range s.runners {
		s.launch(r)
	}
	s.mu.Unlock()

	<-ctx.Done()

	s.mu.Lock()
	runners := make([]*runner, 0, len(s.runners))
	for _, r := range s.runners {
		runners = append(runners, r)
	}
	s.mu.Unlock()
	for _, r := range runners {
		r.stop()
	}
	return nil
}

// Ensure runs q, or hands changed settings to its goroutine, which applies them at the next tick.
func (s *Scheduler) Ensure(q Room) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.runners[q.UID]
	if r == nil {
		r = &runner{s: s, key: q.Key(), changed: make(chan struct{}, 1)}
		r.cfg.Store(&q)
		s.runners[q.UID] = r
		if s.ctx != nil {
			s.launch(r)
		}
		return
	}
	if old := r.cfg.Swap(&q); old.Generation != q.Generation || old.RedisURL != q.RedisURL {
		// A sleeping room takes a new spec at the next grid point, not at the end of its sleep.
		select {
		case r.changed <- struct{}{}:
		default:
		}
	}
}

// Len is how many queues the scheduler runs.
func (s *Scheduler) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.runners)
}

// Snapshot returns what the scheduler last observed of the queue; false when it does not run it.
func (s *Scheduler) Snapshot(uid types.UID) (Snapshot, bool) {
	s.mu.Lock()
	r := s.runners[uid]
	s.mu.Unlock()
	if r == nil {
		return Snapshot{}, false
	}
	return r.snapshot(), true
}

// launch starts r's goroutine; s.mu is held.
func (s *Scheduler) launch(r *runner) {
	ctx, cancel := context.WithCancel(s.ctx)
	r.cancel = cancel
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		r.run(ctx)
	}()
}

// runner is the goroutine of one queue and what it observed.
type runner struct {
	s   *Scheduler
	key types.NamespacedName
	cfg atomic.Pointer[Room]
	// changed wakes a sleeping room when its settings change.
	changed chan struct{}

	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	snap Snapshot
}

func (r *runner) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
}

func (r *runner) snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.snap
	if s.Draw != nil {
		d := *s.Draw
		s.Draw = &d
	}
	return s
}

func (r *runner) update(f func(*Snapshot)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.snap)
}
