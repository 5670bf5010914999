// Package failover drills what a Redis failover does to a waiting room: a primary with replicas (watched
// by Sentinels, or a Redis Cluster's master with its replica) on loopback, a real scheduler and two
// whole proxy replicas on its URL, a steady herd through them, and the primary killed with SIGKILL
// mid-herd.
package failover

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
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/front"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/internal/settings"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

// The drill's room: 20 admissions a second (4 connections held 100 ms at 50 %), 10 per 500 ms tick,
// at most 12 active passes, sessions of a second that the workload ends with each order (so the cap,
// not the rate, holds admission back), and 20 arrivals a second.
const (
	arrivalsPerSecond = 20
	herdDuration      = 12 * time.Second
	killAfter         = 5 * time.Second
	maxActive         = 12
	// passTTL outlasts the drill, so that the released passes checked at its end would still be
	// taken, were they not revoked.
	passTTL = time.Minute
	// orderTime is how long an order holds its session.
	orderTime = time.Second
	// replicationLag is how far behind the primary its replicas are, as over a slow network: more
	// than the admission lead (pollMin and its spread, 240 ms here), so that a visitor can hold a pass
	// whose admission a failover loses.
	replicationLag = time.Second
)

// journey is what one visitor went through.
type journey struct {
	id          string
	place       string // the signed place it was last given
	passes      []string
	atOnce      bool // admitted on entering
	placesLost  int  // answers not_queued after it had a place
	unavailable int  // 503s while Redis was away
	orderFailed bool
	admittedAt  time.Time
	releasedAt  time.Time
}

// TestAFailoverOfTheSentinelsPrimary runs the drill on a primary, two replicas a second behind it and
// three Sentinels, and prints what the failover did: visitors admitted twice, places lost and given
// back, the most passes in use at once against maxActive, protected requests of admitted visitors
// that failed, and how long admission stopped.
func TestAFailoverOfTheSentinelsPrimary(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a Redis primary mid-herd")
	}
	g := testenv.StartRedisSentinelGroup(t, 2, 3, replicationLag)
	runDrill(t, "sentinel", g.URL(), true, func(ctx context.Context, _ string) (*testenv.Redis, error) { return g.Primary(ctx) })
}

// TestAFailoverOfAClusterMaster runs the drill on a Redis Cluster of three masters with a replica
// each, killing the master that serves the room's slot.
func TestAFailoverOfAClusterMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a Redis Cluster master mid-herd")
	}
	c := testenv.StartRedisClusterWithReplicas(t, 3, time.Second)
	runDrill(t, "cluster", c.URL(), false, c.MasterOf)
}

// primaryOf says which server holds a key now.
type primaryOf func(ctx context.Context, key string) (*testenv.Redis, error)

