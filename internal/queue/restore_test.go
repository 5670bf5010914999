package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// loseLastPlaces does to q's keys what a failover to a replica behind the primary does: the sequence
// goes back to the first place, and the places after it are gone.
func loseLastPlaces(t *testing.T, rdb redis.UniversalClient, q *Queue, lost ...string) {
	t.Helper()
	ctx := context.Background()
	if err := rdb.Set(ctx, q.keys.seq, 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZRem(ctx, q.keys.wait, toAny(lost)...).Err(); err != nil {
		t.Fatal(err)
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// enterHolding enters visitor with the place it held, and fails the test on an error.
func enterHolding(t *testing.T, q *Queue, visitor string, held int64, abandonAfter time.Duration) Position {
	t.Helper()
	p, err := q.EnterFrom(context.Background(), visitor, abandonAfter, EntryLimit{HeldPlace: held})
	if err != nil {
		t.Fatalf("EnterFrom(%s, held place %d): %v", visitor, held, err)
	}
	return p
}

// TestAPlaceAFailoverLostComesBack: after a failover took the last places and the sequence back, new
// visitors still queue behind the places this proxy saw given, and visitors who bring back a lost
// place re-enter at it, through any proxy; a place that was not lost (its visitor was admitted) does
// not come back, and a visitor still waiting keeps the place it has.
func TestAPlaceAFailoverLostComesBack(t *testing.T) {
	ctx := context.Background()
	rdb := startClient(t)
	q := newQueue(t, rdb)
	enterAll(t, q, "a", "b", "c")
	loseLastPlaces(t, rdb, q, "b", "c")

	// This proxy saw place 3 given: the new visitor's place comes after it.
	if p := enterHolding(t, q, "late", 0, longAbandon); p.State != Waiting || p.Seq != 4 || p.Position != 2 || p.Restored {
		t.Fatalf("a new visitor after the failover: %+v, want waiting at sequence 4, position 2", p)
	}
	// Another proxy, which saw nothing, gives c its place back; then b.
	other, err := New(rdb, q.namespace, q.name)
	if err != nil {
		t.Fatal(err)
	}
	if p := enterHolding(t, other, "c", 3, longAbandon); p.State != Waiting || !p.Restored || p.Seq != 3 || p.Position != 2 || p.Depth != 3 {
		t.Fatalf("c back with place 3: %+v, want restored at sequence 3, position 2 of 3", p)
	}
	if p, err := other.Status(ctx, "b", longAbandon); err != nil || p.State != NotQueued {
		t.Fatalf("b before it came back: %+v, %v; want not queued", p, err)
	}
	// b polls: it asks for its place and nothing else.
	if p, err := other.EnterFrom(ctx, "b", longAbandon, EntryLimit{HeldPlace: 2, OnlyHeldPlace: true}); err != nil || !p.Restored || p.Position != 2 || p.Depth != 4 {
		t.Fatalf("b asking for place 2 back: %+v, %v; want restored at position 2 of 4", p, err)
	}
	if p := enterHolding(t, q, "c", 3, longAbandon); p.State != Waiting || p.Restored || p.Position != 3 {
		t.Fatalf("c, waiting, entering again: %+v, want its place, 3, and nothing restored", p)
	}
	// a was admitted and its pass is gone: its old place was not lost, and would jump the line.
	if err := rdb.ZRem(ctx, q.keys.wait, "a").Err(); err != nil {
		t.Fatal(err)
	}
	if p, err := q.EnterFrom(ctx, "a", longAbandon, EntryLimit{HeldPlace: 1, OnlyHeldPlace: true}); err != nil || p.State != NotQueued {
		t.Fatalf("a, admitted before, asking for place 1 back: %+v, %v; want not queued", p, err)
	}
	if err := rdb.ZScore(ctx, q.keys.wait, "a").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("a asked only for its place back and took one: %v", err)
	}
	if p := enterHolding(t, q, "a", 1, longAbandon); p.Restored || p.Seq != 5 || p.Position != 4 {
		t.Fatalf("a, admitted before, bringing place 1: %+v, want a new place at the back (sequence 5, position 4)", p)
	}
	if n, err := rdb.HGet(ctx, q.keys.totals, "restored").Int(); err != nil || n != 2 {
		t.Fatalf("restored places counted %d, %v; want 2", n, err)
	}
}

// TestAPlaceAboveTheSequenceProvesItsLoss: a proxy that saw none of the lost places learns of the loss
// from the visitor who brings one back above the sequence, and lifts the sequence past it.
func TestAPlaceAboveTheSequenceProvesItsLoss(t *testing.T) {
	rdb := startClient(t)
	q := newQueue(t, rdb)
	enterAll(t, q, "x", "y")
	loseLastPlaces(t, rdb, q, "y")
	fresh, err := New(rdb, q.namespace, q.name)
	if err != nil {
		t.Fatal(err)
	}
	if p := enterHolding(t, fresh, "y", 2, longAbandon); !p.Restored || p.Seq != 2 || p.Position != 2 {
		t.Fatalf("y back with place 2 above the sequence: %+v, want restored at position 2", p)
	}
	if p := enterHolding(t, fresh, "z", 0, longAbandon); p.Seq != 3 || p.Position != 3 {
		t.Fatalf("a new visitor after y came back: %+v, want sequence 3, position 3", p)
	}
}

// TestALostPlaceComesBackWithinAbandonAfter: the lost range is good for abandon-after, the time a
// silent visitor keeps a place anyway; a place brought back later is a new visitor's.
func TestALostPlaceComesBackWithinAbandonAfter(t *testing.T) {
	rdb := startClient(t)
	q := newQueue(t, rdb)
	const abandon = 300 * time.Millisecond
	for _, v := range []string{"p1", "p2", "p3"} {
		enterHolding(t, q, v, 0, abandon)
	}
	loseLastPlaces(t, rdb, q, "p2", "p3")
	if p := enterHolding(t, q, "n", 0, abandon); p.Seq != 4 {
		t.Fatalf("a new visitor: %+v, want sequence 4", p)
	}
	if p := enterHolding(t, q, "p2", 2, abandon); !p.Restored {
		t.Fatalf("p2 within abandon-after: %+v, want its place back", p)
	}
	time.Sleep(abandon + 100*time.Millisecond)
	if p := enterHolding(t, q, "p3", 3, abandon); p.Restored || p.Seq != 5 {
		t.Fatalf("p3 after abandon-after: %+v, want a new place, sequence 5", p)
	}
}

// TestAnotherProxysNumbersWidenTheLostRange: the proxy that saw fewer of the lost places reaches the
// new primary first and gives the next numbers again; the one that saw more widens the lost range to
// what it saw, so that its visitors still get their places back.
func TestAnotherProxysNumbersWidenTheLostRange(t *testing.T) {
	rdb := startClient(t)
	var queues [2]*Queue
	var watches [2]*FailoverWatch
	for i := range queues {
		watches[i] = NewFailoverWatch()
		watches[i].saw(replication{primary: true, replid: "old"}, time.Now())
		store := NewStore(rdb, StoreOptions{Failovers: watches[i]})
		t.Cleanup(store.Close)
		q, err := store.Queue("test", testQueueName(t))
		if err != nil {
			t.Fatal(err)
		}
		queues[i] = q
	}
	low, high := queues[0], queues[1]
	enterAll(t, low, "l1", "l2")
	enterAll(t, high, "h3", "h4", "h5")
	loseLastPlaces(t, rdb, low, "l2", "h3", "h4", "h5")
	for _, w := range watches {
		w.saw(replication{primary: true, replid: "new", prior: "old"}, time.Now())
	}
	// low saw place 2 given: the range is (1, 2], and low gives 3 to 6 again, past all high saw.
	enterAll(t, low, "n3", "n4", "n5", "n6")
	// high learns of the failover with its next answer, and widens the range with the one after.
	enterAll(t, high, "n7", "n8")
	for _, held := range []struct {
		visitor string
		seq     int64
	}{{"l2", 2}, {"h3", 3}, {"h4", 4}, {"h5", 5}} {
		if p := enterHolding(t, low, held.visitor, held.seq, longAbandon); !p.Restored {
			t.Errorf("%s bringing back place %d: %+v, want it restored", held.visitor, held.seq, p)
		}
	}
}
