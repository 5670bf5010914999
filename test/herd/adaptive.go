package herd

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/front"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/internal/settings"
	"github.com/herdgate/herdgate/test/builder"
)

// Workload is one of the service's bad days: how it behaves over time, and how many admitted
// visitors never come.
type Workload struct {
	Name, Title string
	// Reading says what to look for in the run's table and charts.
	Reading string
	// Profile is how long an order holds its connection t after the start, and whether the service
	// answers 503 at once.
	Profile func(t time.Duration) (latency time.Duration, fail bool)
	// NoShows is the share of admitted visitors who never order.
	NoShows float64
	// From and To bound the bad stretch, for the report; Length is the whole run.
	From, To, Length time.Duration
}

// Workloads are the experiment's: the database slows down (at once, and over a few seconds),
// visitors do not come, the service fails for a while.
func Workloads() []Workload {
	const from = 8 * time.Second
	return []Workload{
		{Name: "slow-down", Title: "The database slows down: 200 → 400 ms an order for 10 s",
			Reading: "Declared keeps admitting 140 a second into a service that now takes 100: the orders waiting for a " +
				"connection pile up for the whole 10 s and drain only after it. Adaptive follows Little's law down to 70 a second " +
				"(28 in flight at 400 ms) and is back at the plan within a second or two of the recovery. The step itself still " +
				"fills the pool once: when the latency doubles at once, the orders already admitted (within the admission lead, " +
				"600 ms) double the in-flight within one latency, before any request is slow enough to tell, so no controller " +
				"could keep that peak under the pool; the loop ends it within about a second.",
			Profile: func(t time.Duration) (time.Duration, bool) {
				if t >= from && t < from+10*time.Second {
					return 2 * RequestLatency, false
				}
				return RequestLatency, false
			}, From: from, To: from + 10*time.Second, Length: 30 * time.Second},
		{Name: "slow-down-gradual", Title: "The database slows down over 4 s: 200 → 400 ms, 6 s at 400 ms, back over 4 s",
			Reading: "A slowdown that builds over a few seconds, as lock contention does, is followed as it comes: " +
				"Adaptive keeps the orders in the service at the pool or under it and nobody waits for a connection, while Declared " +
				"piles them up as before.",
			Profile: func(t time.Duration) (time.Duration, bool) {
				const ramp = 4 * time.Second
				switch {
				case t < from || t >= from+14*time.Second:
					return RequestLatency, false
				case t < from+ramp:
					return RequestLatency + RequestLatency*(t-from)/ramp, false
				case t < from+10*time.Second:
					return 2 * RequestLatency, false
				default:
					return 2*RequestLatency - RequestLatency*(t-from-10*time.Second)/ramp, false
				}
			}, From: from, To: from + 14*time.Second, Length: 32 * time.Second},
		{Name: "no-shows", Title: "No-shows: 30 % of the admitted never order",
			Reading: "Declared admits 140 a second of whom 98 order: the service runs 30 % under what it is sized for. " +
				"Adaptive learns the share that comes a few seconds after their passes became valid and admits up to the pool's " +
				"full rate, 200 a second, the ceiling, so that those who come fill the target; even if every no-show came back, " +
				"the pool would be full, not overrun.",
			Profile: func(time.Duration) (time.Duration, bool) { return RequestLatency, false },
			NoShows: 0.3, From: 0, To: 25 * time.Second, Length: 25 * time.Second},
		{Name: "error-burst", Title: "An error burst: the service answers 503 for 5 s",
			Reading: "While the service fails, Declared keeps admitting, and every admitted visitor retries its failed " +
				"order each second: when the service comes back, hundreds of retries arrive together. Adaptive halves the rate " +
				"within the tick after the first 503s reach it and holds the floor while the errors last, so only a few retry; " +
				"it climbs back a tenth of the plan per tick once they stop. The peak it shows is those retries, at the end of " +
				"the burst.",
			Profile: func(t time.Duration) (time.Duration, bool) {
				return RequestLatency, t >= from && t < from+5*time.Second
			}, From: from, To: from + 5*time.Second, Length: 22 * time.Second},
	}
}

// TickSample is one scheduler tick: when (since the start), the rate its quota came from, and how
// many it admitted.
type TickSample struct {
	At       time.Duration
	Rate     float64
	Admitted int
}

// WorkloadRun is one workload under one capacity mode.
type WorkloadRun struct {
	Workload string
	Mode     herdgatev1alpha1.CapacityMode
	Backend  BackendStats
	Ticks    []TickSample
	// Ordered and Skipped count the visitors who ordered and the no-shows who were admitted.
	Ordered, Skipped int
	// Status is the WaitingQueue's status.workload as the manager would write it, at the end.
	Status *scheduler.Workload
}

