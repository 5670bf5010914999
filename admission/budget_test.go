package admission_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
)

// TestThePollBudgetStretchesHintsFarFromTheFront: on both fronts, behind a deep queue the hints
// grow past maxInterval as the budget needs, but no further than half the visitor's wait nor half
// of abandonAfter; the front keeps minInterval; and without a budget the hint is maxInterval.
func TestThePollBudgetStretchesHintsFarFromTheFront(t *testing.T) {
	onBothFronts(t, func(t *testing.T) {
		for _, c := range []struct {
			name   string
			budget *int32
			want   time.Duration
		}{
			// 2,000 ahead at 10 a second: a 201 s wait; half of it, 100.5 s, is within the longest
			// hint (half of 5 min, spread included: 125 s).
			{"a budget of 50 polls a second", ptr.To[int32](50), 100500 * time.Millisecond},
			{"the default budget, which 2,000 waiting do not reach", nil, 5 * time.Second},
		} {
			t.Run(c.name, func(t *testing.T) {
				h := newHarness(t, func(wq *herdgatev1alpha1.WaitingQueue) {
					wq.Spec.Polling = &herdgatev1alpha1.PollingSpec{Budget: c.budget}
				})
				// One visitor a tick: 10 a second.
				if err := h.q.PublishPlan(context.Background(), queue.PublishedPlan{
					Quota: mustQuota(1), PollMin: 500 * time.Millisecond, PollMax: 5 * time.Second, AbandonAfter: 5 * time.Minute,
				}); err != nil {
					t.Fatal(err)
				}
				first := h.visitor()
				if r := first.enter(); r.StatusCode != http.StatusOK {
					t.Fatalf("the first visitor: %d %s", r.StatusCode, r.body)
				}
				var wg sync.WaitGroup
				for w := range 8 {
					wg.Go(func() {
						for i := w; i < 2000; i += 8 {
							if _, err := h.q.Enter(context.Background(), fmt.Sprintf("ahead-%04d", i), time.Hour); err != nil {
								t.Error(err)
							}
						}
					})
				}
				wg.Wait()
				last := h.visitor()
				r := last.enter().json(t)
				if r["position"] != float64(2002) {
					t.Fatalf("the last visitor: %v", r)
				}
				// The harness's proxy spreads hints by a fixed 0.5: no spread.
				if got := time.Duration(r["nextPollMs"].(float64)) * time.Millisecond; got != c.want {
					t.Fatalf("far back: hint %s, want %s", got, c.want)
				}
				time.Sleep(500 * time.Millisecond) // as the first visitor was told
				front := first.status().json(t)
				if front["position"] != float64(1) || front["nextPollMs"] != float64(500) {
					t.Fatalf("at the front of 2,002: %v, want position 1 and minInterval", front)
				}
			})
		}
	})
}
