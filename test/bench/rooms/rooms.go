package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
	"github.com/herdgate/herdgate/test/testenv/controlplane"
)

// namespace holds every room of a run.
const namespace = "rooms"

// plan is one manager's run: the room counts it reaches, one after the other, and how long each
// level is watched idle and busy.
type plan struct {
	label      string
	managerBin string
	proxyBin   string
	levels     []int
	idle, busy time.Duration
	// busyShare of the rooms are made busy at each level (at least one).
	busyShare float64
	// settle is how long a level waits after its new rooms show a plan before the idle window.
	settle time.Duration
	// modeChanges is how many mode changes are timed to a busy room's proxy; none skips the proxy.
	modeChanges int
	log         io.Writer
}

// level is what one room count measured.
type level struct {
	label      string
	rooms      int
	toPlan     time.Duration // for the rooms this level added
	idle, busy window
	busyRooms  []string
	// ran dry: busy rooms that had nobody left waiting at the end of the busy window.
	ranDry int
	// target is what the busy rooms' plans admit over the busy window.
	target float64
	// modeChanges are the times from a mode change's write to the busy room's proxy serving it.
	modeChanges []time.Duration
}

// run is one manager with a control plane and a Redis of its own.
type run struct {
	plan
	cp      *controlplane.ControlPlane
	admin   client.Client
	redis   *testenv.Redis
	store   *queue.Store
	rdb     redis.UniversalClient
	sampler *sampler
	dir     string
	kubecfg string
	rooms   []string
}

func (p plan) logf(format string, a ...any) {
	fmt.Fprintf(p.log, "[bench-rooms] %s: "+format+"\n", append([]any{p.label}, a...)...)
}

// measure runs the plan and returns a level per room count.
func (p plan) measure(ctx context.Context) (levels []level, err error) {
	r := &run{plan: p}
	defer func() { err = errors.Join(err, r.stop()) }()
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	for _, n := range p.levels {
		l, err := r.level(ctx, n)
		if err != nil {
			return levels, fmt.Errorf("%d rooms: %w", n, err)
		}
		levels = append(levels, l)
	}
	return levels, nil
}

func (r *run) start(ctx context.Context) error {
	var err error
	if r.dir, err = os.MkdirTemp("", "herdgate-bench-rooms-"); err != nil {
		return err
	}
	// Every room has a Service: envtest's default range would run out of addresses at about 250.
	if r.cp, err = controlplane.Start(controlplane.Options{ServiceIPRange: "10.96.0.0/16"}); err != nil {
		return err
	}
	if r.redis, err = testenv.NewRedis(r.dir); err != nil {
		return err
	}
	// The bench's own client makes thousands of rooms at once: client-go's 5 per second would be
	// the bench's limit, not the manager's.
	cfg := rest.CopyConfig(r.cp.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	if r.admin, err = client.New(cfg, client.Options{Scheme: r.cp.Scheme}); err != nil {
		return err
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := r.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	if r.kubecfg, err = r.cp.WriteKubeconfig("bench-rooms", r.dir); err != nil {
		return err
	}
	if r.rdb, err = queue.NewClient(r.redis.URL(), queue.ClientOptions{PoolSize: 64}); err != nil {
		return err
	}
	r.store = queue.NewStore(r.rdb, queue.StoreOptions{})

	procs := processes{redis: r.redis.PID()}
	if procs.apiserver, err = childNamed("kube-apiserver"); err != nil {
		return err
	}
	if procs.etcd, err = childNamed("etcd"); err != nil {
		return err
	}
	metricsPort, err := testenv.FreePort()
	if err != nil {
		return err
	}
	if procs.manager, err = r.startProcess(ctx, "manager", r.managerBin, "--redis-url="+r.redis.URL(), "--proxy-image=registry.example/herdgate:bench",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort), "--health-probe-bind-address=0", "--zap-log-level=error"); err != nil {
		return err
	}
	r.sampler = &sampler{procs: procs, rdb: r.rdb, api: clientset, metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)}
	return waitFor(ctx, 30*time.Second, "the manager's metrics", func() (bool, error) {
		_, err := scrape(ctx, r.sampler.metricsURL)
		return err == nil, nil
	})
}

