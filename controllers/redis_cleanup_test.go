package controllers

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// gatedCleanup is a room's cleanup that the test lets finish, with the outcome it hands in.
type gatedCleanup struct {
	began   chan struct{}
	outcome chan error
	// tries are the numbers of the tries made, as told to each.
	tries []int
}

func newGatedCleanup() *gatedCleanup {
	return &gatedCleanup{began: make(chan struct{}, 10), outcome: make(chan error)}
}

func (g *gatedCleanup) clean(ctx context.Context, try int) error {
	g.tries = append(g.tries, try)
	g.began <- struct{}{}
	select {
	case err := <-g.outcome:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestRedisCleanupRunsBesideTheReconcile: a room's cleanup runs in a goroutine of its own, one try at a
// time; the reconcile that begins it and those that come while it runs return at once; the room is
// reconciled again when it ends, and learns the outcome once.
func TestRedisCleanupRunsBesideTheReconcile(t *testing.T) {
	room, uid := types.NamespacedName{Namespace: "shop", Name: "launch"}, types.UID("launch-uid")
	notified := make(chan types.NamespacedName, 10)
	c := &redisCleanups{notify: func(k types.NamespacedName) { notified <- k }}
	g := newGatedCleanup()

	if got := c.take(room, uid, g.clean); !got.pending {
		t.Fatalf("the first reconcile of a deleted room: %+v, want a cleanup begun", got)
	}
	<-g.began
	for range 3 {
		if got := c.take(room, uid, g.clean); !got.pending {
			t.Fatalf("a reconcile while the cleanup runs: %+v, want it still pending", got)
		}
	}
	select {
	case <-g.began:
		t.Fatal("a second try began while the first was on its way")
	case k := <-notified:
		t.Fatalf("%s was reconciled again before its cleanup ended", k)
	default:
	}

	g.outcome <- nil
	if k := <-notified; k != room {
		t.Fatalf("notified %s, want %s", k, room)
	}
	if got := c.take(room, uid, g.clean); got.pending || got.retry || got.err != nil {
		t.Fatalf("after the cleanup: %+v, want it done", got)
	}
	// Told once: a later reconcile (the room is gone by then) would begin afresh.
	if len(c.byRoom) != 0 {
		t.Fatalf("%d cleanups kept after the room learnt its outcome", len(c.byRoom))
	}
}

// TestRedisCleanupRetriesWithBackoffThenGivesUp: a failed try is told with the backoff to the next; the
// finalizeAttempts-th failure gives up, with the last error.
func TestRedisCleanupRetriesWithBackoffThenGivesUp(t *testing.T) {
	room, uid := types.NamespacedName{Namespace: "shop", Name: "launch"}, types.UID("launch-uid")
	notified := make(chan types.NamespacedName, 10)
	c := &redisCleanups{notify: func(k types.NamespacedName) { notified <- k }}
	g := newGatedCleanup()
	stalled := errors.New("i/o timeout")

	for try := 1; try <= finalizeAttempts; try++ {
		if got := c.take(room, uid, g.clean); !got.pending {
			t.Fatalf("try %d: %+v, want it begun", try, got)
		}
		<-g.began
		g.outcome <- stalled
		<-notified
		got := c.take(room, uid, g.clean)
		if got.pending || got.failures != try || !errors.Is(got.err, stalled) {
			t.Fatalf("after try %d: %+v, want %d failures ending in %v", try, got, try, stalled)
		}
		if try < finalizeAttempts {
			if want := time.Duration(1<<try) * time.Second; !got.retry || got.retryAfter != want {
				t.Fatalf("after try %d: %+v, want a retry after %s", try, got, want)
			}
			continue
		}
		if got.retry {
			t.Fatalf("after the last try: %+v, want it given up", got)
		}
	}
	if len(c.byRoom) != 0 {
		t.Fatalf("%d cleanups kept after giving up", len(c.byRoom))
	}
	if want := []int{1, 2, 3, 4, 5}; !slices.Equal(g.tries, want) {
		t.Fatalf("tries told %v, want %v", g.tries, want)
	}
}

// TestRedisCleanupsTakeTurnsForTheirSlots: with one slot, a second room's try begins when the first's
// ends, and its bound runs from then.
func TestRedisCleanupsTakeTurnsForTheirSlots(t *testing.T) {
	notified := make(chan types.NamespacedName, 10)
	c := &redisCleanups{notify: func(k types.NamespacedName) { notified <- k }, slots: make(chan struct{}, 1)}
	first, second := newGatedCleanup(), newGatedCleanup()
	firstRoom, secondRoom := types.NamespacedName{Namespace: "shop", Name: "first"}, types.NamespacedName{Namespace: "shop", Name: "second"}
	c.take(firstRoom, "first", first.clean)
	<-first.began
	if got := c.take(secondRoom, "second", second.clean); !got.pending {
		t.Fatalf("the second room: %+v, want its cleanup pending", got)
	}
	// The first try holds the one slot until the test lets it end; the second does not begin meanwhile
	// (watched for a while, as Gomega's Consistently would).
	select {
	case <-second.began:
		t.Fatal("the second room's try began while the first held the only slot")
	case <-time.After(200 * time.Millisecond):
	}
	first.outcome <- nil
	if k := <-notified; k != firstRoom {
		t.Fatalf("notified %s first, want %s", k, firstRoom)
	}
	<-second.began
	second.outcome <- nil
	if k := <-notified; k != secondRoom {
		t.Fatalf("notified %s, want %s", k, secondRoom)
	}
}