// runDrill sends the herd through a room on the Redis url, kills the server that holds the room's
// keys five seconds in, just after a visitor had its pass, and reports and checks what happened.
// lagged says the replicas are held behind, so that the failover loses places and admissions.
func runDrill(t *testing.T, name, url string, lagged bool, primary primaryOf) {
	var orders atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/orders" {
			time.Sleep(orderTime)
			orders.Add(1)
			w.Header().Set(admission.ReleaseHeader, "true")
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(upstream.Close)
	wq := builder.Queue("failover", name).UID(types.UID("failover-"+name)).Generation(1).UpstreamURL(upstream.URL).
		Identity("X-User-Id").Capacity(4, 100*time.Millisecond, 50).Tick(500*time.Millisecond).MaxActive(maxActive).
		AbandonAfter(time.Hour).PassTTL(passTTL).Polling(200*time.Millisecond, time.Second).Obj()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cfg, err := admission.NewConfig(wq, key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var replicas []string
	var proxies []*admission.Room
	var q *queue.Queue
	var watches []*queue.FailoverWatch
	for i := range 2 {
		failovers := queue.NewFailoverWatch()
		rdb, err := queue.NewClient(url, queue.ClientOptions{ClientName: "herdgate-proxy", Failovers: failovers})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rdb.Close() })
		store := queue.NewStore(rdb, queue.StoreOptions{Failovers: failovers})
		watches = append(watches, failovers)
		t.Cleanup(store.Close)
		if i == 0 {
			if q, err = store.Queue(wq.Namespace, wq.Name); err != nil {
				t.Fatal(err)
			}
		}
		room, err := admission.NewRoom(cfg, store, admission.Options{Log: logr.Discard(), Replica: fmt.Sprintf("proxy-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		proxies = append(proxies, room)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			_ = front.Serve(ctx, room, front.ServerOptions{Listener: ln, ShutdownTimeout: 5 * time.Second, Log: logr.Discard()})
		})
		replicas = append(replicas, "http://"+ln.Addr().String())
	}
	// Every admission the scheduler makes, by visitor, on whichever primary it made it.
	var admittedMu sync.Mutex
	schedulerAdmitted := map[string][]time.Time{}
	sched := scheduler.New(&queue.Pool{}, scheduler.WithTickObserver(func(r scheduler.TickReport) {
		if r.Key.Name != wq.Name {
			return
		}
		admittedMu.Lock()
		defer admittedMu.Unlock()
		for _, v := range r.Result.Admitted {
			schedulerAdmitted[v.ID] = append(schedulerAdmitted[v.ID], r.Started)
		}
	}))
	wg.Go(func() { _ = sched.Start(ctx) })
	derived, err := settings.Derive(wq)
	if err != nil {
		t.Fatal(err)
	}
	sched.Ensure(scheduler.Room{Settings: derived, RedisURL: url})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := q.ReadPlan(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the scheduler published no plan within 30 s")
		}
	}

	roomKey := "{hg:" + wq.Namespace + "/" + wq.Name + "}:q"
	began := time.Now()
	var killedAt time.Time
	var oldPrimary *testenv.Redis
	// Visitors say here who just learnt of its pass; killed closes once the primary is killed.
	learnt := make(chan string, 64)
	killed := make(chan struct{})
	wg.Go(func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(killAfter):
		}
		// Kill it as soon as a visitor holds a pass whose admission has not reached the replicas: the
		// case in which the new primary would admit that visitor a second time.
		for {
			var id string
			select {
			case <-ctx.Done():
				return
			case id = <-learnt:
			}
			admittedMu.Lock()
			times := schedulerAdmitted[id]
			admittedMu.Unlock()
			if len(times) > 0 && time.Since(times[len(times)-1]) < replicationLag/2 {
				break
			}
		}
		var err error
		if oldPrimary, err = primary(ctx, roomKey); err != nil {
			t.Error(err)
			return
		}
		killedAt = time.Now()
		oldPrimary.Stop() // SIGKILL
		close(killed)
	})

	var mu sync.Mutex
	var journeys []*journey
	var visitors sync.WaitGroup
	interval := time.Second / arrivalsPerSecond
	for i := 0; time.Since(began) < herdDuration; i++ {
		j := &journey{id: fmt.Sprintf("visitor-%04d", i)}
		mu.Lock()
		journeys = append(journeys, j)
		mu.Unlock()
		replica := replicas[i%len(replicas)]
		visitors.Go(func() { visit(ctx, replica, j, learnt) })
		time.Sleep(interval)
	}
	visitors.Wait()
	select {
	case <-killed:
	case <-time.After(time.Second):
		t.Fatalf("no visitor had its pass within %s of its admission, so the primary was never killed", replicationLag/2)
	}
	newPrimary, err := primary(ctx, roomKey)
	if err != nil {
		t.Fatal(err)
	}
	// Every session ended with its order: once the proxies have synced, neither takes a pass again,
	// though the releases made just before the kill went down with the old primary.
	time.Sleep(2 * time.Second)
	var releasedTaken int
	for i, j := range journeys {
		for _, pass := range j.passes {
			if releasedPassTaken(ctx, replicas[(i+1)%len(replicas)], j.id, pass) {
				releasedTaken++
				t.Logf("%s's pass, released at %s, was taken again (the kill: %s)", j.id, j.releasedAt.Sub(began).Round(time.Millisecond), killedAt.Sub(began).Round(time.Millisecond))
			}
		}
	}

	// The figures.
	var twice, lost, lostVisitors, failed, unavailable, neverAdmitted int
	var admissions []time.Time
	type edge struct {
		at time.Time
		d  int
	}
	var edges []edge
	for _, j := range journeys {
		if len(j.passes) > 1 {
			twice++
		}
		lost += j.placesLost
		if j.placesLost > 0 {
			lostVisitors++
		}
		if j.orderFailed {
			failed++
		}
		unavailable += j.unavailable
		if j.admittedAt.IsZero() {
			neverAdmitted++
			continue
		}
		// A visitor the scheduler admitted again after it had its pass: a place the new primary still
		// held for a visitor the old one had admitted. (An admission the old primary made and lost
		// before the visitor learnt of it is made again, and the visitor has one pass.)
		admittedMu.Lock()
		times := schedulerAdmitted[j.id]
		admittedMu.Unlock()
		for _, at := range times {
			if at.After(j.admittedAt) {
				twice++
				t.Logf("%s had its pass at %s and was admitted again at %s (the kill: %s)", j.id,
					j.admittedAt.Sub(began).Round(time.Millisecond), at.Sub(began).Round(time.Millisecond), killedAt.Sub(began).Round(time.Millisecond))
				break
			}
		}
		admissions = append(admissions, j.admittedAt)
		end := j.releasedAt
		if end.IsZero() {
			end = j.admittedAt.Add(passTTL)
		}
		edges = append(edges, edge{j.admittedAt, 1}, edge{end, -1})
	}
	sort.Slice(edges, func(a, b int) bool {
		if edges[a].at.Equal(edges[b].at) {
			return edges[a].d < edges[b].d
		}
		return edges[a].at.Before(edges[b].at)
	})
	active, mostActive := 0, 0
	for _, e := range edges {
		active += e.d
		mostActive = max(mostActive, active)
	}
	sort.Slice(admissions, func(a, b int) bool { return admissions[a].Before(admissions[b]) })
	var pause time.Duration
	for i := 1; i < len(admissions); i++ {
		if admissions[i].After(killedAt) && admissions[i-1].Before(killedAt.Add(30*time.Second)) {
			pause = max(pause, admissions[i].Sub(admissions[i-1]))
		}
	}
	restored := proxyCounter(t, proxies, "herdgate_proxy_requests_total", "outcome", "restored")
	prevented := proxyCounter(t, proxies, "herdgate_proxy_second_admissions_prevented_total", "", "")
	writtenBack := proxyCounter(t, proxies, "herdgate_proxy_passes_written_back_total", "", "")
	t.Logf("%s failover of %s to %s, %s into a herd of %d visitors: admitted twice %d; places lost and given back %v; "+
		"places lost for good %d (by %d visitors, who entered again at the back); passes written back %v, of visitors the new primary still had waiting %v; "+
		"most passes active at once %d (maxActive %d, overshoot %d); released passes taken again %d; failed protected requests of admitted visitors %d; "+
		"longest pause of admissions after the kill %s; 503s while Redis was away %d; never admitted %d; orders %d",
		name, oldPrimary.Addr(), newPrimary.Addr(), killedAt.Sub(began).Round(time.Millisecond), len(journeys), twice, restored, lost, lostVisitors,
		writtenBack, prevented, mostActive, maxActive, max(0, mostActive-maxActive), releasedTaken, failed, pause.Round(100*time.Millisecond), unavailable, neverAdmitted, orders.Load())
	if newPrimary == oldPrimary {
		t.Fatal("no replica was promoted")
	}
	// A functional bound, far from the few seconds a failover takes here: a client that went on
	// calling the dead server until its periodic reload (a minute, in go-redis' Cluster client) is a
	// bug this catches.
	if pause > 30*time.Second {
		t.Errorf("admissions stopped for %s after the kill", pause.Round(100*time.Millisecond))
	}
	// Everyone learnt of the failover: the scheduler paused the room, the proxies wrote back passes.
	if n := schedulerFailovers(t, wq.Namespace, wq.Name); n != 1 {
		t.Errorf("the scheduler took in %v failovers, want 1", n)
	}
	for i, w := range watches {
		if f := w.Last(); f.Epoch != 1 {
			t.Errorf("proxy %d saw %+v, want one failover", i, f)
		}
	}
	if twice != 0 {
		t.Errorf("%d visitors were admitted again after they had their pass", twice)
	}
	if releasedTaken != 0 {
		t.Errorf("%d released passes were taken again after the failover", releasedTaken)
	}
	if lostVisitors != 0 {
		t.Errorf("%d visitors lost their place for good", lostVisitors)
	}
	if mostActive > maxActive {
		t.Errorf("%d passes were in use at once, over maxActive %d", mostActive, maxActive)
	}
	if lagged && (restored == 0 || prevented == 0) {
		// The replicas are behind by more than the admission lead: the kill, just after a visitor had
		// its pass, lost the last places and that admission. Nothing to give back or to prevent would
		// mean the drill tested nothing.
		t.Errorf("places given back %v and second admissions prevented %v; want both above 0", restored, prevented)
	}
	if failed != 0 {
		t.Errorf("%d admitted visitors' protected requests failed: a pass is verified in memory and must ride through a failover", failed)
	}
	if neverAdmitted != 0 {
		t.Errorf("%d visitors were never admitted", neverAdmitted)
	}
}

