package admission

import (
	"cmp"
	"context"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/herdgate/herdgate/admission/entry"
	"github.com/herdgate/herdgate/admission/replica"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/queue"
)

// Entry headers of the HTTP contract (package entry reads them).
const (
	InvitationHeader        = entry.InvitationHeader
	ProofHeader             = entry.ProofHeader
	ChallengeResponseHeader = entry.ChallengeResponseHeader
	LaneCodeHeader          = entry.LaneCodeHeader
)

// visit is one enter or status call on its way through enterOrStatus.
type visit struct {
	x     Exchange
	cfg   *Config
	enter bool
	// class labels its metrics: "enter" or "status".
	class string
	r     outlook
	// visitor is who asks, once identified.
	visitor string
	// laneCode is entry.Outcome.LaneCode of an enter: which of its tokens is a lane code's use.
	laneCode int
	// cookies are what the answer sets whatever it says: a visitor cookie an enter minted.
	cookies []*http.Cookie
	// place is the place the visitor brings, once read (held).
	place *heldPlace
}

// held is the place the visitor brings, read and verified once for the visit.
func (v *visit) held() heldPlace {
	if v.place == nil {
		h := heldPlaceOf(v.x, v.cfg, v.visitor)
		v.place = &h
	}
	return *v.place
}

// queueStanding is the standing a visitor of lane ("" for the main queue) is told its polls by: in
// a room with lanes, its queue's share of the plan, the rate its place moves at when every lane is
// busy (and faster when others leave theirs).
func (v *visit) queueStanding(lane string) outlook {
	if len(v.cfg.Lanes) == 0 {
		return v.r
	}
	return v.r.shared(v.cfg.laneShare(lane))
}

// answer is a, with the cookies the visit set on its way.
func (v *visit) answer(a answer) answer {
	a.cookies = append(v.cookies, a.cookies...)
	return a
}

// enterOrStatus answers POST /.herdgate/enter and GET /.herdgate/status: the mode's and the
// schedule's answers first, then who asks, then the answer far from the front (the proxy's alone)
// or the engine's, and one answer per state the engine tells.
func (api *visitorAPI) enterOrStatus(x Exchange, cfg *Config, enter bool) answer {
	v := &visit{x: x, cfg: cfg, enter: enter, class: "status"}
	if enter {
		v.class = "enter"
	}
	if a, ok := api.modeAnswer(v); ok {
		return a
	}
	v.r = api.standing.outlookOf(x.Context(), cfg)
	if a, ok := api.scheduleAnswer(v); ok {
		return a
	}
	if a, ok := api.identifyVisit(v); !ok {
		return a
	}
	if !enter {
		if a, early := api.earlyInMemory(v); early {
			return a
		}
	}
	if !enter && farPathOpen(api.engine, cfg, v.r.standing) {
		// Far from the front the proxy answers alone, even while Redis rests (FarSnapshotMaxAge).
		if h := v.held(); h.mainQueue() {
			if a, ok := api.far(cfg, v.r, v.visitor, h.seq); ok {
				return a
			}
		}
	}
	if !enter {
		if a, over := api.overClientRate(v); over {
			return a
		}
	}
	pos, a, ok := api.askEngine(v)
	if !ok {
		return v.answer(a)
	}
	return v.answer(api.position(v, pos))
}

// modeAnswer answers for a room its mode switched off or closed to newcomers.
func (api *visitorAPI) modeAnswer(v *visit) (answer, bool) {
	switch v.cfg.Mode {
	case herdgatev1alpha1.ModePassthrough:
		// The room is switched off: nobody needs a pass, so everybody is through.
		zero := int64(0)
		return jsonAnswer(http.StatusOK, positionBody{Admitted: true, Phase: phase.Passthrough, EstimatedWaitSeconds: &zero}).counted(v.class, "passthrough"), true
	case herdgatev1alpha1.ModeClosed:
		if v.enter {
			return closed(v.cfg, v.class), true
		}
	}
	return answer{}, false
}