// processesToStop are the programs a run started, stopped last to first.
var processesToStop sync.Map // *exec.Cmd → struct{}

// startProcess starts bin with args against the run's control plane, logging to a file of the run.
func (r *run) startProcess(_ context.Context, name, bin string, args ...string) (int, error) {
	logs, err := os.Create(filepath.Join(r.dir, name+".log"))
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+r.kubecfg)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		_ = logs.Close()
		return 0, fmt.Errorf("starting %s: %w", name, err)
	}
	processesToStop.Store(cmd, struct{}{})
	go func() { _ = cmd.Wait(); _ = logs.Close() }()
	return cmd.Process.Pid, nil
}

func (r *run) stop() error {
	processesToStop.Range(func(k, _ any) bool {
		cmd := k.(*exec.Cmd)
		_ = cmd.Process.Kill()
		processesToStop.Delete(k)
		return true
	})
	if r.store != nil {
		r.store.Close()
		_ = r.rdb.Close()
	}
	if r.redis != nil {
		r.redis.Stop()
	}
	var err error
	if r.cp != nil {
		err = r.cp.Stop()
	}
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
	return err
}

// roomName is the name of the i-th room.
func roomName(i int) string { return fmt.Sprintf("room-%05d", i) }

func (r *run) level(ctx context.Context, n int) (level, error) {
	l := level{label: r.label, rooms: n}
	added := n - len(r.rooms)
	r.logf("making %d rooms (%d in all)", added, n)
	began := time.Now()
	if err := r.makeRooms(ctx, n); err != nil {
		return l, err
	}
	if err := waitFor(ctx, 30*time.Minute, "every room to show a plan", func() (bool, error) {
		planned, err := r.planned(ctx)
		return planned == n, err
	}); err != nil {
		return l, err
	}
	l.toPlan = time.Since(began)
	r.logf("%d rooms show a plan after %s; settling for %s", n, l.toPlan.Round(time.Second), r.settle)
	if err := sleep(ctx, r.settle); err != nil {
		return l, err
	}

	r.logf("watching %d idle rooms for %s", n, r.idle)
	var err error
	if l.idle, err = r.watch(ctx, r.idle); err != nil {
		return l, err
	}
	busy := max(1, int(float64(n)*r.busyShare))
	l.busyRooms = r.rooms[:busy]
	if err := r.busyWindow(ctx, &l); err != nil {
		return l, err
	}
	return l, nil
}

// makeRooms creates rooms until there are n, many at a time.
func (r *run) makeRooms(ctx context.Context, n int) error {
	from := len(r.rooms)
	for i := from; i < n; i++ {
		r.rooms = append(r.rooms, roomName(i))
	}
	return parallel(ctx, 32, n-from, func(i int) error {
		// Nobody polls in this bench: waiting visitors must not be dropped for silence.
		wq := builder.Queue(namespace, roomName(from+i)).AbandonAfter(time.Hour).Obj()
		return r.admin.Create(ctx, wq)
	})
}

// planned counts the rooms the manager admits in.
func (r *run) planned(ctx context.Context) (int, error) {
	list := &herdgatev1alpha1.WaitingQueueList{}
	if err := r.admin.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return 0, err
	}
	n := 0
	for _, wq := range list.Items {
		if meta.IsStatusConditionTrue(wq.Status.Conditions, herdgatev1alpha1.ConditionAdmitting) && wq.Status.ObservedGeneration == wq.Generation {
			n++
		}
	}
	return n, nil
}

func (r *run) watch(ctx context.Context, d time.Duration) (window, error) {
	before, err := r.sampler.take(ctx)
	if err != nil {
		return window{}, err
	}
	if err := sleep(ctx, d); err != nil {
		return window{}, err
	}
	after, err := r.sampler.take(ctx)
	if err != nil {
		return window{}, err
	}
	return between(before, after), nil
}

