package settings_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/settings"
	"github.com/herdgate/herdgate/test/builder"
)

// TestEventsOverrideTheRoomInTheirWindows: each event runs the room with its overrides and the room's
// other settings, between its start (or pre-queue) and end; a launch has the event's schedule;
// outside every event the room's own settings run.
func TestEventsOverrideTheRoomInTheirWindows(t *testing.T) {
	t0 := time.Date(2027, 3, 1, 10, 0, 0, 0, time.UTC)
	sale := builder.Event("sale", t0.Add(time.Hour), t0.Add(2*time.Hour))
	sale.Capacity = &herdgatev1alpha1.EventCapacity{PoolSize: ptr.To(int32(80))}
	sale.MaxActive = ptr.To(int32(500))
	sale.Page = &herdgatev1alpha1.EventPage{Message: ptr.To("The sale is on")}
	sale.Session = &herdgatev1alpha1.EventSession{TTL: &metav1.Duration{Duration: 10 * time.Minute}}
	launch := builder.Event("launch", t0.Add(5*time.Hour), t0.Add(6*time.Hour))
	launch.PreQueueFrom = ptr.To(metav1.NewTime(t0.Add(4*time.Hour + 45*time.Minute)))
	launch.MaxActive = ptr.To(int32(0))
	wq := builder.Queue("shop", "orders").MaxActive(50).PageMessage("Welcome").Events(sale, launch).Obj()
	s, err := settings.Derive(wq)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at               time.Time
		event            string
		batch, maxActive int64
		notice           string
		passTTL          time.Duration
		phase            phase.Phase
	}{
		{t0, "", 14, 50, "Welcome", 5 * time.Minute, phase.Open},
		{t0.Add(time.Hour - time.Millisecond), "", 14, 50, "Welcome", 5 * time.Minute, phase.Open},
		{t0.Add(time.Hour), "sale", 28, 500, "The sale is on", 10 * time.Minute, phase.Open},
		{t0.Add(2*time.Hour - time.Millisecond), "sale", 28, 500, "The sale is on", 10 * time.Minute, phase.Open},
		{t0.Add(2 * time.Hour), "", 14, 50, "Welcome", 5 * time.Minute, phase.Open},
		{t0.Add(4*time.Hour + 45*time.Minute), "launch", 14, 0, "Welcome", 5 * time.Minute, phase.PreQueue},
		{t0.Add(5 * time.Hour), "launch", 14, 0, "Welcome", 5 * time.Minute, phase.Open},
		{t0.Add(6 * time.Hour), "", 14, 50, "Welcome", 5 * time.Minute, phase.Open},
	} {
		cur := s.At(c.at)
		if cur.Event != c.event || cur.Effective.BatchSize() != c.batch || cur.MaxActive != c.maxActive || cur.Page.Message != c.notice ||
			cur.PassTTL != c.passTTL || cur.PhaseAt(c.at) != c.phase {
			t.Errorf("at %s: event %q, batch %d, maxActive %d, notice %q, pass %s, %s; want %q, %d, %d, %q, %s, %s", c.at.Format(time.RFC3339Nano),
				cur.Event, cur.Effective.BatchSize(), cur.MaxActive, cur.Page.Message, cur.PassTTL, cur.PhaseAt(c.at),
				c.event, c.batch, c.maxActive, c.notice, c.passTTL, c.phase)
		}
	}
	if next := s.NextEdge(t0); !next.Equal(t0.Add(time.Hour)) {
		t.Errorf("the next edge after %s is %s, want the sale's start", t0, next)
	}
	if sc := s.NextOpening(t0); sc == nil || !sc.OpensAt.Equal(t0.Add(5*time.Hour)) {
		t.Errorf("the next opening at %s is %+v, want the launch", t0, sc)
	}
	if sc := s.NextOpening(t0.Add(6 * time.Hour)); sc != nil {
		t.Errorf("an opening after the last launch: %+v", sc)
	}
}

