package admission_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
)

// publishForecast publishes the reference plan with a forecast of the room's queues as of now, and
// waits until the proxy's plan cache holds it.
func (h *harness) publishForecast(queues map[string]queue.LaneForecast) {
	h.t.Helper()
	h.publishForecastWith(queues, nil)
}

// publishSlots publishes the reference plan with a forecast of the main queue and the room's slots
// under its cap, as of now, and waits until the proxy's plan cache holds it.
func (h *harness) publishSlots(waiting int64, slots capacity.Slots) {
	h.t.Helper()
	h.publishForecastWith(map[string]queue.LaneForecast{queue.MainLane: {Waiting: waiting}}, &slots)
}

// publishForecastWith is publishForecast with the room's slots under its cap; nil for none.
func (h *harness) publishForecastWith(queues map[string]queue.LaneForecast, slots *capacity.Slots) {
	h.t.Helper()
	// Queues whose arrivals were counted long enough, unless a test says otherwise.
	for name, q := range queues {
		if q.Counted == 0 {
			q.Counted = 10 * time.Second
			queues[name] = q
		}
	}
	plan := admissionReferencePlan()
	plan.Forecast = &queue.Forecast{At: time.Now(), Queues: queues, Slots: slots}
	if err := h.redisQueue().PublishPlan(context.Background(), plan); err != nil {
		h.t.Fatal(err)
	}
	time.Sleep(admission.PlanTTL + 100*time.Millisecond)
}

func admissionReferencePlan() queue.PublishedPlan {
	return queue.PublishedPlan{Quota: mustQuota(14), PollMin: 500 * time.Millisecond, PollMax: 5 * time.Second, AbandonAfter: harnessAbandonAfter}
}

// lastStep is what every estimate adds after the admission: the lead and half the jitter window.
func (h *harness) lastStep() time.Duration {
	cfg := h.room.Config()
	return cfg.Lead + cfg.JitterWindow/2
}

