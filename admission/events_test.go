package admission_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/builder"
)

// TestAnEventChangesTheRoomsPageAndNotice: while an event of the room's calendar runs, the proxy
// serves its notice (in enter's and status' answers and on the page) and its page, and the room's own
// before and after; the config changes with the proxy's clock, without a new config.
func TestAnEventChangesTheRoomsPageAndNotice(t *testing.T) {
	t0 := time.Now().Truncate(time.Second)
	var clock atomic.Int64
	clock.Store(t0.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	h := newHarnessWith(t, harnessOptions{now: now}, func(wq *herdgatev1alpha1.WaitingQueue) {
		sale := builder.Event("sale", t0.Add(time.Hour), t0.Add(2*time.Hour))
		sale.Page = &herdgatev1alpha1.EventPage{Message: ptr.To("The sale is on: two tickets each")}
		*wq = *builder.From(wq).PageMessage("Welcome").Events(sale).Obj()
	})
	for _, c := range []struct {
		at     time.Duration
		notice string
	}{{0, "Welcome"}, {time.Hour, "The sale is on: two tickets each"}, {2*time.Hour - time.Second, "The sale is on: two tickets each"}, {2 * time.Hour, "Welcome"}} {
		clock.Store(t0.Add(c.at).UnixNano())
		if got := h.visitor().enter().json(t)["notice"]; got != c.notice {
			t.Errorf("%s after the start: enter's notice %v, want %q", c.at, got, c.notice)
		}
		page := h.visitor().do(http.MethodGet, "/.herdgate/?return=/checkout", nil)
		if !strings.Contains(string(page.body), c.notice) {
			t.Errorf("%s after the start: the page does not show %q", c.at, c.notice)
		}
	}
}
