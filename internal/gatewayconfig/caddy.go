package gatewayconfig

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// caddy is the site that asks herdgate's check with forward_auth and, behind it, keeps the
// workload within its cap: Caddy's transport opens at most the cap's connections to it, and a
// request past them waits for one to come free (a queue, not a refusal). Unless opts names a Caddy
// that has the fix, the check's own transport keeps no connection: Caddy can send a pooled one's
// checks to the workload (docs/guides/gateways.md, "Caddy: a check a connection").
func caddy(wq *herdgatev1alpha1.WaitingQueue, opts Options) ([]byte, error) {
	at, err := siteOf(wq, opts, ":80")
	if err != nil {
		return nil, err
	}
	checkTransport := caddyCheckOnItsOwnConnection
	if opts.CaddyVersion != "" {
		// The first word, so that what `caddy version` prints ("v2.11.9 h1:…") will do; a
		// pre-release of the first release with the fix counts as before it.
		first, _, _ := strings.Cut(strings.TrimSpace(opts.CaddyVersion), " ")
		v, err := version.ParseSemantic(first)
		if err != nil {
			return nil, fmt.Errorf("--caddy-version %q: want a Caddy release such as %s", opts.CaddyVersion, caddyPooledChecksSince)
		}
		if v.AtLeast(version.MustParseSemantic(caddyPooledChecksSince)) {
			checkTransport = ""
		}
	}
	return []byte(strings.NewReplacer(
		"LISTEN", at.listen, "HERDGATE_SERVER", at.herdgate, "WORKLOAD_SERVER", at.workload, "CAP", fmt.Sprint(at.limit),
		"\t\t\t\tCHECK_TRANSPORT\n", checkTransport,
	).Replace(caddyTemplate)), nil
}

// caddyPooledChecksSince is the first Caddy release whose forward_auth dials herdgate's address
// however late its connection is dialled (caddyserver/caddy#7859).
const caddyPooledChecksSince = "2.11.5"

// caddyCheckOnItsOwnConnection keeps each check on a connection of its own, for a Caddy before
// caddyPooledChecksSince.
const caddyCheckOnItsOwnConnection = `				# Each check on a connection of its own, dialled while Caddy still means herdgate:
				# see "Caddy: a check a connection" in herdgate's gateways guide.
				transport http {
					keepalive off
				}
`

const caddyTemplate = `{
	admin off
	auto_https off
}
http://LISTEN {
	handle /.herdgate/* {
		reverse_proxy HERDGATE_SERVER
	}
	handle {
		route {
			# Only the check's session handle and cookies reach the workload, never the visitor's.
			request_header -Herdgate-Session
			request_header -X-Herdgate-Cookie
			forward_auth HERDGATE_SERVER {
				uri /.herdgate/check
				copy_headers X-Herdgate-Cookie Herdgate-Session
				# A visitor's own X-Original-* would name another request: the check refuses both.
				header_up -X-Original-*
				CHECK_TRANSPORT
			}
			# A header the check did not answer with is copied as its placeholder, unfilled: drop it.
			@unfilled_session header_regexp Herdgate-Session ^\{
			request_header @unfilled_session -Herdgate-Session
			# The visitor's cookies without herdgate's, when any are left; else no Cookie at all.
			@site_cookies header_regexp X-Herdgate-Cookie ^[^{]
			request_header -Cookie
			request_header @site_cookies Cookie {http.request.header.X-Herdgate-Cookie}
			request_header -X-Herdgate-*
			request_header -Herdgate-Place
			reverse_proxy WORKLOAD_SERVER {
				# The second line: at most CAP connections, so CAP requests, in flight to the
				# workload from this Caddy; a request past them waits for one to come free.
				transport http {
					max_conns_per_host CAP
				}
			}
		}
	}
}
`
