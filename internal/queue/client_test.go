package queue

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/herdgate/herdgate/test/testenv"
)

func TestNewClientRejectsBadURLs(t *testing.T) {
	cases := []struct {
		name, url, want string
	}{
		{"empty", "", "redis URL is empty"},
		{"not a URL", "redis://host:port:x%zz", "not a valid URL"},
		{"no scheme", "//localhost:6379", "has no scheme"},
		{"unknown scheme", "http://localhost:6379", `has scheme "http"`},
		{"no host", "redis://", "names no host"},
		{"unknown option", "redis://localhost:6379?pool_sise=3", "unexpected option: pool_sise"},
		{"bad option value", "redis://localhost:6379?dial_timeout=soon", "invalid dial_timeout duration"},
		{"bad database", "redis://localhost:6379/abc", "invalid database number"},
		{"a port above 65535", "redis://r:99999", `has port "99999", not one of 1 … 65535`},
		{"port 0", "rediss://r:0", `has port "0"`},
		{"a port with a leading zero", "redis://r:06379", `has port "06379"`},
		{"a cluster node on an impossible port", "redis+cluster://a:7000?addr=b:70000", `b:70000 has port "70000"`},
		{"database on a cluster", "redis+cluster://localhost:6379/2", "a Redis Cluster has no database number"},
		{"unknown cluster option", "redis+cluster://localhost:6379?nodes=a", "unexpected option: nodes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewClient(tc.url, ClientOptions{})
			if err == nil {
				_ = c.Close()
				t.Fatalf("NewClient(%q) accepted a bad URL", tc.url)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewClient(%q) error = %q, want it to say %q", tc.url, err, tc.want)
			}
		})
	}
}

func TestNewClientNeverPrintsThePassword(t *testing.T) {
	for _, u := range []string{
		"redis://user:s3cret-pw@localhost:6379?bogus=1",
		"ftp://user:s3cret-pw@localhost:6379",
		"redis://user:s3cret-pw@localhost:6379/x",
		"redis://user:s3cret-pw@local host:6379",
	} {
		_, err := NewClient(u, ClientOptions{})
		if err == nil {
			t.Fatalf("NewClient(%q) accepted a bad URL", u)
		}
		if strings.Contains(err.Error(), "s3cret-pw") {
			t.Fatalf("error for %q repeats the password: %v", u, err)
		}
	}
}

func TestNewClientKinds(t *testing.T) {
	cases := []struct {
		url         string
		wantCluster bool
	}{
		{"redis://localhost:6379", false},
		{"rediss://localhost:6379/3?dial_timeout=2s", false},
		{"redis+cluster://a:7000?addr=b:7001&addr=c:7002", true},
		{"rediss+cluster://a:7000", true},
	}
	for _, tc := range cases {
		c, err := NewClient(tc.url, ClientOptions{})
		if err != nil {
			t.Fatalf("NewClient(%q): %v", tc.url, err)
		}
		_, isCluster := c.(*redis.ClusterClient)
		if isCluster != tc.wantCluster {
			t.Errorf("NewClient(%q) built a cluster client: %v, want %v", tc.url, isCluster, tc.wantCluster)
		}
		_ = c.Close()
	}
}

func TestClientsReachEveryKindOfServer(t *testing.T) {
	ctx := context.Background()
	plain := testenv.StartRedis(t)
	tls := testenv.StartRedis(t, testenv.WithTLS())
	cluster := testenv.StartRedisCluster(t, 3)

	for name, tc := range map[string]struct {
		url  string
		opts ClientOptions
	}{
		"standalone": {plain.URL(), ClientOptions{}},
		"tls":        {tls.URL(), ClientOptions{RootCAs: tls.TLS.RootCAs}},
		"cluster":    {cluster.URL(), ClientOptions{}},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := NewClient(tc.url, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Ping(ctx).Err(); err != nil {
				t.Fatalf("PING over %s: %v", tc.url, err)
			}
		})
	}

	t.Run("tls without the CA is refused", func(t *testing.T) {
		c, err := NewClient(tls.URL(), ClientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("PING over TLS with an unknown CA: %v, want a certificate error", err)
		}
	})
}
