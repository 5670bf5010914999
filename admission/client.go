package admission

import (
	"net/netip"
	"strings"

	"github.com/herdgate/herdgate/internal/queue"
)

// clientAddr is the visitor's address: the connection's peer, or — when the peer is a trusted proxy —
// the last X-Forwarded-For hop that is not itself trusted, walking from the right (the hops a
// visitor writes itself come first, so they are never believed past an untrusted hop). A hop that
// is not an address ends the walk at the trusted one after it.
func clientAddr(peer netip.Addr, forwardedFor []string, trusted []netip.Prefix) netip.Addr {
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

// forwardedClient is the X-Forwarded-For the upstream gets: the visitor's address, which behind a
// trusted proxy is the client it names.
func forwardedClient(x Exchange, cfg *Config) string {
	a := x.RemoteAddr()
	if len(cfg.TrustedProxies) > 0 {
		a = clientAddr(a, x.HeaderValues("X-Forwarded-For"), cfg.TrustedProxies)
	}
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// entryLimit is the engine's limit for this visitor's client, or none when the queue sets none: the
// client is its address cut to the configured prefix length, as "203.0.113.7/32" or "2001:db8::/64".
func (p *Proxy) entryLimit(x Exchange, cfg *Config) queue.EntryLimit {
	if cfg.Entry == nil {
		return queue.EntryLimit{}
	}
	a := clientAddr(x.RemoteAddr(), x.HeaderValues("X-Forwarded-For"), cfg.TrustedProxies)
	if !a.IsValid() {
		return queue.EntryLimit{}
	}
	bits := cfg.Entry.V4Bits
	if !a.Is4() {
		bits = cfg.Entry.V6Bits
	}
	prefix, err := a.Prefix(bits)
	if err != nil {
		return queue.EntryLimit{}
	}
	return queue.EntryLimit{Client: prefix.String(), Burst: cfg.Entry.Burst, PerMinute: cfg.Entry.PerMinute}
}
