package admission_test

import (
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// The tests of a Redis that stops answering while its connections stay open (testenv's Redis.Pause):
// a long command, or a network that drops its packets. Each call waits out its bound there, so what
// matters is how many wait.

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
	crowd := make([]*visitor, 6)
	for i := range crowd {
		crowd[i] = h.visitor()
		if res := crowd[i].enter(); res.StatusCode != http.StatusOK {
			t.Fatalf("enter: %d %s", res.StatusCode, res.body)
		}
	}
	// Every request reads the plan, so the first one after the pause finds it due; the cache has read
	// it once before.
	h.room.ReadPlansFresh(h.q)
	if res := crowd[0].status(); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("an early poll: %d %s", res.StatusCode, res.body)
	}
	resume, err := h.redis.Pause()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(resume)

	first := make(chan response, 1)
	go func() { first <- crowd[0].status() }()
	// Give it the time to reach the read; the read waits up to a round trip's timeout (2 s).
	time.Sleep(200 * time.Millisecond)
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
