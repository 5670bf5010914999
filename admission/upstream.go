package admission

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// What happens once a request the gate let through leaves for the upstream, whichever front carries
// it: the in-flight gauge, the workload meter, the outcome metrics, the session the answer ends, and
// the visitor's answer when the upstream gives none. A front begins an UpstreamCall, forwards, and
// reports the answer's status or the failure; it keeps nothing of this itself.

var (
	// ErrVisitorBody marks a failed forward whose cause was the visitor's own malformed body (a bad
	// chunk): the visitor is answered 400, and the upstream is not blamed.
	ErrVisitorBody = errors.New("reading the request body")
	// ErrUpstreamTimeout and ErrUpstreamClosed name, for a front whose client has errors of its own,
	// an upstream that did not answer in time and one that closed the connection before answering.
	ErrUpstreamTimeout = errors.New("the upstream did not answer in time")
	ErrUpstreamClosed  = errors.New("the upstream closed the connection")
)

// UpstreamCall is one forward to the upstream, from the moment it leaves until its answer's headers
// or its failure. Answered, Failed and End may each be called; only the first counts.
type UpstreamCall struct {
	g        *gate
	d        Decision
	start    time.Time
	inFlight prometheus.Gauge
	// measured: a protected request, which the workload meter times from began.
	measured bool
	began    time.Time
	done     atomic.Bool
}

// beginUpstream counts a request going upstream as d decided it (Room.BeginUpstream).
func (g *gate) beginUpstream(d Decision) *UpstreamCall {
	c := &UpstreamCall{g: g, d: d, start: time.Now(), inFlight: g.metrics.upstreamGauge(d.class), measured: d.class == "protected"}
	c.inFlight.Inc()
	if c.measured {
		c.began = g.workload.Begin()
	}
	return c
}

// finish ends the wait once; false when it had ended already.
func (c *UpstreamCall) finish(failed bool) bool {
	if c.done.Swap(true) {
		return false
	}
	c.inFlight.Dec()
	if c.measured {
		c.g.workload.End(c.began, failed)
	}
	return true
}

// Answered records the upstream's answer: its status and its release header, which the front strips
// from the answer. The session it ends, it ends.
func (c *UpstreamCall) Answered(status int, release string) {
	if !c.finish(status >= 500) {
		return
	}
	c.g.metrics.forwarded(c.d.class, time.Since(c.start))
	c.g.metrics.answered(c.d.class, status)
	c.g.afterUpstream(c.d, status, release)
}

// Failed records that the upstream gave no answer, or that the visitor's body could not be read
// (ErrVisitorBody), and returns the answer the front writes: 400 for the visitor's fault, 502 for the
// upstream's, nothing when the visitor went away. A failure after the answer's headers
// (an upgrade gone wrong) is answered too.
func (c *UpstreamCall) Failed(err error) RoomAnswer {
	c.finish(upstreamFault(err, 0))
	return RoomAnswer{c.g.upstreamFailed(err, c.d), c.g.metrics}
}

// End ends a call the front gave up on without an answer or a failure; it counts nothing more.
func (c *UpstreamCall) End() { c.finish(false) }

// upstreamFailed is the answer to a request the upstream did not answer, or whose body the visitor
// spoilt; none when the visitor went away.
func (g *gate) upstreamFailed(err error, d Decision) answer {
	if errors.Is(err, context.Canceled) {
		return answer{}
	}
	if errors.Is(err, ErrVisitorBody) {
		return errorAnswer(http.StatusBadRequest, errorBody{Error: "bad_request", Message: "the request body is malformed"}).counted("open", "bad_body")
	}
	kind, message := upstreamErrorKind(err)
	g.log.Error(err, "Forwarding upstream failed", "path", d.canonical, "kind", kind)
	g.metrics.upstreamErrors.WithLabelValues(d.class, kind).Inc()
	return errorAnswer(http.StatusBadGateway, errorBody{Error: "upstream_unavailable", Message: message}).counted(d.class, "upstream_error")
}

// upstreamFault tells whether the upstream failed a request: it gave no answer (but for the visitor
// going away or sending a malformed body), or a 5xx.
func upstreamFault(err error, status int) bool {
	if err != nil {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, ErrVisitorBody)
	}
	return status >= 500
}

// upstreamErrorKind names how forwarding failed, for the metrics and the visitor (without the
// upstream's address).
func upstreamErrorKind(err error) (kind, message string) {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused", "the upstream refused the connection"
	case errors.Is(err, ErrUpstreamTimeout), errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout", "the upstream did not answer in time"
	case errors.Is(err, ErrUpstreamClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return "closed", "the upstream closed the connection before answering"
	}
	return "other", "the upstream could not be reached"
}

// afterUpstream ends the session of the request's pass when the workload says so, on any route: with
// the release header, or by answering a completion route with a 2xx or 3xx. A pass the gate did not
// check (the route is not a protected one, or the room let it through without one) is checked now,
// and only now: most answers end nothing.
func (g *gate) afterUpstream(d Decision, status int, release string) {
	released := strings.EqualFold(strings.TrimSpace(release), "true")
	completed := d.completion && status >= 200 && status < 400
	if !released && !completed {
		return
	}
	switch {
	case d.hasPass:
		g.sessions.Release(d.pass)
	case d.presented.token != "" && d.cfg != nil:
		if verified, ok := g.verifyPresented(d.cfg, d.presented, g.now()); ok {
			g.sessions.Release(verified)
		}
	}
}
