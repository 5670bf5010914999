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
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/ptr"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/front"
	"github.com/herdgate/herdgate/internal/draw"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/internal/settings"
	"github.com/herdgate/herdgate/test/builder"
)

// IdentityHeader names the visitors of a launch, as a trusted gateway would.
const IdentityHeader = "X-User-Id"

// LaunchVisitor is one visitor of a launch and what it saw: it enters (holding a pre-queue place
// when it comes before the opening), tries the protected route once before the opening, polls as
// told until admitted and places one order with its pass.
type LaunchVisitor struct {
	ID string
	// Arrival is the pre-queue arrival number enter gave; 0 for a visitor who came after opening.
	Arrival int64
	// Blocked says the protected route refused the visitor before the opening with not_open.
	Blocked bool
	// FirstPosition is the first place in line the visitor was told.
	FirstPosition int64
	// AtOnce says enter admitted the visitor with no poll (the safety net).
	AtOnce bool
	// Expires is when its pass expires: the tick that admitted it (with its jitter) plus the ttl.
	Expires time.Time
	Ordered bool
	Err     error
}

// LaunchClient is an HTTP client sized for a crowd on loopback.
func LaunchClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 128, MaxIdleConnsPerHost: 128}}
}

func launchCall(c *http.Client, method, url, visitor, pass string) (int, map[string]any, error) {
	return launchCallWith(c, method, url, visitor, pass, nil)
}