func wantSeconds(d time.Duration) float64 { return math.Round(d.Seconds()) }

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// TestWaitsAreEstimatedFromTheFrontsAdvance: a visitor is told the admissions ahead of it as its
// queue's front really passes them. When the front passes two arrivals for each visitor it admits
// (every other visitor ahead will have left by its turn), the wait is half the position's.
func TestWaitsAreEstimatedFromTheFrontsAdvance(t *testing.T) {
	h := newHarness(t, nil)
	for i := range 1400 {
		if _, err := h.q.Enter(context.Background(), fmt.Sprintf("ahead-%04d", i), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	body := h.visitor().enter().json(t)
	if want := wantSeconds(1401*time.Second/140 + h.lastStep()); body["position"] != 1401.0 || body["estimatedWaitSeconds"] != want {
		t.Fatalf("enter at 1401 before any forecast = %v; want %v s (position ÷ 140/s)", body, want)
	}
	// A tick that admits nobody leaves the front where it is, at the first arrival.
	h.admit(0, 0)
	h.publishForecast(map[string]queue.LaneForecast{queue.MainLane: {Advance: capacity.Advance{SeqsPerAdmission: 2}, Waiting: 1401}})
	v := h.visitor()
	body = v.enter().json(t)
	// 1401 arrivals between the front and this one: 1 + 1401 ÷ 2 admissions.
	if want := wantSeconds(seconds((1+1401.0/2)/140) + h.lastStep()); body["position"] != 1402.0 || body["estimatedWaitSeconds"] != want {
		t.Fatalf("enter at 1402 with the front passing 2 arrivals an admission = %v; want %v s", body, want)
	}
	// A forecast the scheduler stopped writing is not used.
	plan := admissionReferencePlan()
	plan.Forecast = &queue.Forecast{At: time.Now().Add(-time.Minute), Queues: map[string]queue.LaneForecast{queue.MainLane: {Advance: capacity.Advance{SeqsPerAdmission: 2}}}}
	if err := h.q.PublishPlan(context.Background(), plan); err != nil {
		t.Fatal(err)
	}
	time.Sleep(admission.PlanTTL + 100*time.Millisecond)
	if body := h.visitor().enter().json(t); body["estimatedWaitSeconds"] != wantSeconds(1403*time.Second/140+h.lastStep()) {
		t.Fatalf("enter at 1403 with a stale forecast = %v; want position ÷ 140/s", body)
	}
}

// TestAWaitCountsThePlacesAheadThatWillBeDroppedByTheirTurn: the room drops a place silent for 10 s,
// and its front has waited 15 s: a window of the front's advance later, it would show the drops, but
// now it shows none yet. 30 % of the places ahead went quiet, and by their turn they will have
// waited past 10 s: a newcomer 4,000 arrivals back is told about 0.72 × 4,000 admissions, not 4,000.
func TestAWaitCountsThePlacesAheadThatWillBeDroppedByTheirTurn(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{}, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.AbandonAfter = &metav1.Duration{Duration: 10 * time.Second}
	})
	const ahead = 4000
	for i := range ahead {
		if _, err := h.q.Enter(context.Background(), fmt.Sprintf("ahead-%04d", i), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	res := h.admit(0, 0)
	line := queue.ForecastLine{FrontSeq: res.Sequence - ahead + 1, FrontAge: 15 * time.Second, LastSeq: res.Sequence}
	quiet := capacity.Quiet{SeqsPerPlace: 1, Share: 0.3, Silences: [5]float64{1, 1, 1, 1, 1}}
	h.publishForecast(map[string]queue.LaneForecast{queue.MainLane: {Advance: capacity.Advance{SeqsPerAdmission: 1, Quiet: quiet}, Waiting: ahead, Line: line}})
	body := h.visitor().enter().json(t)
	wait, _ := body["estimatedWaitSeconds"].(float64)
	if body["position"] != ahead+1.0 || wait < wantSeconds(2750*time.Second/140+h.lastStep()) || wait > wantSeconds(3000*time.Second/140+h.lastStep()) {
		t.Fatalf("enter at %d with 30 %% of the places ahead quiet = %v; want about 2,880 ÷ 140/s, not %v s", ahead+1, body,
			wantSeconds((ahead+1)*time.Second/140+h.lastStep()))
	}
	// Nobody ahead went quiet: every place is an admission.
	h.publishForecast(map[string]queue.LaneForecast{queue.MainLane: {Advance: capacity.Advance{SeqsPerAdmission: 1}, Waiting: ahead + 1, Line: line}})
	if body := h.visitor().enter().json(t); body["estimatedWaitSeconds"] != wantSeconds((ahead+2)*time.Second/140+h.lastStep()) {
		t.Fatalf("enter at %d with nobody quiet = %v; want its position ÷ 140/s", ahead+2, body)
	}
}

// TestAMainQueueVisitorIsToldTheShareAnEmptyLaneGivesBack: a lane with nobody waiting and nobody
// arriving takes none of the rate, so the main queue's visitors are told the whole of it; while the
// lane is busy for good, their share.
func TestAMainQueueVisitorIsToldTheShareAnEmptyLaneGivesBack(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{secrets: laneSecrets}, withLanes)
	h.fillAhead(279)
	// Members take 20 % and vip 10 %: the main queue 70 % of 140 a second while both lanes wait.
	h.publishForecast(map[string]queue.LaneForecast{
		queue.MainLane: {Waiting: 280}, "members": {Waiting: 1_000_000, ArrivalsPerSecond: 100}, "vip": {Waiting: 1_000_000, ArrivalsPerSecond: 100},
	})
	if body := h.visitor().enter().json(t); body["position"] != 280.0 || body["estimatedWaitSeconds"] != wantSeconds(280*time.Second/98+h.lastStep()) {
		t.Fatalf("enter at 280 beside busy lanes = %v; want 280 ÷ 98/s", body)
	}
	h.publishForecast(map[string]queue.LaneForecast{queue.MainLane: {Waiting: 281}, "members": {}, "vip": {}})
	if body := h.visitor().enter().json(t); body["position"] != 281.0 || body["estimatedWaitSeconds"] != wantSeconds(281*time.Second/140+h.lastStep()) {
		t.Fatalf("enter at 281 beside empty lanes = %v; want 281 ÷ 140/s", body)
	}
	// Lanes whose arrivals were counted for a moment (the room just woke) may be about to fill: the
	// wait is told as if they stay busy.
	h.publishForecast(map[string]queue.LaneForecast{queue.MainLane: {Waiting: 281}, "members": {Counted: time.Second}, "vip": {Counted: time.Second}})
	if body := h.visitor().enter().json(t); body["position"] != 282.0 || body["estimatedWaitSeconds"] != wantSeconds(282*time.Second/98+h.lastStep()) {
		t.Fatalf("enter at 282 beside lanes counted for a second = %v; want 282 ÷ 98/s", body)
	}
	// Members drain in 2 s (56 waiting at 28 a second), then the main queue gets 90 % of the rate.
	h.publishForecast(map[string]queue.LaneForecast{queue.MainLane: {Waiting: 283}, "members": {Waiting: 56}, "vip": {Waiting: 1_000_000, ArrivalsPerSecond: 100}})
	want := 2*time.Second + seconds((283-2*98.0)/126)
	if body := h.visitor().enter().json(t); body["position"] != 283.0 || math.Abs(body["estimatedWaitSeconds"].(float64)-wantSeconds(want+h.lastStep())) > 1 {
		t.Fatalf("enter at 283 beside a lane that drains = %v; want about %v", body, want+h.lastStep())
	}
}

// TestAnEstimateCrossesTheCalendarsEdges: an event of the room's calendar that halves its capacity
// is in the wait of a visitor who will still be waiting when it starts, and so is the room's own
// capacity when it ends.
func TestAnEstimateCrossesTheCalendarsEdges(t *testing.T) {
	t0 := time.Now().Truncate(time.Second)
	var clock atomic.Int64
	clock.Store(t0.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	h := newHarnessWith(t, harnessOptions{now: now}, func(wq *herdgatev1alpha1.WaitingQueue) {
		// 140 a second; 70 during the sale, from 2 s to 6 s from now.
		sale := builder.Event("sale", t0.Add(2*time.Second), t0.Add(6*time.Second))
		sale.Capacity = &herdgatev1alpha1.EventCapacity{PoolSize: ptr.To[int32](20)}
		*wq = *builder.From(wq).Events(sale).Obj()
	})
	h.fillAhead(700)
	// 280 before the sale, 280 during it, the last 141 after it.
	want := 2*time.Second + 4*time.Second + seconds(141.0/140)
	if body := h.visitor().enter().json(t); body["position"] != 701.0 || body["estimatedWaitSeconds"] != wantSeconds(want+h.lastStep()) {
		t.Fatalf("enter at 701 before a sale that halves the rate = %v; want %v", body, want+h.lastStep())
	}
	// During the sale the scheduler publishes the sale's plan: 70 a second until its end, 3 s away,
	// then 140.
	clock.Store(t0.Add(3 * time.Second).UnixNano())
	sale := admissionReferencePlan()
	sale.Quota = mustQuota(7)
	if err := h.q.PublishPlan(context.Background(), sale); err != nil {
		t.Fatal(err)
	}
	time.Sleep(admission.PlanTTL + 100*time.Millisecond)
	want = 3*time.Second + seconds((702-210)/140.0)
	if body := h.visitor().enter().json(t); body["position"] != 702.0 || body["estimatedWaitSeconds"] != wantSeconds(want+h.lastStep()) {
		t.Fatalf("enter at 702 during the sale = %v; want %v", body, want+h.lastStep())
	}
}

// TestAPollTimedUnderThePlanBeforeACutIsInTime: a visitor told when to poll under one plan polls
// as told after the scheduler cut the plan, which makes the proxy give longer intervals: the poll
// is answered, not refused as too early. A poll that comes far too soon still is.
func TestAPollTimedUnderThePlanBeforeACutIsInTime(t *testing.T) {
	h := newHarness(t, nil)
	// 3 s of wait at 140 a second: a hint of 1.5 s ± 20 %.
	h.fillAhead(419)
	v := h.visitor()
	body := v.enter().json(t)
	hint := time.Duration(body["nextPollMs"].(float64)) * time.Millisecond
	if body["position"] != 420.0 || hint < 1200*time.Millisecond || hint > 1800*time.Millisecond {
		t.Fatalf("enter at 420 = %v; want a hint of 1.5 s ± 20 %%", body)
	}
	hasty := h.visitor()
	hasty.enter()
	cut := admissionReferencePlan()
	cut.Quota = mustQuota(7)
	if err := h.q.PublishPlan(context.Background(), cut); err != nil {
		t.Fatal(err)
	}
	time.Sleep(max(hint, admission.PlanTTL+100*time.Millisecond))
	// At 70 a second the wait is 6 s, and the shortest hint 2.4 s: a poll 1.2 s after the last
	// one would be too early for a visitor told under the cut plan.
	res := v.status()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("a poll as told under the plan before the cut: %d %s", res.StatusCode, res.body)
	}
	body = res.json(t)
	if body["capacityChanged"] != true {
		t.Fatalf("the first answer after the cut = %v; want it to say the capacity changed", body)
	}
	hint = time.Duration(body["nextPollMs"].(float64)) * time.Millisecond
	if res := hasty.status(); res.StatusCode != http.StatusOK {
		t.Fatalf("a second visitor's poll as told: %d %s", res.StatusCode, res.body)
	}
	if res := hasty.status(); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a poll right after the last one: %d %s; want 429", res.StatusCode, res.body)
	}
	time.Sleep(hint)
	if body := v.status().json(t); body["capacityChanged"] != nil {
		t.Fatalf("a poll after the answer that told the change = %v; want no capacityChanged", body)
	}
}

