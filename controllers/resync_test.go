package controllers

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/internal/settings"
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
