package capacity

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func TestAFrontMeterTellsTheNumbersPassedForEachAdmission(t *testing.T) {
	m := NewFrontMeter()
	if a := m.Advance(t0); a.Known() {
		t.Fatalf("a meter that saw nothing knows %v", a)
	}
	// Ten admissions a second; every third place between them was left: the front passes 1.5
	// numbers a visitor.
	head := int64(1)
	at := t0
	for range 40 {
		m.Tick(at, FrontTick{Head: head, Admitted: 10, Taken: 10})
		head += 15
		at = at.Add(time.Second)
	}
	a := m.Advance(at)
	if !a.Known() || math.Abs(a.SeqsPerAdmission-1.5) > 1e-9 {
		t.Fatalf("advance %v, want 1.5 numbers an admission", a)
	}
	// The queue runs empty: the numbers given out while nobody waited are nobody's.
	m.Tick(at, FrontTick{Head: head, Admitted: 3, Taken: 3, Emptied: true})
	m.Tick(at.Add(5*time.Second), FrontTick{Head: head + 1000, Admitted: 10, Taken: 10})
	m.Tick(at.Add(6*time.Second), FrontTick{Head: head + 1010, Admitted: 10, Taken: 10})
	if a := m.Advance(at.Add(6 * time.Second)); math.Abs(a.SeqsPerAdmission-1.5) > 0.1 {
		t.Fatalf("after the queue ran empty the advance is %v", a)
	}
}

func TestAFrontMeterFollowsTheRecentFront(t *testing.T) {
	m := NewFrontMeter()
	head, at := int64(0), t0
	for range 60 {
		m.Tick(at, FrontTick{Head: head, Admitted: 10, Taken: 10})
		head += 10
		at = at.Add(time.Second)
	}
	for range 20 {
		m.Tick(at, FrontTick{Head: head, Admitted: 10, Taken: 10})
		head += 20
		at = at.Add(time.Second)
	}
	if a := m.Advance(at); math.Abs(a.SeqsPerAdmission-2) > 0.11 {
		t.Fatalf("advance %v, want the last %s's 2 numbers an admission", a, FrontWindow)
	}
}

func TestAFrontMeterOfASlowRoomLooksFurtherBack(t *testing.T) {
	m := NewFrontMeter()
	head, at := int64(0), t0
	// One admission every 5 s, every other place left.
	for range 30 {
		m.Tick(at, FrontTick{Head: head, Admitted: 1, Taken: 1})
		head += 2
		at = at.Add(5 * time.Second)
	}
	if a := m.Advance(at); !a.Known() || math.Abs(a.SeqsPerAdmission-2) > 1e-9 {
		t.Fatalf("advance %v, want 2 numbers an admission from the last %d admissions", a, frontMinAdmissions)
	}
	if a := m.Advance(at.Add(frontHistory)); a.Known() {
		t.Fatalf("after %s without a tick the advance is still %v", frontHistory, a)
	}
}

