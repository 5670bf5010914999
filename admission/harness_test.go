package admission_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/admissiontest"
	"github.com/herdgate/herdgate/admission/front"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

// upstreamCall is what the protected workload saw of one request.
type upstreamCall struct {
	Method, Path, RawPath, Query string
	Header                       http.Header
	BodyBytes                    int64
}

// recorder is a stand-in workload that records every request it receives.
type recorder struct {
	mu    sync.Mutex
	calls []upstreamCall
	// hold, when set, is how long each request is held before its answer; inFlight and peak count
	// the requests held at once.
	hold           atomic.Int64
	inFlight, peak atomic.Int64
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if hold := time.Duration(rec.hold.Load()); hold > 0 {
		n := rec.inFlight.Add(1)
		for peak := rec.peak.Load(); n > peak && !rec.peak.CompareAndSwap(peak, n); peak = rec.peak.Load() {
		}
		time.Sleep(hold)
		defer rec.inFlight.Add(-1)
	}
	n, _ := io.Copy(io.Discard, r.Body)
	rec.mu.Lock()
	rec.calls = append(rec.calls, upstreamCall{r.Method, r.URL.Path, r.URL.RawPath, r.URL.RawQuery, r.Header.Clone(), n})
	rec.mu.Unlock()
	w.Header().Set("X-Upstream", "yes")
	fmt.Fprintf(w, "upstream %s %s", r.Method, r.URL.Path)
}

func (rec *recorder) all() []upstreamCall {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]upstreamCall(nil), rec.calls...)
}

// harness is a proxy in front of a recording upstream, on a real Redis, or on a memory engine for the
// tests of decisions that need no queue (newMemoryHarness).
type harness struct {
	t        *testing.T
	redis    *testenv.Redis
	store    *queue.Store
	q        *queue.Queue
	engine   *admissiontest.MemoryEngine
	room     *admission.Room
	server   *httptest.Server
	upstream *recorder
	key      []byte
	wq       *herdgatev1alpha1.WaitingQueue
	tick     int64
}

func testQueue(upstream string) *herdgatev1alpha1.WaitingQueue {
	return builder.Queue("shop", "orders").UID("uid-orders").UpstreamURL(upstream).Routes(
		builder.Route("/api/v1/orders", false, "POST"),
		builder.Route("/api/v1/orders/direct", false, "POST"),
		builder.Route("/checkout", true, "GET"),
	).Obj()
}

func newHarness(t *testing.T, change func(*herdgatev1alpha1.WaitingQueue)) *harness {
	t.Helper()
	return newHarnessWith(t, harnessOptions{}, change)
}

// newMemoryHarness is the harness on a memory engine (admissiontest): for decisions over routes,
// paths, passes and what reaches the upstream, which no queue takes part in. Its engine answers
// every enter and status with the position set for the visitor, and it cannot admit.
func newMemoryHarness(t *testing.T, change func(*herdgatev1alpha1.WaitingQueue)) *harness {
	t.Helper()
	return newHarnessWith(t, harnessOptions{memory: true}, change)
}

// harnessOptions are what some tests give the harness's proxy beyond the queue: the Secret values its
// fields refer to (by Secret name and key), a clock, and a memory engine in place of Redis.
type harnessOptions struct {
	secrets  map[string]map[string]string
	passKeys string
	now      func() time.Time
	memory   bool
}