// TestTheFirstWaitToldIsJudgedAtAdmission: the wait told at the first enter rides with the visitor,
// signed; entering again keeps it; the answer that hands out the pass counts how far off it was
// and forgets it.
func TestTheFirstWaitToldIsJudgedAtAdmission(t *testing.T) {
	var clock atomic.Int64
	// The proxy's clock says the visitor entered a minute before Redis admits it.
	clock.Store(time.Now().Add(-time.Minute).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	h := newHarnessWith(t, harnessOptions{now: now}, nil)
	v := h.visitor()
	res := v.enter()
	var first string
	for _, c := range res.Cookies() {
		if c.Name == h.cookies().Estimate {
			first = c.Value
		}
	}
	if first == "" || res.json(t)["estimatedWaitSeconds"] == nil {
		t.Fatalf("enter set no %s cookie: %v", h.cookies().Estimate, res.Header["Set-Cookie"])
	}
	clock.Add(int64(10 * time.Second))
	for _, c := range v.enter().Cookies() {
		if c.Name == h.cookies().Estimate {
			t.Fatalf("entering again told the wait anew: %v", c)
		}
	}
	if got := h.metric("herdgate_proxy_wait_estimate_error_ratio_count", ""); got != 0 {
		t.Fatalf("%v estimates judged before any admission", got)
	}
	if len(h.admit(1, 0).Admitted) != 1 {
		t.Fatal("the tick admitted nobody")
	}
	// The visitor polls as told (both clocks move).
	time.Sleep(550 * time.Millisecond)
	clock.Add(int64(550 * time.Millisecond))
	res = v.status()
	forgot := false
	for _, c := range res.Cookies() {
		forgot = forgot || (c.Name == h.cookies().Estimate && c.MaxAge < 0)
	}
	if body := res.json(t); body["admitted"] != true || !forgot {
		t.Fatalf("the answer with the pass = %v, cookies %v; want the estimate forgotten", body, res.Header["Set-Cookie"])
	}
	// Told about half a second, had a minute: off by nearly all of it.
	if n, over := h.metric("herdgate_proxy_wait_estimate_error_ratio_count", ""), h.metric("herdgate_proxy_wait_estimate_error_ratio_bucket", `{le="0.5"}`); n != 1 || over != 0 {
		t.Fatalf("judged %v estimates, %v within half the wait; want 1, off by more than half", n, over)
	}
}

// TestACappedRoomsWaitIsTheSlotsItWaitsFor: in a room whose cap on active passes is full, the
// visitors ahead are admitted as passes end, not at the plan's 140 a second. With 20 active passes
// each held 8 s (2.5 end a second), position 280 waits 280 ÷ 2.5 = 112 s; passes nobody releases
// hold their slot for their ttl; and while no pass was seen ending the room tells no wait at all.
func TestACappedRoomsWaitIsTheSlotsItWaitsFor(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{}, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.Capacity.MaxActive = ptr.To[int32](20)
		wq.Spec.Pass = &herdgatev1alpha1.PassSpec{TTL: &metav1.Duration{Duration: time.Minute}}
	})
	h.fillAhead(279)
	within := func(body map[string]any, want time.Duration) bool {
		got, ok := body["estimatedWaitSeconds"].(float64)
		return ok && math.Abs(got-(want+h.lastStep()).Seconds()) <= 1
	}
	released := capacity.Slots{Max: 20, Active: 20, Held: 8 * time.Second, ReleasedPerSecond: 2.5, Counted: time.Minute}
	h.publishSlots(279, released)
	if body := h.visitor().enter().json(t); body["position"] != 280.0 || !within(body, 112*time.Second) {
		t.Fatalf("enter at 280 behind a full cap whose passes end 2.5 a second = %v; want about 112 s, not 280 ÷ 140/s", body)
	}
	// The same passes, none released: each holds its slot for the pass's minute.
	h.publishSlots(280, capacity.Slots{Max: 20, Active: 20, Held: time.Minute, Counted: time.Minute})
	if body := h.visitor().enter().json(t); body["position"] != 281.0 || !within(body, 281*time.Minute/20) {
		t.Fatalf("enter at 281 behind a full cap of passes nobody releases = %v; want 281 ÷ 20 minutes", body)
	}
	// The cap just filled, and no pass ended yet: how long one holds its slot is not known.
	h.publishSlots(281, capacity.Slots{Max: 20, Active: 20, ReleasedPerSecond: 0.1, Counted: 4 * time.Second})
	if body := h.visitor().enter().json(t); body["position"] != 282.0 || body["estimatedWaitSeconds"] != nil {
		t.Fatalf("enter at 282 behind a cap that just filled = %v; want no wait told", body)
	}
	// Slots enough for everyone ahead: the plan's wait.
	h.publishSlots(282, capacity.Slots{Max: 1000, Active: 10, Counted: time.Minute})
	if body := h.visitor().enter().json(t); body["position"] != 283.0 || body["estimatedWaitSeconds"] != wantSeconds(283*time.Second/140+h.lastStep()) {
		t.Fatalf("enter at 283 with slots free for everyone ahead = %v; want 283 ÷ 140/s", body)
	}
}

