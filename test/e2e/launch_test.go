package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herdgate/herdgate/internal/draw"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/herd"
)

// TestALaunch runs a launch end to end on the operator, Redis and a proxy: a queue scheduled about
// 20 s ahead, 2,000 visitors taking pre-queue places in the order of their numbers, 100 coming after
// the opening. Nobody reaches the protected route before opensAt; the seed status reveals hashes
// to the commitment published before the pre-queue opened; the draw's record is what the seed
// gives; the order of admission tells nothing of the order of arrival; and the visitors who came
// after the opening are admitted behind the pre-queue in the order they came.
func TestALaunch(t *testing.T) {
	const preQueued, late = 2000, 100
	var mu sync.Mutex
	var orders []time.Time
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		orders = append(orders, time.Now())
		mu.Unlock()
		fmt.Fprint(w, "ordered")
	}))
	defer upstream.Close()

	now := time.Now().Truncate(time.Second)
	preQueueFrom, opensAt := now.Add(5*time.Second), now.Add(20*time.Second)
	wq := builder.Queue("launch", "drop").UpstreamURL(upstream.URL).Identity("X-User-Id").AbandonAfter(time.Minute).
		Routes(builder.Route("/api/v1/orders", false, "POST")).Schedule(preQueueFrom, opensAt, time.Time{}).Obj()
	createQueue(t, wq)
	var commitment string
	waitUntil(t, "the seed's commitment in status", func() bool {
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(wq), wq); err != nil {
			return false
		}
		commitment = wq.Status.SeedCommitment
		return commitment != ""
	})
	if !time.Now().Before(preQueueFrom) {
		t.Fatalf("the commitment came at %s, after the pre-queue opened at %s", time.Now(), preQueueFrom)
	}
	if wq.Status.Seed != "" {
		t.Fatal("status shows the seed before the opening")
	}
	base, q := serveQueue(t, wq)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := herd.LaunchClient()
	visitors := make([]*herd.LaunchVisitor, preQueued+late)
	var wg sync.WaitGroup
	// The pre-queue visitors come in the order of their numbers over 8 s from preQueueFrom.
	for i := range preQueued {
		visitors[i] = &herd.LaunchVisitor{ID: fmt.Sprintf("early-%04d", i)}
		start := preQueueFrom.Add(500*time.Millisecond + time.Duration(i)*4*time.Millisecond)
		wg.Go(func() {
			time.Sleep(time.Until(start))
			visitors[i].Visit(ctx, c, base, "/api/v1/orders", opensAt)
		})
	}
	// The others come one after another once the room is open and the draw done.
	for i := range late {
		visitors[preQueued+i] = &herd.LaunchVisitor{ID: fmt.Sprintf("late-%03d", i)}
	}
	wg.Go(func() {
		if err := herd.WaitOpen(ctx, c, base); err != nil {
			visitors[preQueued].Err = err
			return
		}
		herd.ComeInOrder(ctx, &wg, c, base, opensAt, visitors[preQueued:])
	})
	wg.Wait()

	for _, v := range visitors {
		if v.Err != nil || !v.Ordered {
			t.Fatalf("visitor %s: ordered %v, %v", v.ID, v.Ordered, v.Err)
		}
	}
	mu.Lock()
	if len(orders) != preQueued+late {
		t.Fatalf("the workload saw %d orders, want %d", len(orders), preQueued+late)
	}
	for _, at := range orders {
		if at.Before(opensAt) {
			t.Fatalf("an order reached the workload at %s, before opensAt %s", at.Format(time.RFC3339Nano), opensAt)
		}
	}
	firstOrder := slices.MinFunc(orders, func(a, b time.Time) int { return a.Compare(b) })
	mu.Unlock()
	arrivals := map[int64]*herd.LaunchVisitor{}
	for _, v := range visitors[:preQueued] {
		if !v.Blocked {
			t.Fatalf("visitor %s was not refused not_open on the protected route before the opening", v.ID)
		}
		if v.Arrival == 0 || arrivals[v.Arrival] != nil {
			t.Fatalf("visitor %s holds arrival %d, missing or twice", v.ID, v.Arrival)
		}
		arrivals[v.Arrival] = v
	}

	// The seed: revealed in status at the opening, hashing to the commitment.
	if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(wq), wq); err != nil {
		t.Fatal(err)
	}
	seed, err := draw.ParseSeed(wq.Status.Seed)
	if err != nil {
		t.Fatalf("status.seed %q: %v", wq.Status.Seed, err)
	}
	// The record: recomputed from the seed and the arrivals the visitors were told, place for place.
	results, err := q.ReadDrawRecord(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := draw.Verify(seed, commitment, results); err != nil {
		t.Fatalf("the draw does not check: %v", err)
	}
	if len(results) != preQueued {
		t.Fatalf("the record has %d places, want %d", len(results), preQueued)
	}
	told := make([]int64, 0, preQueued)
	for a := range arrivals {
		told = append(told, a)
	}
	draw.Order(seed, told)
	place := map[int64]int64{}
	for i, r := range results {
		if r.Arrival != told[i] {
			t.Fatalf("place %d went to arrival %d; the seed gives it to %d", i+1, r.Arrival, told[i])
		}
		place[r.Arrival] = r.Place
	}

	// Admission follows the draw, not the arrival.
	var byArrival, byPlace, admitted []float64
	for _, v := range visitors[:preQueued] {
		byArrival = append(byArrival, float64(v.Arrival))
		byPlace = append(byPlace, float64(place[v.Arrival]))
		admitted = append(admitted, float64(v.Expires.UnixMicro()))
	}
	rhoArrival, rhoPlace := draw.Spearman(byArrival, admitted), draw.Spearman(byPlace, admitted)
	if rhoArrival < -0.1 || rhoArrival > 0.1 {
		t.Errorf("Spearman ρ of arrival and admission = %.3f, want |ρ| < 0.1", rhoArrival)
	}
	if rhoPlace < 0.99 {
		t.Errorf("Spearman ρ of drawn place and admission = %.3f, want above 0.99", rhoPlace)
	}

	// The late visitors: behind the whole pre-queue, in the order they came (up to one tick's jitter).
	window := wq.Spec.EffectiveJitterWindow() + time.Millisecond
	lastEarly := slices.MaxFunc(visitors[:preQueued], func(a, b *herd.LaunchVisitor) int { return a.Expires.Compare(b.Expires) }).Expires
	for i, v := range visitors[preQueued:] {
		if v.Expires.Before(lastEarly.Add(-window)) {
			t.Errorf("late visitor %s was admitted at %s, before the pre-queue's last at %s", v.ID, v.Expires, lastEarly)
		}
		if i == 0 {
			continue
		}
		// Their order shows in when they were admitted, not in the positions they were told: a tick
		// that admits between two of their entries moves everyone up by its batch.
		prev := visitors[preQueued+i-1]
		if v.Expires.Before(prev.Expires.Add(-window)) {
			t.Errorf("late visitor %s was admitted at %s, before %s who came earlier (%s)", v.ID, v.Expires, prev.ID, prev.Expires)
		}
	}
	t.Logf("%d pre-queue visitors and %d late ones; first order %s after opensAt; ρ(arrival, admission) = %.3f, ρ(place, admission) = %.3f",
		preQueued, late, firstOrder.Sub(opensAt).Round(time.Millisecond), rhoArrival, rhoPlace)
}
