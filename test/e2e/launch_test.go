package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/internal/draw"
	"github.com/herdgate/herdgate/test/builder"
)

// launchVisitor is what one visitor of the launch saw.
type launchVisitor struct {
	id string
	// arrival is the pre-queue arrival number enter gave; 0 for a visitor who came after opening.
	arrival int64
	// blocked says the protected route refused the visitor before the opening, with not_open.
	blocked bool
	// firstPosition is the first place in line the visitor was told after the opening.
	firstPosition int64
	// expires is when its pass expires: the tick that admitted it plus the pass's ttl, plus jitter.
	expires time.Time
	ordered bool
	err     error
}

// launchClient is one HTTP client for every visitor, sized for a crowd on loopback.
var launchClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 128, MaxIdleConnsPerHost: 128}}

func launchCall(method, url, visitor, pass string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-User-Id", visitor)
	if pass != "" {
		req.Header.Set(admission.PassHeader, pass)
	}
	res, err := launchClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	body := map[string]any{}
	_ = json.Unmarshal(raw, &body)
	return res.StatusCode, body, nil
}

// ms is the body's key in milliseconds; a second when it is missing.
func ms(body map[string]any, key string) time.Duration {
	if v, ok := body[key].(float64); ok && v > 0 {
		return time.Duration(v) * time.Millisecond
	}
	return time.Second
}