// scheduleAnswer answers an enter the schedule settles without the engine.
func (api *visitorAPI) scheduleAnswer(v *visit) (answer, bool) {
	if !v.enter || v.cfg.Schedule == nil {
		return answer{}, false
	}
	switch {
	case v.r.phase == phase.Scheduled && v.cfg.phaseAt(api.now()) == phase.Scheduled:
		// Nothing to ask Redis: a crowd refreshing before the pre-queue costs the proxy alone.
		return notOpen(v.cfg, v.r.standing, v.class, api.now(), api.rand.Float64(), api.links.enter()), true
	case !v.r.known:
		// The scheduler has not published this schedule's phase yet; the engine would take the
		// visitor as if the room had no schedule.
		return errorAnswer(http.StatusServiceUnavailable, errorBody{Error: "queue_starting", Phase: v.r.phase,
			Message: "the waiting room is getting ready; try again shortly"}).retry(time.Second).counted(v.class, "starting"), true
	}
	return answer{}, false
}

// identifyVisit finds who asks (an enter may mint a visitor cookie), or answers that it cannot.
func (api *visitorAPI) identifyVisit(v *visit) (answer, bool) {
	visitor, minted, ok := identify(v.x, v.cfg, v.enter)
	if ok {
		v.visitor = visitor
		if minted != nil {
			v.cookies = append(v.cookies, minted)
		}
		return answer{}, true
	}
	if v.cfg.IdentityHeader != "" {
		return errorAnswer(http.StatusUnauthorized, errorBody{Error: "identity_required", Header: v.cfg.IdentityHeader}).counted(v.class, "identity_required"), false
	}
	body := errorBody{Error: "not_queued", Message: "enter the queue first", Enter: api.links.enter()}
	if v.cfg.Schedule != nil {
		body.Phase = v.r.phase
	}
	return errorAnswer(http.StatusNotFound, body).counted(v.class, "identity_required"), false
}

// askEngine runs the entry checks of an enter, then asks the engine where the visitor stands; when
// something stops it (a refused entry, a bad identity, Redis away) it returns the answer to give.
func (api *visitorAPI) askEngine(v *visit) (queue.Position, answer, bool) {
	if api.redis.resting() {
		return queue.Position{}, unavailable(v.class), false
	}
	var pos queue.Position
	var err error
	if v.enter {
		var granted entry.Outcome
		in := entry.Input{Request: v.x, Visitor: v.visitor, Now: api.now()}
		check := v.cfg.EntryChecks.Check
		if v.cfg.Shadow != nil && v.cfg.Shadow.ChallengeFailed {
			// A failed challenge enters the shadow queue: the answer reads like the place the entry
			// would have had, lane included, so a bot learns nothing to retry with
			// (docs/guides/entry-control.md, "The shadow queue").
			check = v.cfg.EntryChecks.CheckShadowingFailed
		}
		if refused := check(in, &granted); refused != nil {
			return pos, errorAnswer(refused.Status, errorBody{Error: refused.Code, Message: refused.Message, Header: refused.Header, Enter: refused.Link}).counted(v.class, refused.Code), false
		}
		if h := v.held(); h.ok {
			granted.Limit.HeldPlace, granted.Limit.HeldLane = h.seq, h.lane
		}
		v.laneCode = granted.LaneCode
		pos, err = api.engine.EnterFrom(v.x.Context(), v.visitor, v.r.abandonAfter, granted.Limit)
	} else {
		pos, err = api.engine.Status(v.x.Context(), v.visitor, v.r.abandonAfter)
		if err == nil && pos.State == queue.NotQueued {
			// A failover may have lost the place: the visitor asks for it back, and for nothing else
			// (docs/guides/redis.md, "Places").
			if h := v.held(); h.ok {
				pos, err = api.engine.EnterFrom(v.x.Context(), v.visitor, v.r.abandonAfter, queue.EntryLimit{HeldPlace: h.seq, HeldLane: h.lane, OnlyHeldPlace: true})
			}
		}
	}
	switch {
	case errors.Is(err, queue.ErrInvalidVisitor):
		return pos, errorAnswer(http.StatusBadRequest, errorBody{Error: "bad_identity", Message: err.Error()}).counted(v.class, "bad_identity"), false
	case errors.Is(err, context.Canceled):
		return pos, answer{}, false
	case err != nil:
		api.redis.result(err)
		return pos, unavailable(v.class), false
	}
	api.redis.result(nil)
	return pos, answer{}, true
}