// TestEventsTheRoomCannotRun: an event that cannot run is refused with its own field named.
func TestEventsTheRoomCannotRun(t *testing.T) {
	t0 := time.Date(2027, 3, 1, 10, 0, 0, 0, time.UTC)
	ev := func(change func(*herdgatev1alpha1.Event)) herdgatev1alpha1.Event {
		e := builder.Event("sale", t0, t0.Add(time.Hour))
		change(&e)
		return e
	}
	for name, c := range map[string]struct {
		wq    *herdgatev1alpha1.WaitingQueue
		field string
	}{
		"overlapping events": {builder.Queue("shop", "orders").Events(builder.Event("a", t0, t0.Add(time.Hour)),
			builder.Event("b", t0.Add(30*time.Minute), t0.Add(2*time.Hour))).Obj(), "spec.events"},
		"a pre-queue that overlaps the event before": {builder.Queue("shop", "orders").Events(builder.Event("a", t0, t0.Add(time.Hour)),
			ev(func(e *herdgatev1alpha1.Event) {
				e.Name, e.Start, e.End = "b", metav1.NewTime(t0.Add(2*time.Hour)), metav1.NewTime(t0.Add(3*time.Hour))
				e.PreQueueFrom = ptr.To(metav1.NewTime(t0.Add(59 * time.Minute)))
			})).Obj(), "spec.events"},
		"an end before the start": {builder.Queue("shop", "orders").Events(ev(func(e *herdgatev1alpha1.Event) { e.End = e.Start })).Obj(), "spec.events[0].end"},
		"a pre-queue less than a tick before the start": {builder.Queue("shop", "orders").Tick(10 * time.Second).Events(ev(func(e *herdgatev1alpha1.Event) {
			e.PreQueueFrom = ptr.To(metav1.NewTime(t0.Add(-5 * time.Second)))
		})).Obj(), "spec.events"},
		"a pool of 0": {builder.Queue("shop", "orders").Events(ev(func(e *herdgatev1alpha1.Event) {
			e.Capacity = &herdgatev1alpha1.EventCapacity{PoolSize: ptr.To(int32(0))}
		})).Obj(), "spec.events[0].capacity.poolSize"},
		"a pass shorter than the room's maxSession allows": {builder.Queue("shop", "orders").PassSpec(&herdgatev1alpha1.PassSpec{MaxSession: &metav1.Duration{Duration: 10 * time.Minute}}).
			Events(ev(func(e *herdgatev1alpha1.Event) {
				e.Session = &herdgatev1alpha1.EventSession{TTL: &metav1.Duration{Duration: time.Hour}}
			})).Obj(), "spec.events"},
		"an event's beacon at an address with a query": {builder.Queue("shop", "orders").Events(ev(func(e *herdgatev1alpha1.Event) {
			e.PreQueueFrom = ptr.To(metav1.NewTime(t0.Add(-time.Minute)))
			e.Draw = &herdgatev1alpha1.DrawSpec{SeedSource: herdgatev1alpha1.DrawSeedBeacon,
				Beacon: &herdgatev1alpha1.BeaconSpec{URL: "https://beacon.example/?x=1", ChainHash: strings.Repeat("ab", 32)}}
		})).Obj(), "spec.events[0].draw.beacon.url"},
		"events and a schedule": {builder.Queue("shop", "orders").Schedule(t0.Add(-time.Hour), t0.Add(-time.Minute), time.Time{}).
			Events(ev(func(*herdgatev1alpha1.Event) {})).Obj(), "spec.events"},
	} {
		_, err := settings.Derive(c.wq)
		var fe *settings.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: %v; want an error naming %s", name, err, c.field)
		}
	}
}

// TestALaunchDrawsWithItsOwnBeacon: a launch draws with the room's beacon (spec.draw) unless the
// event names its own; the schedule's opening draws with the room's.
func TestALaunchDrawsWithItsOwnBeacon(t *testing.T) {
	t0 := time.Date(2027, 3, 1, 10, 0, 0, 0, time.UTC)
	room, mirror := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
	first := builder.Event("first", t0.Add(time.Hour), t0.Add(2*time.Hour))
	first.PreQueueFrom = ptr.To(metav1.NewTime(t0.Add(50 * time.Minute)))
	second := builder.Event("second", t0.Add(3*time.Hour), t0.Add(4*time.Hour))
	second.PreQueueFrom = ptr.To(metav1.NewTime(t0.Add(170 * time.Minute)))
	second.Draw = &herdgatev1alpha1.DrawSpec{SeedSource: herdgatev1alpha1.DrawSeedBeacon,
		Beacon: &herdgatev1alpha1.BeaconSpec{URL: "https://mirror.example/drand", ChainHash: mirror, MaxWait: &metav1.Duration{Duration: 5 * time.Minute}}}
	wq := builder.Queue("shop", "orders").Beacon("https://beacon.example", room, 0).Events(first, second).Obj()
	s, err := settings.Derive(wq)
	if err != nil {
		t.Fatal(err)
	}
	if b := s.NextOpening(t0).Beacon; b == nil || b.ChainHash != room || b.MaxWait != settings.DefaultBeaconMaxWait {
		t.Fatalf("the first launch's beacon = %+v; want the room's, waiting the default", b)
	}
	if b := s.NextOpening(t0.Add(2 * time.Hour)).Beacon; b == nil || b.ChainHash != mirror || b.URL != "https://mirror.example/drand" || b.MaxWait != 5*time.Minute {
		t.Fatalf("the second launch's beacon = %+v; want its own", b)
	}
	plain := builder.Queue("shop", "orders").Schedule(t0, t0.Add(time.Hour), time.Time{}).Obj()
	if s, err := settings.Derive(plain); err != nil || s.Schedule.Beacon != nil {
		t.Fatalf("a schedule without spec.draw: beacon %+v, %v; want none", s.Schedule.Beacon, err)
	}
}
