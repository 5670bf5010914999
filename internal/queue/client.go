package queue

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ClientOptions adjust a client built from a Redis URL.
type ClientOptions struct {
	// RootCAs verifies the server certificate of a rediss:// URL; nil means the system roots.
	RootCAs *x509.CertPool
	// ClientName names the connections in CLIENT LIST, e.g. "herdgate-manager".
	ClientName string
	// PoolSize overrides the connection pool size per node; 0 keeps go-redis' default.
	PoolSize int
}

// NewClient builds a Redis client from a URL:
//
//	redis://[user:password@]host:port[/db][?option=value...]          one server
//	rediss://...                                                       one server over TLS
//	redis+cluster://host:port[?addr=host2:port&addr=host3:port...]    a Redis Cluster
//	rediss+cluster://...                                               a Redis Cluster over TLS
//
// Options are go-redis' URL options (dial_timeout, pool_size, skip_verify, ...). Calls end at their
// context's deadline, not only at the client's timeouts, so that a caller bounds its own wait. Unless the URL sets
// max_retries, the client does not retry a command on its own: a retried status poll would look like
// a second poll, so callers decide when to retry. Errors never repeat the URL's password.
func NewClient(rawURL string, opts ClientOptions) (redis.UniversalClient, error) {
	if strings.TrimSpace(rawURL) == "" {
		return nil, errors.New("redis URL is empty")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err // url.Error repeats the whole URL, password included
		}
		return nil, fmt.Errorf("redis URL is not a valid URL: %w", err)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("redis URL %s names no host", u.Redacted())
	}
	// go-redis dials whatever port it is given; one no server can listen on is refused here, where the
	// flag or field it came from is named.
	hosts := append([]string{u.Host}, u.Query()["addr"]...)
	for _, h := range hosts {
		if err := checkPort(h); err != nil {
			return nil, fmt.Errorf("redis URL %s: %s %w", u.Redacted(), h, err)
		}
	}
	retriesSet := u.Query().Has("max_retries")

	switch u.Scheme {
	case "redis", "rediss":
		o, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("redis URL %s: %w", u.Redacted(), err)
		}
		opts.apply(&o.MaxRetries, o.TLSConfig, &o.ClientName, &o.PoolSize, retriesSet)
		o.ContextTimeoutEnabled = true
		return redis.NewClient(o), nil
	case "redis+cluster", "rediss+cluster":
		plain := *u
		plain.Scheme = strings.TrimSuffix(u.Scheme, "+cluster")
		if plain.Path != "" && plain.Path != "/" {
			return nil, fmt.Errorf("redis URL %s: a Redis Cluster has no database number", u.Redacted())
		}
		plain.Path = ""
		o, err := redis.ParseClusterURL(plain.String())
		if err != nil {
			return nil, fmt.Errorf("redis URL %s: %w", u.Redacted(), err)
		}
		opts.apply(&o.MaxRetries, o.TLSConfig, &o.ClientName, &o.PoolSize, retriesSet)
		o.ContextTimeoutEnabled = true
		return redis.NewClusterClient(o), nil
	case "":
		return nil, fmt.Errorf("redis URL %s has no scheme; start it with redis://, rediss://, redis+cluster:// or rediss+cluster://", u.Redacted())
	default:
		return nil, fmt.Errorf("redis URL %s has scheme %q; use redis://, rediss://, redis+cluster:// or rediss+cluster://", u.Redacted(), u.Scheme)
	}
}

// apply sets the options on the fields that go-redis' server and cluster options both have.
func (opts ClientOptions) apply(maxRetries *int, tlsConfig *tls.Config, clientName *string, poolSize *int, retriesSet bool) {
	if !retriesSet {
		*maxRetries = -1
	}
	if tlsConfig != nil {
		tlsConfig.MinVersion = tls.VersionTLS12
		if opts.RootCAs != nil {
			tlsConfig.RootCAs = opts.RootCAs
		}
	}
	*clientName = opts.ClientName
	if opts.PoolSize > 0 {
		*poolSize = opts.PoolSize
	}
}

// checkPort tells why host:port names a port no server listens on (0, above 65535, leading zeros).
func checkPort(hostport string) error {
	_, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil // no port: the default one; a malformed host is go-redis' to refuse
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || (len(port) > 1 && port[0] == '0') {
		return fmt.Errorf("has port %q, not one of 1 … 65535", port)
	}
	return nil
}