// heldPlace is the place a visitor brings: its token as sent, and, when the token is one this
// queue signed for this visitor, its sequence and lane ("" for the main queue). A visit reads it
// once, since verifying it is an HMAC (visit.held).
type heldPlace struct {
	token string
	seq   int64
	lane  string
	ok    bool
}

// heldPlaceOf reads and verifies the place x brings for visitor.
func heldPlaceOf(x Exchange, cfg *Config, visitor string) heldPlace {
	h := heldPlace{token: heldToken(x, cfg)}
	if h.token != "" && len(h.token) <= maxCookieValue {
		h.seq, h.lane, h.ok = cfg.Signer.VerifyHeldPlace(h.token, visitor)
	}
	return h
}

// mainQueue says the place is one of the main queue: its sequence is what far positions bound.
func (h heldPlace) mainQueue() bool { return h.ok && h.lane == "" }

// heldToken is the place token the visitor sent, as it sent it.
func heldToken(x Exchange, cfg *Config) string {
	if token := x.Header(PlaceHeader); token != "" {
		return token
	}
	return roomCookie(x, cfg.Cookies.Place, PlaceCookie)
}

// tooEarly is the answer to a status poll that came sooner than tooEarlyShare of shortest, the
// shortest interval the visitor could have been told (the rest is room for network jitter), by the
// previous poll Redis remembers: 429. ok is false for a poll in time. Either way the replica
// remembers when the visitor may poll next, so that it refuses a poll sooner without Redis
// (earlyInMemory).
func (api *visitorAPI) tooEarly(class, visitor string, enter bool, pos queue.Position, shortest time.Duration) (a answer, ok bool) {
	allowed := time.Duration(tooEarlyShare * float64(shortest))
	now := api.now()
	api.nextPolls.Told(visitor, now, replica.NextPoll{NotBefore: now.Add(allowed), Allowed: allowed, Position: pos.Position, Depth: pos.Depth})
	if enter || pos.PreviousPoll.IsZero() {
		return a, false
	}
	if gap := pos.Now.Sub(pos.PreviousPoll); gap >= allowed {
		return a, false
	}
	// This poll counts as the visitor's sign of life, so the next one is allowed a whole interval
	// after it: a client that waits as told is answered.
	api.metrics.tooEarly.Inc()
	return tooEarlyAnswer(class, allowed, pos.Position, pos.Depth), true
}

// earlyInMemory refuses a status poll that comes sooner than this replica told the visitor, without
// a call to Redis; the poll counts as one, as Redis counts an early poll (replica.NextPolls).
func (api *visitorAPI) earlyInMemory(v *visit) (answer, bool) {
	// Redis hears of a visitor polling too hastily to be answered at least twice before it would pass
	// its place over as silent.
	keepAlive := min(v.r.abandonAfter, cmp.Or(v.cfg.AbandonAtTurnAfter, v.r.abandonAfter)) / 2
	told, early := api.nextPolls.Early(v.visitor, api.now(), keepAlive)
	if !early {
		return answer{}, false
	}
	api.metrics.tooEarly.Inc()
	api.metrics.refusedInMemory.WithLabelValues("too_early").Inc()
	return tooEarlyAnswer(v.class, told.Allowed, told.Position, told.Depth), true
}

// overClientRate refuses, without a call to Redis, a status poll of a client that sent this replica
// more than spec.entry.perClient.pollsPerSecond on to Redis: 429 too_many_polls, the place kept.
func (api *visitorAPI) overClientRate(v *visit) (answer, bool) {
	limit := v.cfg.pollingClients
	if limit == nil {
		return answer{}, false
	}
	client, ok := limit.ClientOf(v.x)
	if !ok {
		return answer{}, false
	}
	api.clientPolls.SetRate(limit.PollsPerSecond)
	retry, ok := api.clientPolls.Allow(client, api.now())
	if ok {
		return answer{}, false
	}
	api.metrics.refusedInMemory.WithLabelValues("client_rate").Inc()
	return errorAnswer(http.StatusTooManyRequests, errorBody{
		Error: "too_many_polls", Message: "this address polls more often than the room allows; your place is kept",
		RetryAfterMs: max(1, retry.Milliseconds()),
	}).retry(retry).counted(v.class, "too_many_polls"), true
}

