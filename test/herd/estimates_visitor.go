package herd

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// A visitor of the wait-estimate experiment: it enters, notes every wait it is told, polls as told
// until it goes silent or is admitted, and, in a capped room, holds its session and ends it.

// told is one answer a visitor read: when, its place, and the wait it was told (nil: none).
type estimateTold struct {
	at       time.Time
	position int64
	lane     string
	wait     *float64
}

// estimateVisitor plays one arrival.
type estimateVisitor struct {
	estimateArrival
	id       string
	told     []estimateTold
	admitted time.Time
	// session, when positive, is how long the visitor holds its pass before it ends its session.
	session time.Duration
	early   int
	err     error
}

// visit enters, polls as told (until it goes silent), and stops at the answer with its pass.
func (v *estimateVisitor) visit(ctx context.Context, c *http.Client, base string) {
	var header []string
	if v.club {
		header = []string{clubHeader, clubValue}
	}
	enter := true
	var silentAt time.Time
	for ctx.Err() == nil {
		method, path := nextCall(enter)
		code, body, err := launchCallWith(c, method, base+path, v.id, "", header)
		now := time.Now()
		if err != nil {
			v.err = err
			return
		}
		var wait time.Duration
		switch {
		case code == http.StatusOK && body["admitted"] == true:
			v.admitted = now
			if pass, _ := body["pass"].(string); v.session > 0 {
				v.endSession(ctx, c, base, pass)
			}
			return
		case code == http.StatusOK:
			t := estimateTold{at: now}
			if p, ok := body["position"].(float64); ok {
				t.position = int64(p)
			}
			t.lane, _ = body["lane"].(string)
			if w, ok := body["estimatedWaitSeconds"].(float64); ok && t.position > 0 {
				t.wait = &w
			}
			if t.position > 0 {
				v.told = append(v.told, t)
			}
			if enter {
				switch {
				case v.noShow:
					return
				case v.leaveAt > 0 && t.wait != nil:
					silentAt = now.Add(time.Duration(v.leaveAt * *t.wait * float64(time.Second)))
				}
			}
			enter = false
			wait = millis(body, "nextPollMs")
		case code == http.StatusTooManyRequests:
			v.early++
			wait = millis(body, "retryAfterMs")
		case code == http.StatusServiceUnavailable:
			wait = millis(body, "retryAfterMs")
		case code == http.StatusNotFound:
			// Dropped for silence: a visitor who left is gone.
			return
		default:
			v.err = fmt.Errorf("%s %s: %d %v", method, path, code, body)
			return
		}
		if !silentAt.IsZero() && now.Add(wait).After(silentAt) {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	v.err = ctx.Err()
}

// sessionEndPath is the workload's route that ends a visitor's session (Herdgate-Release).
const sessionEndPath = "/checkout/done"

// endSession holds the pass for the visitor's session and then ends it through the proxy.
func (v *estimateVisitor) endSession(ctx context.Context, c *http.Client, base, pass string) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(v.session):
	}
	code, body, err := launchCallWith(c, http.MethodGet, base+sessionEndPath, v.id, pass, nil)
	switch {
	case err != nil:
		v.err = fmt.Errorf("ending the session: %w", err)
	case code != http.StatusNoContent:
		v.err = fmt.Errorf("ending the session: %d %v", code, body)
	}
}
