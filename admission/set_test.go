package admission_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

// setRoomCount is how many rooms TestASharedSetKeepsItsRoomsApart serves in one set.
const setRoomCount = 100

// setRoom is one room of the shared set under test.
type setRoom struct {
	name, host string
	wq         *herdgatev1alpha1.WaitingQueue
	q          *queue.Queue
	pass       string
}

func (r setRoom) route() string   { return "/api/" + r.name + "/orders" }
func (r setRoom) message() string { return "notice of " + r.name }

// TestASharedSetKeepsItsRoomsApart serves 100 rooms from one Set on a real Redis, each with its own
// host, protected route, upstream, HMAC key and page: a visitor of each room is admitted and gets
// through on its pass, the pass is refused by each of the 99 other rooms, each page says its own
// notice, a host no room names is refused, two rooms protecting one route on one host leave it to
// the first, and a room that leaves stops being served.
func TestASharedSetKeepsItsRoomsApart(t *testing.T) {
	onBothFronts(t, testSharedSet)
}

func testSharedSet(t *testing.T) {
	redis := testenv.StartRedis(t)
	rdb, err := queue.NewClient(redis.URL(), queue.ClientOptions{PoolSize: 32})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	store := queue.NewStore(rdb, queue.StoreOptions{})
	t.Cleanup(store.Close)
	upstream := &recorder{}
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)

	set := admission.NewSet(logr.Discard())
	created := time.Now().Add(-time.Hour)
	rooms := make([]setRoom, setRoomCount)
	for i := range rooms {
		r := &rooms[i]
		r.name = fmt.Sprintf("room-%03d", i)
		r.host = r.name + ".shop.example"
		r.wq = builder.Queue("shop", r.name).UID(types.UID("uid-"+r.name)).UpstreamURL(up.URL+"/"+r.name).
			Routes(builder.Route(r.route(), false, "POST")).PageMessage(r.message()).Shared("pool", r.host).Obj()
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		addRoom(t, set, store, r.wq, key, created.Add(time.Duration(i)*time.Second))
		if r.q, err = store.Queue("shop", r.name); err != nil {
			t.Fatal(err)
		}
		if err := r.q.PublishPlan(context.Background(), queue.PublishedPlan{Quota: mustQuota(14), PollMin: 500 * time.Millisecond, PollMax: 5 * time.Second, AbandonAfter: 5 * time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	base := serveFront(t, set).URL
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	ask := func(method, host, path string, header ...string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body), res.Header
	}

	// A visitor of each room enters on the room's host and is admitted by its tick; once the poll the
	// entries told has come, each polls its pass.
	visitors := make([]string, len(rooms))
	for i := range rooms {
		r := &rooms[i]
		code, body, header := ask(http.MethodPost, r.host, "/.herdgate/enter")
		if code != http.StatusOK || !strings.Contains(body, `"position":1`) {
			t.Fatalf("%s: enter: %d %s", r.name, code, body)
		}
		visitors[i] = cookieOf(header, admission.CookieNamesOf(r.wq.Namespace, r.wq.Name).Visitor)
		if res, err := r.q.Admit(context.Background(), queue.AdmitRequest{TickID: 1, Limit: 1, PassTTL: 5 * time.Minute, AbandonAfter: 5 * time.Minute}); err != nil || len(res.Admitted) != 1 {
			t.Fatalf("%s: the tick admitted %v, %v", r.name, res.Admitted, err)
		}
	}
	// The longest a first poll is told to wait in these rooms: 500 ms and its spread.
	time.Sleep(600 * time.Millisecond)
	for i := range rooms {
		r := &rooms[i]
		visitorCookie := admission.CookieNamesOf(r.wq.Namespace, r.wq.Name).Visitor
		var status map[string]any
		code, body, _ := ask(http.MethodGet, r.host, "/.herdgate/status", "Cookie", visitorCookie+"="+visitors[i])
		if err := json.Unmarshal([]byte(body), &status); err != nil || status["admitted"] != true {
			t.Fatalf("%s: status after the tick: %d %s", r.name, code, body)
		}
		r.pass = status["pass"].(string)
	}

	// Each pass opens its own room's route, to its own upstream, and nobody else's.
	for _, r := range rooms {
		if code, body, _ := ask(http.MethodPost, r.host, r.route(), admission.PassHeader, r.pass); code != http.StatusOK || body != "upstream POST /"+r.name+r.route() {
			t.Fatalf("%s: its own route with its pass: %d %s", r.name, code, body)
		}
	}
	refused := 0
	for _, holder := range rooms {
		for _, other := range rooms {
			if other.name == holder.name {
				continue
			}
			code, body, _ := ask(http.MethodPost, other.host, other.route(), admission.PassHeader, holder.pass, "Accept", "application/json")
			if code != http.StatusForbidden || !strings.Contains(body, `"error":"pass_`) {
				t.Fatalf("the pass of %s on %s: %d %s; want it refused", holder.name, other.name, code, body)
			}
			refused++
		}
	}
	if want := setRoomCount * (setRoomCount - 1); refused != want || len(upstream.all()) != setRoomCount {
		t.Fatalf("%d passes refused (want %d), %d requests upstream (want %d)", refused, want, len(upstream.all()), setRoomCount)
	}
	// A room's route on another room's host is that room's open path: the pass is not needed, and
	// the request goes to that room's upstream, not to the route's room.
	if code, body, _ := ask(http.MethodPost, rooms[1].host, rooms[0].route()); code != http.StatusOK || body != "upstream POST /"+rooms[1].name+rooms[0].route() {
		t.Fatalf("room-000's route on room-001's host: %d %s", code, body)
	}

	// Each waiting page says its room's notice only; the host matches in any case and with a port.
	for _, r := range []setRoom{rooms[0], rooms[42], rooms[99]} {
		code, body, _ := ask(http.MethodGet, strings.ToUpper(r.host)+":8443", "/.herdgate/")
		if code != http.StatusOK || !strings.Contains(body, r.message()) || strings.Count(body, "notice of ") != 1 {
			t.Fatalf("%s: the waiting page: %d, has its notice: %v", r.name, code, strings.Contains(body, r.message()))
		}
	}
	// A host no room names is refused with JSON; nothing goes upstream.
	for _, host := range []string{"elsewhere.example", "room-000.shop.example.evil", "", "room-000"} {
		code, body, _ := ask(http.MethodPost, host, rooms[0].route(), admission.PassHeader, rooms[0].pass)
		if code != http.StatusMisdirectedRequest || !strings.Contains(body, `"error":"unknown_host"`) {
			t.Fatalf("host %q: %d %s; want 421 unknown_host", host, code, body)
		}
	}

	// The kubelet probes the pod's own address: the set answers them whatever the host.
	for _, path := range []string{"/.herdgate/healthz", "/.herdgate/readyz"} {
		if code, body, _ := ask(http.MethodGet, "10.0.0.7:8080", path); code != http.StatusOK {
			t.Fatalf("%s on the pod's address: %d %s", path, code, body)
		}
	}

	// Each room's series carry its name.
	rec := httptest.NewRecorder()
	set.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, r := range []setRoom{rooms[0], rooms[99]} {
		if want := `herdgate_proxy_pass_verifications_total{result="valid",waitingqueue="shop/` + r.name + `"} 1`; !strings.Contains(rec.Body.String(), want) {
			t.Fatalf("the set's metrics lack %s", want)
		}
	}
	if n := strings.Count(rec.Body.String(), "\ngo_goroutines "); n != 1 {
		t.Fatalf("the process's series appear %d times, want once", n)
	}

	// A later room protecting room-000's route on its host does not take the route: room-000 keeps
	// it, the newcomer's generation is refused saying why, and it serves its other host.
	dup := builder.Queue("shop", "late").UID("uid-late").UpstreamURL(up.URL+"/late").Routes(builder.Route(rooms[0].route(), false, "POST")).
		Shared("pool", rooms[0].host, "late.shop.example").Generation(7).Obj()
	late := addRoom(t, set, store, dup, make([]byte, 32), time.Now())
	if code, _, _ := ask(http.MethodPost, rooms[0].host, rooms[0].route(), admission.PassHeader, rooms[0].pass); code != http.StatusOK {
		t.Fatalf("room-000 after a later room named its host: %d", code)
	}
	if code, body, _ := ask(http.MethodGet, "late.shop.example", "/.herdgate/healthz"); code != http.StatusOK {
		t.Fatalf("the later room's own host: %d %s", code, body)
	}
	lateRec := httptest.NewRecorder()
	late.MetricsHandler().ServeHTTP(lateRec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(lateRec.Body.String(), `herdgate_proxy_config_refused{waitingqueue="shop/late"} 1`) {
		t.Fatalf("the later room's generation was not refused:\n%s", lateRec.Body.String())
	}

	// A room that leaves is no longer served.
	set.Remove("shop/" + rooms[5].name)
	if code, _, _ := ask(http.MethodPost, rooms[5].host, rooms[5].route(), admission.PassHeader, rooms[5].pass); code != http.StatusMisdirectedRequest {
		t.Fatalf("a removed room's host: %d, want 421", code)
	}
	if got := len(set.Names()); got != setRoomCount {
		t.Fatalf("the set serves %d rooms, want %d", got, setRoomCount)
	}
	set.StartDrain()
	if code, _, _ := ask(http.MethodGet, "10.0.0.7:8080", "/.herdgate/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("readyz of a draining set: %d, want 503", code)
	}
}

// addRoom adds wq's room to set with key, configured, and returns its proxy.
func addRoom(t *testing.T, set *admission.Set, store *queue.Store, wq *herdgatev1alpha1.WaitingQueue, key []byte, created time.Time) *admission.Room {
	t.Helper()
	cfg, err := admission.NewConfig(wq, key)
	if err != nil {
		t.Fatal(err)
	}
	room, err := admission.NewUnconfiguredRoom(wq.Namespace, wq.Name, store, admission.Options{Rand: fixedRand(0.5)})
	if err != nil {
		t.Fatal(err)
	}
	set.Add(room, created)
	if !set.Configure(wq.Namespace+"/"+wq.Name, cfg) {
		t.Fatalf("the set does not serve %s", wq.Name)
	}
	return room
}

// cookieOf is the value of the named cookie a response sets.
func cookieOf(h http.Header, name string) string {
	for _, line := range h.Values("Set-Cookie") {
		if v, ok := strings.CutPrefix(line, name+"="); ok {
			value, _, _ := strings.Cut(v, ";")
			return value
		}
	}
	return ""
}