// tooEarlyAnswer is the 429 of a poll that came too early: poll again after allowed.
func tooEarlyAnswer(class string, allowed time.Duration, position, depth int64) answer {
	return errorAnswer(http.StatusTooManyRequests, errorBody{
		Error: "too_early", Message: "poll no sooner than nextPollMs; your place is kept",
		RetryAfterMs: allowed.Milliseconds(), Position: position, QueueDepth: depth,
	}).retry(allowed).counted(class, "too_early")
}

// queueing is the answer to a visitor who is not through yet (a position, a pre-queue place, a
// place kept in a closed room, an admission valid in a moment) with body: 200, or the room's
// spec.page.queueingStatusCode with Retry-After, the time until the next poll in whole seconds.
func queueing(cfg *Config, body positionBody, class, outcome string) answer {
	a := jsonAnswer(http.StatusOK, body).counted(class, outcome)
	if pg := cfg.Page; pg != nil && pg.QueueingStatus != 0 {
		a.status = pg.QueueingStatus
		a.retryAfter = time.Duration(body.NextPollMs) * time.Millisecond
	}
	return a
}

// admitted is the answer to an admitted visitor: with its pass when it is valid now, else with the
// time until its not-before, so that the tick's jitter reaches the client.
func (api *visitorAPI) admitted(x Exchange, cfg *Config, class, visitor string, pos queue.Position, phase phase.Phase) answer {
	zero := int64(0)
	if wait := pos.Pass.NotBefore.Sub(pos.Now); wait > 0 {
		return queueing(cfg, positionBody{EstimatedWaitSeconds: &zero, Phase: phase, NextPollMs: max(1, (wait + time.Millisecond - 1).Milliseconds())}, class, "admitted_soon")
	}
	token, cookie := passCookie(x, cfg, visitor, pos)
	expiry := pos.Pass.Expiry.UTC()
	a := jsonAnswer(http.StatusOK, positionBody{EstimatedWaitSeconds: &zero, Admitted: true, Phase: phase, Pass: token, PassExpiresAt: &expiry})
	a.setCookie(cookie)
	if forget := api.judgeEstimate(x, cfg, visitor, pos.Pass); forget != nil {
		a.setCookie(forget)
	}
	return a.counted(class, "admitted")
}

// unavailable is the answer while Redis is away.
func unavailable(class string) answer {
	return errorAnswer(http.StatusServiceUnavailable, errorBody{Error: "queue_unavailable", Message: "the queue is unreachable; try again shortly"}).
		retry(2*time.Second).counted(class, "unavailable")
}

// pollBase is the poll hint of a visitor waiting at position in a queue of depth before its spread,
// and the shortest hint it gives (what a poll is held to: tooEarly).
func (api *visitorAPI) pollBase(cfg *Config, r outlook, position, depth int64, previousPoll time.Time) (base, shortest time.Duration) {
	base = capacity.BudgetedPollBase(r.plan, position, r.pollMin, r.pollMax, api.stretch(cfg, r.standing, depth))
	shortest = capacity.SpreadPollHint(base, r.pollMin, zeroRand{})
	if r.timedUnderPlanBefore(previousPoll) {
		// The visitor was told when to come back under the plan before: it is held to that.
		before := r
		before.plan = r.planBefore
		b := capacity.BudgetedPollBase(before.plan, position, r.pollMin, r.pollMax, api.stretch(cfg, before.standing, depth))
		shortest = min(shortest, capacity.SpreadPollHint(b, r.pollMin, zeroRand{}))
	}
	return base, shortest
}

// preQueuePoll is the poll hint of a visitor holding a pre-queue place (around pollMax) or waiting
// for the draw to give it one (around pollMin); shortest is the shortest hint it could have had.
func (api *visitorAPI) preQueuePoll(r standing, drawing bool) (hint, shortest time.Duration) {
	d := r.pollMax
	if drawing {
		d = r.pollMin
	}
	return api.spread(d), time.Duration(math.Floor(float64(d) * (1 - capacity.PollSpread)))
}