// TestACappedRoomsLaneVisitorWaitsForItsShareOfTheSlots: with lanes, the cap's slots go to the
// queues by their shares. The main queue gets 70 % while both lanes wait, so its 70th visitor waits
// for 100 of the room's admissions: five turns of a cap of 20 passes held 8 s each, 40 s.
func TestACappedRoomsLaneVisitorWaitsForItsShareOfTheSlots(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{secrets: laneSecrets}, func(wq *herdgatev1alpha1.WaitingQueue) {
		withLanes(wq)
		wq.Spec.Capacity.MaxActive = ptr.To[int32](20)
	})
	h.fillAhead(69)
	h.publishForecastWith(map[string]queue.LaneForecast{
		queue.MainLane: {Waiting: 70}, "members": {Waiting: 1_000_000, ArrivalsPerSecond: 100}, "vip": {Waiting: 1_000_000, ArrivalsPerSecond: 100},
	}, &capacity.Slots{Max: 20, Active: 20, Held: 8 * time.Second, ReleasedPerSecond: 2.5, Counted: time.Minute})
	body := h.visitor().enter().json(t)
	got, _ := body["estimatedWaitSeconds"].(float64)
	if body["position"] != 70.0 || math.Abs(got-(40*time.Second+h.lastStep()).Seconds()) > 1 {
		t.Fatalf("enter at 70 in the main queue beside busy lanes, behind a full cap = %v; want about 40 s", body)
	}
}
