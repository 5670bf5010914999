package admission

import (
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"
	"time"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// ReleaseHeader is the response header with which the workload ends a visitor's session: on any
// response to a request with a valid pass, "true" releases the pass. The proxy strips it.
const ReleaseHeader = "Herdgate-Release"

// SessionHeader carries a request's session handle to the workload, when the room has a release key
// (spec.pass.releaseKeySecretRef): with it the workload ends the session by POST /.herdgate/release.
const SessionHeader = "Herdgate-Session"

// HeldHeader and HeldFailedHeader, on a release in Gateway mode, tell how long the workload held the
// request the session made, in milliseconds, and whether it failed: what the proxy would have
// measured in the data path, for the room's Adaptive capacity (docs/guides/adaptive-capacity.md).
const (
	HeldHeader       = "Herdgate-Held-Ms"
	HeldFailedHeader = "Herdgate-Held-Failed"
)

// maxHeld is the longest hold a release may tell of: spec.capacity.requestLatency's own bound.
const maxHeld = 10 * time.Minute

// Session is the handle of the session of the request's pass, for the workload; "" when the request
// has no valid pass or the room no release key.
func (d Decision) Session() string {
	if !d.hasPass || d.cfg == nil || d.cfg.releaseKey == nil {
		return ""
	}
	return d.cfg.Signer.Session(d.pass)
}

// release ends the session a handle names, for the workload's own servers: the release header's
// equivalent where no answer of the workload reaches herdgate. It is authenticated by the room's
// release key, compared in constant time.
func (api *visitorAPI) release(x Exchange, cfg *Config) answer {
	if cfg.releaseKey == nil {
		return errorAnswer(http.StatusNotFound, errorBody{Error: "no_release_key", Message: "this queue has no spec.pass.releaseKeySecretRef"}).counted("internal", "not_found")
	}
	token, ok := strings.CutPrefix(x.Header("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(token), cfg.releaseKey) != 1 {
		a := errorAnswer(http.StatusUnauthorized, errorBody{Error: "unauthorized", Message: "send the queue's release key as Authorization: Bearer <key>"})
		a.setHeader("WWW-Authenticate", `Bearer realm="herdgate release"`)
		return a.counted("internal", "release_unauthorized")
	}
	session := x.Header(SessionHeader)
	if session == "" || x.HeaderCount(SessionHeader) != 1 {
		return errorAnswer(http.StatusBadRequest, errorBody{Error: "bad_request", Message: "send the Herdgate-Session header the visitor's request carried, once"}).
			counted("internal", "release_bad_request")
	}
	held, failed, told, problem := heldOf(x)
	if problem != "" {
		return errorAnswer(http.StatusBadRequest, errorBody{Error: "bad_request", Header: problem,
			Message: HeldHeader + " is the milliseconds the workload held the request (0 to 600000), " + HeldFailedHeader + " true or false"}).
			counted("internal", "release_bad_request")
	}
	handle, ok := cfg.Signer.VerifySession(session)
	if !ok {
		return errorAnswer(http.StatusUnprocessableEntity, errorBody{Error: "bad_session", Message: "the session handle is not one this queue signed"}).
			counted("internal", "release_bad_session")
	}
	if api.now().Before(handle.Expiry) {
		api.sessions.Release(handle)
	}
	if told && cfg.Enforcement == herdgatev1alpha1.EnforcementGateway {
		// In Proxy mode the proxy measured the request itself.
		api.workload.Told(held, failed)
	}
	return jsonAnswer(http.StatusOK, map[string]bool{"released": true}).counted("internal", "released")
}

// heldOf reads what a release tells of the request it ends: how long the workload held it and
// whether it failed, and whether it told; problem names a header that is not as it must be.
func heldOf(x Exchange) (held time.Duration, failed, told bool, problem string) {
	if x.HeaderCount(HeldHeader) > 1 {
		return 0, false, false, HeldHeader
	}
	if v := x.Header(HeldHeader); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 || time.Duration(ms)*time.Millisecond > maxHeld {
			return 0, false, false, HeldHeader
		}
		held, told = time.Duration(ms)*time.Millisecond, true
	}
	switch v := x.Header(HeldFailedHeader); {
	case v == "" && x.HeaderCount(HeldFailedHeader) == 0:
	case x.HeaderCount(HeldFailedHeader) == 1 && (v == "true" || v == "false") && told:
		failed = v == "true"
	default:
		return 0, false, false, HeldFailedHeader
	}
	return held, failed, told, ""
}
