package controllers

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/internal/settings"
	"github.com/herdgate/herdgate/test/builder"
)

// TestResyncsReadAFewSecretsASecondWhateverTheRooms: each room is resynced every minute until the
// rooms' resyncs together would read more than secretResyncReads Secrets a second; then every room's
// resync grows with their number. Each is a tenth off at random, so rooms made together spread.
func TestResyncsReadAFewSecretsASecondWhateverTheRooms(t *testing.T) {
	for _, tc := range []struct {
		rooms int
		want  time.Duration
	}{{1, time.Minute}, {300, time.Minute}, {1000, 200 * time.Second}, {3000, 600 * time.Second}} {
		sched := scheduler.New(&queue.Pool{})
		for i := range tc.rooms {
			name := fmt.Sprintf("room-%d", i)
			sched.Ensure(scheduler.Room{Settings: &settings.Settings{UID: types.UID(name), Namespace: "shop", Name: name}})
		}
		r := &WaitingQueueReconciler{Scheduler: sched}
		lo, hi := time.Duration(float64(tc.want)*0.9), time.Duration(float64(tc.want)*1.1)
		seen := map[time.Duration]bool{}
		for range 50 {
			d := r.secretResync()
			if d < lo || d > hi {
				t.Fatalf("%d rooms: a resync in %s, want %s ± 10 %%", tc.rooms, d, tc.want)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("%d rooms: 50 resyncs took %d distinct intervals; they should spread", tc.rooms, len(seen))
		}
	}
}

// TestASecretReadServesUntilTheRoomsResync: what a reconcile read of a room's Secrets serves the
// room's next reconciles until its resync, as long as a resync is for the rooms there are then, and
// never across a change of the spec.
func TestASecretReadServesUntilTheRoomsResync(t *testing.T) {
	read := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	now := read
	sched := scheduler.New(&queue.Pool{})
	rooms := func(n int) {
		for i := range n {
			name := fmt.Sprintf("room-%d", i)
			sched.Ensure(scheduler.Room{Settings: &settings.Settings{UID: types.UID(name), Namespace: "shop", Name: name}})
		}
	}
	rooms(10)
	r := &WaitingQueueReconciler{Scheduler: sched, Now: func() time.Time { return now }}
	wq := builder.Queue("shop", "orders").UID("orders").Generation(1).Obj()
	r.rememberRead(wq, secretRead{at: read, spread: 0.5, redisURL: "redis://orders"})

	for _, tc := range []struct {
		name  string
		after time.Duration
		rooms int
		gen   int64
		fresh bool
	}{
		{"a reconcile soon after", 30 * time.Second, 0, 1, true},
		{"a reconcile at the resync of ten rooms", time.Minute, 0, 1, false},
		{"a reconcile after the spec changed", time.Second, 0, 2, false},
		// A thousand rooms resync every 200 s: the read made when there were ten serves that long.
		{"a reconcile a minute on, the rooms grown to a thousand", time.Minute, 990, 1, true},
		{"a reconcile at the resync of a thousand rooms", 200 * time.Second, 0, 1, false},
	} {
		rooms(tc.rooms)
		now = read.Add(tc.after)
		wq.Generation = tc.gen
		got, fresh := r.lastRead(wq)
		if fresh != tc.fresh || (fresh && got.redisURL != "redis://orders") {
			t.Errorf("%s: fresh %t (%+v); want %t", tc.name, fresh, got, tc.fresh)
		}
	}
}