// launchCallWith is launchCall with the request headers of the name, value pairs of header.
func launchCallWith(c *http.Client, method, url, visitor, pass string, header []string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, nil, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	req.Header.Set(IdentityHeader, visitor)
	if pass != "" {
		req.Header.Set(admission.PassHeader, pass)
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	body := map[string]any{}
	_ = json.Unmarshal(raw, &body)
	return res.StatusCode, body, nil
}

// millis is the body's key in milliseconds; a second when it is missing.
func millis(body map[string]any, key string) time.Duration {
	if v, ok := body[key].(float64); ok && v > 0 {
		return time.Duration(v) * time.Millisecond
	}
	return time.Second
}

// Visit plays the visitor against the proxy at base until it placed its order or ctx ends.
func (v *LaunchVisitor) Visit(ctx context.Context, c *http.Client, base, orderPath string, opensAt time.Time) {
	enter, first := true, true
	for ctx.Err() == nil {
		method, path := nextCall(enter)
		code, body, err := launchCall(c, method, base+path, v.ID, "")
		if err != nil {
			v.Err = err
			return
		}
		var wait time.Duration
		switch {
		case code == http.StatusOK && body["admitted"] == true:
			v.AtOnce = first && enter
			pass, _ := body["pass"].(string)
			if v.Expires, err = time.Parse(time.RFC3339Nano, fmt.Sprint(body["passExpiresAt"])); err != nil {
				v.Err = fmt.Errorf("passExpiresAt: %w", err)
				return
			}
			code, _, err := launchCall(c, http.MethodPost, base+orderPath, v.ID, pass)
			switch {
			case err != nil:
				v.Err = err
			case code != http.StatusOK:
				v.Err = fmt.Errorf("the order with a pass got %d", code)
			default:
				v.Ordered = true
			}
			return
		case code == http.StatusOK && body["phase"] == "PreQueue":
			enter = false
			arrival, ok := body["arrival"].(float64)
			if !ok {
				v.Err = fmt.Errorf("%s %s: a pre-queue answer without an arrival: %v", method, path, body)
				return
			}
			v.Arrival = int64(arrival)
			if !v.Blocked && time.Now().Before(opensAt.Add(-time.Second)) {
				code, refused, err := launchCall(c, http.MethodPost, base+orderPath, v.ID, "")
				v.Blocked = err == nil && code == http.StatusForbidden && refused["error"] == "not_open"
			}
			wait = millis(body, "nextPollMs")
		case code == http.StatusOK:
			enter = false
			if p, _ := body["position"].(float64); p > 0 && v.FirstPosition == 0 {
				v.FirstPosition = int64(p)
			}
			wait = millis(body, "nextPollMs")
		case code == http.StatusForbidden || code == http.StatusServiceUnavailable || code == http.StatusNotFound:
			enter = true // not open yet, the room getting ready, or the place was lost
			wait = millis(body, "retryAfterMs")
		case code == http.StatusTooManyRequests:
			wait = millis(body, "retryAfterMs")
		default:
			v.Err = fmt.Errorf("%s %s: %d %v", method, path, code, body)
			return
		}
		first = false
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	v.Err = ctx.Err()
}

// EnterNow enters the visitor once, so that the order of entry is the caller's; Visit goes on.
func (v *LaunchVisitor) EnterNow(c *http.Client, base string) (nextPoll time.Duration, err error) {
	code, body, err := launchCall(c, http.MethodPost, base+"/.herdgate/enter", v.ID, "")
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("enter of %s: %d %v", v.ID, code, body)
	}
	if p, ok := body["position"].(float64); ok {
		v.FirstPosition = int64(p)
	}
	return millis(body, "nextPollMs"), nil
}

// ComeInOrder enters the visitors one after another, so that the order of entry is theirs, and lets
// each visit on in wg.
func ComeInOrder(ctx context.Context, wg *sync.WaitGroup, c *http.Client, base string, opensAt time.Time, visitors []*LaunchVisitor) {
	for _, v := range visitors {
		next, err := v.EnterNow(c, base)
		if err != nil {
			v.Err = err
			continue
		}
		wg.Go(func() {
			time.Sleep(next)
			v.Visit(ctx, c, base, "/api/v1/orders", opensAt)
		})
	}
}

// WaitOpen waits until the room at base says Open: the draw is done.
func WaitOpen(ctx context.Context, c *http.Client, base string) error {
	for ctx.Err() == nil {
		code, body, err := launchCall(c, http.MethodGet, base+"/.herdgate/status", "probe", "")
		if err == nil && code == http.StatusNotFound && body["phase"] == "Open" {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return ctx.Err()
}

// LaunchSpec is a launch in the load tool.
type LaunchSpec struct {
	// PreQueued visitors arrive, in the order of their numbers, over the pre-queue's first four fifths.
	PreQueued int
	// Late visitors arrive one after another once the room is open.
	Late int
	// Trickle visitors arrive one every 100 ms once everybody else has ordered: below the plan.
	Trickle int
	// PreQueue is how long the pre-queue is open before opensAt.
	PreQueue time.Duration
	// MaxActive caps the active passes; the workload releases each visitor after its order.
	MaxActive int32
}

// LaunchResult is what a launch measured.
type LaunchResult struct {
	LaunchSpec
	// Visitors are every visitor: pre-queued, late, trickle, in that order.
	Visitors []*LaunchVisitor
	// RhoPreQueue is Spearman's ρ between arrival and admission over the pre-queue; RhoLate between
	// the order of entry and admission over the late visitors.
	RhoPreQueue, RhoLate float64
	// PeakActive is the most active passes seen, sampled every tick.
	PeakActive int64
	// AtOnce counts the trickle visitors enter admitted with no poll.
	AtOnce int
	// OrdersBeforeOpening counts orders the workload saw before opensAt.
	OrdersBeforeOpening int
	// Through is how long after opensAt the last of the crowd (pre-queue and late) had ordered.
	Through time.Duration
	// Draw is the scheduler's account of the draw; VerifyErr the check of its record against the seed.
	Draw      scheduler.DrawProgress
	VerifyErr error
}

// Launch runs a launch in this process: Redis, the scheduler, a proxy and the stand-in orders service
// that releases every visitor after its order. Progress goes to log.
func Launch(ctx context.Context, spec LaunchSpec, log io.Writer) (LaunchResult, error) {
	res := LaunchResult{LaunchSpec: spec}
	redis, store, stop, err := startRedis()
	if err != nil {
		return res, err
	}
	defer stop()

	now := time.Now().Truncate(time.Second)
	preQueueFrom := now.Add(2 * time.Second)
	opensAt := preQueueFrom.Add(spec.PreQueue)
	var mu sync.Mutex
	backend := NewBackend(PoolSize, RequestLatency, PoolTimeout)
	workload := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if time.Now().Before(opensAt) {
			mu.Lock()
			res.OrdersBeforeOpening++
			mu.Unlock()
		}
		w.Header().Set("Herdgate-Release", "true")
		backend.ServeHTTP(w, r)
	}))
	defer workload.Close()

	wq := builder.Queue("herd", "launch").UID("herd-launch").Generation(1).
		Capacity(PoolSize, RequestLatency, 70).Tick(Tick).UpstreamURL(workload.URL).Identity(IdentityHeader).
		AbandonAfter(time.Minute).Schedule(preQueueFrom, opensAt, time.Time{}).Obj()
	if spec.MaxActive > 0 {
		wq.Spec.Capacity.MaxActive = ptr.To(spec.MaxActive)
	}
	s, err := settings.Derive(wq)
	if err != nil {
		return res, err
	}
	seed, err := draw.NewSeed()
	if err != nil {
		return res, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cfg, err := admission.NewConfig(wq, key)
	if err != nil {
		return res, err
	}
	proxy, err := admission.NewRoom(cfg, store, admission.Options{})
	if err != nil {
		return res, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	// The whole proxy, as herdgate-proxy runs it: the front and the sessions' sync with Redis.
	serveCtx, stopServing := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- front.Serve(serveCtx, proxy, front.ServerOptions{Listener: ln, ShutdownTimeout: 5 * time.Second, Log: logr.Discard()})
	}()
	defer func() {
		stopServing()
		if err := <-served; err != nil {
			fmt.Fprintln(log, "herd: stopping the proxy:", err)
		}
	}()
	base := "http://" + ln.Addr().String()

	sched := scheduler.New(&queue.Pool{})
	schedCtx, stopSched := context.WithCancel(ctx)
	schedDone := make(chan struct{})
	go func() { defer close(schedDone); _ = sched.Start(schedCtx) }()
	defer func() { stopSched(); <-schedDone }()
	sched.Ensure(scheduler.Room{Settings: s, RedisURL: redis.URL(), DrawSeed: seed})
	q, err := store.Queue(wq.Namespace, wq.Name)
	if err != nil {
		return res, err
	}

	ctx, cancel := context.WithTimeout(ctx, spec.PreQueue+5*time.Minute)
	defer cancel()
	sampling := make(chan struct{})
	var sampled sync.WaitGroup
	sampled.Go(func() {
		for {
			select {
			case <-sampling:
				return
			case <-time.After(Tick):
			}
			if st, err := q.Stats(ctx); err == nil && st.Active > res.PeakActive {
				res.PeakActive = st.Active
			}
		}
	})

	c := LaunchClient()
	fmt.Fprintf(log, "[herd] launch: pre-queue from %s, opening at %s; %d visitors in the pre-queue, %d after the opening, %d trickling\n",
		preQueueFrom.Format(time.TimeOnly), opensAt.Format(time.TimeOnly), spec.PreQueued, spec.Late, spec.Trickle)
	var wg sync.WaitGroup
	spread := spec.PreQueue * 4 / 5 / time.Duration(max(1, spec.PreQueued))
	for i := range spec.PreQueued {
		v := &LaunchVisitor{ID: fmt.Sprintf("early-%06d", i)}
		res.Visitors = append(res.Visitors, v)
		start := preQueueFrom.Add(100*time.Millisecond + time.Duration(i)*spread)
		wg.Go(func() {
			time.Sleep(time.Until(start))
			v.Visit(ctx, c, base, "/api/v1/orders", opensAt)
		})
	}
	late := make([]*LaunchVisitor, spec.Late)
	for i := range late {
		late[i] = &LaunchVisitor{ID: fmt.Sprintf("late-%05d", i)}
	}
	res.Visitors = append(res.Visitors, late...)
	wg.Go(func() {
		if WaitOpen(ctx, c, base) == nil {
			fmt.Fprintf(log, "[herd] the draw is done %s after the opening\n", time.Since(opensAt).Round(time.Millisecond))
			ComeInOrder(ctx, &wg, c, base, opensAt, late)
		}
	})
	wg.Wait()
	res.Through = time.Since(opensAt)
	fmt.Fprintf(log, "[herd] the crowd is through %s after the opening; trickling\n", res.Through.Round(time.Millisecond))
	for i := range spec.Trickle {
		v := &LaunchVisitor{ID: fmt.Sprintf("trickle-%04d", i)}
		res.Visitors = append(res.Visitors, v)
		v.Visit(ctx, c, base, "/api/v1/orders", opensAt)
		if v.AtOnce {
			res.AtOnce++
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(sampling)
	sampled.Wait()

	for _, v := range res.Visitors {
		if v.Err != nil || !v.Ordered {
			return res, fmt.Errorf("visitor %s: ordered %v: %w", v.ID, v.Ordered, v.Err)
		}
	}
	if snap, ok := sched.Snapshot(wq.UID); ok && snap.Draw != nil {
		res.Draw = *snap.Draw
	}
	record, err := q.ReadDrawRecord(context.Background())
	if err != nil {
		return res, err
	}
	res.VerifyErr = draw.Verify(seed, draw.Commitment(seed), record)
	if len(record) != spec.PreQueued && res.VerifyErr == nil {
		res.VerifyErr = fmt.Errorf("the record has %d places, not %d", len(record), spec.PreQueued)
	}
	rank := func(vs []*LaunchVisitor, order func(i int, v *LaunchVisitor) float64) float64 {
		if len(vs) < 2 {
			return 0
		}
		var x, y []float64
		for i, v := range vs {
			x = append(x, order(i, v))
			y = append(y, float64(v.Expires.UnixMicro()))
		}
		return draw.Spearman(x, y)
	}
	res.RhoPreQueue = rank(res.Visitors[:spec.PreQueued], func(_ int, v *LaunchVisitor) float64 { return float64(v.Arrival) })
	res.RhoLate = rank(late, func(i int, _ *LaunchVisitor) float64 { return float64(i) })
	return res, nil
}

// LaunchReport writes the launch's report in Markdown.
func LaunchReport(w io.Writer, r LaunchResult) {
	fmt.Fprintf(w, "| measure | value |\n| --- | --- |\n")
	fmt.Fprintf(w, "| visitors | %d in the pre-queue (over %s), %d after the opening, %d trickling at 10/s afterwards |\n",
		r.PreQueued, r.PreQueue, r.Late, r.Trickle)
	fmt.Fprintf(w, "| orders before `opensAt` | %d |\n", r.OrdersBeforeOpening)
	verdict := "every place recomputed from the seed matches the record"
	if r.VerifyErr != nil {
		verdict = "FAILED: " + r.VerifyErr.Error()
	}
	fmt.Fprintf(w, "| the draw's record | %s |\n", verdict)
	fmt.Fprintf(w, "| Spearman ρ, arrival → admission, pre-queue | %.3f (0: arriving early wins nothing) |\n", r.RhoPreQueue)
	fmt.Fprintf(w, "| Spearman ρ, entry → admission, after the opening | %.3f (1: first come, first served) |\n", r.RhoLate)
	if r.MaxActive > 0 {
		fmt.Fprintf(w, "| peak active passes, sampled every tick | %d of `maxActive` %d |\n", r.PeakActive, r.MaxActive)
	} else {
		fmt.Fprintf(w, "| peak active passes, sampled every tick | %d (no `maxActive`) |\n", r.PeakActive)
	}
	fmt.Fprintf(w, "| the crowd through | %s after `opensAt`, %.0f orders per second (the plan: 140) |\n",
		r.Through.Round(100*time.Millisecond), float64(r.PreQueued+r.Late)/r.Through.Seconds())
	fmt.Fprintf(w, "| admitted at once by `enter`, light load | %d of %d |\n", r.AtOnce, r.Trickle)
	if !r.Draw.Finished.IsZero() {
		fmt.Fprintf(w, "| the draw | %d drawn (%d dropped as silent) in %s, %d Redis calls, the longest %s |\n",
			r.Draw.Size, r.Draw.Dropped, r.Draw.Finished.Sub(r.Draw.Began).Round(time.Millisecond), r.Draw.Calls, r.Draw.LongestCall.Round(10*time.Microsecond))
	}
}

// nextCall is a waiting visitor's next call: enter until the room has given it a place, then poll
// its status.
func nextCall(enter bool) (method, path string) {
	if enter {
		return http.MethodPost, "/.herdgate/enter"
	}
	return http.MethodGet, "/.herdgate/status"
}
