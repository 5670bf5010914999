package admission

import (
	"net/http"
	"time"

	"github.com/herdgate/herdgate/admission/replica"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/queue"
)

// Far from the front a status poll is answered without a call to Redis: the visitor brings its
// arrival sequence, signed for it alone (the place), and the proxy bounds its position from a
// snapshot of the queue it takes every few seconds, less the admissions since, which it learns at
// every tick. The visitor's sign of life waits for the tick's batch, one call for all the visitors
// answered so. Within cfg.ExactPositions of the front every poll goes to Redis, as does any poll the
// proxy cannot answer surely (no fresh snapshot, a visitor Redis no longer knows under that place).
// See docs/architecture.md, "A deep queue".

const (
	// PlaceCookie holds the visitor's place; PlaceHeader carries it for clients without cookies.
	PlaceCookie = "herdgate_place"
	PlaceHeader = "Herdgate-Place"
)

// positionEngine is what an engine offers for far positions; the queue on Redis does.
type positionEngine = replica.PositionEngine

// farPathOpen says whether polls of this room may be answered far from the front: the room is open
// (while a pre-queue is drawn, places are still being settled) and the engine offers snapshots.
func farPathOpen(engine Engine, cfg *Config, r standing) bool {
	if _, ok := engine.(positionEngine); !ok || cfg.ExactPositions <= 0 || cfg.Mode != herdgatev1alpha1.ModeQueue {
		return false
	}
	return cfg.Schedule == nil || (r.known && r.phase == phase.Open)
}

// shadowPlace is the place a visitor of the shadow queue holds: its arrival number (and the lane it
// reads as, "" for the main queue), signed as any place is, but for the visitor marked as shadowed
// (visitor IDs hold no NUL), so that it reads like a place and no proxy ever takes it for one: it
// brings nothing back after a failover, and its polls are never answered from the far path.
func shadowPlace(cfg *Config, visitor, lane string, seq int64) string {
	if lane != "" {
		return cfg.Signer.LanePlace(visitor+"\x00shadow", lane, seq)
	}
	return cfg.Signer.Place(visitor+"\x00shadow", seq)
}

// placeCookie is the cookie that holds a place token.
func placeCookie(x Exchange, cfg *Config, token string) *http.Cookie {
	return &http.Cookie{
		Name: cfg.Cookies.Place, Value: token, Path: reservedPrefix, HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: x.Secure(), MaxAge: int(visitorMaxAge / time.Second),
	}
}

// far answers a waiting visitor's status poll from the proxy's snapshot, when it can; false means
// to ask Redis.
func (api *visitorAPI) far(cfg *Config, r outlook, visitor string, seq int64) (answer, bool) {
	now := api.now()
	a, ok := api.farPositions.Bound(visitor, seq, cfg.ExactPositions, now)
	if !ok {
		return answer{}, false
	}
	base, shortest := api.pollBase(cfg, r, a.Position, a.Depth, a.Previous)
	if early, ok := api.tooEarly("status", visitor, false, queue.Position{Position: a.Position, Depth: a.Depth, Now: now, PreviousPoll: a.Previous}, shortest); ok {
		return early, true
	}
	body := positionBody{Position: a.Position, QueueDepth: a.Depth, PositionIsBound: true, Phase: phase.Open, scheduleTimes: scheduleTimesOf(cfg, now)}
	if cfg.Schedule != nil {
		body.Phase = r.phase
	}
	if wait, ok := api.estimatedWait(cfg, r, waitingPlace{position: a.Position, seq: seq, front: a.Front, admittedSince: a.AdmittedSince}); ok {
		body.EstimatedWaitSeconds = waitSeconds(wait)
	}
	body.CapacityChanged = r.capacityChangedSince(a.Previous)
	body.NextPollMs = capacity.SpreadPollHint(base, r.pollMin, api.rand).Milliseconds()
	return queueing(cfg, body, "status", "waiting_far"), true
}

// stretch is the poll interval of visitors far from the front of a queue of depth, under cfg's
// budget and the room's plan.
func (api *visitorAPI) stretch(cfg *Config, r standing, depth int64) time.Duration {
	b := capacity.PollBudget{PerSecond: cfg.PollBudget.PerSecond, MinInterval: r.pollMin, MaxInterval: r.pollMax, AbandonAfter: r.abandonAfter}
	return api.polls.Stretch(b, r.plan, depth)
}
