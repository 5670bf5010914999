package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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
	// managerArgs are more flags for the manager.
	managerArgs []string
	proxyBin    string
	levels      []int
	idle, busy  time.Duration
	// busyShare of the rooms are made busy at each level (at least one, at most busyMax).
	busyShare float64
	busyMax   int
	// settle is how long a level waits after its new rooms show a plan before the idle window.
	settle time.Duration
	// modeChanges is how many mode changes are timed to a busy room's proxy; none skips the proxy.
	modeChanges int
	// profiles, if set, is the directory for CPU profiles of the manager over each window; the
	// manager must serve --pprof-bind-address.
	profiles string
	log      io.Writer
}

// level is what one room count measured.
type level struct {
	label string
	rooms int
	added int // rooms this level made, at once
	// toPlan is how long until every room showed its plan (status.plan at its generation), toAdmit
	// until every room admitted (the Admitting condition True at its generation).
	toPlan, toAdmit time.Duration
	// create is the window from making the rooms to every room showing a plan.
	create, idle, busy window
	busyRooms          []string
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
	cp    *controlplane.ControlPlane
	admin client.Client
	// watched holds the rooms as a watch keeps them, until stopWatch.
	watched   cache.Cache
	stopWatch context.CancelFunc
	redis     *testenv.Redis
	store     *queue.Store
	rdb       redis.UniversalClient
	sampler   *sampler
	dir       string
	kubecfg   string
	rooms     []string
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
	bench := &requestCounter{}
	cfg.Wrap(bench.wrap)
	if r.admin, err = client.New(cfg, client.Options{Scheme: r.cp.Scheme}); err != nil {
		return err
	}
	if r.watched, err = cache.New(cfg, cache.Options{Scheme: r.cp.Scheme, DefaultNamespaces: map[string]cache.Config{namespace: {}}}); err != nil {
		return err
	}
	// The watch ends before the control plane stops: an open one holds up the API server's shutdown.
	watchCtx, stopWatch := context.WithCancel(ctx)
	r.stopWatch = stopWatch
	go func() { _ = r.watched.Start(watchCtx) }()
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
	args := []string{"--redis-url=" + r.redis.URL(), "--proxy-image=registry.example/herdgate:bench",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort), "--health-probe-bind-address=0", "--zap-log-level=error"}
	pprofURL := ""
	if r.profiles != "" {
		pprofPort, err := testenv.FreePort()
		if err != nil {
			return err
		}
		args = append(args, fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", pprofPort))
		pprofURL = fmt.Sprintf("http://127.0.0.1:%d/debug/pprof", pprofPort)
	}
	if procs.manager, err = r.startProcess(ctx, "manager", r.managerBin, append(args, r.managerArgs...)...); err != nil {
		return err
	}
	r.sampler = &sampler{procs: procs, rdb: r.rdb, api: clientset, bench: bench, metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort), pprofURL: pprofURL}
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
	if r.stopWatch != nil {
		r.stopWatch()
	}
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
	l := level{label: r.label, rooms: n, added: n - len(r.rooms)}
	r.logf("making %d rooms (%d in all)", l.added, n)
	before, err := r.sampler.take(ctx)
	if err != nil {
		return l, err
	}
	began := time.Now()
	if err := r.makeRooms(ctx, n); err != nil {
		return l, err
	}
	lastLog := time.Now()
	// Polled every 100 ms for up to a thousand rooms, and less often beyond: each poll reads them all.
	every := max(100*time.Millisecond, time.Duration(n/10)*time.Millisecond)
	if err := waitForEvery(ctx, every, 60*time.Minute, "every room to admit", func() (bool, error) {
		planned, admitting, err := r.planned(ctx)
		if err == nil && planned == n && l.toPlan == 0 {
			l.toPlan = time.Since(began)
		}
		if err == nil && time.Since(lastLog) >= 30*time.Second {
			r.logf("after %s, %d of %d rooms show a plan and %d admit", time.Since(began).Round(time.Second), planned, n, admitting)
			lastLog = time.Now()
		}
		return admitting == n, err
	}); err != nil {
		return l, err
	}
	l.toAdmit = time.Since(began)
	if err := r.logWaits(ctx, r.rooms[n-l.added:]); err != nil {
		return l, err
	}
	after, err := r.sampler.take(ctx)
	if err != nil {
		return l, err
	}
	l.create = between(before, after)
	r.logf("%d rooms show a plan after %s and admit after %s; settling for %s", n, l.toPlan.Round(time.Second), l.toAdmit.Round(time.Second), r.settle)
	if err := sleep(ctx, r.settle); err != nil {
		return l, err
	}

	r.logf("watching %d idle rooms for %s", n, r.idle)
	statuses, err := r.statuses(ctx)
	if err != nil {
		return l, err
	}
	if l.idle, err = r.watch(ctx, r.idle, fmt.Sprintf("idle-%d", n)); err != nil {
		return l, err
	}
	if err := r.reportStatusChanges(ctx, statuses); err != nil {
		return l, err
	}
	busy := min(max(1, int(float64(n)*r.busyShare)), r.busyMax)
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

