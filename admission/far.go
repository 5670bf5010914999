package admission

import (
	"context"
	"net/http"
	"sync"
	"time"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
)

// Far from the front a status poll is answered without a call to Redis: the visitor brings its
// arrival sequence, signed for it alone (the place), and the proxy bounds its position from a
// snapshot of the queue it takes every few seconds, less the admissions since, which it learns at
// every tick. The visitor's sign of life waits for the tick's batch, one call for all the visitors
// answered so. Within cfg.ExactPositions of the front every poll goes to Redis, as does any poll the
// proxy cannot answer surely (no fresh snapshot, a visitor Redis no longer knows under that place).
// See docs/architecture.md, "Positions far from the front".

const (
	// PlaceCookie holds the visitor's place; PlaceHeader carries it for clients without cookies.
	PlaceCookie = "herdgate_place"
	PlaceHeader = "Herdgate-Place"

	// farSnapshotEvery is how often a proxy counts the queue while it is deeper than the exact zone,
	// and farSnapshotMaxAge how old a snapshot may be and still answer (Redis may be down since).
	farSnapshotEvery  = 2 * time.Second
	farSnapshotMaxAge = 10 * time.Second
	// farSnapshotPerCall bounds the boundaries one call counts, and so how long it holds Redis.
	farSnapshotPerCall = 200
	// farBatchMost bounds the signs of life one call records, for the same reason.
	farBatchMost = 1000
	// farMostPending bounds the signs of life a proxy holds while Redis cannot take them; beyond,
	// polls go to Redis one by one, as without this path.
	farMostPending = 1_000_000
	// farAnsweredFor is how long a proxy remembers whom it answered, to refuse a poll that came too
	// early: a poll within it of the last one to the same replica is checked.
	farAnsweredFor = 10 * time.Second
	// farGoneFor is how long a proxy remembers a place Redis no longer knows, so that its visitor's
	// next polls are answered by Redis (not queued, or its new place).
	farGoneFor = time.Hour
	// farMostGone bounds those places; the oldest are forgotten first.
	farMostGone = 100_000
)

// positionEngine is what an engine offers for far positions; the queue on Redis does.
type positionEngine interface {
	RankSnapshot(ctx context.Context, perCall int) (queue.RankSnapshot, error)
	SeenBatch(ctx context.Context, visitors []queue.SeenVisitor, abandonAfter time.Duration) (queue.SeenResult, error)
}

type placeKey struct {
	visitor string
	seq     int64
}

// farPositions is what a proxy knows of its queue far from the front.
type farPositions struct {
	mu sync.Mutex
	// snap is the latest snapshot, taken at snapAt by the proxy's clock.
	snap   queue.RankSnapshot
	snapAt time.Time
	// admitted counts the queue's admissions from the queue, depth its waiting visitors, as last seen.
	admitted, depth int64
	// pending are the signs of life the next batch records, by visitor.
	pending map[string]int64
	// answered remembers when each visitor answered far was answered, in two generations.
	answered, answeredBefore map[string]time.Time
	answeredSince            time.Time
	// gone are places Redis no longer knows, until when they are remembered.
	gone map[placeKey]time.Time
}

func newFarPositions() *farPositions {
	return &farPositions{pending: map[string]int64{}, answered: map[string]time.Time{}, gone: map[placeKey]time.Time{}}
}

// farAnswer is a far visitor's bounded position.
type farAnswer struct {
	position, depth int64
	// previous is when this replica last answered the visitor; zero when it does not know.
	previous time.Time
}

// bound answers the visitor waiting under seq from the snapshot, or says to ask Redis.
func (f *farPositions) bound(visitor string, seq int64, exactZone int64, now time.Time) (farAnswer, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.snapAt.IsZero() || now.Sub(f.snapAt) > farSnapshotMaxAge || len(f.pending) >= farMostPending {
		return farAnswer{}, false
	}
	if _, gone := f.gone[placeKey{visitor, seq}]; gone {
		return farAnswer{}, false
	}
	pos, ok := f.snap.PositionBoundAfter(seq, f.admitted)
	if !ok || pos <= exactZone {
		return farAnswer{}, false
	}
	a := farAnswer{position: pos, depth: max(pos, f.depth)}
	if at, ok := f.answered[visitor]; ok {
		a.previous = at
	} else if at, ok := f.answeredBefore[visitor]; ok {
		a.previous = at
	}
	f.rotateAnswered(now)
	f.answered[visitor] = now
	f.pending[visitor] = seq
	return a, true
}

