package replica

import (
	"strconv"
	"testing"
	"time"

	"github.com/herdgate/herdgate/internal/queue"
)

// TestFarBookkeeping: signs of life a batch could not record are kept for the next, behind newer
// ones; a place Redis said is gone goes to Redis from then on, the visitor's other places do not;
// a snapshot older than FarSnapshotMaxAge answers nobody; pending signs beyond FarMostPending send
// polls to Redis.
func TestFarBookkeeping(t *testing.T) {
	f := NewFarPositions()
	now := time.Unix(1_000_000, 0)
	f.SetSnapshot(queue.RankSnapshot{Front: 1, Tail: 100_000, Boundaries: queue.RankBoundaries(1, 100_000), Counts: nil}, now)
	if _, ok := f.Bound("ada", 50_000, 5000, now); ok {
		t.Fatal("answered from a snapshot without counts")
	}
	s := queue.RankSnapshot{Front: 1, Tail: 100_000, Boundaries: queue.RankBoundaries(1, 100_000)}
	s.Counts = append(s.Counts, s.Boundaries...) // nobody left: as many wait at or below a boundary as it says
	f.SetSnapshot(s, now)
	a, ok := f.Bound("ada", 50_000, 5000, now)
	if !ok || a.Position != 50_000 || !a.Previous.IsZero() {
		t.Fatalf("ada: %+v %v", a, ok)
	}
	if a, ok := f.Bound("ada", 50_000, 5000, now.Add(time.Second)); !ok || !a.Previous.Equal(now) {
		t.Fatalf("ada again: %+v %v", a, ok)
	}
	if _, ok := f.Bound("bea", 4000, 5000, now); ok {
		t.Fatal("a visitor within the exact zone was answered from the snapshot")
	}
	batch := f.TakePending()
	if len(batch) != 1 || batch[0] != (queue.SeenVisitor{Visitor: "ada", Seq: 50_000}) || f.TakePending() != nil {
		t.Fatalf("pending: %v", batch)
	}
	// The batch failed; meanwhile ada polled again with another place (she entered again).
	f.pending["ada"] = 60_000
	f.GiveBack(append(batch, queue.SeenVisitor{Visitor: "cy", Seq: 70_000}))
	if f.pending["ada"] != 60_000 || f.pending["cy"] != 70_000 {
		t.Fatalf("after giving back: %v", f.pending)
	}
	// Redis says cy's place is gone, and 20,000 were admitted: bounds fall by as many.
	batch = f.TakePending()
	f.Recorded(batch, queue.SeenResult{Admitted: 20_000, Depth: 80_000, Gone: []string{"cy"}}, now)
	if _, ok := f.Bound("cy", 70_000, 5000, now.Add(time.Minute)); ok {
		t.Fatal("a gone place was answered from the snapshot")
	}
	if _, ok := f.Bound("cy", 70_001, 5000, now.Add(time.Second)); !ok {
		t.Fatal("cy's other place was sent to Redis")
	}
	if a, ok := f.Bound("dot", 30_000, 5000, now.Add(time.Second)); !ok || a.Position != 10_000 || a.Depth != 80_000 {
		t.Fatalf("dot after 20,000 admissions: %+v %v", a, ok)
	}
	if _, ok := f.Bound("dot", 30_000, 5000, now.Add(FarSnapshotMaxAge+time.Second)); ok {
		t.Fatal("answered from a stale snapshot")
	}
	f.pending = make(map[string]int64, FarMostPending)
	for i := range FarMostPending {
		f.pending[strconv.Itoa(i)] = 1
	}
	if f.PendingCount() != FarMostPending {
		t.Fatalf("pending: %d", f.PendingCount())
	}
	if _, ok := f.Bound("eve", 90_000, 5000, now.Add(time.Second)); ok {
		t.Fatal("answered with a full batch")
	}
}
