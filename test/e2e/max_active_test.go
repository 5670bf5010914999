package e2e

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
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/front"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/internal/settings"
	"github.com/herdgate/herdgate/test/builder"
)

// capRig is a queue with maxActive, run by a real scheduler and served by two whole proxy replicas
// (admission.Serve: their session loops included), in front of a workload that ends the session of
// every order when releases is set.
type capRig struct {
	q        *queue.Queue
	replicas []string
	orders   atomic.Int64
}

func startCapRig(t *testing.T, name string, maxActive int32, releases bool) *capRig {
	t.Helper()
	rig := &capRig{}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/orders" {
			time.Sleep(200 * time.Millisecond) // an order holds a connection this long
			rig.orders.Add(1)
			if releases {
				w.Header().Set(admission.ReleaseHeader, "true")
			}
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(upstream.Close)
	b := builder.Queue("caps", name).UID(types.UID("caps-" + name)).Generation(1).UpstreamURL(upstream.URL).
		Identity("X-User-Id").AbandonAfter(time.Hour).PassTTL(10 * time.Second)
	wq := b.Obj()
	wq.Spec.Capacity.MaxActive = &maxActive
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cfg, err := admission.NewConfig(wq, key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i := range 2 {
		store := newStore(t)
		if i == 0 {
			var err error
			if rig.q, err = store.Queue(wq.Namespace, wq.Name); err != nil {
				t.Fatal(err)
			}
			_ = rig.q.Delete(context.Background())
		}
		room, err := admission.NewRoom(cfg, store, admission.Options{Log: logr.Discard()})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			_ = front.Serve(ctx, room, front.ServerOptions{Listener: ln, ShutdownTimeout: 5 * time.Second, Log: logr.Discard()})
		})
		rig.replicas = append(rig.replicas, "http://"+ln.Addr().String())
	}
	sched := scheduler.New(&queue.Pool{})
	wg.Go(func() { _ = sched.Start(ctx) })
	derived, err := settings.Derive(wq)
	if err != nil {
		t.Fatal(err)
	}
	sched.Ensure(scheduler.Room{Settings: derived, RedisURL: redisSrv.URL()})
	waitUntil(t, "the scheduler's first ticks", func() bool {
		_, err := rig.q.ReadPlan(context.Background())
		return err == nil
	})
	return rig
}

// visit enters through a replica, polls as told until admitted, and orders with the pass.
func (rig *capRig) visit(replica int, id string) error {
	call := func(method, path, token string) (int, map[string]any, error) {
		req, _ := http.NewRequest(method, rig.replicas[replica]+path, nil)
		req.Header.Set("X-User-Id", id)
		if token != "" {
			req.Header.Set(admission.PassHeader, token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer res.Body.Close()
		body := map[string]any{}
		_ = json.NewDecoder(res.Body).Decode(&body)
		return res.StatusCode, body, nil
	}
	code, body, err := call(http.MethodPost, "/.herdgate/enter", "")
	for deadline := time.Now().Add(2 * time.Minute); err == nil; code, body, err = call(http.MethodGet, "/.herdgate/status", "") {
		if code == http.StatusOK && body["admitted"] == true {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s was never admitted: %d %v", id, code, body)
		}
		wait, _ := body["nextPollMs"].(float64)
		if code == http.StatusTooManyRequests {
			wait, _ = body["retryAfterMs"].(float64)
		}
		time.Sleep(time.Duration(max(wait, 50)) * time.Millisecond)
	}
	if err != nil {
		return err
	}
	code, _, err = call(http.MethodPost, "/api/v1/orders", body["pass"].(string))
	if err != nil {
		return fmt.Errorf("%s's order: %w", id, err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("%s's order: %d", id, code)
	}
	return nil
}

// sampleActive reads the active passes every tick until stop, and returns the most it saw.
func (rig *capRig) sampleActive(stop <-chan struct{}) <-chan int64 {
	most := make(chan int64, 1)
	go func() {
		peak := int64(0)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				most <- peak
				return
			case <-t.C:
				if st, err := rig.q.Stats(context.Background()); err == nil {
					peak = max(peak, st.Active)
				}
			}
		}
	}()
	return most
}

// TestMaxActiveWithSessionsTheWorkloadEnds: with maxActive 50 and a workload that ends each session
// with its order, active passes never exceed 50 and admissions go on as releases come; without
// releases, admission stops at the cap and resumes as passes expire.
func TestMaxActiveWithSessionsTheWorkloadEnds(t *testing.T) {
	t.Run("the workload releases after each order", func(t *testing.T) {
		rig := startCapRig(t, "releasing", 50, true)
		stop := make(chan struct{})
		peak := rig.sampleActive(stop)
		var wg sync.WaitGroup
		errs := make(chan error, 300)
		for i := range 300 {
			wg.Go(func() {
				if err := rig.visit(i%2, fmt.Sprintf("buyer-%03d", i)); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(stop)
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		most := <-peak
		// A replica sends a release to Redis right after the answer that ends the session, not before
		// it: the last order's release may still be on its way.
		var st queue.Stats
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var err error
			if st, err = rig.q.Stats(context.Background()); err != nil {
				t.Fatal(err)
			}
			if st.ReleasedTotal >= 300 || time.Now().After(deadline) {
				break
			}
		}
		t.Logf("300 orders; at most %d active at a tick; %d admitted, %d released", most, st.AdmittedTotal, st.ReleasedTotal)
		if most > 50 {
			t.Fatalf("%d passes were active at once, above maxActive 50", most)
		}
		if rig.orders.Load() != 300 || st.ReleasedTotal != 300 || st.AdmittedTotal != 300 {
			t.Fatalf("orders %d, released %d, admitted %d; want 300 each", rig.orders.Load(), st.ReleasedTotal, st.AdmittedTotal)
		}
	})

	t.Run("without releases admission stops at the cap and resumes as passes expire", func(t *testing.T) {
		rig := startCapRig(t, "holding", 50, false)
		ctx := context.Background()
		for i := range 120 {
			if _, err := rig.q.Enter(ctx, fmt.Sprintf("holder-%03d", i), time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(t, "50 admitted", func() bool {
			st, err := rig.q.Stats(ctx)
			return err == nil && st.AdmittedTotal == 50
		})
		// For most of the passes' 10 s, nobody more.
		time.Sleep(3 * time.Second)
		st, err := rig.q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.AdmittedTotal != 50 || st.Active != 50 {
			t.Fatalf("at the cap: %+v; want 50 admitted, 50 active, nobody more", st)
		}
		waitUntil(t, "admission resuming as the first passes expire", func() bool {
			st, err := rig.q.Stats(ctx)
			return err == nil && st.AdmittedTotal > 50 && st.Active <= 50
		})
	})
}
