package queue

import (
	"context"
	"strings"
	"testing"
	"time"

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
		{"a Sentinel URL without a master", "redis+sentinel://s1:26379,s2:26379", "names no master"},
		{"a Sentinel URL with an empty master", "redis+sentinel://s1:26379/", "names no master"},
		{"a Sentinel URL with a path for a master", "redis+sentinel://s1:26379/a/b", "names no master"},
		{"a Sentinel URL without a Sentinel", "redis+sentinel:///mymaster", "names no Sentinel"},
		{"a Sentinel without a port", "redis+sentinel://s1:26379,s2/mymaster", `Sentinel "s2" is not host:port`},
		{"a Sentinel on an impossible port", "rediss+sentinel://s1:26379,s2:65536/mymaster", `s2:65536 has port "65536"`},
		{"an empty Sentinel in the list", "redis+sentinel://s1:26379,,s2:26379/mymaster", `Sentinel "" is not host:port`},
		{"a Sentinel added by addr without a port", "redis+sentinel://s1:26379/mymaster?addr=s2", `Sentinel "s2" is not host:port`},
		{"the master as an option", "redis+sentinel://s1:26379/mymaster?master_name=other", "option master_name is the URL's own part"},
		{"a password as an option", "redis+sentinel://s1:26379/mymaster?password=x", "option password is the URL's own part"},
		{"an unknown Sentinel option", "redis+sentinel://s1:26379/mymaster?sentinels=3", "unexpected option: sentinels"},
		{"a bad Sentinel database", "redis+sentinel://s1:26379/mymaster?db=two", "invalid database number"},
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
		"redis+sentinel://user:s3cret-pw@s1:26379/mymaster?bogus=1",
		"redis+sentinel://user:s3cret-pw@s1:26379",
		"rediss+sentinel://user:s3cret-pw@s1:99999/m",
		"redis+sentinel://s1:26379/m?sentinel_password=s3cret-pw&bogus=1",
		"redis+sentinel://us%zzer:s3cret-pw@s1:26379/m",
		"redis+sentinel://s1:26379/m?sentinel_password=s3cret-pw%zz",
		"redis+sentinel://s1:26379/m?password=s3cret-pw",
		"redis://localhost:6379?password=s3cret-pw",
		"redis://localhost:99999?Password=s3cret-pw",
		"redis+cluster://localhost:7000/3?password=s3cret-pw",
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
		{"redis+sentinel://s1:26379,s2:26379/mymaster?db=2&sentinel_password=pw", false},
		{"rediss+sentinel://user:pw@[::1]:26379,[::1]:26380/mymaster?addr=s3:26379&dial_timeout=2s", false},
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

	t.Run("sentinel", func(t *testing.T) {
		group := testenv.StartRedisSentinelGroup(t, 1, 3, 0)
		watch := NewFailoverWatch()
		c, err := NewClient(group.URL(), ClientOptions{Failovers: watch})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Set(ctx, "written-before", "1", 0).Err(); err != nil {
			t.Fatalf("SET through %s: %v", group.URL(), err)
		}
		// Replicated before the primary goes: WAIT for the replica's acknowledgement.
		if n, err := c.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
			t.Fatalf("WAIT 1: %d replicas, %v", n, err)
		}
		old, err := group.Primary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		old.Stop()
		// The client finds the promoted replica on its own, through the Sentinels.
		var got string
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if got, err = c.Get(ctx, "written-before").Result(); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no answer within 30 s of the primary's death: %v", err)
			}
		}
		// The Sentinels learn of the promotion one after the other: wait until they name another.
		var now *testenv.Redis
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if now, err = group.Primary(ctx); err == nil && now != old {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the Sentinels still name %s as the primary 30 s after it died (%v)", old.Addr(), err)
			}
		}
		if got != "1" {
			t.Fatalf("the promoted replica has %q for a key written before, want 1", got)
		}
		if err := c.Set(ctx, "written-after", "1", 0).Err(); err != nil {
			t.Fatalf("SET after the failover: %v", err)
		}
		if got := watch.Last(); got.Epoch != 1 || !got.Promoted {
			t.Fatalf("the client's failover watch says %+v, want failover 1, a promotion", got)
		}
	})

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
