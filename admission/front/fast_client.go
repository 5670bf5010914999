package front

import (
	"crypto/tls"
	"net/url"
	"time"

	"github.com/valyala/fasthttp"
)

// upstreamClient is the keep-alive client of one upstream (scheme and host). A config change to
// another upstream makes a new one, and the old one's idle connections time out; the rooms of a shared
// set each have theirs.
type upstreamClient struct {
	url    *url.URL
	client *fasthttp.HostClient
}

// client is the keep-alive client of the upstream u: the last one used when it is u, as for every
// request of a proxy of its own, or the one of u's scheme and host.
func (f *Fast) client(u *url.URL) *upstreamClient {
	if c := f.upstream.Load(); c != nil && c.url == u {
		return c
	}
	key := u.Scheme + "://" + u.Host
	if hc, ok := f.upstreams.Load(key); ok {
		// A config reload parses the URL anew: the same upstream keeps its client and connections.
		c := &upstreamClient{url: u, client: hc.(*fasthttp.HostClient)}
		f.upstream.Store(c)
		return c
	}
	addr := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			addr += ":443"
		} else {
			addr += ":80"
		}
	}
	hc, _ := f.upstreams.LoadOrStore(key, &fasthttp.HostClient{
		Addr:                     addr,
		IsTLS:                    u.Scheme == "https",
		TLSConfig:                &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12},
		MaxConns:                 1 << 16,
		MaxIdleConnDuration:      90 * time.Second,
		MaxConnWaitTimeout:       5 * time.Second,
		StreamResponseBody:       true,
		NoDefaultUserAgentHeader: true,
		DisablePathNormalizing:   true,
		ReadBufferSize:           MaxHeaderBytes,
	})
	c := &upstreamClient{url: u, client: hc.(*fasthttp.HostClient)}
	f.upstream.Store(c)
	return c
}
