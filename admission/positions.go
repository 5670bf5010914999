package admission

import (
	"net/http"

	"github.com/herdgate/herdgate/admission/replica"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/queue"
)

// The answers that say where a visitor the engine found stands: waiting (in the main queue, a lane
// or the shadow queue), in the pre-queue, admitted, or not queued; visit.go gets the visitor there.

// position is the answer that says where the engine says the visitor stands.
func (api *visitorAPI) position(v *visit, pos queue.Position) answer {
	if v.cfg.Mode == herdgatev1alpha1.ModeClosed && pos.State != queue.NotQueued {
		// The poll kept the visitor's place; the room is closed to everyone, pass holders included.
		return queueing(v.cfg, positionBody{Position: pos.Position, QueueDepth: pos.Depth, Phase: phase.Closed,
			NextPollMs: api.spread(v.r.pollMax).Milliseconds()}, v.class, "closed")
	}
	switch pos.State {
	case queue.TokenSpent:
		return api.tokenSpent(v, pos)
	case queue.RateLimited:
		// The client took its burst of places: it may come back when it has earned one.
		return errorAnswer(http.StatusTooManyRequests, errorBody{Error: "too_many_entries",
			Message: "this address took its share of places; try again later", RetryAfterMs: max(1, pos.RetryAfter.Milliseconds())}).
			retry(pos.RetryAfter).counted(v.class, "rate_limited")
	case queue.NotQueued:
		return api.notQueued(v, pos)
	case queue.TurnedAway:
		if pos.Phase == phase.Closed {
			return scheduleClosed(v.cfg, v.class, api.now())
		}
		v.r.phase = pos.Phase
		return notOpen(v.cfg, v.r.standing, v.class, api.now(), api.rand.Float64(), api.links.enter())
	case queue.PreQueued, queue.Drawing:
		return api.preQueued(v, pos)
	case queue.Admitted:
		return api.admitted(v.x, v.cfg, v.class, v.visitor, pos, api.visitPhase(v))
	}
	return api.waiting(v, pos)
}

// shadowed answers a visitor holding a shadow place as one waiting behind everyone in the queue it
// would have joined (its lane, or the main queue): the same body, lane included, polls, Retry-After
// and place as such a visitor gets, but the place is one no proxy takes back (shadowPlace), and its
// polls are always Redis's (which are exact, and so bounds too).
func (api *visitorAPI) shadowed(v *visit, pos queue.Position) answer {
	r := v.queueStanding(pos.Lane)
	base, shortest := api.pollBase(v.cfg, r, pos.Position, pos.Depth, pos.PreviousPoll)
	if a, early := api.tooEarly(v.class, v.visitor, v.enter, pos, shortest); early {
		return a
	}
	body := positionBody{Position: pos.Position, QueueDepth: pos.Depth, Phase: api.visitPhase(v), Lane: pos.Lane, scheduleTimes: scheduleTimesOf(v.cfg, api.now())}
	if wait, ok := api.estimatedWait(v.cfg, v.r, waitingPlace{lane: pos.Lane, position: pos.Position}); ok {
		body.EstimatedWaitSeconds = waitSeconds(wait)
	}
	body.CapacityChanged = v.r.capacityChangedSince(pos.PreviousPoll)
	body.NextPollMs = capacity.SpreadPollHint(base, r.pollMin, api.rand).Milliseconds()
	if pos.Seq > 0 {
		// As a main-queue place reads: far from the front, a poll that brings the place is answered
		// from the snapshot (far) while there is a fresh one, as a bound without the place; any
		// other far answer comes from Redis with the place, and near the front the place comes once.
		// A lane's place comes once, as a lane's place does.
		far := pos.Lane == "" && pos.Position > v.cfg.ExactPositions && farPathOpen(api.engine, v.cfg, r.standing)
		token := shadowPlace(v.cfg, v.visitor, pos.Lane, pos.Seq)
		held := v.held().token == token
		switch {
		case far && held && !v.enter && api.farPositions.SnapshotAge(api.now()) <= replica.FarSnapshotMaxAge:
			body.PositionIsBound = true
		case far || !held:
			body.Place = token
			v.cookies = append(v.cookies, placeCookie(v.x, v.cfg, token))
		}
	}
	return queueing(v.cfg, body, v.class, "shadowed")
}

// visitPhase is the phase told to a visitor the engine placed.
func (api *visitorAPI) visitPhase(v *visit) phase.Phase {
	if v.cfg.Schedule == nil {
		return phase.Open
	}
	if v.r.beforeOpening() {
		// The engine placed the visitor, so the room opened since the plan was cached.
		return phase.Opening
	}
	return v.r.phase
}