// rotateAnswered starts a new generation of answered visitors every farAnsweredFor.
func (f *farPositions) rotateAnswered(now time.Time) {
	if now.Sub(f.answeredSince) < farAnsweredFor {
		return
	}
	f.answeredBefore, f.answered, f.answeredSince = f.answered, make(map[string]time.Time, len(f.answered)), now
}

// noteDepth records a depth Redis told, so that the proxy knows when a snapshot is worth taking.
func (f *farPositions) noteDepth(depth int64) {
	f.mu.Lock()
	f.depth = depth
	f.mu.Unlock()
}

// takePending hands the signs of life to record over to the caller.
func (f *farPositions) takePending() []queue.SeenVisitor {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.pending) == 0 {
		return nil
	}
	out := make([]queue.SeenVisitor, 0, len(f.pending))
	for v, seq := range f.pending {
		out = append(out, queue.SeenVisitor{Visitor: v, Seq: seq})
	}
	f.pending = make(map[string]int64, len(out))
	return out
}

// giveBack returns signs of life a batch could not record; newer ones win.
func (f *farPositions) giveBack(visitors []queue.SeenVisitor) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range visitors {
		if _, newer := f.pending[v.Visitor]; !newer && len(f.pending) < farMostPending {
			f.pending[v.Visitor] = v.Seq
		}
	}
}

// recorded takes in what a batch found.
func (f *farPositions) recorded(batch []queue.SeenVisitor, res queue.SeenResult, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.admitted, f.depth = max(f.admitted, res.Admitted), res.Depth
	if len(res.Gone) == 0 {
		return
	}
	seqs := make(map[string]int64, len(batch))
	for _, v := range batch {
		seqs[v.Visitor] = v.Seq
	}
	if len(f.gone)+len(res.Gone) > farMostGone {
		for k, until := range f.gone {
			if until.Before(now) || len(f.gone)+len(res.Gone) > farMostGone {
				delete(f.gone, k)
			}
		}
	}
	for _, v := range res.Gone {
		f.gone[placeKey{v, seqs[v]}] = now.Add(farGoneFor)
	}
}

// snapshotDue says whether the queue is deep enough, and the snapshot old enough, to take another.
func (f *farPositions) snapshotDue(exactZone int64, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.depth > exactZone && now.Sub(f.snapAt) >= farSnapshotEvery
}

func (f *farPositions) setSnapshot(s queue.RankSnapshot, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snap, f.snapAt = s, now
	f.admitted = max(f.admitted, s.Admitted)
	if s.Front < 0 {
		f.depth = 0
	}
}

// farPathOpen says whether polls of this room may be answered far from the front: the room is open
// (while a pre-queue is drawn, places are still being settled) and the engine offers snapshots.
func (p *Proxy) farPathOpen(cfg *Config, r room) bool {
	if _, ok := p.q.(positionEngine); !ok || cfg.ExactPositions <= 0 || cfg.Mode != herdgatev1alpha1.ModeQueue {
		return false
	}
	return cfg.Schedule == nil || (r.known && r.phase == queue.PhaseOpen)
}

// place returns the sequence in the visitor's place, from the header or the cookie, when it is one
// this queue signed for this visitor.
func (p *Proxy) place(x exchange, cfg *Config, visitor string) (int64, bool) {
	token := x.Header(PlaceHeader)
	if token == "" {
		token = x.Cookie(PlaceCookie)
	}
	if token == "" || len(token) > maxCookieValue {
		return 0, false
	}
	return cfg.Signer.VerifyPlace(token, visitor)
}

// setPlace gives a waiting visitor its place, as a cookie and in the answer.
func (p *Proxy) setPlace(x exchange, cfg *Config, visitor string, seq int64) string {
	token := cfg.Signer.Place(visitor, seq)
	x.SetCookie(&http.Cookie{
		Name: PlaceCookie, Value: token, Path: reservedPrefix, HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: x.Secure(), MaxAge: int(visitorMaxAge / time.Second),
	})
	return token
}

