package entry

import (
	"crypto/subtle"
	"net/netip"

	"github.com/herdgate/herdgate/internal/route"
)

// BypassLane is one spec.bypass rule: requests from its CIDRs, with its header and value, or to its
// path reach the protected routes without a pass. Exactly one of CIDRs, Header (with Value) or Path
// is set. A lane never refuses; the first lane a request matches names it in the outcome.
type BypassLane struct {
	Name   string
	CIDRs  []netip.Prefix
	Header string
	Value  []byte
	Path   *route.Route
	// Clients tells the request's client, for a CIDR lane.
	Clients Clients
}

// Check names the lane in out when the request takes it and no lane before did.
func (b *BypassLane) Check(in Input, out *Outcome) *Refusal {
	if out.Bypass == "" && b.matches(in) {
		out.Bypass = b.Name
	}
	return nil
}

func (b *BypassLane) matches(in Input) bool {
	switch {
	case b.Path != nil:
		return b.Path.MatchesPath(in.Path)
	case b.Header != "":
		// One value exactly: a request that repeats the header is judged by none of them.
		return in.Request.HeaderCount(b.Header) == 1 && subtle.ConstantTimeCompare([]byte(in.Request.Header(b.Header)), b.Value) == 1
	default:
		return isTrusted(b.Clients.Of(in.Request), b.CIDRs)
	}
}
