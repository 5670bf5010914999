package admission

import (
	"crypto/subtle"
	"net/netip"

	"github.com/herdgate/herdgate/internal/route"
)

// bypassRule is one spec.bypass rule: exactly one of cidrs, header (with its value) or path is set.
type bypassRule struct {
	name   string
	cidrs  []netip.Prefix
	header string
	value  []byte
	path   *route.Route
}

// bypass is the first rule the request matches, or "".
func (p *Proxy) bypass(x Exchange, cfg *Config, canonical string) string {
	if len(cfg.Bypass) == 0 {
		return ""
	}
	var client netip.Addr
	for i := range cfg.Bypass {
		b := &cfg.Bypass[i]
		switch {
		case b.path != nil:
			if b.path.MatchesPath(canonical) {
				return b.name
			}
		case b.header != "":
			// One value exactly: a request that repeats the header is judged by none of them.
			if x.HeaderCount(b.header) == 1 && subtle.ConstantTimeCompare([]byte(x.Header(b.header)), b.value) == 1 {
				return b.name
			}
		default:
			if !client.IsValid() {
				client = clientAddr(x.RemoteAddr(), x.HeaderValues("X-Forwarded-For"), cfg.TrustedProxies)
			}
			if isTrusted(client, b.cidrs) {
				return b.name
			}
		}
	}
	return ""
}