func newHarnessWith(t *testing.T, opts harnessOptions, change func(*herdgatev1alpha1.WaitingQueue)) *harness {
	t.Helper()
	h := &harness{t: t, upstream: &recorder{}, key: make([]byte, 32)}
	_, _ = rand.Read(h.key)
	up := httptest.NewServer(h.upstream)
	t.Cleanup(up.Close)
	h.wq = testQueue(up.URL)
	if change != nil {
		change(h.wq)
	}
	fc := admission.FileConfig{Secrets: opts.secrets, PassKeys: opts.passKeys}
	cfg, err := admission.NewConfigWithSecrets(h.wq, h.key, fc.Values())
	if err != nil {
		t.Fatal(err)
	}
	proxyOptions := admission.Options{Rand: fixedRand(0.5), Now: opts.now}
	if opts.memory {
		plan := admissiontest.ReferencePlan()
		plan.AbandonAfter = harnessAbandonAfter
		h.engine = admissiontest.NewMemoryEngine(plan)
		h.room = admission.NewRoomOn(h.wq.Namespace+"/"+h.wq.Name, h.engine, proxyOptions)
		h.room.SetConfig(cfg)
		h.server = serveFront(t, h.room)
		return h
	}
	h.redis = testenv.StartRedis(t)
	rdb, err := queue.NewClient(h.redis.URL(), queue.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	h.store = queue.NewStore(rdb, queue.StoreOptions{})
	t.Cleanup(h.store.Close)
	if h.q, err = h.store.Queue("shop", "orders"); err != nil {
		t.Fatal(err)
	}
	if h.room, err = admission.NewRoom(cfg, h.store, proxyOptions); err != nil {
		t.Fatal(err)
	}
	h.server = serveFront(t, h.room)
	h.publishPlan()
	return h
}

// harnessFront is the server the contract tests run on: "fast" (what herdgate-proxy serves) or
// "net/http" (the Room as an http.Handler, which also serves handed-over connections).
var harnessFront = "fast"

// onBothFronts runs test on the fast front and on net/http.
func onBothFronts(t *testing.T, test func(t *testing.T)) {
	for _, front := range []string{"fast", "net/http"} {
		t.Run(front, func(t *testing.T) {
			harnessFront = front
			defer func() { harnessFront = "fast" }()
			test(t)
		})
	}
}

// changed is the next generation of wq, changed as change says.
func changed(wq *herdgatev1alpha1.WaitingQueue, change func(*herdgatev1alpha1.WaitingQueue)) *herdgatev1alpha1.WaitingQueue {
	c := wq.DeepCopy()
	change(c)
	c.Generation++
	return c
}

// serveFront serves p (a proxy, or a shared set's rooms) on a loopback port with the harness's front.
func serveFront(t *testing.T, p admission.Rooms) *httptest.Server {
	t.Helper()
	if harnessFront == "net/http" {
		h := front.NewNetHTTP(p, front.NetHTTPOptions{})
		s := httptest.NewUnstartedServer(h)
		s.Config = front.NewNetHTTPServer(h, nil)
		s.Start()
		addr := s.Listener.Addr().String()
		contract.serving(addr)
		t.Cleanup(func() { s.Close(); contract.stopped(addr) })
		return s
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	contract.serving(ln.Addr().String())
	fast := front.NewFast(p, front.FastOptions{})
	done := make(chan error, 1)
	go func() { done <- fast.Serve(ln) }()
	t.Cleanup(func() {
		// The visitors' clients share the default transport: let its idle connections go first,
		// so that the front is not left waiting for a connection a client dialled and never used.
		plainTransport.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := fast.Shutdown(ctx); err != nil {
			t.Errorf("front shutdown: %v", err)
		}
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("front: %v", err)
		}
		contract.stopped(ln.Addr().String())
	})
	// Only URL is used of it: the address the tests dial.
	return &httptest.Server{URL: "http://" + ln.Addr().String(), Listener: ln}
}

// mustQuota is the plan of num visitors per 100 ms tick.
func mustQuota(num int64) capacity.Plan {
	p, err := capacity.FromQuota(num, 1, 100*time.Millisecond, false)
	if err != nil {
		panic(err)
	}
	return p
}

// harnessAbandonAfter is how long the harness's queue keeps a silent visitor.
const harnessAbandonAfter = 5 * time.Minute

// publishPlan publishes the reference plan, as the scheduler would.
func (h *harness) publishPlan() {
	h.t.Helper()
	plan := admissiontest.ReferencePlan()
	plan.AbandonAfter = harnessAbandonAfter
	if err := h.redisQueue().PublishPlan(context.Background(), plan); err != nil {
		h.t.Fatal(err)
	}
}

// redisQueue is the harness's queue on Redis; a memory harness has none, and fails the test.
func (h *harness) redisQueue() *queue.Queue {
	h.t.Helper()
	if h.q == nil {
		h.t.Fatal("this step needs the queue on Redis: use newHarness, not newMemoryHarness")
	}
	return h.q
}

// admit runs one scheduler tick admitting up to n visitors with not-before now + offset.
func (h *harness) admit(n int, offset time.Duration) queue.AdmitResult {
	h.t.Helper()
	h.tick++
	res, err := h.redisQueue().Admit(context.Background(), queue.AdmitRequest{TickID: h.tick, Limit: n, Lead: offset, PassTTL: 5 * time.Minute, AbandonAfter: harnessAbandonAfter})
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

// visitor is an HTTP client with its own cookie jar.
type visitor struct {
	h      *harness
	client *http.Client
	header http.Header
}

func (h *harness) visitor() *visitor {
	jar, _ := cookiejar.New(nil)
	return &visitor{h: h, header: http.Header{}, client: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

type response struct {
	*http.Response
	body []byte
}

// setCookie is the Set-Cookie line of the named cookie, "" when there is none.
func (r response) setCookie(name string) string {
	for _, l := range r.Header.Values("Set-Cookie") {
		if strings.HasPrefix(l, name+"=") {
			return l
		}
	}
	return ""
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	out := map[string]any{}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("body %q is not JSON: %v", r.body, err)
	}
	return out
}

func (v *visitor) do(method, path string, body io.Reader, header ...string) response {
	v.h.t.Helper()
	req, err := http.NewRequest(method, v.h.server.URL+path, body)
	if err != nil {
		v.h.t.Fatal(err)
	}
	for k, vals := range v.header {
		req.Header[k] = vals
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := v.client.Do(req)
	if err != nil {
		v.h.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return response{res, raw}
}

func (v *visitor) enter() response  { return v.do(http.MethodPost, "/.herdgate/enter", nil) }
func (v *visitor) status() response { return v.do(http.MethodGet, "/.herdgate/status", nil) }

// cookies are the names of the cookies of the harness's room.
func (h *harness) cookies() admission.CookieNames {
	return admission.CookieNamesOf(h.wq.Namespace, h.wq.Name)
}

// visitorCookie is the visitor cookie in the client's jar.
func (v *visitor) visitorCookie() *http.Cookie {
	u, _ := url.Parse(v.h.server.URL)
	for _, c := range v.client.Jar.Cookies(u) {
		if c.Name == admission.CookieNamesOf(v.h.wq.Namespace, v.h.wq.Name).Visitor {
			return c
		}
	}
	return nil
}

// rawResponse is the status and body of a raw request.
type rawResponse struct {
	StatusCode int
	Body       string
}

// raw sends bytes as they are, bypassing the Go client's own path cleaning.
func (h *harness) raw(request string) rawResponse {
	h.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.server.URL, "http://"))
	if err != nil {
		h.t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		h.t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return rawResponse{res.StatusCode, string(body)}
}

// metric reads one series of the proxy's metrics endpoint: name with exactly labels (as
// `{a="b",c="d"}`, or "") and the room's own label.
func (h *harness) metric(name, labels string) float64 {
	h.t.Helper()
	rec := httptest.NewRecorder()
	h.room.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	want := seriesLabels(labels)
	want["waitingqueue"] = h.wq.Namespace + "/" + h.wq.Name
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		series, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		metric, labels, _ := strings.Cut(series, "{")
		if metric == name && maps.Equal(seriesLabels(labels), want) {
			var v float64
			_, _ = fmt.Sscan(value, &v)
			return v
		}
	}
	return 0
}

// seriesLabels reads `{a="b",c="d"}` (or `a="b",c="d"}`), whose values hold no comma or quote.
func seriesLabels(s string) map[string]string {
	out := map[string]string{}
	for pair := range strings.SplitSeq(strings.Trim(s, "{}"), ",") {
		if k, v, ok := strings.Cut(pair, "="); ok {
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}

type fixedRand float64

func (f fixedRand) Float64() float64 { return float64(f) }
