package queue

import (
	"context"
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
	// Failovers, when set, learns of the failovers of the client's primaries (FailoverWatch).
	Failovers *FailoverWatch
}

// NewClient builds a Redis client from a URL:
//
//	redis://[user:password@]host:port[/db][?option=value...]          one server
//	rediss://...                                                       one server over TLS
//	redis+cluster://host:port[?addr=host2:port&addr=host3:port...]    a Redis Cluster
//	rediss+cluster://...                                               a Redis Cluster over TLS
//	redis+sentinel://[user:password@]host:port[,host2:port...]/master  a primary that Sentinels watch
//	rediss+sentinel://...                                              the same over TLS
//
// In a Sentinel URL, user and password are the Redis servers' (as in redis://); the Sentinels' own
// are the options sentinel_username and sentinel_password, the database the option db. The client
// asks the Sentinels for the primary of master, and again when it fails over.
//
// Options are go-redis' URL options (dial_timeout, pool_size, skip_verify, ...). Calls end at their
// context's deadline, not only at the client's timeouts, so that a caller bounds its own wait. Unless the URL sets
// max_retries, the client does not retry a command on its own: a retried status poll would look like
// a second poll, so callers decide when to retry. Errors never repeat the URL's password.
func NewClient(rawURL string, opts ClientOptions) (redis.UniversalClient, error) {
	if strings.TrimSpace(rawURL) == "" {
		return nil, errors.New("redis URL is empty")
	}
	if scheme, _, _ := strings.Cut(rawURL, "://"); scheme == "redis+sentinel" || scheme == "rediss+sentinel" {
		return newFailoverClient(rawURL, opts)
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
		return nil, fmt.Errorf("redis URL %s names no host", redacted(u))
	}
	// go-redis dials whatever port it is given; one no server can listen on is refused here, where the
	// flag or field it came from is named.
	hosts := append([]string{u.Host}, u.Query()["addr"]...)
	for _, h := range hosts {
		if err := checkPort(h); err != nil {
			return nil, fmt.Errorf("redis URL %s: %s %w", redacted(u), h, err)
		}
	}
	retriesSet := u.Query().Has("max_retries")

	switch u.Scheme {
	case "redis", "rediss":
		o, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("redis URL %s: %w", redacted(u), err)
		}
		opts.apply(&o.MaxRetries, o.TLSConfig, &o.ClientName, &o.PoolSize, retriesSet)
		o.OnConnect = opts.watch(true)
		o.ContextTimeoutEnabled = true
		return redis.NewClient(o), nil
	case "redis+cluster", "rediss+cluster":
		plain := *u
		plain.Scheme = strings.TrimSuffix(u.Scheme, "+cluster")
		if plain.Path != "" && plain.Path != "/" {
			return nil, fmt.Errorf("redis URL %s: a Redis Cluster has no database number", redacted(u))
		}
		plain.Path = ""
		o, err := redis.ParseClusterURL(plain.String())
		if err != nil {
			return nil, fmt.Errorf("redis URL %s: %w", redacted(u), err)
		}
		opts.apply(&o.MaxRetries, o.TLSConfig, &o.ClientName, &o.PoolSize, retriesSet)
		o.OnConnect = opts.watch(false)
		o.ContextTimeoutEnabled = true
		c := redis.NewClusterClient(o)
		c.AddHook(reloadOnLostNode{c})
		return c, nil
	case "":
		return nil, fmt.Errorf("redis URL %s has no scheme; start it with %s", redacted(u), schemes)
	default:
		return nil, fmt.Errorf("redis URL %s has scheme %q; use %s", redacted(u), u.Scheme, schemes)
	}
}

// redacted is u as an error may show it: without its password, in the user part or in an option
// (password=, sentinel_password=).
func redacted(u *url.URL) string {
	shown := *u
	if q := u.Query(); len(q) > 0 && redactQuery(q) {
		shown.RawQuery = q.Encode()
	}
	return shown.Redacted()
}

// redactQuery hides the values of the options that name a password; it says whether there were any.
func redactQuery(q url.Values) bool {
	found := false
	for k := range q {
		if strings.Contains(strings.ToLower(k), "password") {
			q[k] = []string{"xxxxx"}
			found = true
		}
	}
	return found
}

// schemes are the URL schemes NewClient takes, as its errors name them.
const schemes = "redis://, rediss://, redis+cluster://, rediss+cluster://, redis+sentinel:// or rediss+sentinel://"

