package entry

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/herdgate/herdgate/internal/queue"
)

// ExternalChallenge verifies a widget's token with the provider (spec.entry.challenge.external).
type ExternalChallenge struct {
	// VerifyURL is the provider's siteverify endpoint; Secret the site's secret with it.
	VerifyURL, Secret string
	// Timeout bounds one verification.
	Timeout time.Duration
	// Clients tells the visitor's address, which the provider is told.
	Clients Clients
	// Client calls the provider; nil means a keep-alive client shared by the proxy.
	Client *http.Client
}

// verifiers is the client that calls the providers when a check has none of its own.
var verifiers = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute}}

// Check asks the provider about the request's response; the response goes in out as a single-use
// token, for the engine to bind.
func (e *ExternalChallenge) Check(in Input, out *Outcome) *Refusal {
	remoteIP := ""
	if a := e.Clients.Of(in.Request); a.IsValid() {
		remoteIP = a.String()
	}
	t, refused := e.verify(in.Request.Header(ChallengeResponseHeader), remoteIP, in.Now)
	out.Limit.SingleUse = append(out.Limit.SingleUse, t...)
	return refused
}

// verifyAnswer is the provider's answer, as Turnstile and hCaptcha write it.
type verifyAnswer struct {
	Success    bool     `json:"success"`
	ErrorCodes []string `json:"error-codes"`
}

// notVerdicts are the providers' error codes (Turnstile's and hCaptcha's) that say the response
// could not be judged rather than that it failed: a request or a site key at fault, a response
// missing, spent or expired, the provider's own trouble. None of them sends an entry to the shadow
// queue.
var notVerdicts = map[string]bool{
	"missing-input-secret": true, "invalid-input-secret": true, "missing-input-response": true,
	"bad-request": true, "timeout-or-duplicate": true, "internal-error": true,
	"expired-input-response": true, "already-seen-response": true, "invalid-or-already-seen-response": true,
	"sitekey-secret-mismatch": true, "missing-remoteip": true, "invalid-remoteip": true,
}

// verdict says a failed answer judged the response itself: none of its error codes is one of
// notVerdicts.
func (a verifyAnswer) verdict() bool {
	for _, c := range a.ErrorCodes {
		if notVerdicts[c] {
			return false
		}
	}
	return true
}

// verify asks the provider about response, from the client at remoteIP; it returns the single-use
// token that keeps the response from entering a second visitor, or why the entry is refused.
func (e *ExternalChallenge) verify(response, remoteIP string, now time.Time) ([]queue.SingleUse, *Refusal) {
	refuse := func(status int, code, message string) ([]queue.SingleUse, *Refusal) {
		return nil, &Refusal{Status: status, Code: code, Message: message, Header: ChallengeResponseHeader}
	}
	if response == "" {
		return refuse(http.StatusUnauthorized, "challenge_required", "solve the site's challenge and enter with its response")
	}
	if len(response) > 4096 {
		return refuse(http.StatusBadRequest, "challenge_invalid", "the challenge response is too long")
	}
	form := url.Values{"secret": {e.Secret}, "response": {response}}
	if remoteIP != "" {
		form.Set("remoteip", remoteIP)
	}
	c := *verifiers
	if e.Client != nil {
		c = *e.Client
	}
	c.Timeout = e.Timeout
	res, err := c.PostForm(e.VerifyURL, form)
	if err != nil {
		return refuse(http.StatusServiceUnavailable, "challenge_unavailable", "the challenge could not be verified; try again shortly")
	}
	defer res.Body.Close()
	answer := verifyAnswer{}
	if res.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(res.Body, 64<<10)).Decode(&answer) != nil {
		return refuse(http.StatusServiceUnavailable, "challenge_unavailable", "the challenge could not be verified; try again shortly")
	}
	if !answer.Success {
		message := "the challenge was not solved"
		if len(answer.ErrorCodes) > 0 {
			message += ": " + strings.Join(answer.ErrorCodes, ", ")
		}
		_, refused := refuse(http.StatusForbidden, "challenge_failed", message)
		refused.Failed = answer.verdict()
		return nil, refused
	}
	// Providers spend a response once; the engine does too, for providers that do not.
	return []queue.SingleUse{{ID: singleUseID("external", response), Until: now.Add(ChallengeLifetime)}}, nil
}
