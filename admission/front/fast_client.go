package front

import (
	"crypto/tls"
	"net/url"
	"time"

	"github.com/valyala/fasthttp"
)

// upstreamClient is the keep-alive client of one upstream (scheme and host); a config change to
// another upstream makes a new one, and the old one's idle connections time out.
type upstreamClient struct {
	url    *url.URL
	client *fasthttp.HostClient
}

// client is the keep-alive client of the configured upstream.
func (f *Fast) client(u *url.URL) *upstreamClient {
	if c := f.upstream.Load(); c != nil && c.url == u {
		return c
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.upstream.Load()
	if c != nil && c.url == u {
		return c
	}
	// A config reload parses the URL anew: the same upstream keeps its client and connections.
	if c != nil && c.url.Scheme == u.Scheme && c.url.Host == u.Host {
		c = &upstreamClient{url: u, client: c.client}
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
	c = &upstreamClient{url: u, client: &fasthttp.HostClient{
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
	}}
	f.upstream.Store(c)
	return c
}