// planned counts the rooms that show their plan, and those that admit, at their generation. It
// reads them from the bench's cache, which a watch keeps: listing thousands of rooms every poll would
// cost the API server more than the manager does.
func (r *run) planned(ctx context.Context) (planned, admitting int, err error) {
	list := &herdgatev1alpha1.WaitingQueueList{}
	// Read in place: a copy of ten thousand rooms every poll would cost more than the manager does.
	if err := r.watched.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return 0, 0, err
	}
	for _, wq := range list.Items {
		if wq.Status.ObservedGeneration != wq.Generation {
			continue
		}
		if wq.Status.Plan != nil {
			planned++
		}
		if meta.IsStatusConditionTrue(wq.Status.Conditions, herdgatev1alpha1.ConditionAdmitting) {
			admitting++
		}
	}
	return planned, admitting, nil
}

// logWaits logs how long after its creation each of rooms showed its plan and admitted, by the
// transition times of its Accepted and Admitting conditions (to the second), at the 50th, 90th and
// 100th percentiles: who waited, and for what.
func (r *run) logWaits(ctx context.Context, rooms []string) error {
	list := &herdgatev1alpha1.WaitingQueueList{}
	if err := r.watched.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	made := map[string]bool{}
	for _, name := range rooms {
		made[name] = true
	}
	var planned, admitting []time.Duration
	for _, wq := range list.Items {
		if !made[wq.Name] {
			continue
		}
		for _, c := range wq.Status.Conditions {
			switch c.Type {
			case herdgatev1alpha1.ConditionAccepted:
				planned = append(planned, c.LastTransitionTime.Sub(wq.CreationTimestamp.Time))
			case herdgatev1alpha1.ConditionAdmitting:
				admitting = append(admitting, c.LastTransitionTime.Sub(wq.CreationTimestamp.Time))
			}
		}
	}
	at := func(d []time.Duration, q float64) time.Duration {
		slices.Sort(d)
		if len(d) == 0 {
			return 0
		}
		return d[min(len(d)-1, int(q*float64(len(d))))]
	}
	r.logf("after its creation a room showed its plan after %s / %s / %s (p50 / p90 / max), and admitted after %s / %s / %s",
		at(planned, 0.5), at(planned, 0.9), at(planned, 1), at(admitting, 0.5), at(admitting, 0.9), at(admitting, 1))
	return nil
}

// watch samples the world before and after d; with profiles it also profiles the manager over d,
// into a file named for the window.
func (r *run) watch(ctx context.Context, d time.Duration, name string) (window, error) {
	before, err := r.sampler.take(ctx)
	if err != nil {
		return window{}, err
	}
	if r.profiles != "" {
		file := filepath.Join(r.profiles, "manager-"+name+".pprof")
		if err := r.sampler.profile(ctx, d, file); err != nil {
			return window{}, err
		}
		r.logf("wrote the manager's CPU profile over the window to %s", file)
	} else if err := sleep(ctx, d); err != nil {
		return window{}, err
	}
	after, err := r.sampler.take(ctx)
	if err != nil {
		return window{}, err
	}
	return between(before, after), nil
}
