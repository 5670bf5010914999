package queue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdgate/herdgate/test/testenv"
)

// model is what the engine's state must be, kept by the test in plain Go.
type model struct {
	waiting  []string        // arrival order
	silent   map[string]bool // waiting visitors that stopped polling
	admitted map[string]Pass // visitors holding a pass
	lives    map[string]int  // how many times each visitor has been admitted
}

func newModel() *model {
	return &model{silent: map[string]bool{}, admitted: map[string]Pass{}, lives: map[string]int{}}
}

func (m *model) position(id string) int { return slices.Index(m.waiting, id) + 1 }

func (m *model) drop(id string) {
	if i := slices.Index(m.waiting, id); i >= 0 {
		m.waiting = slices.Delete(m.waiting, i, i+1)
	}
	delete(m.silent, id)
}

// expectAdmit predicts a tick: the front visitors that still poll, skipping (and dropping) silent
// ones, within the examination bound of the script.
func (m *model) expectAdmit(n, budget int) (admit []string, droppedAtFront []string) {
	examined := 0
	for _, id := range m.waiting {
		if len(admit) == n || examined == n+budget {
			break
		}
		examined++
		if m.silent[id] {
			droppedAtFront = append(droppedAtFront, id)
		} else {
			admit = append(admit, id)
		}
	}
	return admit, droppedAtFront
}

