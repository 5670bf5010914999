package admission

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/settings"
)

// positionBody is the answer of enter and status.
type positionBody struct {
	Position   int64 `json:"position"`
	QueueDepth int64 `json:"queueDepth"`
	// EstimatedWaitSeconds is null while no scheduler has published a plan (or it admits nobody).
	EstimatedWaitSeconds *int64 `json:"estimatedWaitSeconds"`
	NextPollMs           int64  `json:"nextPollMs"`
	// PositionIsBound is set when the position comes from the proxy's snapshot of the queue, far
	// from the front: it is never below the exact position (far.go).
	PositionIsBound bool `json:"positionIsBound,omitempty"`
	// Place is the waiting visitor's signed arrival sequence, also set as the herdgate_place cookie;
	// clients without cookies send it back in the Herdgate-Place header.
	Place    string `json:"place,omitempty"`
	Admitted bool   `json:"admitted"`
	// Phase is the room's phase: Open (visitors queue), Passthrough (no pass needed) or Closed; with
	// a schedule also Scheduled, PreQueue and Opening (see phase.go).
	Phase settings.Phase `json:"phase"`
	// Arrival is the visitor's arrival number while it holds a pre-queue place: what its drawn place
	// is computed from (herd verify-shuffle).
	Arrival int64 `json:"arrival,omitempty"`
	// Pass and PassExpiresAt are set when Admitted; the pass is also set as the herdgate_pass cookie.
	Pass          string     `json:"pass,omitempty"`
	PassExpiresAt *time.Time `json:"passExpiresAt,omitempty"`
	// The schedule, when the queue has one.
	scheduleTimes
}

