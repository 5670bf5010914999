package node

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdgate/herdgate/internal/kubectl"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/testenv"
)

// The drills' queue: 10 connections × 50 % ÷ 200 ms = 25 admissions per second, 10 per 400 ms tick.
// A new leader makes up at most ten missed ticks, 4 s at this tick: more than a takeover takes (the
// lease is retried every 2 s), so that the leader drill can hold the count to rate × time.
const (
	drillNamespace = "drills"
	drillQueue     = "drills"
	drillRate      = 25.0
	drillBatch     = 10
	drillTick      = 400 * time.Millisecond
	// leaseDuration is controller-runtime's default, which the manager keeps.
	leaseDuration = 15 * time.Second
	orderPath     = "/api/v1/orders"
)

var drillQueueYAML = fmt.Sprintf(`apiVersion: herdgate.io/v1alpha1
kind: WaitingQueue
metadata: {name: %s, namespace: %s}
spec:
  capacity: {poolSize: 10, requestLatency: 200ms, utilizationPercent: 50}
  tick: 400ms
  upstream: {service: {name: orders, port: 8080}}
  proxy: {replicas: 2}
  protectedRoutes:
    - {methods: [POST], path: %s}
`, drillQueue, drillNamespace, orderPath)

const (
	proxySelector   = "app.kubernetes.io/name=herdgate-proxy,app.kubernetes.io/instance=" + drillQueue
	managerSelector = "app.kubernetes.io/name=herdgate,app.kubernetes.io/component=manager"
	redisSelector   = "app.kubernetes.io/component=redis"
)

// rig is what every drill uses: the cluster, the proxy's Service and the engine's counters.
type rig struct {
	c      *Cluster
	target string
	q      *queue.Queue
}