// tokenSpent answers an entry whose single-use invitation or solution entered another visitor.
func (api *visitorAPI) tokenSpent(v *visit, pos queue.Position) answer {
	body := errorBody{Error: "invitation_used", Message: "the invitation entered another visitor already", Header: InvitationHeader}
	switch {
	case v.laneCode > 0 && pos.Token == v.laneCode-1:
		body = errorBody{Error: "lane_code_used", Message: "the lane code entered as many visitors as it may", Header: LaneCodeHeader}
	case pos.Token >= v.cfg.invitationTokens:
		body = errorBody{Error: "challenge_reused", Message: "the solution entered another visitor already; solve a new challenge", Header: ProofHeader}
		if v.cfg.External != nil {
			body.Header = ChallengeResponseHeader
		}
	}
	return errorAnswer(http.StatusConflict, body).counted(v.class, body.Error)
}

func (api *visitorAPI) notQueued(v *visit, pos queue.Position) answer {
	body := errorBody{Error: "not_queued", Message: "enter the queue first", Enter: api.links.enter()}
	if v.cfg.Schedule != nil {
		// The engine's phase is the freshest, once the scheduler has published this schedule.
		body.Phase = v.r.phase
		if v.r.known {
			body.Phase = pos.Phase
		}
	}
	return errorAnswer(http.StatusNotFound, body).counted(v.class, "not_queued")
}

func (api *visitorAPI) preQueued(v *visit, pos queue.Position) answer {
	drawing := pos.State == queue.Drawing
	hint, shortest := api.preQueuePoll(v.r.standing, drawing)
	if a, early := api.tooEarly(v.class, v.visitor, v.enter, pos, shortest); early {
		return a
	}
	body := positionBody{QueueDepth: pos.Depth, Arrival: pos.Arrival, Phase: phase.PreQueue, Lane: pos.Lane, NextPollMs: hint.Milliseconds(), scheduleTimes: scheduleTimesOf(v.cfg, api.now())}
	outcome := "pre_queued"
	if drawing {
		body.Phase, outcome = phase.Opening, "drawing"
	}
	return queueing(v.cfg, body, v.class, outcome)
}

func (api *visitorAPI) waiting(v *visit, pos queue.Position) answer {
	if pos.Shadow {
		return api.shadowed(v, pos)
	}
	r := v.queueStanding(pos.Lane)
	if pos.Lane == "" {
		api.farPositions.NoteDepth(pos.Depth)
	}
	// The shortest interval this visitor could have been told.
	base, shortest := api.pollBase(v.cfg, r, pos.Position, pos.Depth, pos.PreviousPoll)
	if a, early := api.tooEarly(v.class, v.visitor, v.enter, pos, shortest); early {
		return a
	}
	body := positionBody{Position: pos.Position, QueueDepth: pos.Depth, Phase: api.visitPhase(v), Lane: pos.Lane, scheduleTimes: scheduleTimesOf(v.cfg, api.now())}
	place := waitingPlace{lane: pos.Lane, position: pos.Position, seq: pos.Seq, front: pos.Front}
	if wait, ok := api.estimatedWait(v.cfg, v.r, place); ok {
		body.EstimatedWaitSeconds = waitSeconds(wait)
		if v.enter && pos.Seq > 0 {
			api.tellFirst(v, pos.Seq, wait)
		}
	}
	body.CapacityChanged = v.r.capacityChangedSince(pos.PreviousPoll)
	body.NextPollMs = capacity.SpreadPollHint(base, r.pollMin, api.rand).Milliseconds()
	switch {
	case pos.Seq > 0 && pos.Lane == "":
		// Every waiting visitor of the main queue holds its place: far from the front its polls are
		// answered without Redis, and after a failover that lost the place it brings it back. Near
		// the front the place is sent once, far from it with every answer.
		far := pos.Position > v.cfg.ExactPositions && farPathOpen(api.engine, v.cfg, r.standing)
		if h := v.held(); far || !h.mainQueue() || h.seq != pos.Seq {
			body.Place = v.cfg.Signer.Place(v.visitor, pos.Seq)
		}
	case pos.Seq > 0:
		// A lane's visitor polls Redis (its lane is short), and its place names the lane, which a
		// failover that lost the place gives it back in.
		if h := v.held(); !h.ok || h.seq != pos.Seq || h.lane != pos.Lane {
			body.Place = v.cfg.Signer.LanePlace(v.visitor, pos.Lane, pos.Seq)
		}
	}
	if body.Place != "" {
		v.cookies = append(v.cookies, placeCookie(v.x, v.cfg, body.Place))
	}
	outcome := "waiting"
	if pos.Restored {
		outcome = "restored"
	}
	return queueing(v.cfg, body, v.class, outcome)
}
