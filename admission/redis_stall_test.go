package admission_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
)

// The tests of a Redis that stops answering while its connections stay open (testenv's Redis.Pause):
// a long command, or a network that drops its packets. Each call waits out its bound there, so what
// matters is how many wait.

// enterCrowd enters n visitors, behind whoever waits.
func (h *harness) enterCrowd(n int) []*visitor {
	h.t.Helper()
	crowd := make([]*visitor, n)
	for i := range crowd {
		crowd[i] = h.visitor()
		if res := crowd[i].enter(); res.StatusCode != http.StatusOK {
			h.t.Fatalf("enter: %d %s", res.StatusCode, res.body)
		}
	}
	return crowd
}

// signalledReads is the queue's plan, read as the proxy reads it, saying on began each time a read
// begins: the test knows the read is on its way, and waits on Redis, without guessing how long the
// request takes to get there.
type signalledReads struct {
	q     queue.PlanReader
	began chan struct{}
}

func (s signalledReads) ReadPlan(ctx context.Context) (queue.PublishedPlan, error) {
	select {
	case s.began <- struct{}{}:
	default:
	}
	return s.q.ReadPlan(ctx)
}

// readPlansSignalled makes the harness's room read the plan at every request, through reads that say
// when they begin; the channel is empty.
func (h *harness) readPlansSignalled() chan struct{} {
	began := make(chan struct{}, 16)
	h.room.ReadPlansFresh(signalledReads{q: h.q, began: began})
	return began
}

// pauseRedis pauses the harness's Redis until the returned resume, or the test's end.
func (h *harness) pauseRedis() (resume func()) {
	h.t.Helper()
	resume, err := h.redis.Pause()
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(resume)
	return resume
}

// drain empties began.
func drain(began chan struct{}) {
	for {
		select {
		case <-began:
		default:
			return
		}
	}
}

// stillOnItsWay fails the test when the request whose answer comes on done has been answered.
func stillOnItsWay(t *testing.T, done <-chan response, which, what string) {
	t.Helper()
	select {
	case res := <-done:
		t.Fatalf("%s: %s ended (%d %s) before; it waited on it", what, which, res.StatusCode, res.body)
	default:
	}
}

// TestARedisThatStopsAnsweringHoldsOneRequestNotACrowd: while Redis has stopped answering (paused,
// its connections open), the request that finds the room's plan due waits on its read, and nobody
// else does: polls too early, refused from the replica's memory, and a request to a protected route
// without a pass are answered while that read is still on its way, by the plan read last.
func TestARedisThatStopsAnsweringHoldsOneRequestNotACrowd(t *testing.T) {
	h := newHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) {
		// Long enough that every poll below is early.
		wq.Spec.Polling = &herdgatev1alpha1.PollingSpec{
			MinInterval: &metav1.Duration{Duration: 10 * time.Second}, MaxInterval: &metav1.Duration{Duration: 20 * time.Second},
		}
	})
	h.fillAhead(40)
	crowd := h.enterCrowd(6)
	// Every request reads the plan, so the first one after the pause finds it due; the cache has read
	// it once before.
	reads := h.readPlansSignalled()
	if res := crowd[0].status(); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("an early poll: %d %s", res.StatusCode, res.body)
	}
	resume := h.pauseRedis()

	drain(reads)
	first := make(chan response, 1)
	go func() { first <- crowd[0].status() }()
	// Its read waits on Redis up to a round trip's bound (2 s).
	<-reads
	for i, v := range crowd[1:] {
		res := v.status()
		if res.StatusCode != http.StatusTooManyRequests || res.json(t)["error"] != "too_early" {
			t.Fatalf("early poll %d while Redis does not answer: %d %s; want 429 too_early", i, res.StatusCode, res.body)
		}
		stillOnItsWay(t, first, "the first poll's read of the plan", "an early poll")
	}
	passless := h.visitor()
	if res := passless.do(http.MethodPost, "/api/v1/orders", nil); res.StatusCode != http.StatusForbidden {
		t.Fatalf("a protected request without a pass while Redis does not answer: %d %s; want 403", res.StatusCode, res.body)
	}
	stillOnItsWay(t, first, "the first poll's read of the plan", "a protected request without a pass")

	resume()
	if res := <-first; res.StatusCode != http.StatusTooManyRequests || res.json(t)["error"] != "too_early" {
		t.Fatalf("the poll that read the plan: %d %s; want 429 too_early", res.StatusCode, res.body)
	}
}

// TestARedisThatStopsAnsweringIsTriedByOneCallAtATime: once a call has found Redis not answering,
// the calls that come after the rest are not all sent to wait on it: one tries Redis (here the read of
// the plan, which counts as a call), and while it is on its way the other polls answer 503
// queue_unavailable at once, and a browser asking for a protected page without a pass goes to the
// waiting page without trying to be admitted at once. When Redis answers that one call, everyone is
// answered by Redis again.
func TestARedisThatStopsAnsweringIsTriedByOneCallAtATime(t *testing.T) {
	h := newHarness(t, nil)
	h.fillAhead(40)
	crowd := h.enterCrowd(7)
	// Every poll below comes in time, so each is Redis' to answer.
	time.Sleep(1500 * time.Millisecond)
	reads := h.readPlansSignalled()
	if res := crowd[6].status(); res.StatusCode != http.StatusOK {
		t.Fatalf("a poll before the pause: %d %s", res.StatusCode, res.body)
	}
	resume := h.pauseRedis()
	unavailable := func(res response) bool {
		return res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Retry-After") != "" && res.json(t)["error"] == "queue_unavailable"
	}
	if res := crowd[0].status(); !unavailable(res) {
		t.Fatalf("a poll Redis does not answer: %d %s; want 503 queue_unavailable", res.StatusCode, res.body)
	}

	// Past the rest after that failure, and past the plan cache's own pause before it reads again.
	time.Sleep(max(admission.RedisRetryAfterError, queue.PlanRetryAfterError))
	drain(reads)
	trying := make(chan response, 1)
	go func() { trying <- crowd[1].status() }()
	// Its read of the plan tries Redis, and waits there up to a round trip's bound (2 s).
	<-reads
	for i, v := range crowd[2:6] {
		if res := v.status(); !unavailable(res) {
			t.Fatalf("poll %d while one call tries Redis: %d %s; want 503 queue_unavailable", i, res.StatusCode, res.body)
		}
		stillOnItsWay(t, trying, "the call trying Redis", "a poll")
	}
	browser := h.visitor()
	res := browser.do(http.MethodGet, "/checkout", nil, "Accept", "text/html")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/.herdgate/") {
		t.Fatalf("a browser without a pass while one call tries Redis: %d (Location %q); want 303 to the waiting page", res.StatusCode, res.Header.Get("Location"))
	}
	stillOnItsWay(t, trying, "the call trying Redis", "a browser without a pass")

	resume()
	if res := <-trying; res.StatusCode != http.StatusOK || res.json(t)["position"] == nil {
		t.Fatalf("the call that tried Redis, answered: %d %s; want its position", res.StatusCode, res.body)
	}
	for i, v := range crowd[2:6] {
		if res := v.status(); res.StatusCode != http.StatusOK {
			t.Fatalf("poll %d once Redis answered: %d %s", i, res.StatusCode, res.body)
		}
	}
}
