package scheduler

import (
	"testing"
	"time"
)

// TestABusySpellKeepsWhatAHerdDid: a spell runs from the first tick that admits anyone to the last,
// at the rate its ticks admitted; it is ongoing while anyone waits, survives the quiet ticks after
// it, goes on through a pause shorter than the rates' window, and gives way to a new spell after a
// longer one.
func TestABusySpellKeepsWhatAHerdDid(t *testing.T) {
	const tick = 100 * time.Millisecond
	t0 := time.Date(2027, 3, 1, 10, 0, 0, 0, time.UTC)
	var b BusySpell
	if b.take(t0, tick, 0, 0) || !b.Start.IsZero() {
		t.Fatalf("a tick that admits nobody began a spell: %+v", b)
	}
	// A herd of 500: 35 ticks of 14 and one of 10.
	at := t0
	waiting := int64(500)
	for i := range 36 {
		n := min(14, waiting)
		waiting -= n
		at = t0.Add(time.Duration(i) * tick)
		if !b.take(at, tick, n, waiting) {
			t.Fatalf("tick %d admitting %d: no change", i, n)
		}
		if want := waiting > 0; b.Ongoing != want {
			t.Fatalf("tick %d with %d left: ongoing %t", i, waiting, b.Ongoing)
		}
	}
	if b.Start != t0 || b.End != at || b.Admitted != 500 || b.PeakDepth != 500 || b.AdmittedPerSecond() != "138.888" {
		t.Fatalf("the herd's spell %+v; want 500 admitted from %s to %s, 500 at the peak, at 500 / 3.6 s", b, t0, at)
	}
	if b.take(at.Add(tick), tick, 0, 0) || b.take(at.Add(5*time.Second), tick, 0, 0) {
		t.Fatal("the quiet ticks after the herd changed its spell")
	}

	// Two visitors 5 s later: the same spell, longer, at a lower rate.
	b.take(at.Add(5*time.Second), tick, 2, 0)
	if b.Start != t0 || b.Admitted != 502 || b.Ongoing {
		t.Fatalf("a pause of 5 s: %+v; want the herd's spell going on", b)
	}
	// A visitor after a pause of the rates' window: a spell of its own.
	later := at.Add(5*time.Second + busyGap)
	b.take(later, tick, 1, 3)
	if b.Start != later || b.Admitted != 1 || b.PeakDepth != 4 || !b.Ongoing || b.AdmittedPerSecond() != "10" {
		t.Fatalf("a visitor after a pause of %s: %+v; want a new spell of one, 10 a second over its one tick", busyGap, b)
	}
	// Nobody admitted and nobody left: the spell is over, as it was.
	if !b.take(later.Add(tick), tick, 0, 0) || b.Ongoing || b.End != later {
		t.Fatalf("the tick that found nobody: %+v; want the spell over, ended at its last admission", b)
	}
}
