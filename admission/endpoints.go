package admission

import (
	_ "embed"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/herdgate/herdgate/admission/replica"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/page"
	"github.com/herdgate/herdgate/internal/phase"
)

// openAPIDocument describes what the proxy answers under /.herdgate/ (OpenAPI 3.1), served at
// /.herdgate/openapi.json; the proxy's tests validate every answer they receive against it, and make
// manifests copies it to docs/reference.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPIDocument is the OpenAPI 3.1 description of the visitor API the proxy serves.
func OpenAPIDocument() []byte { return openAPIDocument }

// visitorAPI answers the room's own paths under /.herdgate/: enter and status through the engine,
// far from the front from the replica's far positions, the waiting page, release, JWKS, challenges.
type visitorAPI struct {
	engine   Engine
	standing *standings
	redis    *redisHealth
	links    *links
	sessions *replica.Sessions
	// workload counts how far off the first waits told were, for the room's status.
	workload     *replica.WorkloadMeter
	farPositions *replica.FarPositions
	polls        *replica.PollStretches
	// nextPolls is when this replica told each visitor it may poll next (earlyInMemory).
	nextPolls *replica.NextPolls
	// clientPolls bounds the polls each client sends on to Redis (overClientRate).
	clientPolls *replica.ClientPolls
	// draining is the room's: readyz fails once it drains.
	draining *atomic.Bool
	metrics  *metrics
	log      logr.Logger
	now      func() time.Time
	rand     capacity.Rand
}

// positionBody is the answer of enter and status.
type positionBody struct {
	Position   int64 `json:"position"`
	QueueDepth int64 `json:"queueDepth"`
	// EstimatedWaitSeconds is null while no scheduler has published a plan (or it admits nobody), and
	// while a full cap cannot tell when passes end (slotsWait).
	EstimatedWaitSeconds *int64 `json:"estimatedWaitSeconds"`
	NextPollMs           int64  `json:"nextPollMs"`
	// CapacityChanged is set when the room's capacity changed since the visitor's previous poll:
	// the estimated wait follows the new capacity, so a page can say why it moved.
	CapacityChanged bool `json:"capacityChanged,omitempty"`
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
	// The schedule, when the room has one.
	scheduleTimes
}

// serveReserved is the answer to a request to herdgate's own path canonical, under cfg.
func (api *visitorAPI) serveReserved(x Exchange, cfg *Config, canonical string) answer {
	var methods []string
	switch canonical {
	case reservedPrefix + "/enter", reservedPrefix + "/release":
		methods = []string{http.MethodPost}
	case reservedPrefix + "/challenge":
		methods = []string{http.MethodGet}
	case reservedPrefix + "/status", reservedPrefix + "/jwks.json", reservedPrefix, page.WithoutScriptPath, reservedPrefix + "/openapi.json",
		reservedPrefix + "/busy":
		methods = []string{http.MethodGet, http.MethodHead}
	}
	var notice string
	if canonical == reservedPrefix+"/enter" || canonical == reservedPrefix+"/status" {
		// The operator's notice goes with every answer of enter and status, so that the waiting page
		// shows a changed one at the next poll.
		notice = cfg.PageMessage()
	}
	if methods != nil && !slices.Contains(methods, x.Method()) {
		a := errorAnswer(http.StatusMethodNotAllowed, errorBody{Error: "method_not_allowed", Message: "use " + strings.Join(methods, ", ")})
		a.setHeader("Allow", strings.Join(methods, ", "))
		a.notice = notice
		return a
	}
	switch canonical {
	case reservedPrefix + "/enter", reservedPrefix + "/status":
		a := api.enterOrStatus(x, cfg, canonical == reservedPrefix+"/enter")
		a.notice = notice
		return a
	case reservedPrefix + "/challenge":
		return api.challenge(cfg)
	case reservedPrefix + "/release":
		return api.release(x, cfg)
	case reservedPrefix + "/jwks.json":
		return api.jwks(cfg)
	case reservedPrefix:
		return api.page(x, cfg).counted("page", "served")
	case page.WithoutScriptPath:
		return api.pageWithoutScript(x, cfg)
	case reservedPrefix + "/openapi.json":
		a := answer{status: http.StatusOK, contentType: "application/json", raw: openAPIDocument}
		a.setHeader("Cache-Control", "public, max-age=300")
		return a
	case reservedPrefix + "/busy":
		return api.busy(x)
	case reservedPrefix + "/healthz":
		return jsonAnswer(http.StatusOK, map[string]string{"status": "ok"})
	case reservedPrefix + "/readyz":
		if api.draining.Load() {
			return jsonAnswer(http.StatusServiceUnavailable, map[string]string{"status": "draining"})
		}
		return jsonAnswer(http.StatusOK, map[string]string{"status": "ready"})
	}
	return errorAnswer(http.StatusNotFound, errorBody{Error: "not_found", Message: "no such herdgate endpoint"}).counted("internal", "not_found")
}

