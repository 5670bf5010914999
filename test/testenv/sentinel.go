package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name the Sentinels of a RedisSentinelGroup monitor.
const SentinelMaster = "herdgate"

// RedisSentinelGroup is a primary, its replicas and the Sentinels that watch them, every process on
// loopback, as a test started them.
type RedisSentinelGroup struct {
	// Servers are the primary (first, at the start) and its replicas.
	Servers   []*Redis
	Sentinels []*Sentinel
}

// Sentinel is a redis-sentinel process.
type Sentinel struct {
	Port int
	Dir  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Addr is the Sentinel's host:port.
func (s *Sentinel) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// Stop kills the Sentinel and waits for it to exit. Stopping twice is fine.
func (s *Sentinel) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// StartRedisSentinelGroup starts a primary with replicas replicas and sentinels Sentinels (a quorum
// of a majority) that declare the primary down after a second, and waits until every replica
// replicates and every Sentinel knows the others and the replicas. Everything stops when the test ends.
//
// With lag > 0 the replicas first replicate through a link that holds the primary's stream back that
// long, as a slow network would: what the primary wrote within lag of dying never reaches them. Once
// Sentinel has failed over, replicas replicate from the new primary directly.
func StartRedisSentinelGroup(tb TB, replicas, sentinels int, lag time.Duration) *RedisSentinelGroup {
	tb.Helper()
	g := &RedisSentinelGroup{}
	tb.Cleanup(g.Stop)
	primary, err := NewRedis(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	g.Servers = append(g.Servers, primary)
	upstream := primary.Addr()
	if lag > 0 {
		link, err := startLaggingLink(primary.Addr(), lag)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(link.close)
		upstream = link.addr()
	}
	host, port, _ := net.SplitHostPort(upstream)
	for range replicas {
		r, err := NewRedis(tb.TempDir(), WithArgs("--replicaof", host, port))
		if err != nil {
			tb.Fatal(err)
		}
		g.Servers = append(g.Servers, r)
	}
	bin, err := exec.LookPath("redis-sentinel")
	if err != nil {
		tb.Fatal("redis-sentinel not found on PATH; run 'make toolchain' (Debian package redis-sentinel)")
	}
	for range sentinels {
		s, err := startSentinel(bin, tb.TempDir(), primary.Port, sentinels/2+1)
		if err != nil {
			tb.Fatal(err)
		}
		g.Sentinels = append(g.Sentinels, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.waitSettled(ctx, primary.Addr(), replicas, sentinels); err != nil {
		tb.Fatal(err)
	}
	return g
}

// sentinelDownAfter is how long the test's Sentinels wait before they judge a silent primary down.
// A second was too short on a busy two-core run: a freshly promoted primary that stalled for a
// second (its first fork, a loaded machine) was voted down too, and the group failed over twice.
const sentinelDownAfter = 2 * time.Second

func startSentinel(bin, dir string, primaryPort, quorum int) (*Sentinel, error) {
	var lastErr error
	for range 5 {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		conf := fmt.Sprintf(`port %d
bind 127.0.0.1
protected-mode no
dir %s
logfile %s
sentinel monitor %s 127.0.0.1 %d %d
sentinel down-after-milliseconds %[4]s %[7]d
sentinel failover-timeout %[4]s 10000
sentinel parallel-syncs %[4]s 1
`, port, dir, filepath.Join(dir, "redis.log"), SentinelMaster, primaryPort, quorum, sentinelDownAfter.Milliseconds()) // redis.log: Redis.logTail reads it
		path := filepath.Join(dir, "sentinel.conf") // Sentinel rewrites its config as it learns
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, path)
		cmd.Dir = dir
		dieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting redis-sentinel: %w", err)
		}
		s := &Sentinel{Port: port, Dir: dir, cmd: cmd, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(s.done) }()
		r := &Redis{Port: port, Dir: dir}
		for deadline := time.Now().Add(startTimeout); ; time.Sleep(20 * time.Millisecond) {
			if lastErr = r.ping(); lastErr == nil {
				return s, nil
			}
			exited := false
			select {
			case <-s.done:
				exited = true
			default:
			}
			if exited {
				lastErr = fmt.Errorf("redis-sentinel on port %d exited at start:\n%s", port, r.logTail())
				break
			}
			if time.Now().After(deadline) {
				break
			}
		}
		s.Stop()
	}
	return nil, lastErr
}

// waitSettled waits until the primary has its replicas online and every Sentinel sees the
// replicas and the other Sentinels: before that, a failover could not be carried out.
func (g *RedisSentinelGroup) waitSettled(ctx context.Context, primary string, replicas, sentinels int) error {
	rdb := redis.NewClient(&redis.Options{Addr: primary})
	defer rdb.Close()
	for {
		settled := func() bool {
			info, err := rdb.Info(ctx, "replication").Result()
			if err != nil || strings.Count(info, "state=online") != replicas {
				return false
			}
			for _, s := range g.Sentinels {
				sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
				master, err := sc.Master(ctx, SentinelMaster).Result()
				_ = sc.Close()
				if err != nil || master["num-slaves"] != strconv.Itoa(replicas) || master["num-other-sentinels"] != strconv.Itoa(sentinels-1) {
					return false
				}
			}
			return true
		}()
		if settled {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("the Sentinel group did not settle within 30 s (replicas online, Sentinels known to each other)")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// URL is the redis+sentinel:// URL naming every Sentinel.
func (g *RedisSentinelGroup) URL() string {
	addrs := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		addrs[i] = s.Addr()
	}
	return "redis+sentinel://" + strings.Join(addrs, ",") + "/" + SentinelMaster
}

// Primary asks the first Sentinel that answers which server is the primary now.
func (g *RedisSentinelGroup) Primary(ctx context.Context) (*Redis, error) {
	for _, s := range g.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
		addr, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
		_ = sc.Close()
		if err != nil || len(addr) != 2 {
			continue
		}
		for _, r := range g.Servers {
			if strconv.Itoa(r.Port) == addr[1] {
				return r, nil
			}
		}
	}
	return nil, errors.New("no Sentinel named a primary of the group")
}

// Stop stops every Sentinel and server.
func (g *RedisSentinelGroup) Stop() {
	for _, s := range g.Sentinels {
		s.Stop()
	}
	for _, r := range g.Servers {
		r.Stop()
	}
}

// laggingLink forwards TCP connections to a server, holding what the server sends back for a while;
// when the server's side ends, what it still holds is dropped, as it would be in a network.
type laggingLink struct {
	ln     net.Listener
	target string
	lag    time.Duration
	wg     sync.WaitGroup
}

func startLaggingLink(target string, lag time.Duration) (*laggingLink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &laggingLink{ln: ln, target: target, lag: lag}
	l.wg.Go(l.accept)
	return l, nil
}

func (l *laggingLink) addr() string { return l.ln.Addr().String() }

func (l *laggingLink) close() {
	_ = l.ln.Close()
	l.wg.Wait()
}

func (l *laggingLink) accept() {
	for {
		down, err := l.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", l.target)
		if err != nil {
			_ = down.Close()
			continue
		}
		l.wg.Go(func() { _, _ = io.Copy(up, down); _ = up.Close() })
		l.wg.Go(func() { l.delay(up, down) })
	}
}

// delay copies from to to, each chunk lag after it was read; it stops, dropping what it holds, when
// from ends.
func (l *laggingLink) delay(from, to net.Conn) {
	type chunk struct {
		at   time.Time
		data []byte
	}
	chunks := make(chan chunk, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range chunks {
			if c.data == nil {
				return // the server's side ended: drop the rest
			}
			time.Sleep(time.Until(c.at.Add(l.lag)))
			if _, err := to.Write(c.data); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			select {
			case chunks <- chunk{time.Now(), append([]byte(nil), buf[:n]...)}:
			case <-done: // the replica's side ended
				err = io.EOF
			}
		}
		if err != nil {
			break
		}
	}
	_ = to.Close()
	_ = from.Close()
	select {
	case chunks <- chunk{}:
	case <-done:
	}
	<-done
}
