package scheduler

import (
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/herdgate/herdgate/test/builder"
)

// TestABusyRoomTellsOfItsFiguresEveryTenSeconds: a busy room's depth and rate change at every stats
// read (every 2 s), and it tells the reconciler of that at most every liveNotifyInterval; a Redis
// failure, which changes a condition, it tells at once.
func TestABusyRoomTellsOfItsFiguresEveryTenSeconds(t *testing.T) {
	var mu sync.Mutex
	var told []time.Time
	var h *schedulerHarness
	h = newHarness(t, WithNotify(func(types.NamespacedName) bool {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, h.clock.Now())
		return true
	}))
	h.fill("busy", 3000) // 14 a tick for 20 s: 2,800
	h.s.Ensure(h.queue("busy", builder.Queue("", "")))
	depths := map[int64]bool{}
	for range 200 { // 20 s of 100 ms ticks
		h.mustStep(100 * time.Millisecond)
		snap, _ := h.s.Snapshot(types.UID("busy"))
		depths[snap.Depth] = true
	}
	mu.Lock()
	got := append([]time.Time(nil), told...)
	mu.Unlock()
	if len(depths) < 8 {
		t.Fatalf("the room's depth took %d values over 20 s, want one a stats read", len(depths))
	}
	// The first stats, then the figures at most every 10 s: three in 20 s.
	if len(got) == 0 || len(got) > 3 {
		t.Fatalf("the room told the reconciler %d times in 20 s (at %v), want at most 3", len(got), got)
	}
	for i := 1; i < len(got); i++ {
		if d := got[i].Sub(got[i-1]); d < liveNotifyInterval {
			t.Fatalf("the room told the reconciler %s after the time before, within %s, of figures alone", d, liveNotifyInterval)
		}
	}

	// Redis goes: the next tick fails, and the reconciler hears of it at once.
	h.redis.Stop()
	last := got[len(got)-1]
	h.move(100 * time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(told)
		mu.Unlock()
		if n > len(got) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a failing tick %s after the last notification told the reconciler nothing", h.clock.Now().Sub(last))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s, _ := h.s.Snapshot(types.UID("busy")); s.RedisError == "" {
		t.Fatal("the snapshot shows no Redis error after the tick failed")
	}
}

// TestARoomThatDrainsSaysSoAtOnce: the tick that admits the last waiting visitor puts the room to
// sleep, and the room's depth is 0 from that tick on, told to the reconciler at once, although the
// last read of the counters came before the last admissions and the next comes when it wakes.
func TestARoomThatDrainsSaysSoAtOnce(t *testing.T) {
	var mu sync.Mutex
	var told []time.Time
	var h *schedulerHarness
	h = newHarness(t, WithNotify(func(types.NamespacedName) bool {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, h.clock.Now())
		return true
	}))
	h.fill("draining", 300) // 14 a tick: 22 ticks
	h.s.Ensure(h.queue("draining", builder.Queue("", "")))
	var sawDepth bool
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("the room never fell asleep in 10 s of ticks")
		}
		r := h.mustStep(100 * time.Millisecond)
		snap, _ := h.s.Snapshot(types.UID("draining"))
		if !r.Result.Asleep {
			sawDepth = sawDepth || snap.Depth > 0
			continue
		}
		if !sawDepth {
			t.Fatal("the room never showed anybody waiting before it drained")
		}
		if snap.Depth != 0 {
			t.Fatalf("the tick that drained the room left its depth at %d", snap.Depth)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			last := told[len(told)-1]
			mu.Unlock()
			if !last.Before(h.clock.Now()) {
				return // told at the draining tick
			}
			if time.Now().After(deadline) {
				t.Fatalf("the reconciler was last told at %s, before the tick at %s that drained the room", last, h.clock.Now())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestARoomAtRestTellsNothing: a room nobody waits in wakes every idle sleep and reads its
// figures, which stay as they were; a read that changes nothing is no news, so the reconciler,
// which writes status for news, hears nothing of it, however long the room rests.
func TestARoomAtRestTellsNothing(t *testing.T) {
	var mu sync.Mutex
	told := 0
	toldSoFar := func() int {
		mu.Lock()
		defer mu.Unlock()
		return told
	}
	h := newHarness(t, WithNotify(func(types.NamespacedName) bool {
		mu.Lock()
		defer mu.Unlock()
		told++
		return true
	}))
	h.s.Ensure(h.queue("resting", builder.Queue("", "")))
	if r := h.mustStep(100 * time.Millisecond); !r.Result.Asleep {
		t.Fatal("a room nobody waits in stayed awake")
	}
	// The first figures are news: let them be told.
	for range 3 * int(defaultIdleSleep/time.Second) {
		h.step(time.Second)
	}
	settled := toldSoFar()
	if settled == 0 {
		t.Fatal("the room never told the reconciler of its first figures")
	}
	first, _ := h.s.Snapshot(types.UID("resting"))
	wakes := 0
	for range 30 * int(defaultIdleSleep/time.Second) { // thirty idle sleeps
		if _, ok := h.step(time.Second); ok {
			wakes++
		}
	}
	last, _ := h.s.Snapshot(types.UID("resting"))
	if wakes < 25 || !last.StatsAt.After(first.StatsAt) {
		t.Fatalf("the resting room woke %d times and read its figures at %s, then %s; want a wake and a read every idle sleep",
			wakes, first.StatsAt, last.StatsAt)
	}
	if n := toldSoFar(); n != settled {
		t.Fatalf("over %d wakes that found nothing new the room told the reconciler %d times", wakes, n-settled)
	}
}
