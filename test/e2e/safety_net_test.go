package e2e

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/test/builder"
)

// safetyNet is a queue run by a real scheduler on the real clock, served by two proxy replicas, each
// on the fast front herdgate-proxy serves, with no Kubernetes in between.
type safetyNet struct {
	q        *queue.Queue
	replicas []string // base URLs
}

func startSafetyNet(t *testing.T, name string, upstreamURL string) *safetyNet {
	t.Helper()
	wq := builder.Queue("safety", name).UID(types.UID("safety-"+name)).Generation(1).UpstreamURL(upstreamURL).
		Routes(builder.Route("/api/v1/orders", false, "POST"), builder.Route("/checkout", true, "GET")).
		Identity("X-User-Id").AbandonAfter(time.Hour).Obj()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cfg, err := admission.NewConfig(wq, key)
	if err != nil {
		t.Fatal(err)
	}
	s := &safetyNet{}
	for i := range 2 {
		store := newStore(t)
		if i == 0 {
			if s.q, err = store.Queue(wq.Namespace, wq.Name); err != nil {
				t.Fatal(err)
			}
			_ = s.q.Delete(context.Background())
		}
		room, err := admission.NewRoom(cfg, store, admission.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.replicas = append(s.replicas, serveFront(t, room))
	}
	sched := scheduler.New(&queue.Pool{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = sched.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	sched.Ensure(scheduler.Room{Settings: builder.Queue("safety", name).UID(types.UID("safety-" + name)).Generation(1).
		AbandonAfter(time.Hour).Settings(), RedisURL: redisSrv.URL()})
	waitUntil(t, "the scheduler's first ticks", func() bool {
		_, err := s.q.ReadPlan(context.Background())
		return err == nil
	})
	return s
}

// enter enters visitor through the replica and returns the answer.
func (s *safetyNet) enter(t *testing.T, replica int, visitor string) (int, map[string]any) {
	req, _ := http.NewRequest(http.MethodPost, s.replicas[replica]+"/.herdgate/enter", nil)
	req.Header.Set("X-User-Id", visitor)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	defer res.Body.Close()
	body := map[string]any{}
	_ = json.NewDecoder(res.Body).Decode(&body)
	return res.StatusCode, body
}

// TestTheSafetyNet: under light load nobody waits, every visitor is admitted by enter with no poll,
// and a browser goes straight to the protected page; under a steady load above the plan, ticks and
// instant admissions together keep to the plan's rate, whatever replica a visitor comes through.
func TestTheSafetyNet(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "the checkout page") }))
	defer upstream.Close()

	t.Run("a trickle below the plan's rate is admitted at once", func(t *testing.T) {
		s := startSafetyNet(t, "trickle", upstream.URL)
		// 20 a second for 3 s, the reference plan admits 140.
		for i := range 60 {
			code, body := s.enter(t, i%2, fmt.Sprintf("trickle-%03d", i))
			if code != http.StatusOK || body["admitted"] != true || body["pass"] == nil {
				t.Fatalf("visitor %d under a trickle: %d %v; want admitted with a pass, no poll", i, code, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		st, err := s.q.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.InstantAdmittedTotal != 60 || st.Depth != 0 {
			t.Fatalf("stats after the trickle = %+v; want 60 admitted at once and nobody waiting", st)
		}
	})

	t.Run("a browser goes straight to the protected page", func(t *testing.T) {
		s := startSafetyNet(t, "browser", upstream.URL)
		jar, _ := cookiejar.New(nil)
		browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		get := func() *http.Response {
			req, _ := http.NewRequest(http.MethodGet, s.replicas[0]+"/checkout/cart", nil)
			req.Header.Set("Accept", "text/html")
			req.Header.Set("X-User-Id", "shopper")
			res, err := browser.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		res := get()
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || string(body) != "the checkout page" || !strings.Contains(res.Header.Get("Set-Cookie"), admission.CookieNamesOf("safety", "browser").Pass+"=") {
			t.Fatalf("a browser's first protected request: %d %q (Set-Cookie %q); want the page and a pass", res.StatusCode, body, res.Header.Get("Set-Cookie"))
		}
		again := get()
		_ = again.Body.Close()
		if again.StatusCode != http.StatusOK {
			t.Fatalf("the same browser with its pass: %d", again.StatusCode)
		}
	})

	t.Run("a steady load above the plan keeps to the plan's rate", func(t *testing.T) {
		if testing.Short() {
			t.Skip("runs 30 s of load")
		}
		s := startSafetyNet(t, "steady", upstream.URL)
		// 150 entries a second over both replicas, against 140 admissions a second.
		ctx, cancel := context.WithCancel(context.Background())
		var sent atomic.Int64
		// wg holds the workers and every entry they started: the replicas stop only after the last
		// answer, so that no entry meets a server shutting down.
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Go(func() {
				tick := time.NewTicker(40 * time.Millisecond) // 25 a second per worker
				defer tick.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
						n := sent.Add(1)
						wg.Go(func() { s.enter(t, w%2, fmt.Sprintf("steady-%06d", n)) })
					}
				}
			})
		}
		time.Sleep(2 * time.Second)
		before, err := s.q.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		time.Sleep(30 * time.Second)
		after, err := s.q.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		elapsed := time.Since(start)
		cancel()
		wg.Wait()
		rate := float64(after.AdmittedTotal-before.AdmittedTotal) / elapsed.Seconds()
		t.Logf("%d sent; %.2f admitted a second over %s (%d at once in all), %d waiting at the end",
			sent.Load(), rate, elapsed.Round(time.Millisecond), after.InstantAdmittedTotal, after.Depth)
		if rate < 0.99*140 || rate > 1.01*140 {
			t.Fatalf("admitted %.2f a second over 30 s, want 140 ± 1 %%", rate)
		}
	})
}