func TestAheadCountsThePlacesThatWillBeAdmitted(t *testing.T) {
	for _, c := range []struct {
		name                 string
		position, seq, front int64
		advance              Advance
		want                 float64
	}{
		{"unknown advance: the position", 100, 500, 300, Advance{}, 100},
		{"one number an admission", 100, 399, 300, Advance{SeqsPerAdmission: 1}, 100},
		{"a third of the places ahead will go", 120, 450, 300, Advance{SeqsPerAdmission: 1.5}, 101},
		{"never more than the position", 10, 450, 300, Advance{SeqsPerAdmission: 1.5}, 10},
		{"the front itself", 1, 300, 300, Advance{SeqsPerAdmission: 2}, 1},
		{"a place the front has not reached counts as its position", 5, 200, 300, Advance{SeqsPerAdmission: 2}, 5},
		{"not waiting", 0, 300, 300, Advance{SeqsPerAdmission: 2}, 0},
	} {
		if got := Ahead(c.position, c.seq, c.front, c.advance); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: Ahead = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRatesTimeForCrossesTheirSteps(t *testing.T) {
	r := Rates{{From: t0, PerSecond: 10}, {From: t0.Add(10 * time.Second), PerSecond: 5}, {From: t0.Add(20 * time.Second), PerSecond: 0}, {From: t0.Add(30 * time.Second), PerSecond: 20}}
	for _, c := range []struct {
		n    float64
		want time.Duration
		ok   bool
	}{
		{0, 0, true},
		{50, 5 * time.Second, true},
		{100, 10 * time.Second, true},
		{125, 15 * time.Second, true},
		// 150 by 20 s, nobody until 30 s, then 20 a second.
		{170, 31 * time.Second, true},
	} {
		got, ok := r.TimeFor(c.n, t0)
		if ok != c.ok || got != c.want {
			t.Errorf("TimeFor(%v) = %v, %v, want %v, %v", c.n, got, ok, c.want, c.ok)
		}
	}
	if got, ok := r.TimeFor(10, t0.Add(25*time.Second)); !ok || got != 5*time.Second+500*time.Millisecond {
		t.Errorf("from inside the pause: %v, %v", got, ok)
	}
	if _, ok := (Rates{{From: t0, PerSecond: 10}, {From: t0.Add(time.Second), PerSecond: 0}}).TimeFor(20, t0); ok {
		t.Errorf("a room that stops admitting admits everyone")
	}
}

func TestShareRatesGiveADrainedLanesShareBack(t *testing.T) {
	room := ConstantRate(t0, 10)
	// The main queue weighs 70, a lane 30 with 60 waiting and 1 arriving a second: the lane takes
	// 3 a second, runs empty after 30 s, and then takes its arrivals alone.
	queues := []QueueLoad{{Weight: 70, Waiting: 1000}, {Weight: 30, Waiting: 60, ArrivalsPerSecond: 1}}
	got := ShareRates(room, queues, 0, t0)
	want := Rates{{From: t0, PerSecond: 7}, {From: t0.Add(30 * time.Second), PerSecond: 9}}
	if len(got) != len(want) {
		t.Fatalf("rates %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].From.Equal(want[i].From) || math.Abs(got[i].PerSecond-want[i].PerSecond) > 1e-9 {
			t.Fatalf("rates %v, want %v", got, want)
		}
	}
	// The lane's own visitors are told its share while the main queue is busy, and the whole rate
	// once its thousand are through.
	if lane := ShareRates(room, queues, 1, t0); len(lane) != 2 || math.Abs(lane[0].PerSecond-3) > 1e-9 || math.Abs(lane[1].PerSecond-10) > 1e-9 {
		t.Fatalf("the lane's rates %v", lane)
	}
	// A lane that fills faster than its share never gives it back.
	queues[1].ArrivalsPerSecond = 5
	if got := ShareRates(room, queues, 0, t0); len(got) != 1 || math.Abs(got[0].PerSecond-7) > 1e-9 {
		t.Fatalf("rates %v beside a lane that never drains", got)
	}
}

func TestShareRatesFollowTheRoomsSteps(t *testing.T) {
	room := Rates{{From: t0, PerSecond: 10}, {From: t0.Add(10 * time.Second), PerSecond: 20}}
	queues := []QueueLoad{{Weight: 50, Waiting: 1000}, {Weight: 50, Waiting: 100}}
	// The lane drains at 5 a second for 10 s, then at 10 a second for 5 s more.
	got := ShareRates(room, queues, 0, t0)
	want := []float64{5, 10, 20}
	at := []time.Duration{0, 10 * time.Second, 15 * time.Second}
	if len(got) != len(want) {
		t.Fatalf("rates %v", got)
	}
	for i := range want {
		if !got[i].From.Equal(t0.Add(at[i])) || math.Abs(got[i].PerSecond-want[i]) > 1e-9 {
			t.Fatalf("rates %v, want %v from %v", got, want, at)
		}
	}
}
