package admission

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// ReleaseHeader is the response header with which the workload ends a visitor's session: on any
// response to a request with a valid pass, "true" releases the pass. The proxy strips it.
const ReleaseHeader = "Herdgate-Release"

// SessionHeader carries a request's session handle to the workload, when the room has a release key
// (spec.pass.releaseKeySecretRef): with it the workload ends the session by POST /.herdgate/release.
const SessionHeader = "Herdgate-Session"

// Session is the handle of the session of the request's pass, for the workload; "" when the request
// has no valid pass or the queue no release key.
func (d Decision) Session() string {
	if !d.hasPass || d.cfg == nil || d.cfg.releaseKey == nil {
		return ""
	}
	return d.cfg.Signer.Session(d.pass)
}

// release ends the session a handle names, for the workload's own servers: the release header's
// equivalent where no answer of the workload reaches herdgate. It is authenticated by the queue's
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
	handle, ok := cfg.Signer.VerifySession(session)
	if !ok {
		return errorAnswer(http.StatusUnprocessableEntity, errorBody{Error: "bad_session", Message: "the session handle is not one this queue signed"}).
			counted("internal", "release_bad_session")
	}
	if api.now().Before(handle.Expiry) {
		api.sessions.Release(handle)
	}
	return jsonAnswer(http.StatusOK, map[string]bool{"released": true}).counted("internal", "released")
}
