package admission

import (
	"cmp"
	"math"
	"net/http"
	"time"

	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/queue"
)

// forecastMaxAge is how old the scheduler's forecast may be for a wait to be estimated from it: it
// publishes one every second while anyone waits, so an older one is of a room that emptied, or of a
// scheduler that is away, and waits are told from the plan alone.
const forecastMaxAge = 10 * time.Second

// forecastHorizon bounds how far ahead the room's calendar is read for an estimate.
const forecastHorizon = 24 * time.Hour

// waitingPlace is what an estimate knows of a waiting visitor's place.
type waitingPlace struct {
	// lane is the visitor's lane, "" for the main queue.
	lane string
	// position is its 1-based place in its queue (a bound from above on the far path).
	position int64
	// seq is its arrival and front the arrival at its queue's front; front is 0 when unknown.
	seq, front int64
	// admittedSince is how many the queue admitted since front was read (the far path's snapshot).
	admittedSince int64
}

// estimatedWait is the wait a visitor at place is told, under the room's standing at now
// (docs/architecture.md, "Wait estimates"): the admissions of its queue ahead of it, counted from
// how the queue's front really advances, at the rate its queue gets as the room's other queues run
// empty and the calendar turns, and then the last step, from admission to the pass's not-before
// time. ok is false when the room admits nobody, now or ever.
func (api *visitorAPI) estimatedWait(cfg *Config, r outlook, place waitingPlace) (time.Duration, bool) {
	now := api.now()
	name := place.lane
	if name == "" {
		name = queue.MainLane
	}
	ahead := float64(place.position)
	// In a room with lanes the arrival numbers mix the queues' arrivals, and the mix at the front is
	// not the one behind it (a lane's burst a minute ago): the places ahead count as they are.
	if f := r.forecast; f != nil && place.front > 0 && len(cfg.Lanes) == 0 {
		// The front moved on since it was read, by about the arrivals its admissions passed. The
		// places ahead that will have been silent for abandonAtTurnAfter at their turn are dropped then.
		q := f.Queues[name]
		ahead = capacity.AheadAging(place.position+place.admittedSince, place.seq, place.front, q.Advance, q.Line.At(f.At),
			cmp.Or(cfg.AbandonAtTurnAfter, r.abandonAfter), r.plan.PerSecond(), now) - float64(place.admittedSince)
		ahead = max(ahead, min(1, float64(place.position)))
	}
	wait, share, ok := api.planWait(cfg, r, place.lane, ahead, now)
	if !ok {
		return 0, false
	}
	if wait, ok = slotsWait(cfg, r.forecast, ahead/share, wait, now); !ok {
		return 0, false
	}
	return wait + cfg.Lead + cfg.JitterWindow/2, true
}

// planWait is how long the plan takes to admit ahead visitors of the queue lane, and share the
// part of the room's admissions that queue gets now.
func (api *visitorAPI) planWait(cfg *Config, r outlook, lane string, ahead float64, now time.Time) (wait time.Duration, share float64, ok bool) {
	if len(cfg.Lanes) == 0 && len(cfg.roomConfig().Events) == 0 {
		// One queue at one rate: the common case, on every poll.
		rate := r.plan.PerSecond()
		if rate <= 0 {
			return 0, 0, false
		}
		return time.Duration(ahead / rate * float64(time.Second)), 1, true
	}
	from := now
	if r.forecast != nil && r.forecast.At.Before(now) {
		from = r.forecast.At
	}
	room := roomRates(cfg, r, from)
	rates, share := room, 1.0
	if len(cfg.Lanes) > 0 {
		rates = api.queueRates(cfg, r, room, lane, from)
		if len(rates) > 0 && len(room) > 0 && room[0].PerSecond > 0 {
			share = rates[0].PerSecond / room[0].PerSecond
		}
	}
	wait, ok = rates.TimeFor(ahead, now)
	return wait, share, ok && share > 0
}

// slotsWait is a wait of planWait in a room whose cap on active passes is full (spec.capacity.maxActive):
// the admissions the room makes before the visitor's (roomAhead) wait for passes to end too, as the
// scheduler's count of the slots tells (capacity.Slots). ok is false while it cannot tell how long
// a pass holds its slot: no wait is told rather than one the cap makes wrong.
func slotsWait(cfg *Config, f *queue.Forecast, roomAhead float64, wait time.Duration, now time.Time) (time.Duration, bool) {
	if f == nil || f.Slots == nil || f.Slots.Max <= 0 {
		return wait, true
	}
	s := *f.Slots
	if roomAhead <= float64(s.Max-min(s.Active, s.Max)) {
		return wait, true
	}
	longest := cfg.PassTTL
	if cfg.Sliding {
		longest = cfg.MaxSession
	}
	hold, ok := s.Hold(cfg.PassTTL, longest, cfg.Sliding)
	if !ok {
		return 0, false
	}
	// The place was read now, after the admissions the slots' passes made room for since.
	return max(wait, s.Older(now.Sub(f.At)).TimeFor(roomAhead, hold)), true
}

