package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCluster is a Redis Cluster of masters started by a test, every node on loopback.
type RedisCluster struct {
	Nodes []*Redis
}

// Addrs are the host:port of every node.
func (c *RedisCluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// URL is a redis+cluster:// URL naming every node.
func (c *RedisCluster) URL() string {
	u := "redis+cluster://" + c.Nodes[0].Addr()
	for i, n := range c.Nodes[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + n.Addr()
	}
	return u
}

// StartRedisCluster starts masters redis-server processes with cluster mode on, joins them with
// redis-cli --cluster create, waits until the cluster is ok and stops every node when the test ends.
func StartRedisCluster(tb TB, masters int) *RedisCluster {
	tb.Helper()
	return startRedisCluster(tb, masters, 0, 5*time.Second)
}

// StartRedisClusterWithReplicas starts a Redis Cluster of masters masters with one replica each,
// whose nodes count one another as failed after nodeTimeout: a replica takes over its master's slots
// about that long after the master died.
func StartRedisClusterWithReplicas(tb TB, masters int, nodeTimeout time.Duration) *RedisCluster {
	tb.Helper()
	return startRedisCluster(tb, masters, 1, nodeTimeout)
}

func startRedisCluster(tb TB, masters, replicas int, nodeTimeout time.Duration) *RedisCluster {
	c := &RedisCluster{}
	for i := range masters * (1 + replicas) {
		dir := filepath.Join(tb.TempDir(), fmt.Sprintf("node%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		n, err := NewRedis(dir, WithArgs("--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", strconv.Itoa(int(nodeTimeout.Milliseconds()))))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(n.Stop)
		c.Nodes = append(c.Nodes, n)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		tb.Fatal("redis-cli not found on PATH; run 'make toolchain' (Debian package redis-tools)")
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	// Every node must agree that all slots are served, and every replica replicate, before a client
	// can rely on the cluster.
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.Nodes {
		for {
			out, err := exec.CommandContext(ctx, cli, "-p", strconv.Itoa(n.Port), "cluster", "info").CombinedOutput()
			repl, _ := exec.CommandContext(ctx, cli, "-p", strconv.Itoa(n.Port), "info", "replication").CombinedOutput()
			if err == nil && strings.Contains(string(out), "cluster_state:ok") &&
				(!strings.Contains(string(repl), "role:slave") || strings.Contains(string(repl), "master_link_status:up")) {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("cluster node %s not ok after 30s: %s", n.Addr(), out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return c
}

// MasterOf asks the nodes which one serves the slot of key now.
func (c *RedisCluster) MasterOf(ctx context.Context, key string) (*Redis, error) {
	for _, n := range c.Nodes {
		if n.PID() == 0 {
			continue // stopped
		}
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr()})
		slot, err := rdb.ClusterKeySlot(ctx, key).Result()
		var shards []redis.ClusterShard
		if err == nil {
			shards, err = rdb.ClusterShards(ctx).Result()
		}
		_ = rdb.Close()
		if err != nil {
			continue
		}
		for _, s := range shards {
			for _, r := range s.Slots {
				if r.Start > slot || slot > r.End {
					continue
				}
				for _, node := range s.Nodes {
					if node.Role != "master" || node.Health != "online" {
						continue
					}
					for _, m := range c.Nodes {
						if int64(m.Port) == node.Port {
							return m, nil
						}
					}
				}
			}
		}
	}
	return nil, fmt.Errorf("no node says which master serves the slot of %s", key)
}