// newFailoverClient builds the client of a Sentinel URL. Its authority lists the Sentinels, which
// net/url does not parse when they are IPv6 literals, so it is read here; the rest goes to go-redis'
// own parser of failover options, rewritten in its terms.
func newFailoverClient(rawURL string, opts ClientOptions) (redis.UniversalClient, error) {
	scheme, rest, _ := strings.Cut(rawURL, "://")
	authority, pathAndQuery := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, pathAndQuery = rest[:i], rest[i:]
	}
	var user *url.Userinfo
	hosts := authority
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		info, err := url.Parse(scheme + "://" + authority[:i] + "@host")
		if err != nil {
			return nil, errors.New("redis URL has a user or password that is not valid in a URL") // never repeat it
		}
		user, hosts = info.User, authority[i+1:]
	}
	redacted := scheme + "://"
	if user != nil {
		redacted += user.Username() + ":xxxxx@"
	}
	redacted += hosts
	tail, err := url.Parse("redis://host" + pathAndQuery)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err // url.Error repeats the whole URL, the Sentinels' password included
		}
		return nil, fmt.Errorf("redis URL %s…: %w", redacted, err)
	}
	if _, err := url.ParseQuery(tail.RawQuery); err != nil {
		return nil, fmt.Errorf("redis URL %s… has options that are not valid in a URL", redacted)
	}
	redacted += tail.EscapedPath()
	if shown := tail.Query(); len(shown) > 0 {
		redactQuery(shown)
		redacted += "?" + shown.Encode()
	}
	if tail.Fragment != "" {
		return nil, fmt.Errorf("redis URL %s has a fragment", redacted)
	}
	master := strings.TrimPrefix(tail.Path, "/")
	if master == "" || strings.Contains(master, "/") {
		return nil, fmt.Errorf("redis URL %s names no master: write the name Sentinel monitors as its path, e.g. %s://sentinel:26379/mymaster", redacted, scheme)
	}
	q := tail.Query()
	for _, name := range []string{"master_name", "username", "password"} {
		if q.Has(name) {
			return nil, fmt.Errorf("redis URL %s: option %s is the URL's own part here (the path, or user:password@)", redacted, name)
		}
	}
	var sentinels []string
	if hosts != "" {
		sentinels = strings.Split(hosts, ",")
	}
	sentinels = append(sentinels, q["addr"]...)
	if len(sentinels) == 0 {
		return nil, fmt.Errorf("redis URL %s names no Sentinel", redacted)
	}
	for _, h := range sentinels {
		host, _, err := net.SplitHostPort(h)
		if err != nil || host == "" {
			return nil, fmt.Errorf("redis URL %s: Sentinel %q is not host:port", redacted, h)
		}
		if err := checkPort(h); err != nil {
			return nil, fmt.Errorf("redis URL %s: %s %w", redacted, h, err)
		}
	}
	// go-redis' failover URL: the Sentinels' credentials as user:password, the servers' as options.
	g := url.Values{}
	for k, v := range q {
		switch k {
		case "addr", "sentinel_username", "sentinel_password":
		default:
			g[k] = v
		}
	}
	g.Set("master_name", master)
	if user != nil {
		g.Set("username", user.Username())
		if p, ok := user.Password(); ok {
			g.Set("password", p)
		}
	}
	for _, h := range sentinels[1:] {
		g.Add("addr", h)
	}
	gu := url.URL{Scheme: strings.TrimSuffix(scheme, "+sentinel"), Host: sentinels[0], RawQuery: g.Encode()}
	if q.Has("sentinel_username") || q.Has("sentinel_password") {
		gu.User = url.UserPassword(q.Get("sentinel_username"), q.Get("sentinel_password"))
	}
	o, err := redis.ParseFailoverURL(gu.String())
	if err != nil {
		return nil, fmt.Errorf("redis URL %s: %w", redacted, err)
	}
	opts.apply(&o.MaxRetries, o.TLSConfig, &o.ClientName, &o.PoolSize, q.Has("max_retries"))
	o.OnConnect = opts.watch(true)
	o.ContextTimeoutEnabled = true
	return redis.NewFailoverClient(o), nil
}

// reloadOnLostNode has a Cluster client read the cluster's slots again when a node did not answer or
// the cluster said a slot is not served. go-redis does so on a MOVED answer, which a dead master never
// sends, and otherwise once a minute: a master that died would take its slots' rooms away for up to a
// minute after its replica took over (test/failover measured 59 s).
type reloadOnLostNode struct{ c *redis.ClusterClient }

func (h reloadOnLostNode) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnLostNode) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.check(ctx, err)
		return err
	}
}

func (h reloadOnLostNode) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.check(ctx, err)
		return err
	}
}

func (h reloadOnLostNode) check(ctx context.Context, err error) {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return
	}
	var redisErr redis.Error
	if errors.As(err, &redisErr) && !strings.HasPrefix(err.Error(), "CLUSTERDOWN") {
		return // the node answered
	}
	// go-redis waits 200 ms between reloads, however often it is asked.
	h.c.ReloadState(context.WithoutCancel(ctx))
}

// watch is the OnConnect of a client with one primary at a time or several (a Cluster's); nil without
// a FailoverWatch.
func (opts ClientOptions) watch(onePrimary bool) func(context.Context, *redis.Conn) error {
	if opts.Failovers == nil {
		return nil
	}
	opts.Failovers.onePrimary = onePrimary
	return opts.Failovers.onConnect
}

// apply sets the options on the fields that go-redis' server and cluster options both have.
func (opts ClientOptions) apply(maxRetries *int, tlsConfig *tls.Config, clientName *string, poolSize *int, retriesSet bool) {
	if !retriesSet {
		*maxRetries = -1
	}
	if tlsConfig != nil {
		tlsConfig.MinVersion = tls.VersionTLS12
		// go-redis names the first host as the server of every connection; each node of a Cluster and
		// each Sentinel and server a Sentinel names is verified as the host it was dialled at.
		tlsConfig.ServerName = ""
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