func setUp(t *testing.T) *rig {
	t.Helper()
	if !Inside() {
		t.Skip("the node suite runs inside the node: test/node/run.sh (make test runs it where the node can run)")
	}
	ctx := context.Background()
	c, err := Connect()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := c.InstallChart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl(ctx, "create", "namespace", drillNamespace); err != nil && !strings.Contains(err.Error(), "AlreadyExists") {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, OrdersService(drillNamespace)); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, drillQueueYAML); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitPodsReady(ctx, drillNamespace, proxySelector, 2, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitPodsReady(ctx, drillNamespace, "app=orders", 1, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitQueueReady(ctx, drillNamespace, drillQueue, time.Minute); err != nil {
		t.Fatal(err)
	}
	ip, err := c.ServiceIP(ctx, drillNamespace, drillQueue+"-herdgate")
	if err != nil {
		t.Fatal(err)
	}
	ordersIP, err := c.ServiceIP(ctx, drillNamespace, "orders")
	if err != nil {
		t.Fatal(err)
	}
	// Ready pods are not yet reachable Services: kube-proxy programs a Service's endpoints at its next
	// sync, and until then connections to it are refused. A drill's first orders would fail on that.
	for _, u := range []string{"http://" + ordersIP + ":8080/", "http://" + ip + "/.herdgate/healthz"} {
		if err := WaitAnswers(ctx, u, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	redisIP, err := c.ServiceIP(ctx, Namespace, Release+"-redis")
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := queue.NewClient("redis://"+redisIP+":6379", queue.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	store := queue.NewStore(rdb, queue.StoreOptions{})
	t.Cleanup(store.Close)
	q, err := store.Queue(drillNamespace, drillQueue)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("chart, orders service and queue ready in %s; proxy Service http://%s", time.Since(began).Round(time.Second), ip)
	return &rig{c: c, target: "http://" + ip, q: q}
}

// sample is one reading of the engine's counters.
type sample struct {
	at              time.Time // Redis' clock
	admitted, depth int64
}

// sampler reads the engine's counters every 100 ms while a drill runs.
type sampler struct {
	mu      sync.Mutex
	samples []sample
	stop    chan struct{}
	done    chan struct{}
}

func (r *rig) sample(ctx context.Context) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			callCtx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := r.q.Stats(callCtx)
			cancel()
			if err == nil {
				s.mu.Lock()
				s.samples = append(s.samples, sample{at: st.Now, admitted: st.AdmittedTotal, depth: st.Depth})
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) finish() []sample {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// drill is one fault under a steady herd.
type drill struct {
	name string
	// perSecond visitors arrive; the default stays below the plan, so the queue stays short.
	perSecond int
	// fault happens after the herd has run for a while; it returns once the fault is over.
	fault func(ctx context.Context, t *testing.T, r *rig) error
	// redisRestarts: the engine's counters start again at zero, and places held are gone.
	redisRestarts bool
}

type drillResult struct {
	name   string
	counts Counts
	extra  string
}

var (
	resultsMu sync.Mutex
	results   []drillResult
)

func (r *rig) run(t *testing.T, d drill) (Counts, []sample) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before, err := r.q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := r.sample(ctx)
	h := &Herd{Target: r.target, OrderPath: orderPath, PerSecond: max(d.perSecond, 15), Orders: 2, OrderGap: 150 * time.Millisecond}
	h.Start(ctx)
	time.Sleep(4 * time.Second)
	faultAt := time.Now()
	if err := d.fault(ctx, t, r); err != nil {
		h.Stop()
		t.Fatalf("%s: %v", d.name, err)
	}
	t.Logf("%s: the fault took %s", d.name, time.Since(faultAt).Round(100*time.Millisecond))
	time.Sleep(6 * time.Second)
	h.Stop()
	if ctx.Err() != nil {
		t.Errorf("%s: the herd did not get through in time", d.name)
	}
	samples := s.finish()
	after, err := r.q.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	engine, since := after.AdmittedTotal-before.AdmittedTotal, time.Time{}
	if d.redisRestarts {
		// The new Redis counts from zero; only the visitors admitted once the old one was gone count.
		engine, since = after.AdmittedTotal, faultAt
	}
	counts := h.Counts(engine, since)
	t.Logf("%s: %s", d.name, counts)
	for _, f := range counts.Failures {
		t.Logf("%s: e.g. %s", d.name, f)
	}
	if counts.Entered == 0 {
		t.Fatalf("%s: no visitor entered", d.name)
	}
	if counts.Lost != 0 {
		t.Errorf("%s: %d visitors entered and were never admitted", d.name, counts.Lost)
	}
	if counts.AdmittedTwice != 0 {
		t.Errorf("%s: %d admissions beyond the visitors admitted", d.name, counts.AdmittedTwice)
	}
	if counts.OrdersFailed != 0 {
		t.Errorf("%s: %d protected requests with a valid pass failed", d.name, counts.OrdersFailed)
	}
	if counts.UnavailableNoRetryAfter != 0 {
		t.Errorf("%s: %d answers 503 without Retry-After", d.name, counts.UnavailableNoRetryAfter)
	}
	if !d.redisRestarts && counts.PlacesLost != 0 {
		t.Errorf("%s: the queue forgot %d places", d.name, counts.PlacesLost)
	}
	return counts, samples
}

func record(name string, c Counts, extra string) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	results = append(results, drillResult{name, c, extra})
}

func TestDrillsOnTheNode(t *testing.T) {
	r := setUp(t)
	ctx := context.Background()
	t.Cleanup(func() { printResults(t) })
	herdgatePods := func(t *testing.T) map[string]int32 {
		t.Helper()
		out := map[string]int32{}
		for _, sel := range []struct{ ns, selector string }{{Namespace, managerSelector}, {drillNamespace, proxySelector}} {
			pods, err := r.c.Pods(ctx, sel.ns, sel.selector)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods {
				out[p.UID] = p.Restarts
			}
		}
		return out
	}
	settle := func(t *testing.T) {
		t.Helper()
		if _, err := r.c.WaitPodsReady(ctx, drillNamespace, proxySelector, 2, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := r.c.WaitPodsReady(ctx, Namespace, managerSelector, 2, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
	}

	// survivedRedis fails t unless visitors were told 503 while Redis was how, a pass held across it
	// worked every time, and no herdgate pod was replaced or restarted since pods.
	survivedRedis := func(t *testing.T, how string, c Counts, during passUse, pods map[string]int32) {
		t.Helper()
		if c.Unavailable == 0 {
			t.Errorf("no visitor was told 503 while Redis was %s", how)
		}
		if during.ok == 0 || during.failed != 0 {
			t.Errorf("a pass used while Redis was %s: %d ok, %d failed (%s)", how, during.ok, during.failed, during.lastErr)
		}
		for uid, restarts := range herdgatePods(t) {
			if was, ok := pods[uid]; !ok || was != restarts {
				t.Errorf("a herdgate pod was replaced or restarted (uid %s)", uid)
			}
		}
	}

	t.Run("a proxy pod deleted", func(t *testing.T) {
		c, _ := r.run(t, drill{name: "proxy pod deleted", fault: func(ctx context.Context, t *testing.T, r *rig) error {
			pods, err := r.c.Pods(ctx, drillNamespace, proxySelector)
			if err != nil || len(pods) != 2 {
				return fmt.Errorf("want two proxy pods, have %v (%w)", pods, err)
			}
			_, err = r.c.Kubectl(ctx, "delete", "pod", "-n", drillNamespace, pods[0].Name, "--wait=false")
			return err
		}})
		record("proxy pod deleted (2 replicas)", c, "")
		settle(t)
	})

	t.Run("kubectl herdgate bundle reads the pods' logs and metrics", func(t *testing.T) {
		// The Secret's Redis URL names the Service by its cluster DNS name, which this process does not
		// resolve: like a user outside the cluster, it gives the address it reaches.
		redisIP, err := r.c.ServiceIP(ctx, Namespace, Release+"-redis")
		if err != nil {
			t.Fatal(err)
		}
		archive := filepath.Join(t.TempDir(), "bundle.tar.gz")
		var stdout, stderr bytes.Buffer
		code := kubectl.Run(ctx, []string{"-n", drillNamespace, "bundle", drillQueue, "-o", archive, "--manager-namespace", Namespace,
			"--redis-url", "redis://" + redisIP + ":6379"}, &stdout, &stderr)
		if code != 0 {
			t.Fatalf("bundle: exit %d, %s%s", code, stdout.String(), stderr.String())
		}
		files, err := testenv.ReadArchive(archive)
		if err != nil {
			t.Fatal(err)
		}
		got := func(suffix string) []string {
			var out []string
			for path, data := range files {
				if strings.Contains(path, suffix) {
					out = append(out, data)
				}
			}
			return out
		}
		t.Logf("bundle: %s; errors.txt:\n%s", strings.TrimSpace(stdout.String()), strings.Join(got("/errors.txt"), ""))
		for _, c := range []struct {
			part, want string
			count      int
		}{
			{"/proxy/logs/", "", 2},
			{"/manager/logs/", "", 2},
			{"/proxy/metrics/", `waitingqueue="` + drillNamespace + "/" + drillQueue + `"`, 2},
			// Only the leader's scheduler has series of the room.
			{"/manager/metrics/", "controller_runtime_", 2},
			{"/redis.txt", "Admitted:", 1},
		} {
			parts := got(c.part)
			if len(parts) != c.count {
				t.Errorf("%d files under %s, want %d", len(parts), c.part, c.count)
			}
			for _, data := range parts {
				if !strings.Contains(data, c.want) || strings.TrimSpace(data) == "" {
					t.Errorf("a file under %s is empty or lacks %q", c.part, c.want)
				}
			}
		}
		var leaderSeries bool
		for _, data := range got("/manager/metrics/") {
			leaderSeries = leaderSeries || strings.Contains(data, "herdgate_queue_depth{")
		}
		if !leaderSeries {
			t.Error("no manager's metrics hold the room's herdgate_queue_depth")
		}
	})

	t.Run("kubectl herdgate, from the node shell's PATH, tells what a herd just did", func(t *testing.T) {
		// hack/node.sh exec puts bin/ on the PATH: kubectl finds the plugin there, as the demo's lines
		// and the docs write it.
		if _, err := exec.LookPath("kubectl-herdgate"); err != nil {
			t.Fatalf("the plugin is not on the node shell's PATH (%s): %v", os.Getenv("PATH"), err)
		}
		kubectlPath, err := exec.LookPath("kubectl")
		if err != nil {
			t.Fatal(err)
		}
		// A herd of 200 at once: the plan (10 a 400 ms tick, 25 a second) admits it over 8 s. The
		// rates over 10 s never show it whole; the last busy spell must, once it is over.
		began := time.Now()
		for i := range 200 {
			if _, err := r.q.Enter(ctx, fmt.Sprintf("spell-%03d", i), time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		spell, err := r.c.WaitSpellOver(ctx, drillNamespace, drillQueue, began, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if spell.Admitted < 180 {
			t.Fatalf("the herd's spell %+v; want 180 admitted or more by the ticks (a few may be admitted at once)", spell)
		}
		rate, err := strconv.ParseFloat(spell.AdmittedPerSecond, 64)
		if err != nil || rate < 22 || rate > 25.5 {
			t.Errorf("the herd's spell: %+v; want about the plan, 25 a second", spell)
		}
		out, err := exec.CommandContext(ctx, kubectlPath, "herdgate", "status", drillQueue, "-n", drillNamespace).CombinedOutput()
		if want := fmt.Sprintf("%d admitted at %s a second", spell.Admitted, spell.AdmittedPerSecond); err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("kubectl herdgate status %s: %v; want %q in\n%s", drillQueue, err, want, out)
		}
		t.Logf("kubectl herdgate status %s:\n%s", drillQueue, out)
	})

	t.Run("a rolling update of the proxy", func(t *testing.T) {
		var replaced int
		c, _ := r.run(t, drill{name: "proxy rollout", fault: func(ctx context.Context, t *testing.T, r *rig) error {
			old, err := r.c.Pods(ctx, drillNamespace, proxySelector)
			if err != nil {
				return err
			}
			// A change of the pod template: every proxy pod is replaced.
			if _, err := r.c.Kubectl(ctx, "patch", "waitingqueue", "-n", drillNamespace, drillQueue, "--type=merge",
				"-p", `{"spec":{"proxy":{"resources":{"requests":{"cpu":"110m","memory":"64Mi"},"limits":{"memory":"256Mi"}}}}}`); err != nil {
				return err
			}
			// Right after the patch the old pods are still the two ready ones: wait for two ready pods
			// none of which is old, however long the manager and the Deployment take to get there.
			deadline := time.Now().Add(2 * time.Minute)
			for {
				pods, err := r.c.WaitPodsReady(ctx, drillNamespace, proxySelector, 2, time.Until(deadline))
				if err != nil {
					return err
				}
				var kept []string
				for _, p := range pods {
					for _, o := range old {
						if p.UID == o.UID {
							kept = append(kept, p.Name)
						}
					}
				}
				if len(kept) == 0 {
					replaced = len(old)
					return nil
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("pods %v were not replaced", kept)
				}
				time.Sleep(250 * time.Millisecond)
			}
		}})
		if replaced != 2 {
			t.Errorf("the rollout replaced %d pods, want 2", replaced)
		}
		record("proxy rolling update", c, fmt.Sprintf("%d pods replaced", replaced))
		settle(t)
	})

	t.Run("the leader manager pod deleted", func(t *testing.T) {
		var takeover time.Duration
		var leader, successor string
		c, samples := r.run(t, drill{name: "leader deleted", perSecond: int(drillRate) + 10, fault: func(ctx context.Context, t *testing.T, r *rig) error {
			var err error
			if leader, err = r.c.LeaseHolder(ctx); err != nil || leader == "" {
				return fmt.Errorf("reading the lease: %q (%w)", leader, err)
			}
			began := time.Now()
			if _, err := r.c.Kubectl(ctx, "delete", "pod", "-n", Namespace, leader, "--wait=false"); err != nil {
				return err
			}
			for time.Since(began) < 2*leaseDuration {
				if successor, err = r.c.LeaseHolder(ctx); err == nil && successor != "" && successor != leader {
					takeover = time.Since(began)
					return nil
				}
				time.Sleep(100 * time.Millisecond)
			}
			return fmt.Errorf("no other manager took the lease of %s in %s", leader, 2*leaseDuration)
		}})
		if takeover > leaseDuration {
			t.Errorf("the other manager took over after %s, more than the lease (%s)", takeover, leaseDuration)
		}
		admitted, window, stalled := saturatedWindow(samples)
		if window < 5*time.Second {
			t.Fatalf("the queue was saturated for only %s; the drill needs more arrivals", window)
		}
		planned := drillRate * window.Seconds()
		extra := fmt.Sprintf("%s → %s in %s; while saturated %s: admitted %d, rate × time %.0f (longest pause of admissions %s)",
			leader, successor, takeover.Round(100*time.Millisecond), window.Round(100*time.Millisecond), admitted, planned,
			stalled.Round(100*time.Millisecond))
		t.Log("leader deleted: " + extra)
		// The new leader carries on from the last tick in Redis and makes up the grid points nobody
		// ran: the count is the plan's within one batch, and never more.
		if float64(admitted) > planned+drillBatch {
			t.Errorf("admitted %d, more than rate × time %.0f and one batch", admitted, planned)
		}
		if float64(admitted) < planned-drillBatch {
			t.Errorf("admitted %d, fewer than rate × time %.0f less one batch", admitted, planned)
		}
		record("leader manager deleted (2 replicas)", c, extra)
		settle(t)
	})

	t.Run("the evaluation Redis restarted", func(t *testing.T) {
		pods := herdgatePods(t)
		holder := r.holdAPass(t)
		var during passUse
		c, _ := r.run(t, drill{name: "Redis restarted", redisRestarts: true, fault: func(ctx context.Context, t *testing.T, r *rig) error {
			old, err := r.c.Pods(ctx, Namespace, redisSelector)
			if err != nil || len(old) != 1 {
				return fmt.Errorf("want one Redis pod, have %v (%w)", old, err)
			}
			stopUsing := holder.useWhile(ctx, r, &during)
			defer stopUsing()
			// Stopped for a few seconds, then started again: a restart the herd cannot miss.
			deploy := "deployment/" + Release + "-redis"
			if _, err := r.c.Kubectl(ctx, "scale", "-n", Namespace, deploy, "--replicas=0"); err != nil {
				return err
			}
			if _, err := r.c.Kubectl(ctx, "wait", "-n", Namespace, "pod/"+old[0].Name, "--for=delete", "--timeout=60s"); err != nil {
				return err
			}
			time.Sleep(3 * time.Second)
			if _, err := r.c.Kubectl(ctx, "scale", "-n", Namespace, deploy, "--replicas=1"); err != nil {
				return err
			}
			_, err = r.c.WaitPodsReady(ctx, Namespace, redisSelector, 1, 2*time.Minute)
			return err
		}})
		survivedRedis(t, "away", c, during, pods)
		record("evaluation Redis restarted", c, fmt.Sprintf("a pass held across it: %d ok / %d failed; no herdgate pod restarted", during.ok, during.failed))
	})

	t.Run("the evaluation Redis paused", func(t *testing.T) {
		pods := herdgatePods(t)
		holder := r.holdAPass(t)
		var during passUse
		c, _ := r.run(t, drill{name: "Redis paused", fault: func(ctx context.Context, t *testing.T, r *rig) error {
			pid, err := r.redisPID(ctx)
			if err != nil {
				return err
			}
			stopUsing := holder.useWhile(ctx, r, &during)
			defer stopUsing()
			// Stopped, not ended: its connections stay open and nothing answers, as a Redis stuck in a
			// long command or behind a network that drops its packets looks. It goes on whatever happens.
			resume, err := testenv.PauseProcess(pid)
			if err != nil {
				return err
			}
			defer resume()
			time.Sleep(redisPause)
			return nil
		}})
		survivedRedis(t, "paused", c, during, pods)
		record(fmt.Sprintf("evaluation Redis paused %s", redisPause), c, fmt.Sprintf("enter and status calls held a second or more: %d of %d; a pass held across it: %d ok / %d failed; no herdgate pod restarted",
			c.Held, c.Calls, during.ok, during.failed))
	})

	t.Run("kubelet restarted", func(t *testing.T) {
		pods := herdgatePods(t)
		c, _ := r.run(t, drill{name: "kubelet restarted", fault: func(ctx context.Context, t *testing.T, r *rig) error {
			script := filepath.Join(r.c.Root, "hack", "node.sh")
			if out, err := exec.CommandContext(ctx, script, "restart-kubelet").CombinedOutput(); err != nil {
				return fmt.Errorf("%s restart-kubelet: %w\n%s", script, err, out)
			}
			// Back when the node reports Ready again with a fresh heartbeat.
			time.Sleep(2 * time.Second)
			_, err := r.c.Kubectl(ctx, "wait", "node", "--all", "--for=condition=Ready", "--timeout=60s")
			return err
		}})
		for uid, restarts := range herdgatePods(t) {
			if was, ok := pods[uid]; !ok || was != restarts {
				t.Errorf("a herdgate pod was replaced or restarted (uid %s)", uid)
			}
		}
		record("kubelet restarted", c, "no herdgate pod restarted")
	})
}

// redisPause is how long the Redis drill keeps redis-server stopped: longer than a round trip's bound
// (2 s), so that calls time out, and than the replica's check of Redis (every second).
const redisPause = 5 * time.Second

// redisPID is the process id of the evaluation Redis' server, found on the node by its pod's cgroup.
func (r *rig) redisPID(ctx context.Context) (int, error) {
	pods, err := r.c.Pods(ctx, Namespace, redisSelector)
	if err != nil || len(pods) != 1 {
		return 0, fmt.Errorf("want one Redis pod, have %v (%w)", pods, err)
	}
	// The cgroupfs driver names a pod's cgroup by its UID; the systemd driver with underscores.
	uids := []string{pods[0].UID, strings.ReplaceAll(pods[0].UID, "-", "_")}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", p.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "redis-server" {
			continue
		}
		cgroup, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cgroup"))
		if err == nil && (strings.Contains(string(cgroup), uids[0]) || strings.Contains(string(cgroup), uids[1])) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no redis-server process in the cgroup of pod %s", pods[0].Name)
}

// saturatedWindow is the stretch in which the queue held at least two batches: the engine's
// admissions over it, its length by Redis' clock, and the longest time without an admission.
func saturatedWindow(samples []sample) (admitted int64, window, stalled time.Duration) {
	first, last := -1, -1
	for i, s := range samples {
		if s.depth >= 2*drillBatch {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 || last <= first {
		return 0, 0, 0
	}
	lastChange := samples[first].at
	for i := first + 1; i <= last; i++ {
		if samples[i].admitted != samples[i-1].admitted {
			stalled = max(stalled, samples[i].at.Sub(lastChange))
			lastChange = samples[i].at
		}
	}
	stalled = max(stalled, samples[last].at.Sub(lastChange))
	// A tick's admissions are on time when no tick went missing: a stall of a tick or two is the grid.
	if stalled <= 2*drillTick {
		stalled = 0
	}
	return samples[last].admitted - samples[first].admitted, samples[last].at.Sub(samples[first].at), stalled
}

// heldPass is a visitor admitted before a fault, who keeps using its pass through it.
type heldPass struct {
	jar  http.CookieJar
	pass string
}

type passUse struct {
	ok, failed int
	lastErr    string
}

func (r *rig) holdAPass(t *testing.T) *heldPass {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := &Herd{Target: r.target, client: &http.Client{Timeout: 5 * time.Second}}
	jar, _ := cookiejar.New(nil)
	path, method := "/.herdgate/enter", http.MethodPost
	for ctx.Err() == nil {
		code, a, _, err := h.call(ctx, jar, method, path, "")
		if err == nil && code == http.StatusOK && a.Admitted {
			return &heldPass{jar: jar, pass: a.Pass}
		}
		path, method = "/.herdgate/status", http.MethodGet
		// Poll as told: a poll sooner is refused, and puts the next one off.
		time.Sleep(time.Duration(max(a.NextPollMs, a.RetryAfterMs, 50)) * time.Millisecond)
	}
	t.Fatal("a visitor was not admitted within a minute")
	return nil
}

// useWhile sends a protected request with the pass every 200 ms until the returned stop is called.
func (p *heldPass) useWhile(ctx context.Context, r *rig, use *passUse) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	h := &Herd{Target: r.target, client: &http.Client{Timeout: 5 * time.Second}}
	go func() {
		defer close(finished)
		for {
			code, _, _, err := h.call(ctx, p.jar, http.MethodPost, orderPath, p.pass)
			switch {
			case err != nil:
				use.failed++
				use.lastErr = err.Error()
			case code != http.StatusOK:
				use.failed++
				use.lastErr = fmt.Sprintf("status %d", code)
			default:
				use.ok++
			}
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); <-finished }
}

func printResults(t *testing.T) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	var b strings.Builder
	b.WriteString("| drill | entered | admitted | lost | admitted twice | protected ok | protected failed | 503 | notes |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %s |\n", r.name, r.counts.Entered, r.counts.Admitted,
			r.counts.Lost, r.counts.AdmittedTwice, r.counts.OrdersOK, r.counts.OrdersFailed, r.counts.Unavailable, r.extra)
	}
	t.Log("drills on the node:\n" + b.String())
	if dir, err := testenv.ArtifactsDir(); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "node-drills.md"), []byte(b.String()), 0o644)
	}
}
