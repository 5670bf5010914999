package admission

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/page"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/queue"
)

// openAPIDocument describes what the proxy answers under /.herdgate/ (OpenAPI 3.1), served at
// /.herdgate/openapi.json; the proxy's tests validate every answer they receive against it, and make
// manifests copies it to docs/reference.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPIDocument is the OpenAPI 3.1 description of the visitor API the proxy serves.
func OpenAPIDocument() []byte { return openAPIDocument }

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
	Phase phase.Phase `json:"phase"`
	// Arrival is the visitor's arrival number while it holds a pre-queue place: what its drawn place
	// is computed from (herd verify-shuffle).
	Arrival int64 `json:"arrival,omitempty"`
	// Lane is the metered lane the visitor waits in (spec.lanes); position and queueDepth are then
	// its place in the lane and the lane's length; in the pre-queue, the lane the draw places the
	// visitor in. Unset in the main queue.
	Lane string `json:"lane,omitempty"`
	// Pass and PassExpiresAt are set when Admitted; the pass is also set as the herdgate_pass cookie.
	Pass          string     `json:"pass,omitempty"`
	PassExpiresAt *time.Time `json:"passExpiresAt,omitempty"`
	// The schedule, when the queue has one.
	scheduleTimes
}

func (api *visitorAPI) serveReserved(x Exchange, cfg *Config, canonical string) {
	switch canonical {
	case reservedPrefix + "/enter", reservedPrefix + "/status":
		if notice := cfg.PageMessage(); notice != "" {
			x = noticeExchange{x, notice}
		}
	}
	switch canonical {
	case reservedPrefix + "/enter":
		if !allow(x, http.MethodPost) {
			return
		}
		api.serveEnterOrStatus(x, cfg, true)
	case reservedPrefix + "/status":
		if !allow(x, http.MethodGet, http.MethodHead) {
			return
		}
		api.serveEnterOrStatus(x, cfg, false)
	case reservedPrefix + "/challenge":
		if !allow(x, http.MethodGet) {
			return
		}
		api.serveChallenge(x, cfg)
	case reservedPrefix + "/release":
		if !allow(x, http.MethodPost) {
			return
		}
		api.serveRelease(x, cfg)
	case reservedPrefix + "/jwks.json":
		if !allow(x, http.MethodGet, http.MethodHead) {
			return
		}
		api.serveJWKS(x, cfg)
	case reservedPrefix:
		if !allow(x, http.MethodGet, http.MethodHead) {
			return
		}
		api.metrics.requests.WithLabelValues("page", "served").Inc()
		api.servePage(x, cfg)
	case page.WithoutScriptPath:
		if !allow(x, http.MethodGet, http.MethodHead) {
			return
		}
		api.serveWithoutScript(x, cfg)
	case reservedPrefix + "/openapi.json":
		if !allow(x, http.MethodGet, http.MethodHead) {
			return
		}
		x.SetHeader("Cache-Control", "public, max-age=300")
		x.Reply(http.StatusOK, "application/json", openAPIDocument)
	case reservedPrefix + "/healthz":
		replyJSON(x, http.StatusOK, map[string]string{"status": "ok"})
	case reservedPrefix + "/readyz":
		if api.draining.Load() {
			replyJSON(x, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
			return
		}
		replyJSON(x, http.StatusOK, map[string]string{"status": "ready"})
	default:
		api.metrics.requests.WithLabelValues("internal", "not_found").Inc()
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

// pollTooEarly answers a status poll that came sooner than tooEarlyShare of shortest, the shortest
// interval the visitor could have been told (the rest is room for network jitter), with 429.
func (api *visitorAPI) pollTooEarly(x Exchange, class string, enter bool, pos queue.Position, shortest time.Duration) bool {
	if enter || pos.PreviousPoll.IsZero() {
		return false
	}
	allowed := time.Duration(tooEarlyShare * float64(shortest))
	if gap := pos.Now.Sub(pos.PreviousPoll); gap >= allowed {
		return false
	}
	// This poll counts as the visitor's sign of life, so the next one is allowed a whole interval
	// after it: a client that waits as told is answered.
	api.metrics.tooEarly.Inc()
	api.metrics.requests.WithLabelValues(class, "too_early").Inc()
	retryAfter(x, allowed)
	replyJSON(x, http.StatusTooManyRequests, errorBody{
		Error: "too_early", Message: "poll no sooner than nextPollMs; your place is kept",
		RetryAfterMs: allowed.Milliseconds(), Position: pos.Position, QueueDepth: pos.Depth,
	})
	return true
}

// replyQueueing answers a visitor who is not through yet (a position, a pre-queue place, a place
// kept in a closed room, an admission valid in a moment) with body: 200, or the room's
// spec.page.queueingStatusCode with Retry-After, the time until the next poll in whole seconds.
func replyQueueing(x Exchange, cfg *Config, body positionBody) {
	status := http.StatusOK
	if pg := cfg.Page; pg != nil && pg.QueueingStatus != 0 {
		status = pg.QueueingStatus
		retryAfter(x, time.Duration(body.NextPollMs)*time.Millisecond)
	}
	replyJSON(x, status, body)
}

// serveAdmitted answers an admitted visitor: with its pass when it is valid now, else with the time
// until its not-before, so that the tick's jitter reaches the client.
func (api *visitorAPI) serveAdmitted(x Exchange, cfg *Config, class, visitor string, pos queue.Position, phase phase.Phase) {
	if wait := pos.Pass.NotBefore.Sub(pos.Now); wait > 0 {
		zero := int64(0)
		api.metrics.requests.WithLabelValues(class, "admitted_soon").Inc()
		replyQueueing(x, cfg, positionBody{EstimatedWaitSeconds: &zero, Phase: phase, NextPollMs: max(1, (wait + time.Millisecond - 1).Milliseconds())})
		return
	}
	token := api.setPassCookie(x, cfg, visitor, pos)
	expiry := pos.Pass.Expiry.UTC()
	zero := int64(0)
	api.metrics.requests.WithLabelValues(class, "admitted").Inc()
	replyJSON(x, http.StatusOK, positionBody{EstimatedWaitSeconds: &zero, Admitted: true, Phase: phase, Pass: token, PassExpiresAt: &expiry})
}

// spread is d with the poll hints' random spread, so that pollers never synchronise.
func (api *visitorAPI) spread(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (1 - capacity.PollSpread + 2*capacity.PollSpread*api.rand.Float64()))
}

// zeroRand draws the low end of the poll spread: the shortest hint the proxy could give.
type zeroRand struct{}

func (zeroRand) Float64() float64 { return 0 }

// jwksMaxAge is how long a gateway may keep the JWKS: far shorter than the time a next key is
// published ahead of its turn (spec.pass.keyRotation, at least an hour).
const jwksMaxAge = 5 * time.Minute

// serveJWKS answers GET /.herdgate/jwks.json with the public keys of the queue's ES256 passes.
func (api *visitorAPI) serveJWKS(x Exchange, cfg *Config) {
	if cfg.JWKS == nil {
		api.metrics.requests.WithLabelValues("internal", "not_found").Inc()
		replyJSON(x, http.StatusNotFound, errorBody{Error: "no_public_keys",
			Message: "this queue's passes are not signed with public keys: see spec.pass.format and spec.pass.algorithm"})
		return
	}
	api.metrics.requests.WithLabelValues("internal", "jwks").Inc()
	x.SetHeader("Cache-Control", fmt.Sprintf("public, max-age=%d", int(jwksMaxAge/time.Second)))
	x.Reply(http.StatusOK, "application/jwk-set+json", cfg.JWKS)
}

// serveChallenge answers GET /.herdgate/challenge with a fresh proof-of-work challenge.
func (api *visitorAPI) serveChallenge(x Exchange, cfg *Config) {
	if cfg.ProofOfWork == nil {
		api.metrics.requests.WithLabelValues("challenge", "not_found").Inc()
		replyJSON(x, http.StatusNotFound, errorBody{Error: "no_challenge", Message: "this queue asks no proof of work"})
		return
	}
	c := cfg.ProofOfWork.Issue(api.now())
	api.metrics.difficulty.Set(float64(c.Difficulty))
	api.metrics.requests.WithLabelValues("challenge", "issued").Inc()
	replyJSON(x, http.StatusOK, c)
}
