package entry

import (
	"net/netip"
	"strings"

	"github.com/herdgate/herdgate/internal/settings"
)

// Clients tells which client sent a request, given the load balancers trusted to say so.
type Clients struct {
	// Trusted are the proxies whose X-Forwarded-For names the client (spec.entry.trustedProxies).
	Trusted []netip.Prefix
}

// Of is the request's client: the connection's peer, or — when the peer is a trusted proxy — the
// last X-Forwarded-For hop that is not itself trusted, walking from the right (the hops a visitor
// writes itself come first, so they are never believed past an untrusted hop). A hop that is not an
// address ends the walk at the trusted one after it.
func (c Clients) Of(r Request) netip.Addr {
	peer := r.RemoteAddr()
	if !isTrusted(peer.Unmap(), c.Trusted) {
		// Most requests: no trusted proxy in front, and no header to read (every forward asks).
		return peer.Unmap()
	}
	return ClientAddr(peer, r.HeaderValues("X-Forwarded-For"), c.Trusted)
}

// ClientAddr is Clients.Of for a peer and its X-Forwarded-For values.
func ClientAddr(peer netip.Addr, forwardedFor []string, trusted []netip.Prefix) netip.Addr {
	peer = peer.Unmap()
	if !isTrusted(peer, trusted) {
		return peer
	}
	var hops []string
	for _, v := range forwardedFor {
		hops = append(hops, strings.Split(v, ",")...)
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return client
		}
		client = a.Unmap()
		if !isTrusted(client, trusted) {
			return client
		}
	}
	return client
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientLimit bounds the places one client takes (spec.entry.perClient): it names the client for
// the engine, as its address cut to the configured prefix length ("203.0.113.7/32",
// "2001:db8::/64"). It never refuses: the engine does, once the client's bucket is empty.
type ClientLimit struct {
	settings.EntryLimit
	Clients Clients
	// ShadowFactor, when positive, sends a client's asks past ShadowFactor times its burst to the
	// shadow queue (spec.entry.shadowQueue.overEntryLimitFactor).
	ShadowFactor int
}

// Check names the request's client and its limit in out.
func (l *ClientLimit) Check(in Input, out *Outcome) *Refusal {
	prefix, ok := l.ClientOf(in.Request)
	if !ok {
		return nil
	}
	out.Limit.Client, out.Limit.Burst, out.Limit.PerMinute = prefix.String(), l.Burst, l.PerMinute
	out.Limit.ShadowFactor = l.ShadowFactor
	return nil
}

// ClientOf is the request's client as the limit counts it: its address cut to the configured prefix
// length; false when the request has no address (a test's, or a unix socket's).
func (l *ClientLimit) ClientOf(r Request) (netip.Prefix, bool) {
	a := l.Clients.Of(r)
	if !a.IsValid() {
		return netip.Prefix{}, false
	}
	bits := l.V4Bits
	if !a.Is4() {
		bits = l.V6Bits
	}
	prefix, err := a.Prefix(bits)
	return prefix, err == nil
}