// AdaptiveVisitors is how many visitors come at the start of a run: more than the queue can admit
// in the longest run at the ceiling, so that the queue never runs dry.
const AdaptiveVisitors = 7000

// workloadRig is a queue of the reference capacity in one mode in this process: Redis, the stand-in
// service, two proxy replicas as herdgate-proxy runs them (each reports to Redis) and a scheduler
// whose ticks it records.
type workloadRig struct {
	backend *Backend
	bases   []string
	uid     types.UID
	sched   *scheduler.Scheduler

	mu    sync.Mutex
	start time.Time // zero until the clock starts
	ticks []TickSample

	stopReplica []context.CancelFunc
	closers     []func()
}

// newWorkloadRig starts the rig; close stops it.
func newWorkloadRig(ctx context.Context, name string, mode herdgatev1alpha1.CapacityMode, log io.Writer) (rig *workloadRig, err error) {
	rig = &workloadRig{backend: NewBackend(PoolSize, RequestLatency, PoolTimeout)}
	defer func() {
		if err != nil {
			rig.close()
		}
	}()
	redis, store, stop, err := startRedis()
	if err != nil {
		return rig, err
	}
	rig.closers = append(rig.closers, stop)
	service := httptest.NewServer(rig.backend)
	rig.closers = append(rig.closers, service.Close)
	wq := builder.Queue("herd", name).UID(types.UID("herd-"+name)).Generation(1).
		Capacity(PoolSize, RequestLatency, herdgatev1alpha1.DefaultUtilizationPercent).Tick(Tick).UpstreamURL(service.URL).
		Identity(IdentityHeader).Obj()
	wq.Spec.Capacity.Mode = mode
	rig.uid = wq.UID
	s, err := settings.Derive(wq)
	if err != nil {
		return rig, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cfg, err := admission.NewConfig(wq, key)
	if err != nil {
		return rig, err
	}
	for _, replica := range []string{"herd-proxy-a", "herd-proxy-b"} {
		proxy, err := admission.NewRoom(cfg, store, admission.Options{Replica: replica})
		if err != nil {
			return rig, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return rig, err
		}
		serveCtx, stopServing := context.WithCancel(context.Background())
		served := make(chan struct{})
		go func() {
			defer close(served)
			if err := front.Serve(serveCtx, proxy, front.ServerOptions{Listener: ln, ShutdownTimeout: 5 * time.Second, Log: logr.Discard()}); err != nil {
				fmt.Fprintln(log, "herd: stopping a proxy:", err)
			}
		}()
		rig.stopReplica = append(rig.stopReplica, func() { stopServing(); <-served })
		rig.closers = append(rig.closers, func() { stopServing(); <-served })
		rig.bases = append(rig.bases, "http://"+ln.Addr().String())
	}

	rig.sched = scheduler.New(&queue.Pool{}, scheduler.WithTickObserver(rig.observe))
	schedCtx, stopSched := context.WithCancel(ctx)
	schedDone := make(chan struct{})
	go func() { defer close(schedDone); _ = rig.sched.Start(schedCtx) }()
	rig.closers = append(rig.closers, func() { stopSched(); <-schedDone })
	rig.sched.Ensure(scheduler.Room{Settings: s, RedisURL: redis.URL()})
	q, err := store.Queue(wq.Namespace, wq.Name)
	if err != nil {
		return rig, err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := q.ReadPlan(ctx); err == nil {
			return rig, nil
		}
		if time.Now().After(deadline) {
			return rig, fmt.Errorf("the scheduler published no plan for %s", wq.Name)
		}
	}
}

func (rig *workloadRig) observe(t scheduler.TickReport) {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	if rig.start.IsZero() || t.Err != nil {
		return
	}
	rig.ticks = append(rig.ticks, TickSample{At: t.Started.Sub(rig.start), Rate: t.Rate, Admitted: len(t.Result.Admitted)})
}

// begin resets the service to profile and starts the clock of the ticks and the service.
func (rig *workloadRig) begin(profile func(time.Duration) (time.Duration, bool)) {
	rig.backend.Reset()
	rig.backend.SetProfile(profile)
	rig.mu.Lock()
	rig.start = time.Now()
	rig.mu.Unlock()
}

// recorded returns the ticks since begin.
func (rig *workloadRig) recorded() []TickSample {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	return slices.Clone(rig.ticks)
}

// workload is what the scheduler last measured.
func (rig *workloadRig) workload() *scheduler.Workload {
	snap, _ := rig.sched.Snapshot(rig.uid)
	return snap.Workload
}

// close stops everything, last started first.
func (rig *workloadRig) close() {
	for i := len(rig.closers) - 1; i >= 0; i-- {
		rig.closers[i]()
	}
	rig.closers = nil
}

// crowd is visitors that poll through one replica and order through the other.
type crowd struct {
	polls, orders *http.Client
	wg            sync.WaitGroup
	mu            sync.Mutex
	ordered       int
	skipped       int
}

func newCrowd() *crowd {
	return &crowd{
		polls:  &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 256, MaxIdleConnsPerHost: 256}},
		orders: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 256}},
	}
}

