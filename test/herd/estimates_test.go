package herd

import (
	"math"
	"testing"
	"time"
)

// judge counts each wait told against the wait had from then, at entry and later, and a visitor
// whose estimated end moved later by more than max(20 %, 30 s) once.
func TestJudgeComparesEachWaitToldWithTheWaitHad(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	w := func(s float64) *float64 { return &s }
	visitors := []*estimateVisitor{
		// Told 20 s at entry and 11 s 10 s later; admitted 22 s after entering: 9.1 % and 8.3 % off.
		{told: []estimateTold{{at: t0, position: 200, wait: w(20)}, {at: t0.Add(10 * time.Second), position: 100, wait: w(11)}}, admitted: t0.Add(22 * time.Second)},
		// Told 10 s, then 60 s a second later (its end moved 51 s later): a rise; admitted 40 s in.
		{told: []estimateTold{{at: t0, position: 100, wait: w(10)}, {at: t0.Add(time.Second), position: 99, wait: w(60)}}, admitted: t0.Add(40 * time.Second)},
		// Never admitted: not judged.
		{told: []estimateTold{{at: t0, position: 5, wait: w(1)}}},
		// A wait under 5 s is not judged, but the visitor counts among the admitted.
		{told: []estimateTold{{at: t0, position: 3, wait: w(1)}}, admitted: t0.Add(2 * time.Second)},
	}
	var points int
	a := judge(visitors, func(t estimateTold) float64 { return *t.wait }, func(had, told float64, _ estimateTold) { points++ })
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-3 }
	if a.Judged != 2 || points != 2 || !near(a.EntryP50, 2.0/22) || !near(a.EntryP90, 30.0/40) || !near(a.Rises, 1.0/3) {
		t.Fatalf("accuracy %+v, %d points; want 2 judged at entry (p50 9.1 %%, p90 75 %%) and one rise of three admitted", a, points)
	}
	if want := math.Abs(60-39.0) / 39; !near(a.LaterP90, want) {
		t.Fatalf("later p90 %v, want %v", a.LaterP90, want)
	}
	if a.MeetsGoal() {
		t.Fatal("a run 75 % off at p90 meets the goal")
	}
}