// queueRates is the rate of the visitor's queue (lane; "" for the main queue) within the room's
// rates: forecast from the queues' loads as the others run empty, or, without a forecast, its share
// of the room's rate as if every queue stayed busy.
func (api *visitorAPI) queueRates(cfg *Config, r outlook, room capacity.Rates, lane string, from time.Time) capacity.Rates {
	names := append([]string{""}, cfg.LaneNames()...)
	own := 0
	loads := make([]capacity.QueueLoad, len(names))
	for i, n := range names {
		loads[i].Weight = float64(cfg.laneShare(n))
		if n == lane {
			own = i
		}
		if r.forecast == nil {
			// Busy for ever: each queue gets its share.
			loads[i].Waiting = math.Inf(1)
			continue
		}
		key := n
		if key == "" {
			key = queue.MainLane
		}
		q := r.forecast.Queues[key]
		if q.Counted < queue.ArrivalsCountedEnough {
			// Counted for a moment (the room just woke): whether it fills is not known yet, and a
			// wait told as if it stays busy can only turn out shorter.
			loads[i].Waiting = math.Inf(1)
			continue
		}
		loads[i].Waiting, loads[i].ArrivalsPerSecond = float64(q.Waiting), q.ArrivalsPerSecond
	}
	return capacity.ShareRates(room, loads, own, from)
}

// roomRates is the room's admission rate from from on: the plan the scheduler runs now, then, at
// each edge of the calendar ahead (spec.events), the rate of the event that starts, or the room's
// own after one ends.
func roomRates(cfg *Config, r outlook, from time.Time) capacity.Rates {
	room := cfg.roomConfig()
	rates := capacity.ConstantRate(from, r.plan.PerSecond())
	// Back from an event, the room runs its own plan: the one published now, when no event runs.
	own := room.Quota.PerSecond()
	if cfg == room {
		own = r.plan.PerSecond()
	}
	for i := range room.Events {
		e := &room.Events[i]
		if !e.End.After(from) || e.From.After(from.Add(forecastHorizon)) {
			continue
		}
		if e.From.After(from) {
			rates = append(rates, capacity.RateStep{From: e.From, PerSecond: room.events[i].Quota.PerSecond()})
		}
		if next := i + 1; next >= len(room.Events) || room.Events[next].From.After(e.End) {
			rates = append(rates, capacity.RateStep{From: e.End, PerSecond: own})
		}
	}
	return rates
}

// waitSeconds is a wait as estimatedWaitSeconds tells it: in whole seconds, to the nearest.
func waitSeconds(wait time.Duration) *int64 {
	s := int64((wait + time.Second/2) / time.Second)
	return &s
}

// EstimateCookie keeps the first wait a visitor was told for its place (pass.Told), so that the
// replica that admits it can tell how far off it was (herdgate_proxy_wait_estimate_error_ratio).
const EstimateCookie = "herdgate_estimate"

// minJudgedWait is the shortest wait whose estimate's error is counted: below it a second's
// rounding is most of the error.
const minJudgedWait = 5 * time.Second

// tellFirst keeps the wait told at an enter as the visitor's first for its place seq, unless the
// visitor already holds one for it.
func (api *visitorAPI) tellFirst(v *visit, seq int64, wait time.Duration) {
	if told, ok := v.cfg.Signer.VerifyEstimate(roomCookie(v.x, v.cfg.Cookies.Estimate, EstimateCookie), v.visitor); ok && told.Seq == seq {
		return
	}
	token := v.cfg.Signer.Estimate(v.visitor, pass.Told{Seq: seq, Entered: api.now(), Wait: wait})
	v.cookies = append(v.cookies, &http.Cookie{
		Name: v.cfg.Cookies.Estimate, Value: token, Path: reservedPrefix, HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: v.x.Secure(), MaxAge: int(visitorMaxAge / time.Second),
	})
}

// judgeEstimate counts how far off the first wait told to a visitor admitted with pass p was, and
// returns the cookie that forgets it; nil when the visitor holds none.
func (api *visitorAPI) judgeEstimate(x Exchange, cfg *Config, visitor string, p queue.Pass) *http.Cookie {
	raw := roomCookie(x, cfg.Cookies.Estimate, EstimateCookie)
	if raw == "" {
		return nil
	}
	if told, ok := cfg.Signer.VerifyEstimate(raw, visitor); ok {
		if had := p.NotBefore.Sub(told.Entered); had >= minJudgedWait {
			ratio := math.Abs(float64(told.Wait-had)) / float64(had)
			api.metrics.estimateError.Observe(ratio)
			api.workload.Judged(ratio)
		}
	}
	return &http.Cookie{Name: cfg.Cookies.Estimate, Value: "", Path: reservedPrefix, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: x.Secure(), MaxAge: -1}
}