// come sends n visitors to rig's replicas until ctx ends; of every ten in line, noShows × 10 walk
// away once admitted.
func (c *crowd) come(ctx context.Context, rig *workloadRig, n int, noShows float64) {
	for i := range n {
		noShow := float64(i%10) < noShows*10
		c.wg.Go(func() {
			outcome := workloadVisit(ctx, c.polls, c.orders, rig.bases[i%2], rig.bases[(i+1)%2], fmt.Sprintf("herd-%06d", i), noShow)
			c.mu.Lock()
			defer c.mu.Unlock()
			switch outcome {
			case visitOrdered:
				c.ordered++
			case visitSkipped:
				c.skipped++
			}
		})
	}
}

// wait waits for every visitor to be done, and lets their connections go.
func (c *crowd) wait() {
	c.wg.Wait()
	c.polls.CloseIdleConnections()
	c.orders.CloseIdleConnections()
}

// RunWorkload lets visitors through a queue of the reference capacity in the given mode, with two
// proxy replicas (visitors poll one and order through the other), while the service behaves as w
// says.
func RunWorkload(ctx context.Context, w Workload, mode herdgatev1alpha1.CapacityMode, visitors int, log io.Writer) (WorkloadRun, error) {
	run := WorkloadRun{Workload: w.Name, Mode: mode}
	rig, err := newWorkloadRig(ctx, w.Name+"-"+strings.ToLower(string(mode)), mode, log)
	if err != nil {
		return run, err
	}
	defer rig.close()
	fmt.Fprintf(log, "[herd] %s, capacity %s: %d visitors, %s\n", w.Name, mode, visitors, w.Length)
	runCtx, cancel := context.WithTimeout(ctx, w.Length)
	defer cancel()
	rig.begin(w.Profile)
	c := newCrowd()
	c.come(runCtx, rig, visitors, w.NoShows)
	<-runCtx.Done()
	c.wait()
	run.Backend, run.Ticks, run.Status = rig.backend.Stats(), rig.recorded(), rig.workload()
	run.Ordered, run.Skipped = c.ordered, c.skipped
	return run, nil
}

type visitOutcome int

const (
	visitGaveUp visitOutcome = iota
	visitOrdered
	visitSkipped
)

// workloadVisit enters through poll, polls as told, and once admitted orders through order (or,
// for a no-show, walks away), until ctx ends.
func workloadVisit(ctx context.Context, polls, orders *http.Client, poll, order, visitor string, noShow bool) visitOutcome {
	call := func(c *http.Client, method, url, pass string) (int, map[string]any) {
		req, err := http.NewRequestWithContext(ctx, method, url, nil)
		if err != nil {
			return 0, nil
		}
		req.Header.Set(IdentityHeader, visitor)
		if pass != "" {
			req.Header.Set(admission.PassHeader, pass)
		}
		res, err := c.Do(req)
		if err != nil {
			return 0, nil
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		body := map[string]any{}
		_ = json.Unmarshal(raw, &body)
		return res.StatusCode, body
	}
	sleep := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	code, body := call(polls, http.MethodPost, poll+"/.herdgate/enter", "")
	for ctx.Err() == nil {
		switch {
		case code == http.StatusOK && body["admitted"] == true:
			if noShow {
				return visitSkipped
			}
			pass, _ := body["pass"].(string)
			for ctx.Err() == nil {
				code, body = call(orders, http.MethodPost, order+"/api/v1/orders", pass)
				switch code {
				case http.StatusOK:
					return visitOrdered
				case http.StatusTooManyRequests:
					// The pass is not valid yet: its jitter.
					if !sleep(millis(body, "retryAfterMs")) {
						return visitGaveUp
					}
				default:
					// The service failed the order; the visitor tries again a second later.
					if !sleep(time.Second) {
						return visitGaveUp
					}
				}
			}
			return visitGaveUp
		case code == http.StatusOK:
			if !sleep(millis(body, "nextPollMs")) {
				return visitGaveUp
			}
		default:
			if !sleep(millis(body, "retryAfterMs")) {
				return visitGaveUp
			}
		}
		code, body = call(polls, http.MethodGet, poll+"/.herdgate/status", "")
	}
	return visitGaveUp
}
