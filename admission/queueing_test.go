package admission_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// queueingStatus sets spec.page.queueingStatusCode; 0 leaves it unset.
func queueingStatus(code int32) func(*herdgatev1alpha1.WaitingQueue) {
	return func(wq *herdgatev1alpha1.WaitingQueue) {
		if code == 0 {
			return
		}
		if wq.Spec.Page == nil {
			wq.Spec.Page = &herdgatev1alpha1.PageSpec{}
		}
		wq.Spec.Page.QueueingStatusCode = ptr.To(code)
	}
}

// fillAhead puts n visitors in the queue in front of whoever comes next, past the budget a tick
// admits at once.
func (h *harness) fillAhead(n int) {
	h.t.Helper()
	for i := range n {
		if _, err := h.q.Enter(context.Background(), fmt.Sprintf("ahead-%03d", i), time.Hour); err != nil {
			h.t.Fatal(err)
		}
	}
}

// TestAWaitingVisitorGetsTheQueueingStatus: with spec.page.queueingStatusCode, every answer of a
// visitor who is not through yet (entering, polling, an admission valid in a moment) comes with that
// status and Retry-After, the next poll in whole seconds, and the same body; the answer that hands
// out the pass, and errors, keep theirs. Unset, it is 200 without Retry-After, as before.
func TestAWaitingVisitorGetsTheQueueingStatus(t *testing.T) {
	for _, code := range []int32{0, 200, 202, 429} {
		t.Run(strconv.Itoa(int(code)), func(t *testing.T) {
			onBothFronts(t, func(t *testing.T) {
				want := int(code)
				if want == 0 {
					want = http.StatusOK
				}
				h := newHarness(t, queueingStatus(code))
				h.fillAhead(30)
				v := h.visitor()
				check := func(what string, r response) map[string]any {
					t.Helper()
					body := r.json(t)
					if r.StatusCode != want || body["error"] != nil {
						t.Fatalf("%s: %d %v; want %d with the visitor's place", what, r.StatusCode, body, want)
					}
					retry := r.Header.Get("Retry-After")
					if code == 0 {
						if retry != "" {
							t.Fatalf("%s: Retry-After %q without a queueing status", what, retry)
						}
						return body
					}
					next := int64(body["nextPollMs"].(float64))
					if s, err := strconv.ParseInt(retry, 10, 64); err != nil || s != max(1, (next+999)/1000) {
						t.Fatalf("%s: Retry-After %q with nextPollMs %d; want the next poll in whole seconds", what, retry, next)
					}
					return body
				}
				body := check("entering behind 30", v.enter())
				if body["position"].(float64) < 1 {
					t.Fatalf("entering behind 30: %v; want a place", body)
				}
				time.Sleep(time.Duration(body["nextPollMs"].(float64)) * time.Millisecond)
				check("polling", v.status())
				// Too early stays 429 too_early, whatever the room's queueing status.
				if r := v.status(); r.StatusCode != http.StatusTooManyRequests || r.json(t)["error"] != "too_early" {
					t.Fatalf("polling at once: %d %s; want 429 too_early", r.StatusCode, r.body)
				}
				time.Sleep(5 * time.Second)
				h.admit(100, 800*time.Millisecond)
				soon := check("admitted, valid in a moment", v.status())
				if soon["admitted"] != false {
					t.Fatalf("admitted, valid in a moment: %v", soon)
				}
				time.Sleep(time.Duration(soon["nextPollMs"].(float64)) * time.Millisecond)
				r := v.status()
				if r.StatusCode != http.StatusOK || r.json(t)["admitted"] != true || r.Header.Get("Retry-After") != "" {
					t.Fatalf("admitted: %d %s (Retry-After %q); want 200 with the pass", r.StatusCode, r.body, r.Header.Get("Retry-After"))
				}
			})
		})
	}
}
