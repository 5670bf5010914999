package capacity

import (
	"math"
	"testing"
	"time"
)

// noShows is the Quiet of a queue where 30 % of the places never poll after entering: silent for
// all of their age.
var noShows = Quiet{SeqsPerPlace: 1, Share: 0.3, Silences: [5]float64{1, 1, 1, 1, 1}}

func TestQuietTellsTheShareSilentBeyondAShareOfTheirAge(t *testing.T) {
	uniform := Quiet{SeqsPerPlace: 1, Share: 0.3, Silences: [5]float64{0.1, 0.3, 0.5, 0.7, 0.9}}
	for _, x := range []float64{0, 0.05, 0.2, 0.5, 0.8, 0.95, 1} {
		if got := uniform.silentBeyond(x); math.Abs(got-(1-x)) > 1e-9 {
			t.Errorf("uniform silences: %.2f silent beyond %.2f of their age, want %.2f", got, x, 1-x)
		}
	}
	if got := noShows.silentBeyond(0.5); got < 0.9 {
		t.Errorf("visitors who never polled: %.2f silent beyond half their age, want nearly all", got)
	}
	if got := noShows.droppedAt(9, 10); got != 0 {
		t.Errorf("%.2f dropped before abandonAfter", got)
	}
	if got := noShows.droppedAt(20, 10); got < 0.27 || got > 0.3 {
		t.Errorf("%.2f dropped at twice abandonAfter, want nearly the 30 %% quiet", got)
	}
}

func TestAheadAgingCountsTheDropsTheFrontHasNotShownYet(t *testing.T) {
	const abandonAfter = 10 * time.Second
	// The room admits 14 a second; the front has waited 8 s and nobody was dropped there yet (the
	// advance is one number an admission), but the places ahead of a visitor 400 numbers back will
	// have waited past abandonAfter at their turn: the 30 % who never polled will be dropped.
	now := t0
	line := ArrivalLine{FrontSeq: 1000, FrontAt: now.Add(-8 * time.Second), LastSeq: 1400, LastAt: now}
	a := Advance{SeqsPerAdmission: 1, Quiet: noShows}
	plain := Ahead(401, 1400, 1000, a)
	got := AheadAging(401, 1400, 1000, a, line, abandonAfter, 14, now)
	if plain != 401 || got < 280 || got > 305 {
		t.Fatalf("ahead %.1f (by the front's advance alone %.1f), want about 1 + 400 × 0.7", got, plain)
	}
	// Whose places ahead will not have waited abandonAfter at their turn loses none of them.
	short := ArrivalLine{FrontSeq: 1000, FrontAt: now.Add(-2 * time.Second), LastSeq: 1040, LastAt: now}
	if got := AheadAging(41, 1040, 1000, a, short, abandonAfter, 14, now); got != 41 {
		t.Errorf("a short wait: ahead %.1f, want 41", got)
	}
	// Visitors who leave during their wait are silent for part of their age only: fewer drops.
	leavers := a
	leavers.Quiet.Silences = [5]float64{0.1, 0.3, 0.5, 0.7, 0.9}
	if l := AheadAging(401, 1400, 1000, leavers, line, abandonAfter, 14, now); l <= got || l >= plain {
		t.Errorf("leavers: ahead %.1f, want between the no-shows' %.1f and %.1f", l, got, plain)
	}
	// Once the front itself has waited abandonAfter and a window since, its advance holds the drops.
	old := ArrivalLine{FrontSeq: 1000, FrontAt: now.Add(-abandonAfter - FrontWindow), LastSeq: 1400, LastAt: now}
	measured := Advance{SeqsPerAdmission: 1.4, Quiet: noShows}
	if got, want := AheadAging(401, 1400, 1000, measured, old, abandonAfter, 14, now), Ahead(401, 1400, 1000, measured); got != want {
		t.Errorf("a front past abandonAfter: ahead %.1f, want the advance's %.1f", got, want)
	}
	// Without a line, quiet places or a rate, it is Ahead.
	for name, c := range map[string]struct {
		a    Advance
		line ArrivalLine
		rate float64
	}{"no line": {a, ArrivalLine{}, 14}, "no quiet places": {Advance{SeqsPerAdmission: 1}, line, 14}, "no rate": {a, line, 0}} {
		if got := AheadAging(401, 1400, 1000, c.a, c.line, abandonAfter, c.rate, now); got != plain {
			t.Errorf("%s: ahead %.1f, want %.1f", name, got, plain)
		}
	}
}

func TestAFrontMeterTellsHowPlacesGoQuiet(t *testing.T) {
	m := NewFrontMeter()
	head, at := int64(0), t0
	// Ten places a second leave the front, three of which went quiet: two never polled, one left
	// halfway; every other arrival number is another queue's.
	for range 20 {
		m.Tick(at, FrontTick{Head: head, Admitted: 10, Taken: 10, Quiet: 3, Silences: []float64{1, 1, 0.5}})
		head += 20
		at = at.Add(time.Second)
	}
	q := m.Advance(at).Quiet
	if !q.Known() || math.Abs(q.SeqsPerPlace-2) > 1e-9 || math.Abs(q.Share-0.3) > 1e-9 {
		t.Fatalf("quiet %+v, want 2 numbers a place and a share of 0.3", q)
	}
	if q.Silences[0] != 0.5 || q.Silences[4] != 1 {
		t.Errorf("silences %v, want from 0.5 to 1", q.Silences)
	}
	if q := NewFrontMeter().Advance(at).Quiet; q.Known() {
		t.Errorf("a meter that saw nothing knows %+v", q)
	}
}
