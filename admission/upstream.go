package admission

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"

	"github.com/valyala/fasthttp"
)

// Forwarding that failed: whose fault it was, what kind, and what the visitor is told. Both transports
// answer through here.

// upstreamFailed answers a request the upstream did not answer, or whose body the visitor spoilt.
func (p *Proxy) upstreamFailed(x exchange, err error, d decision) {
	if errors.Is(err, context.Canceled) {
		return // the visitor went away
	}
	if errors.Is(err, errVisitorBody) {
		// The visitor's own body was malformed (a bad chunk): its fault, not the upstream's.
		p.metrics.requests.WithLabelValues("open", "bad_body").Inc()
		replyJSON(x, http.StatusBadRequest, errorBody{Error: "bad_request", Message: "the request body is malformed"})
		return
	}
	kind, message := upstreamErrorKind(err)
	p.log.Error(err, "Forwarding upstream failed", "path", d.canonical, "kind", kind)
	p.metrics.requests.WithLabelValues(d.class, "upstream_error").Inc()
	p.metrics.upstreamErrors.WithLabelValues(d.class, kind).Inc()
	replyJSON(x, http.StatusBadGateway, errorBody{Error: "upstream_unavailable", Message: message})
}

// upstreamFault tells whether the upstream failed a request: it gave no answer (but for the visitor
// going away or sending a malformed body), or a 5xx.
func upstreamFault(err error, status int) bool {
	if err != nil {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, errVisitorBody)
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
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return "timeout", "the upstream did not answer in time"
	case errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return "closed", "the upstream closed the connection before answering"
	}
	return "other", "the upstream could not be reached"
}

// errVisitorBody marks an error reading the visitor's request body while it went upstream.
var errVisitorBody = errors.New("reading the request body")

// visitorBody reads a visitor's body on its way upstream and keeps what went wrong reading it, so
// that a malformed body is answered 400 rather than taken for an upstream failure.
type visitorBody struct {
	r   io.Reader
	err error
}

func (b *visitorBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.err = fmt.Errorf("%w: %w", errVisitorBody, err)
		return n, b.err
	}
	return n, err
}