func (p *Proxy) serveReserved(x Exchange, cfg *Config, canonical string) {
	switch canonical {
	case reservedPrefix + "/enter", reservedPrefix + "/status":
		if cfg.PageMessage != "" {
			x = noticeExchange{x, cfg.PageMessage}
		}
	}
	switch canonical {
	case reservedPrefix + "/enter":
		if !allow(x, http.MethodPost) {
			return
		}
		p.serveEnterOrStatus(x, cfg, true)
	case reservedPrefix + "/status":
		if !allow(x, http.MethodGet, http.MethodHead) {
			return
		}
		p.serveEnterOrStatus(x, cfg, false)
	case reservedPrefix + "/challenge":
		if !allow(x, http.MethodGet) {
			return
		}
		p.serveChallenge(x, cfg)
	case reservedPrefix:
		if !allow(x, http.MethodGet, http.MethodHead) {
			return
		}
		p.metrics.requests.WithLabelValues("page", "served").Inc()
		p.servePage(x, cfg)
	case reservedPrefix + "/healthz":
		replyJSON(x, http.StatusOK, map[string]string{"status": "ok"})
	case reservedPrefix + "/readyz":
		if p.draining.Load() {
			replyJSON(x, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
			return
		}
		replyJSON(x, http.StatusOK, map[string]string{"status": "ready"})
	default:
		p.metrics.requests.WithLabelValues("internal", "not_found").Inc()
		replyJSON(x, http.StatusNotFound, errorBody{Error: "not_found", Message: "no such herdgate endpoint"})
	}
}

// noticeExchange adds the operator's notice (spec.page.message) to every JSON answer of enter and
// status, so that the waiting page shows a changed one at the next poll.
type noticeExchange struct {
	Exchange
	notice string
}

func (x noticeExchange) Reply(status int, contentType string, body []byte) {
	if contentType == "application/json" && len(body) > 1 && body[0] == '{' {
		n, _ := json.Marshal(x.notice)
		out := make([]byte, 0, len(body)+len(n)+12)
		out = append(append(append(out, `{"notice":`...), n...), ',')
		if body[1] == '}' {
			out = out[:len(out)-1]
		}
		body = append(out, body[1:]...)
	}
	x.Exchange.Reply(status, contentType, body)
}

func allow(x Exchange, methods ...string) bool {
	for _, m := range methods {
		if x.Method() == m {
			return true
		}
	}
	x.SetHeader("Allow", joinMethods(methods))
	replyJSON(x, http.StatusMethodNotAllowed, errorBody{Error: "method_not_allowed", Message: "use " + joinMethods(methods)})
	return false
}

func joinMethods(m []string) string {
	out := m[0]
	for _, x := range m[1:] {
		out += ", " + x
	}
	return out
}

// serveEnterOrStatus answers POST /.herdgate/enter and GET /.herdgate/status.
func (p *Proxy) serveEnterOrStatus(x Exchange, cfg *Config, enter bool) {
	class := "status"
	if enter {
		class = "enter"
	}
	switch cfg.Mode {
	case herdgatev1alpha1.ModePassthrough:
		// The room is switched off: nobody needs a pass, so everybody is through.
		zero := int64(0)
		p.metrics.requests.WithLabelValues(class, "passthrough").Inc()
		replyJSON(x, http.StatusOK, positionBody{Admitted: true, Phase: settings.PhasePassthrough, EstimatedWaitSeconds: &zero})
		return
	case herdgatev1alpha1.ModeClosed:
		if enter {
			p.replyClosed(x, cfg, class)
			return
		}
	}
	r := p.room(x.Context(), cfg)
	if enter && cfg.Schedule != nil {
		switch {
		case r.phase == settings.PhaseScheduled && cfg.phaseAt(p.now()) == settings.PhaseScheduled:
			// Nothing to ask Redis: a crowd refreshing before the pre-queue costs the proxy alone.
			p.replyNotOpen(x, cfg, r, class)
			return
		case !r.known:
			// The scheduler has not published this schedule's phase yet; the engine would take the
			// visitor as if the room had no schedule.
			p.metrics.requests.WithLabelValues(class, "starting").Inc()
			retryAfter(x, time.Second)
			replyJSON(x, http.StatusServiceUnavailable, errorBody{Error: "queue_starting", Phase: r.phase,
				Message: "the waiting room is getting ready; try again shortly"})
			return
		}
	}
	visitor, ok := p.identify(x, cfg, enter)
	if !ok {
		p.metrics.requests.WithLabelValues(class, "identity_required").Inc()
		if cfg.IdentityHeader != "" {
			replyJSON(x, http.StatusUnauthorized, errorBody{Error: "identity_required", Header: cfg.IdentityHeader})
		} else {
			body := errorBody{Error: "not_queued", Message: "enter the queue first", Enter: reservedPrefix + "/enter"}
			if cfg.Schedule != nil {
				body.Phase = r.phase
			}
			replyJSON(x, http.StatusNotFound, body)
		}
		return
	}

	if !enter && p.farPathOpen(cfg, r) {
		// Far from the front the proxy answers alone, even while Redis rests (farSnapshotMaxAge).
		if seq, ok := p.place(x, cfg, visitor); ok && p.serveFar(x, cfg, r, visitor, seq) {
			return
		}
	}
	var pos queue.Position
	var err error
	if p.redisResting() {
		p.metrics.requests.WithLabelValues(class, "unavailable").Inc()
		retryAfter(x, 2*time.Second)
		replyJSON(x, http.StatusServiceUnavailable, errorBody{Error: "queue_unavailable", Message: "the queue is unreachable; try again shortly"})
		return
	}
	if enter {
		limit := p.entryLimit(x, cfg)
		tokens, refused := p.checkEntry(x, cfg, visitor)
		if refused != nil {
			p.metrics.requests.WithLabelValues(class, refused.body.Error).Inc()
			replyJSON(x, refused.status, refused.body)
			return
		}
		limit.SingleUse = tokens
		pos, err = p.q.EnterFrom(x.Context(), visitor, r.abandonAfter, limit)
	} else {
		pos, err = p.q.Status(x.Context(), visitor, r.abandonAfter)
	}
	if err != nil {
		if errors.Is(err, queue.ErrInvalidVisitor) {
			p.metrics.requests.WithLabelValues(class, "bad_identity").Inc()
			replyJSON(x, http.StatusBadRequest, errorBody{Error: "bad_identity", Message: err.Error()})
			return
		}
		if errors.Is(err, context.Canceled) {
			return
		}
		p.redisResult(err)
		p.metrics.requests.WithLabelValues(class, "unavailable").Inc()
		retryAfter(x, 2*time.Second)
		replyJSON(x, http.StatusServiceUnavailable, errorBody{Error: "queue_unavailable", Message: "the queue is unreachable; try again shortly"})
		return
	}
	p.redisResult(nil)

	if cfg.Mode == herdgatev1alpha1.ModeClosed && pos.State != queue.NotQueued {
		// The poll kept the visitor's place; the room is closed to everyone, pass holders included.
		p.metrics.requests.WithLabelValues(class, "closed").Inc()
		replyJSON(x, http.StatusOK, positionBody{Position: pos.Position, QueueDepth: pos.Depth, Phase: settings.PhaseClosed,
			NextPollMs: p.spread(r.pollMax).Milliseconds()})
		return
	}
	phase := settings.PhaseOpen
	if cfg.Schedule != nil {
		phase = r.phase
		if r.beforeOpening() {
			// The engine placed the visitor, so the room opened since the plan was cached.
			phase = settings.PhaseOpening
		}
	}
	switch pos.State {
	case queue.TokenSpent:
		// A single-use invitation or a solution that entered another visitor already.
		body := errorBody{Error: "invitation_used", Message: "the invitation entered another visitor already", Header: InvitationHeader}
		if pos.Token >= p.invitationTokens(cfg) {
			body = errorBody{Error: "challenge_reused", Message: "the solution entered another visitor already; solve a new challenge", Header: ProofHeader}
			if cfg.External != nil {
				body.Header = ChallengeResponseHeader
			}
		}
		p.metrics.requests.WithLabelValues(class, body.Error).Inc()
		replyJSON(x, http.StatusConflict, body)
	case queue.RateLimited:
		// The client took its burst of places: it may come back when it has earned one.
		p.metrics.requests.WithLabelValues(class, "rate_limited").Inc()
		retryAfter(x, pos.RetryAfter)
		replyJSON(x, http.StatusTooManyRequests, errorBody{Error: "too_many_entries",
			Message: "this address took its share of places; try again later", RetryAfterMs: max(1, pos.RetryAfter.Milliseconds())})
	case queue.NotQueued:
		p.metrics.requests.WithLabelValues(class, "not_queued").Inc()
		body := errorBody{Error: "not_queued", Message: "enter the queue first", Enter: reservedPrefix + "/enter"}
		if cfg.Schedule != nil {
			// The engine's phase is the freshest, once the scheduler has published this schedule.
			body.Phase = r.phase
			if r.known {
				body.Phase = pos.Phase
			}
		}
		replyJSON(x, http.StatusNotFound, body)
	case queue.TurnedAway:
		if pos.Phase == settings.PhaseClosed {
			p.replyScheduleClosed(x, cfg, class)
			return
		}
		r.phase = pos.Phase
		p.replyNotOpen(x, cfg, r, class)
	case queue.PreQueued, queue.Drawing:
		drawing := pos.State == queue.Drawing
		hint, shortest := p.preQueuePoll(r, drawing)
		if p.pollTooEarly(x, class, enter, pos, shortest) {
			return
		}
		body := positionBody{QueueDepth: pos.Depth, Arrival: pos.Arrival, Phase: settings.PhasePreQueue, NextPollMs: hint.Milliseconds(), scheduleTimes: p.scheduleTimes(cfg)}
		outcome := "pre_queued"
		if drawing {
			body.Phase, outcome = settings.PhaseOpening, "drawing"
		}
		p.metrics.requests.WithLabelValues(class, outcome).Inc()
		replyJSON(x, http.StatusOK, body)
	case queue.Admitted:
		p.serveAdmitted(x, cfg, class, visitor, pos, phase)
	case queue.Waiting:
		p.far.NoteDepth(pos.Depth)
		// The shortest interval this visitor could have been told.
		stretch := p.stretch(cfg, r, pos.Depth)
		if p.pollTooEarly(x, class, enter, pos, capacity.BudgetedPollHint(r.plan, pos.Position, r.pollMin, r.pollMax, stretch, zeroRand{})) {
			return
		}
		body := positionBody{Position: pos.Position, QueueDepth: pos.Depth, Phase: phase, scheduleTimes: p.scheduleTimes(cfg)}
		if wait, ok := r.plan.EstimatedWait(pos.Position); ok {
			s := int64(wait / time.Second)
			body.EstimatedWaitSeconds = &s
		}
		body.NextPollMs = capacity.BudgetedPollHint(r.plan, pos.Position, r.pollMin, r.pollMax, stretch, p.rand).Milliseconds()
		if pos.Seq > 0 && pos.Position > cfg.ExactPositions && p.farPathOpen(cfg, r) {
			// Nobody joins ahead of a waiting visitor: one within the exact zone never needs a place.
			body.Place = p.setPlace(x, cfg, visitor, pos.Seq)
		}
		p.metrics.requests.WithLabelValues(class, "waiting").Inc()
		replyJSON(x, http.StatusOK, body)
	}
}

// pollTooEarly answers a status poll that came sooner than tooEarlyShare of shortest, the shortest
// interval the visitor could have been told (the rest is room for network jitter), with 429.
func (p *Proxy) pollTooEarly(x Exchange, class string, enter bool, pos queue.Position, shortest time.Duration) bool {
	if enter || pos.PreviousPoll.IsZero() {
		return false
	}
	allowed := time.Duration(tooEarlyShare * float64(shortest))
	if gap := pos.Now.Sub(pos.PreviousPoll); gap >= allowed {
		return false
	}
	// This poll counts as the visitor's sign of life, so the next one is allowed a whole interval
	// after it: a client that waits as told is answered.
	p.metrics.tooEarly.Inc()
	p.metrics.requests.WithLabelValues(class, "too_early").Inc()
	retryAfter(x, allowed)
	replyJSON(x, http.StatusTooManyRequests, errorBody{
		Error: "too_early", Message: "poll no sooner than nextPollMs; your place is kept",
		RetryAfterMs: allowed.Milliseconds(), Position: pos.Position, QueueDepth: pos.Depth,
	})
	return true
}

// serveAdmitted answers an admitted visitor: with its pass when it is valid now, else with the time
// until its not-before, so that the tick's jitter reaches the client.
func (p *Proxy) serveAdmitted(x Exchange, cfg *Config, class, visitor string, pos queue.Position, phase settings.Phase) {
	if wait := pos.Pass.NotBefore.Sub(pos.Now); wait > 0 {
		zero := int64(0)
		p.metrics.requests.WithLabelValues(class, "admitted_soon").Inc()
		replyJSON(x, http.StatusOK, positionBody{EstimatedWaitSeconds: &zero, Phase: phase, NextPollMs: max(1, (wait + time.Millisecond - 1).Milliseconds())})
		return
	}
	token := p.setPassCookie(x, cfg, visitor, pos)
	expiry := pos.Pass.Expiry.UTC()
	zero := int64(0)
	p.metrics.requests.WithLabelValues(class, "admitted").Inc()
	replyJSON(x, http.StatusOK, positionBody{EstimatedWaitSeconds: &zero, Admitted: true, Phase: phase, Pass: token, PassExpiresAt: &expiry})
}

// setPassCookie signs the visitor's pass and sets it as the pass cookie; it returns the pass.
func (p *Proxy) setPassCookie(x Exchange, cfg *Config, visitor string, pos queue.Position) string {
	token := cfg.Signer.Issue(visitor, pos.Pass.NotBefore, pos.Pass.Expiry)
	x.SetCookie(&http.Cookie{
		Name: PassCookie, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: x.Secure(), MaxAge: max(1, int(pos.Pass.Expiry.Sub(pos.Now)/time.Second)),
	})
	return token
}

// replyClosed answers a request the closed room turns away: 503, to try again after the longest poll
// interval.
func (p *Proxy) replyClosed(x Exchange, cfg *Config, class string) {
	p.metrics.requests.WithLabelValues(class, "closed").Inc()
	retryAfter(x, cfg.PollMax)
	replyJSON(x, http.StatusServiceUnavailable, errorBody{Error: "closed", Phase: settings.PhaseClosed,
		Message: "the waiting room is closed for now; places already taken are kept"})
}

// spread is d with the poll hints' random spread, so that pollers never synchronise.
func (p *Proxy) spread(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (1 - capacity.PollSpread + 2*capacity.PollSpread*p.rand.Float64()))
}

