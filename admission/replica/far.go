package replica

import (
	"sync"
	"time"

	"github.com/herdgate/herdgate/internal/queue"
)

// Far from the front a status poll is answered without a call to Redis, from a snapshot of the queue
// less the admissions since (docs/architecture.md, "A deep queue"). FarPositions is
// what a replica knows for it: the snapshot, the signs of life the next batch records, whom it
// answered lately, and the places Redis no longer knows.

const (
	// FarSnapshotEvery is how often a proxy counts the queue while it is deeper than the exact zone,
	// and FarSnapshotMaxAge how old a snapshot may be and still answer (Redis may be down since).
	FarSnapshotEvery  = 2 * time.Second
	FarSnapshotMaxAge = 10 * time.Second
	// FarMostPending bounds the signs of life a proxy holds while Redis cannot take them; beyond,
	// polls go to Redis one by one, as without this path.
	FarMostPending = 1_000_000
	// farAnsweredFor is how long a proxy remembers whom it answered, to refuse a poll that came too
	// early: a poll within it of the last one to the same replica is checked.
	farAnsweredFor = 10 * time.Second
	// farGoneFor is how long a proxy remembers a place Redis no longer knows, so that its visitor's
	// next polls are answered by Redis (not queued, or its new place).
	farGoneFor = time.Hour
	// farMostGone bounds those places; the oldest are forgotten first.
	farMostGone = 100_000
)

type placeKey struct {
	visitor string
	seq     int64
}

// FarPositions is what a proxy knows of its queue far from the front.
type FarPositions struct {
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

func NewFarPositions() *FarPositions {
	return &FarPositions{pending: map[string]int64{}, answered: map[string]time.Time{}, gone: map[placeKey]time.Time{}}
}

// FarAnswer is a far visitor's bounded position.
type FarAnswer struct {
	// Position bounds the visitor's position from above; Depth is the queue's depth as last seen.
	Position, Depth int64
	// Previous is when this replica last answered the visitor; zero when it does not know.
	Previous time.Time
	// Front is the arrival at the queue's front when the snapshot was taken, and AdmittedSince how
	// many the queue admitted since: what a wait is estimated from (the front moved on by about the
	// arrivals those admissions passed).
	Front, AdmittedSince int64
}

// Bound answers the visitor waiting under seq from the snapshot, or says to ask Redis.
func (f *FarPositions) Bound(visitor string, seq int64, exactZone int64, now time.Time) (FarAnswer, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.snapAt.IsZero() || now.Sub(f.snapAt) > FarSnapshotMaxAge || len(f.pending) >= FarMostPending {
		return FarAnswer{}, false
	}
	if _, gone := f.gone[placeKey{visitor, seq}]; gone {
		return FarAnswer{}, false
	}
	pos, ok := f.snap.PositionBoundAfter(seq, f.admitted)
	if !ok || pos <= exactZone {
		return FarAnswer{}, false
	}
	a := FarAnswer{Position: pos, Depth: max(pos, f.depth), Front: max(0, f.snap.Front), AdmittedSince: max(0, f.admitted-f.snap.Admitted)}
	if at, ok := f.answered[visitor]; ok {
		a.Previous = at
	} else if at, ok := f.answeredBefore[visitor]; ok {
		a.Previous = at
	}
	f.rotateAnswered(now)
	f.answered[visitor] = now
	f.pending[visitor] = seq
	return a, true
}

// rotateAnswered starts a new generation of answered visitors every farAnsweredFor.
func (f *FarPositions) rotateAnswered(now time.Time) {
	if now.Sub(f.answeredSince) < farAnsweredFor {
		return
	}
	f.answeredBefore, f.answered, f.answeredSince = f.answered, make(map[string]time.Time, len(f.answered)), now
}

// NoteDepth records a depth Redis told, so that the proxy knows when a snapshot is worth taking.
func (f *FarPositions) NoteDepth(depth int64) {
	f.mu.Lock()
	f.depth = depth
	f.mu.Unlock()
}

// TakePending hands the signs of life to record over to the caller.
func (f *FarPositions) TakePending() []queue.SeenVisitor {
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

// GiveBack returns signs of life a batch could not record; newer ones win.
func (f *FarPositions) GiveBack(visitors []queue.SeenVisitor) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range visitors {
		if _, newer := f.pending[v.Visitor]; !newer && len(f.pending) < FarMostPending {
			f.pending[v.Visitor] = v.Seq
		}
	}
}

// Recorded takes in what a batch found.
func (f *FarPositions) Recorded(batch []queue.SeenVisitor, res queue.SeenResult, now time.Time) {
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

// SnapshotDue says whether the queue is deep enough, and the snapshot old enough, to take another.
func (f *FarPositions) SnapshotDue(exactZone int64, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.depth > exactZone && now.Sub(f.snapAt) >= FarSnapshotEvery
}

// SetSnapshot takes in a count of the queue taken at now.
func (f *FarPositions) SetSnapshot(s queue.RankSnapshot, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snap, f.snapAt = s, now
	f.admitted = max(f.admitted, s.Admitted)
	if s.Front < 0 {
		f.depth = 0
	}
}

// SnapshotAge is how old the snapshot is at now; very old when there is none.
func (f *FarPositions) SnapshotAge(now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.snapAt.IsZero() {
		return time.Duration(1<<63 - 1)
	}
	return now.Sub(f.snapAt)
}

// PendingCount is how many signs of life the next batch records.
func (f *FarPositions) PendingCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
}