// state reads what Redis holds for every visitor of the pool in two round trips.
func readState(t *testing.T, q *Queue, pool []string) (waiting []string, passes map[string]bool) {
	t.Helper()
	ctx := context.Background()
	waiting, err := q.rdb.ZRange(ctx, q.keys.wait, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.BoolCmd, len(pool))
	for i, id := range pool {
		cmds[i] = pipe.HExists(ctx, q.keys.passes, id)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	passes = map[string]bool{}
	for i, c := range cmds {
		if c.Val() {
			passes[pool[i]] = true
		}
	}
	return waiting, passes
}

// checkInvariant: each visitor is waiting (in the model's order), or holds exactly one pass, or is
// gone (expired or abandoned) — never two of these — and Redis agrees with the model.
func checkInvariant(t *testing.T, step int, q *Queue, m *model, pool []string) {
	t.Helper()
	waiting, passes := readState(t, q, pool)
	// Silent visitors may be swept at any tick; forget those Redis no longer holds.
	inRedis := map[string]bool{}
	for _, id := range waiting {
		inRedis[id] = true
	}
	for id := range m.silent {
		if !inRedis[id] {
			m.drop(id)
		}
	}
	if !slices.Equal(waiting, m.waiting) {
		t.Fatalf("step %d: waiting order differs\nredis: %v\nmodel: %v", step, waiting, m.waiting)
	}
	for _, id := range pool {
		w, p := inRedis[id], passes[id]
		_, mp := m.admitted[id]
		if w && p {
			t.Fatalf("step %d: %s is waiting and holds a pass", step, id)
		}
		if p != mp {
			t.Fatalf("step %d: %s holds a pass in Redis: %v, in the model: %v", step, id, p, mp)
		}
	}
}

func TestPropertyRandomTraffic(t *testing.T) {
	ticks := 10_000
	if testing.Short() {
		ticks = 1_000
	}
	r := testenv.StartRedis(t)
	rdb, err := NewClient(r.URL(), ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	runRandomTraffic(t, rdb, ticks, 1)

	t.Run("cluster", func(t *testing.T) {
		c := testenv.StartRedisCluster(t, 3)
		crdb, err := NewClient(c.URL(), ClientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer crdb.Close()
		runRandomTraffic(t, crdb, ticks/10, 2)
	})
}

func runRandomTraffic(t *testing.T, rdb redis.UniversalClient, ticks int, seed uint64) {
	ctx := context.Background()
	q := newQueue(t, rdb)
	rng := rand.New(rand.NewPCG(seed, 42))
	pool := visitorIDs("p", 300)
	m := newModel()
	const abandonAfter = time.Hour
	var tickID int64
	var maxDepth, frontDrops int

	for step := 0; step < ticks; step++ {
		// A few visitor actions between two ticks.
		for range rng.IntN(7) {
			id := pool[rng.IntN(len(pool))]
			switch op := rng.IntN(20); {
			case op < 9: // enter (new, again, or holding a pass)
				p, err := q.Enter(ctx, id, abandonAfter)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case m.admitted[id] != (Pass{}):
					if p.State != Admitted || p.Pass != m.admitted[id] {
						t.Fatalf("step %d: Enter(%s) holding a pass = %+v, want its pass %+v", step, id, p, m.admitted[id])
					}
				case m.silent[id]:
					// Silent past abandonAfter: back of the queue with a fresh place.
					m.drop(id)
					m.waiting = append(m.waiting, id)
					if p.Position != int64(len(m.waiting)) {
						t.Fatalf("step %d: Enter(%s) after silence = %+v, want the back (%d)", step, id, p, len(m.waiting))
					}
				case m.position(id) > 0:
					if p.State != Waiting || p.Position != int64(m.position(id)) {
						t.Fatalf("step %d: re-Enter(%s) = %+v, want position %d", step, id, p, m.position(id))
					}
				default:
					m.waiting = append(m.waiting, id)
					if p.State != Waiting || p.Position != int64(len(m.waiting)) || p.Depth != int64(len(m.waiting)) {
						t.Fatalf("step %d: Enter(%s) = %+v, want position %d of %d", step, id, p, len(m.waiting), len(m.waiting))
					}
				}
			case op < 15: // poll
				p, err := q.Status(ctx, id, abandonAfter)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case m.admitted[id] != (Pass{}):
					if p.State != Admitted || p.Pass != m.admitted[id] {
						t.Fatalf("step %d: Status(%s) = %+v, want its pass", step, id, p)
					}
				case m.silent[id]:
					m.drop(id)
					if p.State != NotQueued {
						t.Fatalf("step %d: Status(%s) after silence = %+v, want NotQueued", step, id, p)
					}
				case m.position(id) > 0:
					if p.State != Waiting || p.Position != int64(m.position(id)) || p.Depth != int64(len(m.waiting)) {
						t.Fatalf("step %d: Status(%s) = %+v, want position %d of %d", step, id, p, m.position(id), len(m.waiting))
					}
				default:
					if p.State != NotQueued {
						t.Fatalf("step %d: Status(%s) = %+v, want NotQueued", step, id, p)
					}
				}
			case op < 16: // a waiting visitor goes silent
				if len(m.waiting) > 0 {
					id := m.waiting[rng.IntN(len(m.waiting))]
					if !m.silent[id] {
						silence(t, q, id, 2*abandonAfter)
						m.silent[id] = true
					}
				}
			default: // a pass expires
				for id := range m.admitted { // map order: a random holder
					if err := rdb.HDel(ctx, q.keys.passes, id).Err(); err != nil {
						t.Fatal(err)
					}
					delete(m.admitted, id)
					break
				}
			}
		}

		n := rng.IntN(2)
		budget := 1 + rng.IntN(8)
		want, droppedAtFront := m.expectAdmit(n, budget)
		tickID++
		res, err := q.Admit(ctx, AdmitRequest{TickID: tickID, Limit: n, Window: 100 * time.Millisecond, Seed: tickID,
			PassTTL: time.Hour, AbandonAfter: abandonAfter, FrontBudget: budget})
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(res.Admitted))
		for i, a := range res.Admitted {
			got[i] = a.ID
			if m.lives[a.ID] > 0 && m.admitted[a.ID] != (Pass{}) {
				t.Fatalf("step %d: %s admitted while it still holds a pass", step, a.ID)
			}
			if a.Pass.NotBefore.Before(res.Now) || !a.Pass.NotBefore.Before(res.Now.Add(100*time.Millisecond)) {
				t.Fatalf("step %d: %s not-before outside the jitter window", step, a.ID)
			}
			m.admitted[a.ID] = a.Pass
			m.lives[a.ID]++
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: tick of %d admitted %v, want %v (waiting %v, silent %v)", step, n, got, want, m.waiting, m.silent)
		}
		for _, id := range append(got, droppedAtFront...) {
			m.drop(id)
		}
		checkInvariant(t, step, q, m, pool)
		maxDepth = max(maxDepth, len(m.waiting))
		frontDrops += len(droppedAtFront)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var lives int64
	for _, n := range m.lives {
		lives += int64(n)
	}
	if st.AdmittedTotal != lives {
		t.Fatalf("admitted total %d, the model counted %d admissions", st.AdmittedTotal, lives)
	}
	t.Logf("%d ticks: %d admissions, %d abandoned (%d at the front of a tick), up to %d waiting", ticks, lives, st.AbandonedTotal, frontDrops, maxDepth)
	if !testing.Short() && (frontDrops == 0 || st.AbandonedTotal == int64(frontDrops) || maxDepth < 20) {
		t.Fatal("the random traffic did not exercise front drops, sweeps and a deep queue; adjust its mix")
	}
}

// TestAtomicityUnderFaults runs visitors and a scheduler against one server while another client kills
// the engine's connections and flushes the script cache at random moments. Calls fail; the state
// must not: nobody is lost, nobody holds a pass and a place, nobody is admitted twice.
func TestAtomicityUnderFaults(t *testing.T) {
	duration := 8 * time.Second
	if testing.Short() {
		duration = 2 * time.Second
	}
	ctx := context.Background()
	srv := testenv.StartRedis(t)
	rdb, err := NewClient(srv.URL(), ClientOptions{ClientName: "engine", PoolSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	chaos := redis.NewClient(&redis.Options{Addr: srv.Addr(), ClientName: "chaos"})
	defer chaos.Close()
	q := newQueue(t, rdb)

	stop := make(chan struct{})
	var kills, flushes, failedCalls atomic.Int64
	var wg sync.WaitGroup

	// Chaos: every few milliseconds, kill the engine's connections or flush the scripts.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(3, 3))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(rng.IntN(15)) * time.Millisecond):
			}
			if rng.IntN(3) == 0 {
				if chaos.ScriptFlush(ctx).Err() == nil {
					flushes.Add(1)
				}
				continue
			}
			list, err := chaos.ClientList(ctx).Result()
			if err != nil {
				continue
			}
			for _, line := range strings.Split(list, "\n") {
				if !strings.Contains(line, " name=engine ") {
					continue
				}
				id := strings.TrimPrefix(strings.Fields(line)[0], "id=")
				if rng.IntN(2) == 0 && chaos.Do(ctx, "CLIENT", "KILL", "ID", id).Err() == nil {
					kills.Add(1)
				}
			}
		}
	})

	// Visitors: enter and poll; remember whom Redis confirmed.
	var mu sync.Mutex
	confirmed := map[string]bool{}
	var attempted []string
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				mu.Lock()
				attempted = append(attempted, id)
				mu.Unlock()
				if _, err := q.Enter(ctx, id, time.Hour); err != nil {
					failedCalls.Add(1)
				} else {
					mu.Lock()
					confirmed[id] = true
					mu.Unlock()
				}
				if _, err := q.Status(ctx, fmt.Sprintf("w%d-%d", w, rng.IntN(i+1)), time.Hour); err != nil {
					failedCalls.Add(1)
				}
			}
		})
	}

	// Scheduler: tick ids grow; a failed call is retried with the same id until Redis answers, so a
	// lost reply can neither skip nor repeat a tick.
	admittedSeen := map[string]int{}
	var ticks, duplicates int64
	wg.Go(func() {
		for tick := int64(1); ; tick++ {
			select {
			case <-stop:
				return
			default:
			}
			for {
				res, err := q.Admit(ctx, AdmitRequest{TickID: tick, Limit: 7, Window: 7 * time.Millisecond, PassTTL: time.Hour, AbandonAfter: time.Hour})
				if err != nil {
					failedCalls.Add(1)
					continue
				}
				ticks++
				if res.Duplicate {
					duplicates++ // the first attempt ran; its reply was lost
				}
				for _, a := range res.Admitted {
					admittedSeen[a.ID]++
				}
				break
			}
			time.Sleep(time.Millisecond)
		}
	})

	time.Sleep(duration)
	close(stop)
	wg.Wait()

	check := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer check.Close()
	cq, err := New(check, "test", testQueueName(t))
	if err != nil {
		t.Fatal(err)
	}
	waiting, passes := readState(t, cq, attempted)
	inQueue := map[string]bool{}
	for _, id := range waiting {
		inQueue[id] = true
	}
	for _, id := range attempted {
		if inQueue[id] && passes[id] {
			t.Fatalf("%s is waiting and holds a pass", id)
		}
		if confirmed[id] && !inQueue[id] && !passes[id] {
			t.Fatalf("%s entered (Redis confirmed it) and is now neither waiting nor admitted: lost", id)
		}
	}
	for id, n := range admittedSeen {
		if n > 1 {
			t.Fatalf("%s admitted %d times", id, n)
		}
		if !passes[id] {
			t.Fatalf("%s was reported admitted but holds no pass", id)
		}
	}
	st, err := cq.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.AdmittedTotal != int64(len(passes)) || st.Active != int64(len(passes)) {
		t.Fatalf("admitted total %d and active %d, but %d passes exist", st.AdmittedTotal, st.Active, len(passes))
	}
	// Admissions whose reply was lost are in Redis but not in admittedSeen; none may be missing the
	// other way round, and the fault injection must actually have hit.
	if kills.Load() == 0 || flushes.Load() == 0 || failedCalls.Load() == 0 {
		t.Fatalf("the faults did not bite: %d kills, %d flushes, %d failed calls", kills.Load(), flushes.Load(), failedCalls.Load())
	}
	t.Logf("%d visitors tried, %d confirmed, %d admitted (%d replies seen), %d waiting; %d ticks (%d replayed); %d kills, %d flushes, %d failed calls",
		len(attempted), len(confirmed), len(passes), len(admittedSeen), len(waiting), ticks, duplicates, kills.Load(), flushes.Load(), failedCalls.Load())
}