// zeroRand draws the low end of the poll spread: the shortest hint the proxy could give.
type zeroRand struct{}

func (zeroRand) Float64() float64 { return 0 }

// checkEntry runs the entry's checks the queue configures, before the engine is asked: the
// invitation, then the challenge. It returns the single-use tokens the engine binds, or the refusal.
func (p *Proxy) checkEntry(x Exchange, cfg *Config, visitor string) ([]queue.SingleUse, *refusal) {
	var tokens []queue.SingleUse
	now := p.now()
	if cfg.Invitation != nil {
		t, refused := cfg.Invitation.verify(x.Header(InvitationHeader), visitor, now)
		if refused != nil {
			return nil, refused
		}
		tokens = append(tokens, t...)
	}
	switch {
	case cfg.ProofOfWork != nil:
		cfg.ProofOfWork.rate.add(now)
		t, refused := cfg.ProofOfWork.verify(x.Header(ProofHeader), now)
		if refused != nil {
			return nil, refused
		}
		tokens = append(tokens, t...)
	case cfg.External != nil:
		t, refused := cfg.External.verify(p.verifier, x.Header(ChallengeResponseHeader), forwardedClient(x, cfg), now)
		if refused != nil {
			return nil, refused
		}
		tokens = append(tokens, t...)
	}
	return tokens, nil
}

// invitationTokens is how many of an entry's single-use tokens come from its invitation.
func (p *Proxy) invitationTokens(cfg *Config) int {
	if cfg.Invitation != nil && cfg.Invitation.singleUse {
		return 1
	}
	return 0
}

// serveChallenge answers GET /.herdgate/challenge with a fresh proof-of-work challenge.
func (p *Proxy) serveChallenge(x Exchange, cfg *Config) {
	if cfg.ProofOfWork == nil {
		p.metrics.requests.WithLabelValues("challenge", "not_found").Inc()
		replyJSON(x, http.StatusNotFound, errorBody{Error: "no_challenge", Message: "this queue asks no proof of work"})
		return
	}
	c := cfg.ProofOfWork.issue(p.now())
	p.metrics.difficulty.Set(float64(c.Difficulty))
	p.metrics.requests.WithLabelValues("challenge", "issued").Inc()
	replyJSON(x, http.StatusOK, c)
}
