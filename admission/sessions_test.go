package admission_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/herdgate/herdgate/admission"

	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

// sessionRig is a queue on a real Redis served by two proxy replicas, in front of a workload that ends
// the session of every order it takes.
type sessionRig struct {
	q        *queue.Queue
	rdb      redis.UniversalClient
	replicas [2]*admission.Room
	urls     [2]string
	cfg      *admission.Config
}

func newSessionRig(t *testing.T, change func(*builder.QueueBuilder)) *sessionRig {
	t.Helper()
	srv := testenv.StartRedis(t)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/orders", "/account/logout", "/checkout/logout": // the order is placed, the visitor left: the session is over
			w.Header().Set(admission.ReleaseHeader, "true")
		case "/account/keep":
			w.Header().Set(admission.ReleaseHeader, "false")
		}
		_, _ = io.WriteString(w, "done")
	}))
	t.Cleanup(upstream.Close)
	b := builder.Queue("shop", "orders").UID("uid-sessions").UpstreamURL(upstream.URL).Identity("X-User-Id").
		Routes(builder.Route("/api/v1/orders", false, "POST"), builder.Route("/checkout", true, "GET", "POST"))
	if change != nil {
		change(b)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cfg, err := admission.NewConfig(b.Obj(), key)
	if err != nil {
		t.Fatal(err)
	}
	rig := &sessionRig{cfg: cfg}
	if rig.rdb, err = queue.NewClient(srv.URL(), queue.ClientOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rig.rdb.Close() })
	store := queue.NewStore(rig.rdb, queue.StoreOptions{})
	t.Cleanup(store.Close)
	if rig.q, err = store.Queue("shop", "orders"); err != nil {
		t.Fatal(err)
	}
	for i := range rig.replicas {
		if rig.replicas[i], err = admission.NewRoom(cfg, store, admission.Options{}); err != nil {
			t.Fatal(err)
		}
		rig.urls[i] = serveFront(t, rig.replicas[i]).URL
	}
	return rig
}

// admitOne admits visitor and returns its pass, as the proxy would hand it out.
func (rig *sessionRig) admitOne(t *testing.T, visitor string, tickID int64) (string, queue.AdmittedVisitor) {
	t.Helper()
	ctx := context.Background()
	if _, err := rig.q.Enter(ctx, visitor, time.Hour); err != nil {
		t.Fatal(err)
	}
	res, err := rig.q.Admit(ctx, queue.AdmitRequest{TickID: tickID, Limit: 1, PassTTL: time.Minute, AbandonAfter: time.Hour})
	if err != nil || len(res.Admitted) != 1 {
		t.Fatalf("admitting %s: %+v, %v", visitor, res, err)
	}
	a := res.Admitted[0]
	time.Sleep(time.Until(a.Pass.NotBefore))
	return rig.cfg.Signer.Issue(visitor, a.Pass.NotBefore, a.Pass.Expiry), a
}

// answer is what a visitor saw of one request.
type answer struct {
	StatusCode int
	Header     http.Header
}