// visit plays one visitor as a well-behaved client: it enters (in the pre-queue when it comes before
// the opening), tries the protected route once before the opening, polls as told until admitted and
// places one order with its pass.
func (v *launchVisitor) visit(ctx context.Context, base string, opensAt time.Time) {
	enter := true
	for ctx.Err() == nil {
		method, path := http.MethodGet, "/.herdgate/status"
		if enter {
			method, path = http.MethodPost, "/.herdgate/enter"
		}
		code, body, err := launchCall(method, base+path, v.id, "")
		if err != nil {
			v.err = err
			return
		}
		var wait time.Duration
		switch {
		case code == http.StatusOK && body["admitted"] == true:
			pass, _ := body["pass"].(string)
			if v.expires, err = time.Parse(time.RFC3339Nano, fmt.Sprint(body["passExpiresAt"])); err != nil {
				v.err = fmt.Errorf("passExpiresAt: %w", err)
				return
			}
			code, _, err := launchCall(http.MethodPost, base+"/api/v1/orders", v.id, pass)
			v.ordered, v.err = err == nil && code == http.StatusOK, err
			if err == nil && code != http.StatusOK {
				v.err = fmt.Errorf("the order with a pass got %d", code)
			}
			return
		case code == http.StatusOK && body["phase"] == "PreQueue":
			enter = false
			arrival, ok := body["arrival"].(float64)
			if !ok {
				v.err = fmt.Errorf("%s %s: a pre-queue answer without an arrival: %v", method, path, body)
				return
			}
			v.arrival = int64(arrival)
			if !v.blocked && time.Now().Before(opensAt.Add(-time.Second)) {
				code, refused, err := launchCall(http.MethodPost, base+"/api/v1/orders", v.id, "")
				v.blocked = err == nil && code == http.StatusForbidden && refused["error"] == "not_open"
			}
			wait = ms(body, "nextPollMs")
		case code == http.StatusOK:
			enter = false
			if p, _ := body["position"].(float64); p > 0 && v.firstPosition == 0 {
				v.firstPosition = int64(p)
			}
			wait = ms(body, "nextPollMs")
		case code == http.StatusForbidden || code == http.StatusServiceUnavailable || code == http.StatusNotFound:
			enter = true // not open yet, the room getting ready, or the place was lost
			wait = ms(body, "retryAfterMs")
		case code == http.StatusTooManyRequests:
			wait = ms(body, "retryAfterMs")
		default:
			v.err = fmt.Errorf("%s %s: %d %v", method, path, code, body)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	v.err = ctx.Err()
}

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
	visitors := make([]*launchVisitor, preQueued+late)
	var wg sync.WaitGroup
	// The pre-queue visitors come in the order of their numbers over 8 s from preQueueFrom.
	for i := range preQueued {
		visitors[i] = &launchVisitor{id: fmt.Sprintf("early-%04d", i)}
		start := preQueueFrom.Add(500*time.Millisecond + time.Duration(i)*4*time.Millisecond)
		wg.Go(func() {
			time.Sleep(time.Until(start))
			visitors[i].visit(ctx, base, opensAt)
		})
	}
	// The others come one after another once the room is open and the draw done.
	wg.Go(func() {
		for ctx.Err() == nil {
			code, body, err := launchCall(http.MethodGet, base+"/.herdgate/status", "probe", "")
			if err == nil && code == http.StatusNotFound && body["phase"] == "Open" {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		var lateGroup sync.WaitGroup
		for i := range late {
			v := &launchVisitor{id: fmt.Sprintf("late-%03d", i)}
			visitors[preQueued+i] = v
			// Enter synchronously, so that the order of entry is known, then poll apart.
			code, body, err := launchCall(http.MethodPost, base+"/.herdgate/enter", v.id, "")
			if err != nil {
				v.err = err
				continue
			}
			if code != http.StatusOK {
				v.err = fmt.Errorf("late enter: %d %v", code, body)
				continue
			}
			v.firstPosition = int64(body["position"].(float64))
			lateGroup.Go(func() {
				time.Sleep(ms(body, "nextPollMs") + time.Duration(rand.IntN(100))*time.Millisecond)
				v.visit(ctx, base, opensAt)
			})
		}
		lateGroup.Wait()
	})
	wg.Wait()

	for _, v := range visitors {
		if v.err != nil || !v.ordered {
			t.Fatalf("visitor %s: ordered %v, %v", v.id, v.ordered, v.err)
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
	arrivals := map[int64]*launchVisitor{}
	for _, v := range visitors[:preQueued] {
		if !v.blocked {
			t.Fatalf("visitor %s was not refused not_open on the protected route before the opening", v.id)
		}
		if v.arrival == 0 || arrivals[v.arrival] != nil {
			t.Fatalf("visitor %s holds arrival %d, missing or twice", v.id, v.arrival)
		}
		arrivals[v.arrival] = v
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
	var record bytes.Buffer
	if _, err := q.WriteDrawRecord(context.Background(), &record); err != nil {
		t.Fatal(err)
	}
	results, err := draw.ParseRecord(&record)
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
		byArrival = append(byArrival, float64(v.arrival))
		byPlace = append(byPlace, float64(place[v.arrival]))
		admitted = append(admitted, float64(v.expires.UnixMicro()))
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
	lastEarly := slices.MaxFunc(visitors[:preQueued], func(a, b *launchVisitor) int { return a.expires.Compare(b.expires) }).expires
	for i, v := range visitors[preQueued:] {
		if v.expires.Before(lastEarly.Add(-window)) {
			t.Errorf("late visitor %s was admitted at %s, before the pre-queue's last at %s", v.id, v.expires, lastEarly)
		}
		if i == 0 {
			continue
		}
		prev := visitors[preQueued+i-1]
		if v.firstPosition <= prev.firstPosition-1 {
			t.Errorf("late visitor %s was told position %d after %s was told %d", v.id, v.firstPosition, prev.id, prev.firstPosition)
		}
		if v.expires.Before(prev.expires.Add(-window)) {
			t.Errorf("late visitor %s was admitted at %s, before %s who came earlier (%s)", v.id, v.expires, prev.id, prev.expires)
		}
	}
	t.Logf("%d pre-queue visitors and %d late ones; first order %s after opensAt; ρ(arrival, admission) = %.3f, ρ(place, admission) = %.3f",
		preQueued, late, firstOrder.Sub(opensAt).Round(time.Millisecond), rhoArrival, rhoPlace)
}
