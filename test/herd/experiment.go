package herd

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/front"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/internal/settings"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

// The reference service and queue of the post.
const (
	PoolSize       = 40
	RequestLatency = 200 * time.Millisecond
	PoolTimeout    = 30 * time.Second
	Tick           = 100 * time.Millisecond
)

// RunSpec is one cell of the experiment.
type RunSpec struct {
	Test     string // "A" or "B"
	Visitors int
	// Batch is the admissions per tick: 14 is derived from the pool, other values override it.
	Batch  int
	Jitter herdgatev1alpha1.JitterMode
}

// RunResult is a run's visitor and service measurements.
type RunResult struct {
	RunSpec
	Visitors Results
	Backend  BackendStats
}

// Matrix is the reference experiment: Test A (500 visitors) and Test B (140 at once), batch 14, 500
// and 1000, jitter on and off.
func Matrix() []RunSpec {
	var specs []RunSpec
	for _, test := range []struct {
		name     string
		visitors int
	}{{"A", 500}, {"B", 140}} {
		for _, batch := range []int{14, 500, 1000} {
			for _, j := range []herdgatev1alpha1.JitterMode{herdgatev1alpha1.JitterUniform, herdgatev1alpha1.JitterNone} {
				specs = append(specs, RunSpec{Test: test.name, Visitors: test.visitors, Batch: batch, Jitter: j})
			}
		}
	}
	return specs
}

// Experiment runs each spec against a fresh service, queue and proxy (one Redis, one scheduler) in
// this process, and returns the measurements. Progress goes to log.
func Experiment(ctx context.Context, specs []RunSpec, log io.Writer) ([]RunResult, error) {
	redis, store, stop, err := startRedis()
	if err != nil {
		return nil, err
	}
	defer stop()

	sched := scheduler.New(&queue.Pool{})
	schedCtx, stopSched := context.WithCancel(ctx)
	defer stopSched()
	go func() { _ = sched.Start(schedCtx) }()

	backend := NewBackend(PoolSize, RequestLatency, PoolTimeout)
	backendServer := httptest.NewServer(backend)
	defer backendServer.Close()

	var out []RunResult
	for i, spec := range specs {
		fmt.Fprintf(log, "[herd] run %d/%d: test %s, %d visitors, batch %d, jitter %s\n", i+1, len(specs), spec.Test, spec.Visitors, spec.Batch, spec.Jitter)
		res, err := runOne(ctx, spec, fmt.Sprintf("run-%d", i), store, sched, backend, backendServer.URL, redis.URL())
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", i+1, err)
		}
		fmt.Fprintf(log, "[herd]   orders %d/%d, pass wait p95 %s, peak in flight %d, timeouts %d\n",
			res.Visitors.OrdersOK, spec.Visitors, res.Visitors.PassWaitP95.Round(time.Millisecond), res.Backend.PeakInFlight, res.Backend.Timeouts)
		out = append(out, res)
	}
	return out, nil
}

// Queue is the WaitingQueue of a run: the reference queue, with the batch overridden unless it is 14.
func Queue(name string, batch int, jitter herdgatev1alpha1.JitterMode, upstream string) *herdgatev1alpha1.WaitingQueue {
	b := builder.Queue("herd", name).UID(types.UID("herd-"+name)).Generation(1).
		Capacity(PoolSize, RequestLatency, herdgatev1alpha1.DefaultUtilizationPercent).Tick(Tick).Jitter(jitter, 0).UpstreamURL(upstream)
	if batch != 14 {
		b.BatchSizeOverride(int32(batch))
	}
	return b.Obj()
}

func runOne(ctx context.Context, spec RunSpec, name string, store *queue.Store, sched *scheduler.Scheduler,
	backend *Backend, backendURL, redisURL string) (RunResult, error) {
	wq := Queue(name, spec.Batch, spec.Jitter, backendURL)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cfg, err := admission.NewConfig(wq, key)
	if err != nil {
		return RunResult{}, err
	}
	proxy, err := admission.NewRoom(cfg, store, admission.Options{})
	if err != nil {
		return RunResult{}, err
	}
	// The visitors go through the front herdgate-proxy serves.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return RunResult{}, err
	}
	front := front.NewFast(proxy, front.FastOptions{})
	served := make(chan error, 1)
	go func() { served <- front.Serve(ln) }()
	defer func() {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := errors.Join(front.Shutdown(shutdownCtx), <-served); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "herd: stopping the front:", err)
		}
	}()
	frontURL := "http://" + ln.Addr().String()

	s, err := settings.Derive(wq)
	if err != nil {
		return RunResult{}, err
	}
	backend.Reset()
	sched.Ensure(scheduler.Room{Settings: s, RedisURL: redisURL})
	defer sched.Remove(wq.UID)
	// Visitors come to a waiting room whose scheduler already runs: wait for its plan.
	q, err := store.Queue(wq.Namespace, wq.Name)
	if err != nil {
		return RunResult{}, err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := q.ReadPlan(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return RunResult{}, fmt.Errorf("the scheduler published no plan for %s", wq.Name)
		}
	}

	results := Run(ctx, Scenario{Name: "Test " + spec.Test, Visitors: spec.Visitors, Target: frontURL, OrderPath: "/api/v1/orders", GiveUp: 2 * time.Minute})
	return RunResult{RunSpec: spec, Visitors: results, Backend: backend.Stats()}, nil
}

// startRedis starts a redis-server of the tool's own and a Store on it; stop ends both.
func startRedis() (redis *testenv.Redis, store *queue.Store, stop func(), err error) {
	dir, err := os.MkdirTemp("", "herdgate-herd-")
	if err != nil {
		return nil, nil, nil, err
	}
	if redis, err = testenv.NewRedis(dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	rdb, err := queue.NewClient(redis.URL(), queue.ClientOptions{})
	if err != nil {
		redis.Stop()
		_ = os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	store = queue.NewStore(rdb, queue.StoreOptions{})
	return redis, store, func() {
		store.Close()
		_ = rdb.Close()
		redis.Stop()
		_ = os.RemoveAll(dir)
	}, nil
}
