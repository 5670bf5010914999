package admission

import (
	"net/http"
	"net/url"
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

// pageWithoutScript answers a load of the page without JavaScript.
func (api *visitorAPI) pageWithoutScript(x Exchange, cfg *Config) answer {
	query, _ := url.ParseQuery(x.RawQuery())
	ret, carried := safeReturn(query.Get("return")), page.CarriedOf(query)
	req := carriedRequest{Exchange: x, carried: carried}
	var asked []answer
	if _, _, known := identify(x, cfg, false); known && query.Get("poll") != "" {
		asked = append(asked, api.enterOrStatus(req, cfg, false))
	}
	if len(asked) == 0 || asked[0].status == 0 || asked[0].status == http.StatusNotFound {
		asked = append(asked, api.enterOrStatus(req, cfg, true))
	}
	a := asked[len(asked)-1]
	pos, e := bodiesOf(a)
	var out answer
	if a.status == http.StatusOK && e.Error == "" && pos.Admitted {
		// The pass cookie is set: back to the page the visitor asked for.
		out = redirect(ret).counted("page", "admitted_without_script")
		out.setHeader("Cache-Control", "no-store")
	} else {
		st, refresh := api.stateWithoutScript(cfg, a, pos, e)
		d := pageFor(page.Language(x.Header("Accept-Language")), ret, cfg)
		d.Phase = st.Phase
		d.WithoutScript(st, refresh, page.WithoutScriptURL(ret, carried, true))
		out = api.renderPage(cfg, d, a.status).counted("page", "without_script")
		out.retryAfter = a.retryAfter
	}
	// What enter and status said is counted as theirs, and the cookies they set go to the visitor.
	for _, was := range asked {
		out.cookies = append(out.cookies, was.cookies...)
		out.alsoCounted = append(out.alsoCounted, [2]string{was.class, was.outcome})
	}
	return out
}

// bodiesOf is what the page without JavaScript reads of an answer of enter or status: its position,
// or its error.
func bodiesOf(a answer) (positionBody, errorBody) {
	switch b := a.body.(type) {
	case positionBody:
		return b, errorBody{}
	case errorBody:
		return positionBody{}, b
	case notOpenBody:
		return positionBody{}, errorBody{Error: b.Error, Message: b.Message, Phase: b.Phase, Enter: b.Enter, RetryAfterMs: b.RetryAfterMs}
	}
	return positionBody{}, errorBody{}
}

// stateWithoutScript is what the page without JavaScript shows of the answer a, and when it
// refreshes (0: it does not, the visitor has something to do first).
func (api *visitorAPI) stateWithoutScript(cfg *Config, a answer, pos positionBody, e errorBody) (page.State, time.Duration) {
	st := page.State{Phase: pos.Phase, Position: pos.Position, Depth: pos.QueueDepth, Bound: pos.PositionIsBound, CapacityChanged: pos.CapacityChanged}
	if sc := cfg.Schedule; sc != nil {
		st.OpensAt, st.PreQueueFrom, st.ClosesAt = sc.OpensAt, sc.PreQueueFrom, sc.ClosesAt
	}
	if pos.EstimatedWaitSeconds != nil {
		wait := time.Duration(*pos.EstimatedWaitSeconds) * time.Second
		st.EstimatedWait = &wait
	}
	retry := retryOf(a, 2*time.Second)
	switch e.Error {
	case "":
		return st, time.Duration(pos.NextPollMs) * time.Millisecond
	case "too_early", "too_many_polls":
		// The place is kept: show it (a client's refusal knows none), and come back when a poll is
		// allowed.
		st.Phase, st.Position, st.Depth = api.pagePhase(cfg), e.Position, e.QueueDepth
		return st, time.Duration(e.RetryAfterMs) * time.Millisecond
	case "not_open":
		st.Phase = phase.Scheduled
		return st, min(retry, maxNotOpenRetry)
	case "closed":
		st.Phase = phase.Closed
		return st, retryOf(a, time.Minute)
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

// retryOf is the answer's Retry-After as the visitor reads it (whole seconds), or otherwise when it
// has none.
func retryOf(a answer, otherwise time.Duration) time.Duration {
	if a.retryAfter <= 0 {
		return otherwise
	}
	return max(time.Second, (a.retryAfter+time.Second-1)/time.Second*time.Second)
}

// carriedRequest is the request of the page without JavaScript as enter and status see it: the
// invitation and lane code of the page's address stand in for their headers.
type carriedRequest struct {
	Exchange
	carried page.Carried
}

func (r carriedRequest) Header(name string) string {
	v := r.Exchange.Header(name)
	switch {
	case v != "":
	case name == InvitationHeader:
		v = r.carried.Invitation
	case name == LaneCodeHeader:
		v = r.carried.LaneCode
	}
	return v
}