// serveFar answers a waiting visitor's status poll from the proxy's snapshot, when it can; false
// means to ask Redis.
func (p *Proxy) serveFar(x exchange, cfg *Config, r room, visitor string, seq int64) bool {
	now := p.now()
	a, ok := p.far.bound(visitor, seq, cfg.ExactPositions, now)
	if !ok {
		return false
	}
	stretch := p.polls.stretch(cfg, r, a.depth)
	if !a.previous.IsZero() {
		shortest := capacity.BudgetedPollHint(r.plan, a.position, r.pollMin, r.pollMax, stretch, zeroRand{})
		if p.pollTooEarly(x, "status", false, queue.Position{Position: a.position, Depth: a.depth, Now: now, PreviousPoll: a.previous}, shortest) {
			return true
		}
	}
	body := positionBody{Position: a.position, QueueDepth: a.depth, PositionIsBound: true, Phase: phaseOpen, scheduleTimes: p.scheduleTimes(cfg)}
	if cfg.Schedule != nil {
		body.Phase = string(r.phase)
	}
	if wait, ok := r.plan.EstimatedWait(a.position); ok {
		s := int64(wait / time.Second)
		body.EstimatedWaitSeconds = &s
	}
	body.NextPollMs = capacity.BudgetedPollHint(r.plan, a.position, r.pollMin, r.pollMax, stretch, p.rand).Milliseconds()
	p.metrics.requests.WithLabelValues("status", "waiting_far").Inc()
	replyJSON(x, http.StatusOK, body)
	return true
}

// KeepFarPositions records the signs of life of visitors answered far from the front every tick,
// and counts the queue every farSnapshotEvery while it is deeper than the exact zone, until ctx
// ends. Serve runs it; a program that serves the Proxy as an http.Handler runs it beside, or every
// poll goes to Redis.
func (p *Proxy) KeepFarPositions(ctx context.Context) { p.keepFarPositions(ctx) }

func (p *Proxy) keepFarPositions(ctx context.Context) {
	if _, ok := p.q.(positionEngine); !ok {
		return
	}
	for {
		interval := herdgatev1alpha1.DefaultTick
		if cfg := p.cfg.Load(); cfg != nil && cfg.Tick > 0 {
			interval = cfg.Tick
		}
		if !sleepFor(ctx, interval) {
			// The last tick's signs of life still go to Redis, so that a replica shutting down
			// costs its far visitors nothing.
			flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			p.refreshFar(flushCtx)
			cancel()
			return
		}
		p.refreshFar(ctx)
	}
}

// sleepFor waits d, or until ctx ends; false when ctx ended.
func sleepFor(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// refreshFar runs one tick of keepFarPositions.
func (p *Proxy) refreshFar(ctx context.Context) {
	engine, ok := p.q.(positionEngine)
	cfg := p.cfg.Load()
	if !ok || cfg == nil {
		return
	}
	r := p.room(ctx, cfg)
	callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	pending := p.far.takePending()
	for start := 0; start < len(pending); start += farBatchMost {
		batch := pending[start:min(len(pending), start+farBatchMost)]
		res, err := engine.SeenBatch(callCtx, batch, r.abandonAfter)
		if err != nil {
			p.far.giveBack(pending[start:])
			if ctx.Err() == nil {
				p.log.V(1).Info("Recording far visitors' signs of life failed; will retry", "visitors", len(pending)-start, "error", err.Error())
			}
			return
		}
		p.far.recorded(batch, res, p.now())
		p.metrics.farSigns.Add(float64(len(batch)))
	}
	if now := p.now(); p.farPathOpen(cfg, r) && p.far.snapshotDue(cfg.ExactPositions, now) {
		snap, err := engine.RankSnapshot(callCtx, farSnapshotPerCall)
		if err != nil {
			if ctx.Err() == nil {
				p.log.V(1).Info("Counting the queue for far positions failed; will retry", "error", err.Error())
			}
			return
		}
		p.far.setSnapshot(snap, now)
		p.metrics.farSnapshots.Inc()
	}
}
