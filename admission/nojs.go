package admission

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/herdgate/herdgate/internal/page"
	"github.com/herdgate/herdgate/internal/phase"
)

// The waiting page for browsers without JavaScript (GET /.herdgate/wait). The page with the script
// sends such a browser here (a refresh inside <noscript>). Each load asks what the script would ask,
// and renders the answer into the page, which refreshes itself at the visitor's next poll: the first
// load enters (keeping any place the visitor holds), as the script does when its page opens; the
// refreshes poll the visitor's status, so a load sooner than allowed is answered 429 as a poll is,
// keeping the place. An admitted visitor gets its pass cookie and goes back to the page it asked for.

// serveWithoutScript answers a load of the page without JavaScript.
func (api *visitorAPI) serveWithoutScript(x Exchange, cfg *Config) {
	query, _ := url.ParseQuery(x.RawQuery())
	ret, carried := safeReturn(query.Get("return")), page.CarriedOf(query)
	a := &recordedAnswer{Exchange: x, carried: carried}
	if _, known := api.identify(x, cfg, false); known && query.Get("poll") != "" {
		api.serveEnterOrStatus(a, cfg, false)
	}
	if a.status == 0 || a.status == http.StatusNotFound {
		*a = recordedAnswer{Exchange: x, carried: carried}
		api.serveEnterOrStatus(a, cfg, true)
	}
	var pos positionBody
	var e errorBody
	_ = json.Unmarshal(a.body, &pos)
	_ = json.Unmarshal(a.body, &e)
	if a.status == http.StatusOK && e.Error == "" && pos.Admitted {
		// The pass cookie is set: back to the page the visitor asked for.
		api.metrics.requests.WithLabelValues("page", "admitted_without_script").Inc()
		x.SetHeader("Cache-Control", "no-store")
		replyRedirect(x, ret)
		return
	}
	st, refresh := api.stateWithoutScript(cfg, a, pos, e)
	if v := a.header.Get("Retry-After"); v != "" {
		x.SetHeader("Retry-After", v)
	}
	api.metrics.requests.WithLabelValues("page", "without_script").Inc()
	d := pageFor(page.Language(x.Header("Accept-Language")), ret, cfg)
	d.Phase = st.Phase
	d.WithoutScript(st, refresh, page.WithoutScriptURL(ret, carried, true))
	api.renderPage(x, cfg, d, a.status)
}

// stateWithoutScript is what the page without JavaScript shows of the answer a, and when it
// refreshes (0: it does not, the visitor has something to do first).
func (api *visitorAPI) stateWithoutScript(cfg *Config, a *recordedAnswer, pos positionBody, e errorBody) (page.State, time.Duration) {
	st := page.State{Phase: pos.Phase, Position: pos.Position, Depth: pos.QueueDepth, Bound: pos.PositionIsBound}
	if sc := cfg.Schedule; sc != nil {
		st.OpensAt, st.PreQueueFrom, st.ClosesAt = sc.OpensAt, sc.PreQueueFrom, sc.ClosesAt
	}
	if pos.EstimatedWaitSeconds != nil {
		wait := time.Duration(*pos.EstimatedWaitSeconds) * time.Second
		st.EstimatedWait = &wait
	}
	retry := a.retryAfter(2 * time.Second)
	switch e.Error {
	case "":
		return st, time.Duration(pos.NextPollMs) * time.Millisecond
	case "too_early":
		// The place is kept: show it, and come back when a poll is allowed.
		st.Phase, st.Position, st.Depth = api.pagePhase(cfg), e.Position, e.QueueDepth
		return st, time.Duration(e.RetryAfterMs) * time.Millisecond
	case "not_open":
		st.Phase = phase.Scheduled
		return st, min(retry, maxNotOpenRetry)
	case "closed":
		st.Phase = phase.Closed
		return st, a.retryAfter(time.Minute)
	case "lane_code_invalid", "lane_code_expired", "lane_code_used", "lane_code_wrong_queue", "lane_code_not_yet_valid":
		st.Phase, st.Title, st.Summary = api.pagePhase(cfg), "titleLaneCode", "summaryLaneCode"
		return st, 0
	case "invitation_required", "invitation_invalid", "invitation_expired", "invitation_used":
		st.Phase, st.Title, st.Summary = api.pagePhase(cfg), "titleInvitation", "summaryInvitationOnly"
		if e.Error == "invitation_expired" {
			st.Summary = "summaryInvitationExpired"
		}
		return st, 0
	}
	st.Phase = api.pagePhase(cfg)
	switch {
	case e.Header == ProofHeader || e.Header == ChallengeResponseHeader:
		// A challenge is solved by the page's script.
		st.Summary = "summaryNeedsScript"
		return st, 0
	case a.status == http.StatusServiceUnavailable || a.status == http.StatusTooManyRequests:
		st.Summary = "summaryBusy"
		return st, retry
	}
	st.Summary = "summaryError"
	return st, 5 * time.Second
}

// recordedAnswer is the request of the page without JavaScript as enter and status see it, with
// their answer kept for the page: the invitation and lane code of the page's address stand in for
// their headers, and the cookies they set go to the visitor.
type recordedAnswer struct {
	Exchange
	carried page.Carried
	status  int
	header  http.Header
	body    []byte
}

func (a *recordedAnswer) Header(name string) string {
	v := a.Exchange.Header(name)
	switch {
	case v != "":
	case name == InvitationHeader:
		v = a.carried.Invitation
	case name == LaneCodeHeader:
		v = a.carried.LaneCode
	}
	return v
}

func (a *recordedAnswer) SetHeader(name, value string) {
	if a.header == nil {
		a.header = http.Header{}
	}
	a.header.Set(name, value)
}

func (a *recordedAnswer) Reply(status int, _ string, body []byte) { a.status, a.body = status, body }

// retryAfter is the answer's Retry-After, or otherwise when it has none.
func (a *recordedAnswer) retryAfter(otherwise time.Duration) time.Duration {
	if s, err := strconv.Atoi(a.header.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return otherwise
}