// busyWindow makes l.busyRooms busy: suspended while visitors fill them for the whole window (and a
// margin), then admitting at their plan while the window is watched. Afterwards it times mode changes
// to a busy room's proxy, and waits for the rooms to be idle again.
func (r *run) busyWindow(ctx context.Context, l *level) error {
	const margin = 10 * time.Second
	rooms := l.busyRooms
	r.logf("filling %d busy rooms", len(rooms))
	if err := r.suspend(ctx, rooms, true); err != nil {
		return err
	}
	perRoom := int(140 * (r.busy + margin).Seconds()) // the reference plan: 140 a second
	var entered atomic.Int64
	if err := parallel(ctx, 64, len(rooms)*perRoom, func(i int) error {
		q, err := r.store.Queue(namespace, rooms[i%len(rooms)])
		if err != nil {
			return err
		}
		_, err = q.Enter(ctx, "v"+strconv.Itoa(i), time.Hour)
		entered.Add(1)
		return err
	}); err != nil {
		return err
	}
	var waiting, admitted, abandoned int64
	for _, name := range rooms {
		q, err := r.store.Queue(namespace, name)
		if err != nil {
			return err
		}
		st, err := q.Stats(ctx)
		if err != nil {
			return err
		}
		waiting, admitted, abandoned = waiting+st.Depth, admitted+st.AdmittedTotal, abandoned+st.AbandonedTotal
	}
	r.logf("%d visitors entered, %d wait (the busy rooms have admitted %d and abandoned %d so far); opening the busy rooms", entered.Load(), waiting, admitted, abandoned)
	if err := r.suspend(ctx, rooms, false); err != nil {
		return err
	}
	// Every busy room admits again before the window begins.
	if err := sleep(ctx, 3*time.Second); err != nil {
		return err
	}
	redisAdmitted := func() (int64, error) {
		var n int64
		for _, name := range rooms {
			q, err := r.store.Queue(namespace, name)
			if err != nil {
				return 0, err
			}
			st, err := q.Stats(ctx)
			if err != nil {
				return 0, err
			}
			n += st.AdmittedTotal
		}
		return n, nil
	}
	before, err := redisAdmitted()
	if err != nil {
		return err
	}
	if l.busy, err = r.watch(ctx, r.busy); err != nil {
		return err
	}
	after, err := redisAdmitted()
	if err != nil {
		return err
	}
	r.logf("Redis counted %d admitted before the window and %d in it; the manager's metric %0.f in it", before, after-before, l.busy.admitted(rooms))
	for _, name := range rooms {
		q, err := r.store.Queue(namespace, name)
		if err != nil {
			return err
		}
		st, err := q.Stats(ctx)
		if err != nil {
			return err
		}
		if st.Depth == 0 {
			l.ranDry++
		}
	}
	l.target = 140 * l.busy.seconds * float64(len(rooms))
	if r.modeChanges > 0 {
		if l.modeChanges, err = r.timeModeChanges(ctx, rooms[0]); err != nil {
			return err
		}
	}
	r.logf("waiting for the busy rooms to empty")
	return waitFor(ctx, 5*time.Minute, "the busy rooms to empty", func() (bool, error) {
		for _, name := range rooms {
			q, err := r.store.Queue(namespace, name)
			if err != nil {
				return false, err
			}
			st, err := q.Stats(ctx)
			if err != nil || st.Depth > 0 {
				return false, err
			}
		}
		return true, nil
	})
}

func (r *run) suspend(ctx context.Context, rooms []string, suspended bool) error {
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspended))
	if err := parallel(ctx, 32, len(rooms), func(i int) error {
		wq := &herdgatev1alpha1.WaitingQueue{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: rooms[i]}}
		return r.admin.Patch(ctx, wq, patch)
	}); err != nil {
		return err
	}
	// The manager's scheduler has the change once every room has observed it.
	return waitFor(ctx, 2*time.Minute, "the rooms to observe suspend", func() (bool, error) {
		for _, name := range rooms {
			wq := &herdgatev1alpha1.WaitingQueue{}
			if err := r.admin.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, wq); err != nil {
				return false, err
			}
			if wq.Status.ObservedGeneration != wq.Generation {
				return false, nil
			}
		}
		return true, nil
	})
}

