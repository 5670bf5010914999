package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
)

// A busy room publishes, with its plan, how each queue's front advances and what it holds: here the
// main queue's and the lane's visitors entered in turn, so each front passes two arrivals for every
// visitor it admits.
func TestSchedulerPublishesEachQueuesFront(t *testing.T) {
	h := newHarness(t)
	q := h.engine("fronts")
	if err := q.SetLanes([]string{"club"}); err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		lane := ""
		if i%2 == 1 {
			lane = "club"
		}
		if _, err := q.EnterFrom(context.Background(), fmt.Sprintf("v%05d", i), time.Hour, queue.EntryLimit{Lane: lane}); err != nil {
			t.Fatal(err)
		}
	}
	// 14 a tick, 7 for each queue.
	h.s.Ensure(h.queue("fronts", builder.Queue("", "").Capacity(40, 200*time.Millisecond, 70).Lanes(builder.LaneByCode("club", 50, "codes", "club"))))
	for range 12 {
		h.mustStep(100 * time.Millisecond)
	}
	plan, err := publishedPlan(q, func(p queue.PublishedPlan) bool {
		return p.Forecast != nil && p.Forecast.Queues[queue.MainLane].Advance.Known() && p.Forecast.Queues["club"].Advance.Known()
	})
	if err != nil || plan.Forecast == nil {
		t.Fatalf("no forecast published: %+v, %v", plan, err)
	}
	for _, name := range []string{queue.MainLane, "club"} {
		f := plan.Forecast.Queues[name]
		if f.Advance.SeqsPerAdmission != 2 || f.Waiting <= 0 || f.Waiting >= 150 || f.ArrivalsPerSecond != 0 {
			t.Errorf("%s: %+v; want 2 arrivals an admission, some of its 150 waiting, nobody arriving", name, f)
		}
	}
	if at := plan.Forecast.At; at.Before(gridStart) || at.After(gridStart.Add(2*time.Second)) {
		t.Errorf("the forecast is of %s, not of the ticks' clock", at)
	}
}

// A room that caps its active passes publishes them with its forecast: here the cap of 20 filled
// at the first tick, and none of the passes has ended since, so they are as old as the count.
func TestACappedRoomPublishesItsSlots(t *testing.T) {
	h := newHarness(t)
	q := h.engine("capped")
	for i := range 300 {
		if _, err := q.Enter(context.Background(), fmt.Sprintf("v%05d", i), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	h.s.Ensure(h.queue("capped", builder.Queue("", "").Capacity(40, 200*time.Millisecond, 70).MaxActive(20)))
	for range 50 {
		h.mustStep(100 * time.Millisecond)
	}
	plan, err := publishedPlan(q, func(p queue.PublishedPlan) bool {
		return p.Forecast != nil && p.Forecast.Slots != nil && p.Forecast.Slots.Counted >= 4*time.Second
	})
	if err != nil || plan.Forecast == nil || plan.Forecast.Slots == nil {
		t.Fatalf("no slots published: %+v, %v", plan, err)
	}
	s := *plan.Forecast.Slots
	if s.Max != 20 || s.Active != 20 || s.Held != 0 || s.ReleasedPerSecond != 0 {
		t.Fatalf("slots %+v; want the cap of 20 full, no pass ended", s)
	}
	if oldest := s.Ages[capacity.SlotAgeSteps]; oldest < s.Counted-2*time.Second || oldest > s.Counted {
		t.Errorf("the oldest pass is %v old, counted over %v: they were admitted at the first ticks", oldest, s.Counted)
	}
	if waiting := plan.Forecast.Queues[queue.MainLane].Waiting; waiting != 280 {
		t.Errorf("%d waiting, want the 280 the cap left", waiting)
	}
}

// A queue's arrivals are counted from its first tick: a room that started a second ago and took in
// sixteen visitors since is read at sixteen a second, not at a tenth of that.
func TestAQueuesArrivalsAreReadOverTheTimeCounted(t *testing.T) {
	var f queueFronts
	t0 := time.Unix(1_800_000_000, 0)
	lanes := []string{"club"}
	tick := func(at time.Duration, mainDepth, clubDepth int64) {
		f.take(lanes, t0.Add(at), queue.AdmitResult{Fronts: []queue.FrontMove{{Head: -1, Depth: mainDepth}, {Head: -1, Depth: clubDepth}}}, &arrivalClock{})
	}
	tick(0, 0, 150)
	for i := 1; i <= 10; i++ {
		tick(time.Duration(i)*100*time.Millisecond, int64(16*i/10), 150+int64(i/10))
	}
	got := f.due(t0.Add(time.Second))
	if got == nil {
		t.Fatal("no forecast while visitors wait")
	}
	if main, club := got.Queues[queue.MainLane], got.Queues["club"]; main.ArrivalsPerSecond != 16 || club.ArrivalsPerSecond != 1 || club.Waiting != 151 {
		t.Fatalf("main %+v, club %+v; want 16 and 1 a second, 151 waiting in the club (its backlog is no arrival)", main, club)
	}
	if c := got.Queues[queue.MainLane].Counted; c != time.Second {
		t.Errorf("arrivals counted over %s, want the second since the first tick", c)
	}
	// The room slept five seconds (its ticks skipped): the arrivals are counted anew from its waking.
	tick(6*time.Second, 20, 151)
	tick(6100*time.Millisecond, 22, 151)
	f.publishedAt = time.Time{}
	got = f.due(t0.Add(6100 * time.Millisecond))
	if main := got.Queues[queue.MainLane]; main.Counted != 100*time.Millisecond || main.ArrivalsPerSecond != 20 {
		t.Errorf("after a sleep: main %+v; want 2 arrivals counted over 100 ms", main)
	}
}

// The forecast tells how long the front's place has waited and how the places taken off went quiet:
// here three in ten never polled after entering, so they were silent for all of their age.
func TestAForecastTellsHowTheFrontsPlacesWentQuiet(t *testing.T) {
	var f queueFronts
	var clock arrivalClock
	t0 := time.Unix(1_800_000_000, 0)
	// Ten enter a second from t0 on: arrival 10·s entered by t0 + s.
	for s := range 40 {
		clock.mark(int64(10*s), t0.Add(time.Duration(s)*time.Second))
	}
	// From t0 + 30 s, ten places a second leave the front, each 8 s after it entered.
	var due *queue.Forecast
	for s := 30; s < 40; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		head := int64(10 * (s - 8))
		var quiet []queue.QuietPlace
		for i := range int64(3) {
			quiet = append(quiet, queue.QuietPlace{Arrival: head + i, Silence: 8 * time.Second})
		}
		f.take(nil, now, queue.AdmitResult{Now: now, Sequence: int64(10 * s), Fronts: []queue.FrontMove{
			{Head: head, Admitted: 10, Taken: 10, Quiet: 3, QuietPlaces: quiet, Depth: 80}}}, &clock)
		if d := f.due(now); d != nil {
			due, f.publishedAt = d, now
		}
	}
	if due == nil {
		t.Fatal("no forecast while visitors wait")
	}
	main := due.Queues[queue.MainLane]
	if main.Line.FrontAge < 7*time.Second || main.Line.FrontAge > 9*time.Second || main.Line.LastSeq != 390 {
		t.Errorf("line %+v: the front waited about 8 s, and 390 was the last arrival", main.Line)
	}
	q := main.Advance.Quiet
	if !q.Known() || q.Share != 0.3 || q.Silences[0] < 0.85 {
		t.Errorf("quiet %+v: 30 %% went quiet, silent for nearly all of their age", q)
	}
}