// busyRetry is how soon, on average, a visitor refused by the gateway's cap on the workload tries
// again: each is told a moment of its own between half of it and one and a half, so that the
// visitors one bunch refused do not come back as one bunch (docs/performance.md, "Through a gateway").
const busyRetry = time.Second

// busyPage is what a browser refused by the gateway's cap reads: it loads the same page again after
// the seconds it is given, without a script, its pass untouched.
const busyPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="%d">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>One moment</title></head>
<body><p>The site is busy for a moment. This page loads again by itself shortly; your place is kept.</p></body></html>
`

// busy answers GET /.herdgate/busy, where a gateway sends a request its own cap on the workload
// refused (its second line, docs/guides/gateways.md): the room's 503 with Retry-After, counted, so
// that a client waits a moment and comes again with the pass it holds.
func (api *visitorAPI) busy(x Exchange) answer {
	wait := time.Duration(float64(busyRetry) * (0.5 + api.rand.Float64()))
	var a answer
	if isBrowserPage(x) {
		seconds := int64((wait + time.Second - 1) / time.Second)
		a = answer{status: http.StatusServiceUnavailable, contentType: "text/html; charset=utf-8", raw: fmt.Appendf(nil, busyPage, seconds)}
		a.setHeader("Cache-Control", "no-store")
		a.setHeader("Content-Security-Policy", "default-src 'none'")
	} else {
		a = errorAnswer(http.StatusServiceUnavailable, errorBody{Error: "workload_busy", RetryAfterMs: wait.Milliseconds(),
			Message: "the site is at its limit for a moment; your pass stays valid: try again after retryAfterMs"})
	}
	return a.retry(wait).counted("gateway", "workload_busy")
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

// jwks answers GET /.herdgate/jwks.json with the public keys of the room's ES256 passes.
func (api *visitorAPI) jwks(cfg *Config) answer {
	if cfg.JWKS == nil {
		return errorAnswer(http.StatusNotFound, errorBody{Error: "no_public_keys",
			Message: "this queue's passes are not signed with public keys: see spec.pass.format and spec.pass.algorithm"}).counted("internal", "not_found")
	}
	a := answer{status: http.StatusOK, contentType: "application/jwk-set+json", raw: cfg.JWKS}
	a.setHeader("Cache-Control", fmt.Sprintf("public, max-age=%d", int(jwksMaxAge/time.Second)))
	return a.counted("internal", "jwks")
}

// challenge answers GET /.herdgate/challenge with a fresh proof-of-work challenge.
func (api *visitorAPI) challenge(cfg *Config) answer {
	if cfg.ProofOfWork == nil {
		return errorAnswer(http.StatusNotFound, errorBody{Error: "no_challenge", Message: "this queue asks no proof of work"}).counted("challenge", "not_found")
	}
	c := cfg.ProofOfWork.Issue(api.now())
	api.metrics.difficulty.Set(float64(c.Difficulty))
	return jsonAnswer(http.StatusOK, c).counted("challenge", "issued")
}
