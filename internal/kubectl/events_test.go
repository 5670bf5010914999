package kubectl

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/builder"
)

// TestEventsPreviewsTheSettingsAtATime: the calendar with what each event overrides, and at a time
// the settings in force, derived as the manager and the proxies derive them.
func TestEventsPreviewsTheSettingsAtATime(t *testing.T) {
	t0 := time.Date(2027, 3, 1, 10, 0, 0, 0, time.UTC)
	sale := builder.Event("sale", t0.Add(time.Hour), t0.Add(2*time.Hour))
	sale.Capacity = &herdgatev1alpha1.EventCapacity{PoolSize: ptr.To(int32(80))}
	sale.MaxActive = ptr.To(int32(500))
	sale.Page = &herdgatev1alpha1.EventPage{Message: ptr.To("The sale is on")}
	launch := builder.Event("launch", t0.Add(5*time.Hour), t0.Add(6*time.Hour))
	launch.PreQueueFrom = ptr.To(metav1.NewTime(t0.Add(4*time.Hour + 30*time.Minute)))
	wq := builder.Queue("shop", "orders").PageMessage("Welcome").Events(sale, launch).Obj()
	for _, c := range []struct {
		at   time.Time
		want []string
	}{
		{t0, []string{"sale    -", "capacity, maxActive, page", "a pre-queue and its draw", "the room's own settings", "140 per second, 14 per 100ms tick",
			"Max active:   no cap", `notice "Welcome"`, "Next change:  2027-03-01T11:00:00Z (1h0m0s from then)"}},
		{t0.Add(90 * time.Minute), []string{"the event sale", "280 per second, 28 per 100ms tick", "Max active:   500", `notice "The sale is on"`}},
		{t0.Add(4*time.Hour + 40*time.Minute), []string{"the event launch", "Launch:       PreQueue: pre-queue from 2027-03-01T14:30:00Z, drawn at 2027-03-01T15:00:00Z"}},
	} {
		var out bytes.Buffer
		if err := writeEvents(&out, wq, c.at); err != nil {
			t.Fatal(err)
		}
		for _, want := range c.want {
			if !strings.Contains(out.String(), want) {
				t.Errorf("at %s: no %q in\n%s", c.at.Format(time.RFC3339), want, out.String())
			}
		}
	}
	var out bytes.Buffer
	if err := writeEvents(&out, builder.Queue("shop", "plain").Obj(), t0); err != nil || !strings.Contains(out.String(), "has no events") {
		t.Errorf("a room without events: %v\n%s", err, out.String())
	}
}
