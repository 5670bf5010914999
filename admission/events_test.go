package admission_test

import (
	"io"
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
	h := newHarnessWith(t, harnessOptions{now: now, memory: true}, func(wq *herdgatev1alpha1.WaitingQueue) {
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

// TestAnEventThroughGateways: through each real gateway, configured as the guide says, a visitor who
// enters while an event runs gets the event's notice, on the answer and on the waiting page, and
// the page of an event not yet begun stays the room's own.
func TestAnEventThroughGateways(t *testing.T) {
	t0 := time.Now().Truncate(time.Second)
	for name, gw := range gateways {
		t.Run(name, func(t *testing.T) {
			for _, c := range []struct {
				start  time.Duration
				notice string
			}{{-time.Minute, "The sale is on: two tickets each"}, {time.Hour, "Welcome"}} {
				_, gateway := throughGateway(t, gw, func(wq *herdgatev1alpha1.WaitingQueue) {
					sale := builder.Event("sale", t0.Add(c.start), t0.Add(c.start+2*time.Hour))
					sale.Page = &herdgatev1alpha1.EventPage{Message: ptr.To("The sale is on: two tickets each")}
					*wq = *builder.From(wq).PageMessage("Welcome").Events(sale).Obj()
				})
				res, err := http.Post(gateway+"/.herdgate/enter", "application/json", nil)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(res.Body)
				_ = res.Body.Close()
				if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"notice":"`+c.notice+`"`) {
					t.Fatalf("event from %s: enter through %s: %d %s; want the notice %q", c.start, name, res.StatusCode, body, c.notice)
				}
				res, err = http.Get(gateway + "/.herdgate/?return=/checkout")
				if err != nil {
					t.Fatal(err)
				}
				page, _ := io.ReadAll(res.Body)
				_ = res.Body.Close()
				if res.StatusCode != http.StatusOK || !strings.Contains(string(page), c.notice) || (c.start > 0) == strings.Contains(string(page), "two tickets") {
					t.Fatalf("event from %s: the page through %s: %d, does not show %q", c.start, name, res.StatusCode, c.notice)
				}
			}
		})
	}
}