func (rig *sessionRig) do(t *testing.T, replica int, method, path, visitor, token string) answer {
	t.Helper()
	req, _ := http.NewRequest(method, rig.urls[replica]+path, nil)
	req.Header.Set("X-User-Id", visitor)
	if token != "" {
		req.Header.Set(admission.PassHeader, token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return answer{res.StatusCode, res.Header}
}

func TestAReleasedPassIsRefusedByEveryReplicaWithinATick(t *testing.T) {
	rig := newSessionRig(t, nil)
	ctx := context.Background()
	token, admitted := rig.admitOne(t, "ada", 1)
	if res := rig.do(t, 1, http.MethodGet, "/checkout/cart", "ada", token); res.StatusCode != http.StatusOK {
		t.Fatalf("replica B with a valid pass: %d", res.StatusCode)
	}

	// The order ends the session: the workload says so, and the visitor never sees it said.
	res := rig.do(t, 0, http.MethodPost, "/api/v1/orders", "ada", token)
	if res.StatusCode != http.StatusOK || res.Header.Get(admission.ReleaseHeader) != "" {
		t.Fatalf("the order: %d, release header %q; want 200 and the header stripped", res.StatusCode, res.Header.Get(admission.ReleaseHeader))
	}
	// Replica A refuses the pass at once ...
	if res := rig.do(t, 0, http.MethodGet, "/checkout/cart", "ada", token); res.StatusCode != http.StatusForbidden || res.Header.Get("X-Herdgate-Pass-Result") != string(pass.Released) {
		t.Fatalf("replica A after the release: %d %q", res.StatusCode, res.Header.Get("X-Herdgate-Pass-Result"))
	}
	// ... tells Redis once (its sync runs at once after a release; here it is driven by hand) ...
	if err := rig.replicas[0].SyncSessions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rig.replicas[0].SyncSessions(ctx); err != nil { // nothing more to send
		t.Fatal(err)
	}
	st, err := rig.q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ReleasedTotal != 1 || st.Active != 0 {
		t.Fatalf("stats after the release = %+v; want 1 released and the slot free", st)
	}
	if p, err := rig.q.Status(ctx, "ada", time.Hour); err != nil || p.State != queue.NotQueued {
		t.Fatalf("the released visitor's state = %+v, %v; want no pass left", p, err)
	}
	// ... and replica B refuses it after its next tick's sync.
	if res := rig.do(t, 1, http.MethodGet, "/checkout/cart", "ada", token); res.StatusCode != http.StatusOK {
		t.Fatalf("replica B before its next sync: %d (it has not read the revocation yet)", res.StatusCode)
	}
	if err := rig.replicas[1].SyncSessions(ctx); err != nil {
		t.Fatal(err)
	}
	if res := rig.do(t, 1, http.MethodGet, "/checkout/cart", "ada", token); res.StatusCode != http.StatusForbidden {
		t.Fatalf("replica B after one sync: %d, want the released pass refused", res.StatusCode)
	}
	// A second release of the same pass, from B, reaches Redis as nothing.
	rig.replicas[1].AfterUpstream(admission.PassDecision(pass.Pass{Visitor: "ada", NotBefore: admitted.Pass.NotBefore, Expiry: admitted.Pass.Expiry}), 200, "true")
	if err := rig.replicas[1].SyncSessions(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := rig.q.Stats(ctx); err != nil || st.ReleasedTotal != 1 {
		t.Fatalf("released total after a second release = %+v, %v; want 1", st, err)
	}
}

func TestTheReplicasSessionLoopsRefuseAReleasedPassWithinATick(t *testing.T) {
	rig := newSessionRig(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, p := range rig.replicas {
		go p.KeepSessions(ctx)
	}
	token, _ := rig.admitOne(t, "bea", 1)
	rig.do(t, 0, http.MethodPost, "/api/v1/orders", "bea", token)
	start := time.Now()
	for rig.do(t, 1, http.MethodGet, "/checkout/cart", "bea", token).StatusCode != http.StatusForbidden {
		if time.Since(start) > 10*time.Second {
			t.Fatal("replica B never refused the released pass")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("replica B refused the pass %s after replica A forwarded the release (tick 100ms)", time.Since(start).Round(time.Millisecond))
}

func TestCompletionRoutesAndSlidingPasses(t *testing.T) {
	rig := newSessionRig(t, func(b *builder.QueueBuilder) {
		b.PassSpec(&herdgatev1alpha1.PassSpec{
			TTL:              &metav1.Duration{Duration: 20 * time.Second},
			Renewal:          herdgatev1alpha1.RenewalSliding,
			CompletionRoutes: []herdgatev1alpha1.ProtectedRoute{builder.Route("/checkout/done", false, "POST")},
		})
	})
	ctx := context.Background()
	// A pass with 8 of its 20 s left, written as a tick would have.
	now := time.Now().Truncate(time.Millisecond)
	nb, exp := now.Add(-12*time.Second), now.Add(8*time.Second)
	if err := rig.rdb.HSet(ctx, rig.q.KeyPrefix()+":passes", "cy", strconv.FormatInt(nb.UnixMilli(), 10)+":"+strconv.FormatInt(exp.UnixMilli(), 10)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rig.rdb.ZAdd(ctx, rig.q.KeyPrefix()+":a", redis.Z{Score: float64(exp.UnixMilli()), Member: "cy"}).Err(); err != nil {
		t.Fatal(err)
	}
	token := rig.cfg.Signer.Issue("cy", nb, exp)
	res := rig.do(t, 0, http.MethodGet, "/checkout/cart", "cy", token)
	renewed := res.Header.Get(admission.PassHeader)
	if res.StatusCode != http.StatusOK || renewed == "" {
		t.Fatalf("a request with a pass past half its time: %d, renewed pass %q", res.StatusCode, renewed)
	}
	got, result := rig.cfg.Signer.Verify(renewed, "cy", time.Now())
	if result != pass.Valid || time.Until(got.Expiry) < 19*time.Second || !got.NotBefore.Equal(nb) {
		t.Fatalf("the renewed pass = %+v, %s; want 20 s from now, same not-before", got, result)
	}
	if err := rig.replicas[0].SyncSessions(ctx); err != nil {
		t.Fatal(err)
	}
	score, err := rig.rdb.ZScore(ctx, rig.q.KeyPrefix()+":a", "cy").Result()
	if err != nil || int64(score) != got.Expiry.UnixMilli() {
		t.Fatalf("the slot in Redis expires at %v (%v), want the renewed %d", score, err, got.Expiry.UnixMilli())
	}
	// A Sliding pass never outlasts maxSession (1h by default) after its not-before time.
	oldNB, oldExp := now.Add(-time.Hour+10*time.Second), now.Add(5*time.Second)
	if err := rig.rdb.HSet(ctx, rig.q.KeyPrefix()+":passes", "dee", strconv.FormatInt(oldNB.UnixMilli(), 10)+":"+strconv.FormatInt(oldExp.UnixMilli(), 10)).Err(); err != nil {
		t.Fatal(err)
	}
	capped := rig.do(t, 0, http.MethodGet, "/checkout/cart", "dee", rig.cfg.Signer.Issue("dee", oldNB, oldExp)).Header.Get(admission.PassHeader)
	if got, result := rig.cfg.Signer.Verify(capped, "dee", time.Now()); result != pass.Valid || !got.Expiry.Equal(oldNB.Add(time.Hour)) {
		t.Fatalf("the renewal of a pass near maxSession = %+v, %s; want it to end at not-before + 1h", got, result)
	}
	// A completion route ends the session once the workload answers it.
	if res := rig.do(t, 0, http.MethodPost, "/checkout/done", "cy", renewed); res.StatusCode != http.StatusOK {
		t.Fatalf("the completion route: %d", res.StatusCode)
	}
	if res := rig.do(t, 0, http.MethodGet, "/checkout/cart", "cy", renewed); res.StatusCode != http.StatusForbidden {
		t.Fatalf("after the completion route: %d, want the pass released", res.StatusCode)
	}
}

// TestASessionEndsWhereverTheWorkloadEndsIt: the release header on a route that is not protected
// (a logout page) and a completion route outside protectedRoutes (a thank-you page) each end the
// session: both replicas refuse the pass, and under maxActive the slot goes to a waiting visitor at
// the next tick.
func TestASessionEndsWhereverTheWorkloadEndsIt(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		rig := newSessionRig(t, func(b *builder.QueueBuilder) {
			b.PassSpec(&herdgatev1alpha1.PassSpec{CompletionRoutes: []herdgatev1alpha1.ProtectedRoute{builder.Route("/thanks", false, "GET")}})
		})
		ctx := context.Background()
		tick := int64(0)
		for _, c := range []struct{ how, method, path string }{
			{"the release header on a logout page", http.MethodGet, "/account/logout"},
			{"a completion route outside protectedRoutes", http.MethodGet, "/thanks"},
		} {
			tick++
			holder := fmt.Sprintf("holder-%d", tick)
			token, _ := rig.admitOne(t, holder, tick)
			waiting := fmt.Sprintf("waiting-%d", tick)
			if _, err := rig.q.Enter(ctx, waiting, time.Hour); err != nil {
				t.Fatal(err)
			}
			// Under maxActive: 1 the holder's slot is taken, so a tick admits nobody.
			tick++
			if res := rig.admitCapped(t, tick); len(res.Admitted) != 0 {
				t.Fatalf("%s: a tick under maxActive 1 admitted %d while the slot is taken", c.how, len(res.Admitted))
			}
			// Requests that end nothing: the header saying "false", a forged pass, another visitor's.
			rig.do(t, 0, http.MethodGet, "/account/keep", holder, token)
			rig.do(t, 0, c.method, c.path, holder, tampered(token))
			rig.do(t, 0, c.method, c.path, "somebody-else", token)
			for replica := range rig.replicas {
				if res := rig.do(t, replica, http.MethodGet, "/checkout/cart", holder, token); res.StatusCode != http.StatusOK {
					t.Fatalf("%s: replica %d refused the pass before the session ended: %d %q", c.how, replica, res.StatusCode, res.Header.Get("X-Herdgate-Pass-Result"))
				}
			}

			res := rig.do(t, 0, c.method, c.path, holder, token)
			if res.StatusCode != http.StatusOK || res.Header.Get(admission.ReleaseHeader) != "" {
				t.Fatalf("%s: %d, release header %q; want 200 and no header", c.how, res.StatusCode, res.Header.Get(admission.ReleaseHeader))
			}
			if res := rig.do(t, 0, http.MethodGet, "/checkout/cart", holder, token); res.StatusCode != http.StatusForbidden ||
				res.Header.Get("X-Herdgate-Pass-Result") != string(pass.Released) {
				t.Fatalf("%s: replica A after the end: %d %q, want 403 released", c.how, res.StatusCode, res.Header.Get("X-Herdgate-Pass-Result"))
			}
			for _, p := range rig.replicas { // each replica's per-tick sync
				if err := p.SyncSessions(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if res := rig.do(t, 1, http.MethodGet, "/checkout/cart", holder, token); res.StatusCode != http.StatusForbidden {
				t.Fatalf("%s: replica B after its next sync: %d, want the pass refused", c.how, res.StatusCode)
			}
			tick++
			res2 := rig.admitCapped(t, tick)
			if len(res2.Admitted) != 1 || res2.Admitted[0].ID != waiting {
				t.Fatalf("%s: the next tick under maxActive 1 admitted %+v, want %s in the freed slot", c.how, res2.Admitted, waiting)
			}
			// Its pass ends at once for the next case.
			rig.replicas[0].Sessions().Release(pass.Pass{Visitor: waiting, NotBefore: res2.Admitted[0].Pass.NotBefore, Expiry: res2.Admitted[0].Pass.Expiry})
			if err := rig.replicas[0].SyncSessions(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// admitCapped runs a tick admitting at most one visitor under maxActive: 1.
func (rig *sessionRig) admitCapped(t *testing.T, tickID int64) queue.AdmitResult {
	t.Helper()
	res, err := rig.q.Admit(context.Background(), queue.AdmitRequest{TickID: tickID, Limit: 1, MaxActive: 1, PassTTL: time.Minute, AbandonAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// tampered is token with one character of its MAC changed, to another.
func tampered(token string) string {
	b := []byte(token)
	i := len(b) - 10
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// TestASessionEndsWhateverLetTheRequestThrough: a bypass lane, Passthrough mode and a visitor known
// by its cookie rather than a header: the release header ends the session of the pass the request
// carried in each, and a visitor cookie that is not the pass's visitor ends nothing.
func TestASessionEndsWhateverLetTheRequestThrough(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		ctx := context.Background()
		released := func(t *testing.T, rig *sessionRig, visitor string, a queue.AdmittedVisitor) bool {
			t.Helper()
			return rig.replicas[0].Sessions().IsRevoked(pass.Pass{Visitor: visitor, NotBefore: a.Pass.NotBefore, Expiry: a.Pass.Expiry})
		}
		t.Run("through a bypass lane", func(t *testing.T) {
			rig := newSessionRig(t, func(b *builder.QueueBuilder) {
				b.Bypass(herdgatev1alpha1.BypassRule{Name: "leave", Path: ptr.To(herdgatev1alpha1.RoutePath("/checkout/logout"))})
			})
			token, a := rig.admitOne(t, "bob", 1)
			if res := rig.do(t, 0, http.MethodGet, "/checkout/logout", "bob", token); res.StatusCode != http.StatusOK || !released(t, rig, "bob", a) {
				t.Fatalf("a bypassed logout: %d, released %v", res.StatusCode, released(t, rig, "bob", a))
			}
		})
		t.Run("in Passthrough", func(t *testing.T) {
			rig := newSessionRig(t, func(b *builder.QueueBuilder) { b.Mode(herdgatev1alpha1.ModePassthrough) })
			token, a := rig.admitOne(t, "cat", 1)
			if res := rig.do(t, 0, http.MethodGet, "/checkout/logout", "cat", token); res.StatusCode != http.StatusOK || !released(t, rig, "cat", a) {
				t.Fatalf("a logout in Passthrough: %d, released %v", res.StatusCode, released(t, rig, "cat", a))
			}
			if err := rig.replicas[0].SyncSessions(ctx); err != nil {
				t.Fatal(err)
			}
			if st, err := rig.q.Stats(ctx); err != nil || st.ReleasedTotal != 1 || st.Active != 0 {
				t.Fatalf("stats after the release = %+v, %v; want 1 released and no active pass", st, err)
			}
		})
		t.Run("a visitor known by its cookie", func(t *testing.T) {
			rig := newSessionRig(t, func(b *builder.QueueBuilder) { b.Identity("") })
			id, cookie := rig.cfg.Signer.NewVisitorCookie()
			_, otherCookie := rig.cfg.Signer.NewVisitorCookie()
			token, a := rig.admitOne(t, id, 1)
			logout := func(visitorCookie string) int {
				t.Helper()
				req, _ := http.NewRequest(http.MethodGet, rig.urls[1]+"/account/logout", nil)
				req.Header.Set("Cookie", admission.VisitorCookie+"="+visitorCookie+"; "+admission.PassCookie+"="+token)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				_ = res.Body.Close()
				return res.StatusCode
			}
			if code := logout(otherCookie); code != http.StatusOK || rig.replicas[1].Sessions().IsRevoked(pass.Pass{Visitor: id, NotBefore: a.Pass.NotBefore}) {
				t.Fatalf("a logout with another visitor's cookie: %d; it must end nothing", code)
			}
			if code := logout(cookie); code != http.StatusOK || !rig.replicas[1].Sessions().IsRevoked(pass.Pass{Visitor: id, NotBefore: a.Pass.NotBefore}) {
				t.Fatalf("a logout with the pass and its visitor's cookie: %d; want the session ended", code)
			}
		})
	})
}