// visit enters through replica, polls as told until admitted (entering again when its place is
// gone, waiting out 503s), and orders with the pass; the workload ends the session.
func visit(ctx context.Context, replica string, j *journey, learnt chan<- string) {
	call := func(method, path, pass string) (int, map[string]any, http.Header, error) {
		req, _ := http.NewRequestWithContext(ctx, method, replica+path, nil)
		req.Header.Set("X-User-Id", j.id)
		if pass != "" {
			req.Header.Set(admission.PassHeader, pass)
		}
		if j.place != "" {
			req.Header.Set(admission.PlaceHeader, j.place)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, nil, err
		}
		defer res.Body.Close()
		body := map[string]any{}
		_ = json.NewDecoder(res.Body).Decode(&body)
		return res.StatusCode, body, res.Header, nil
	}
	path := "/.herdgate/enter"
	method := http.MethodPost
	hadPlace := false
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; {
		code, body, header, err := call(method, path, "")
		wait := 200 * time.Millisecond
		switch {
		case err != nil:
		case code == http.StatusOK && body["admitted"] == true:
			j.atOnce = path == "/.herdgate/enter"
			pass, _ := body["pass"].(string)
			j.passes = append(j.passes, pass)
			j.admittedAt = time.Now()
			select {
			case learnt <- j.id:
			default:
			}
			code, _, _, err := call(http.MethodPost, "/api/v1/orders", pass)
			if err != nil || code != http.StatusOK {
				j.orderFailed = true
			}
			j.releasedAt = time.Now()
			return
		case code == http.StatusOK:
			hadPlace = true
			if place, ok := body["place"].(string); ok {
				j.place = place
			}
			method, path = http.MethodGet, "/.herdgate/status"
			if ms, ok := body["nextPollMs"].(float64); ok {
				wait = time.Duration(ms) * time.Millisecond
			}
		case code == http.StatusNotFound && body["error"] == "not_queued":
			if hadPlace {
				j.placesLost++
			}
			method, path = http.MethodPost, "/.herdgate/enter"
			wait = 0
		case code == http.StatusTooManyRequests:
			if ms, ok := body["retryAfterMs"].(float64); ok {
				wait = time.Duration(ms) * time.Millisecond
			}
		case code == http.StatusServiceUnavailable:
			j.unavailable++
			if s := header.Get("Retry-After"); s != "" && !strings.ContainsAny(s, "-.") {
				var secs int
				_, _ = fmt.Sscan(s, &secs)
				wait = time.Duration(secs) * time.Second
			}
		}
		time.Sleep(wait)
	}
}

// schedulerFailovers reads herdgate_redis_failovers_total of the room from the scheduler's registry.
func schedulerFailovers(t *testing.T, namespace, name string) float64 {
	t.Helper()
	n, err := testenv.RoomCounter(metrics.Registry, "herdgate_redis_failovers_total", namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// releasedPassTaken says whether replica lets a protected request with a released pass through.
func releasedPassTaken(ctx context.Context, replica, visitor, pass string) bool {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, replica+"/api/v1/orders", nil)
	req.Header.Set("X-User-Id", visitor)
	req.Header.Set(admission.PassHeader, pass)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// proxyCounter sums a counter over the proxies' series, those with label = value when label is set.
func proxyCounter(t *testing.T, proxies []*admission.Room, name, label, value string) float64 {
	t.Helper()
	var sum float64
	for _, p := range proxies {
		rec := httptest.NewRecorder()
		p.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		f := families[name]
		if f == nil {
			continue
		}
		for _, m := range f.GetMetric() {
			if label == "" || slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == label && l.GetValue() == value }) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
