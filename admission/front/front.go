// Package front holds the proxy's fronts: the servers that carry visitors' requests to the gate
// (package admission) and forward what it lets through. A front adapts a request to an
// admission.Exchange, asks Room.Decide, and carries out the Decision: it forwards as the Decision
// says and reports the upstream's answer or failure through an admission.UpstreamCall, writes the
// gate's Reply, or has the room serve herdgate's own path; it decides nothing itself. Fast, on fasthttp,
// is the one herdgate-proxy serves; NetHTTP carries the connections Fast hands over for a protocol
// upgrade, and serves programs that embed the gate in a net/http server.
package front

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/herdgate/herdgate/admission"
)

// MaxHeaderBytes bounds a request's line and headers, cookies included, on both fronts.
const MaxHeaderBytes = 16 << 10

// hopHeaders are meaningful for one connection only and never cross the proxy; each front removes
// them (and those the Connection header names) as it carries the request.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Expect"}

// isWebSocketUpgrade: the Upgrade header asks for WebSocket, the one upgrade the gate honours.
func isWebSocketUpgrade(upgrade string) bool {
	return strings.EqualFold(strings.TrimSpace(upgrade), "websocket")
}

// visitorBody reads a visitor's body on its way upstream and keeps what went wrong reading it, so
// that a malformed body is answered 400 rather than taken for an upstream failure.
type visitorBody struct {
	r   io.Reader
	err error
}

func (b *visitorBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.err = fmt.Errorf("%w: %w", admission.ErrVisitorBody, err)
		return n, b.err
	}
	return n, err
}

// cookieName is the name of one cookie-pair as a server reads it: before '=', blanks trimmed; a pair
// without '=' is its own name.
func cookieName(pair string) string {
	name, _, _ := strings.Cut(pair, "=")
	return strings.Trim(name, " \t")
}

// writeReply answers x with the gate's reply as it is: what a proxy front sends a request the gate
// answered itself.
func writeReply(x admission.Exchange, r admission.Reply) {
	for name, values := range r.Header {
		x.SetHeader(name, values[0])
	}
	for _, c := range r.Cookies {
		x.SetCookie(c)
	}
	x.Reply(r.Status, r.ContentType, r.Body)
}