// timeModeChanges runs the admission proxy for room, as its Deployment would, and times each of
// r.modeChanges changes of spec.mode (Closed, then Queue again, ...) from the write to the proxy
// serving the new generation.
func (r *run) timeModeChanges(ctx context.Context, room string) ([]time.Duration, error) {
	key := types.NamespacedName{Namespace: namespace, Name: room}
	wq := &herdgatev1alpha1.WaitingQueue{}
	if err := r.admin.Get(ctx, key, wq); err != nil {
		return nil, err
	}
	secret := &corev1.Secret{}
	if err := r.admin.Get(ctx, types.NamespacedName{Namespace: namespace, Name: wq.SecretName()}, secret); err != nil {
		return nil, err
	}
	keyDir := filepath.Join(r.dir, "key-"+room)
	if err := os.MkdirAll(keyDir, 0o700); err != nil {
		return nil, err
	}
	keyFile := filepath.Join(keyDir, herdgatev1alpha1.SecretHMACKey)
	if err := os.WriteFile(keyFile, secret.Data[herdgatev1alpha1.SecretHMACKey], 0o600); err != nil {
		return nil, err
	}
	listen, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	metrics, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	pid, err := r.startProcess(ctx, "proxy-"+room, r.proxyBin, "--waitingqueue="+key.String(), "--kubeconfig="+r.kubecfg, "--redis-url="+r.redis.URL(),
		"--hmac-key-file="+keyFile, fmt.Sprintf("--listen=127.0.0.1:%d", listen), fmt.Sprintf("--metrics-listen=127.0.0.1:%d", metrics),
		"--drain-delay=0s", "--zap-log-level=error")
	if err != nil {
		return nil, err
	}
	defer func() {
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Kill()
		}
	}()
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)
	serves := func(generation int64) bool {
		families, err := scrape(ctx, metricsURL)
		if err != nil {
			return false // not listening yet
		}
		for _, m := range families["herdgate_proxy_config_generation"].GetMetric() {
			if int64(m.GetGauge().GetValue()) == generation {
				return true
			}
		}
		return false
	}
	if err := waitFor(ctx, 30*time.Second, "the proxy to serve "+room, func() (bool, error) { return serves(wq.Generation), nil }); err != nil {
		return nil, err
	}
	var out []time.Duration
	modes := []herdgatev1alpha1.Mode{herdgatev1alpha1.ModeClosed, herdgatev1alpha1.ModeQueue}
	for i := range r.modeChanges {
		began := time.Now()
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"mode":%q}}`, modes[i%2]))
		changed := &herdgatev1alpha1.WaitingQueue{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: room}}
		if err := r.admin.Patch(ctx, changed, patch); err != nil {
			return nil, err
		}
		if err := waitForEvery(ctx, time.Millisecond, 30*time.Second, "the proxy to serve the new mode", func() (bool, error) { return serves(changed.Generation), nil }); err != nil {
			return nil, err
		}
		out = append(out, time.Since(began))
	}
	if len(out)%2 == 1 { // leave the room open
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"mode":"Queue"}}`))
		if err := r.admin.Patch(ctx, &herdgatev1alpha1.WaitingQueue{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: room}}, patch); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parallel calls f(0) … f(n-1) from workers goroutines; the first error stops it.
func parallel(ctx context.Context, workers, n int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

func waitFor(ctx context.Context, limit time.Duration, what string, done func() (bool, error)) error {
	return waitForEvery(ctx, 500*time.Millisecond, limit, what, done)
}

// waitForEvery asks done every interval until it says true, fails, or limit passes.
func waitForEvery(ctx context.Context, interval, limit time.Duration, what string, done func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s", limit, what)
		}
		if err := sleep(ctx, interval); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
