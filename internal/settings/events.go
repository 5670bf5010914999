package settings

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// MaxEvents bounds a room's calendar (spec.events).
const MaxEvents = 16

// Event is one spec.events event: its window and the room's settings during it.
type Event struct {
	Name string
	// From is when the event takes over: its pre-queue's start, or its start. Start and End are the
	// spec's.
	From, Start, End time.Time
	// Settings are the room's during the event: its own with the event's overrides, derived with the
	// same checks. With a pre-queue, their Schedule is the event's launch (no closesAt).
	Settings *Settings
}

// At is the room's settings at t: the event's in force then, or the room's own. The scheduler asks
// it on its tick grid, so the room switches at the events' edges on the grid.
func (s *Settings) At(t time.Time) *Settings {
	if e := s.EventAt(t); e != nil {
		return e.Settings
	}
	return s
}

// EventAt is the event in force at t, nil for none.
func (s *Settings) EventAt(t time.Time) *Event {
	for i := range s.Events {
		if e := &s.Events[i]; !t.Before(e.From) && t.Before(e.End) {
			return e
		}
	}
	return nil
}

// NextEdge is the first edge of an event after t, where the settings in force change; zero when
// none is left.
func (s *Settings) NextEdge(t time.Time) time.Time {
	var next time.Time
	for _, e := range s.Events {
		for _, edge := range []time.Time{e.From, e.End} {
			if edge.After(t) && (next.IsZero() || edge.Before(next)) {
				next = edge
			}
		}
	}
	return next
}

// NextOpening is the launch whose draw comes next at t: the room's schedule, or the schedule of the
// event in force or the next one with a pre-queue; nil when there is none.
func (s *Settings) NextOpening(t time.Time) *Schedule {
	if s.Schedule != nil {
		return s.Schedule
	}
	for _, e := range s.Events {
		if sc := e.Settings.Schedule; sc != nil && t.Before(e.End) {
			return sc
		}
	}
	return nil
}

// deriveEvents derives the calendar: each event's settings are the spec with its overrides, derived
// like the room's own, so that an event the API server accepts runs, and an error names the event's
// field.
func (s *Settings) deriveEvents(wq *herdgatev1alpha1.WaitingQueue) error {
	events := wq.Spec.Events
	if len(events) == 0 {
		return nil
	}
	if len(events) > MaxEvents {
		return fieldErr("spec.events", "%d events, at most %d", len(events), MaxEvents)
	}
	if wq.Spec.Schedule != nil {
		return fieldErr("spec.events", "a room has either events or a schedule: an event with preQueueFrom is a scheduled opening")
	}
	for i, ev := range events {
		field := fmt.Sprintf("spec.events[%d]", i)
		e := Event{Name: ev.Name, Start: ev.Start.Time, End: ev.End.Time, From: ev.Start.Time}
		// A zero time is written as null, which the API server reads as unset.
		if ev.PreQueueFrom != nil && ev.PreQueueFrom.IsZero() {
			ev.PreQueueFrom = nil
		}
		if ev.PreQueueFrom != nil {
			e.From = ev.PreQueueFrom.Time
		}
		switch {
		case len(ev.Name) > 63 || !bypassName.MatchString(ev.Name):
			return fieldErr(field+".name", "%q is not lower-case letters, digits and '-'", ev.Name)
		case !e.Start.Before(e.End):
			return fieldErr(field+".end", "an event's start must be before its end")
		case ev.PreQueueFrom != nil && e.From.Add(s.Plan.Tick()).After(e.Start):
			return fieldErr(field+".preQueueFrom", "must be at least one tick (%s) before start", s.Plan.Tick())
		case ev.PreQueueFrom != nil && e.Start.Sub(e.From) > 24*time.Hour:
			return fieldErr(field+".preQueueFrom", "must be at most 24h before start")
		}
		merged := withEvent(wq, ev)
		es, err := Derive(merged)
		if err != nil {
			return eventFieldError(field, err)
		}
		es.Event = ev.Name
		if ev.Page != nil && ev.Page.Template != nil {
			es.Page.Template.Field = field + ".page.template"
		}
		e.Settings = es
		s.Events = append(s.Events, e)
	}
	sort.Slice(s.Events, func(a, b int) bool { return s.Events[a].From.Before(s.Events[b].From) })
	for i := 1; i < len(s.Events); i++ {
		if prev, e := s.Events[i-1], s.Events[i]; e.From.Before(prev.End) {
			return fieldErr("spec.events", "events must not overlap: %s runs until %s, %s from %s",
				prev.Name, prev.End.UTC().Format(time.RFC3339), e.Name, e.From.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// withEvent is wq with ev's overrides in place of the room's fields, and ev's launch as its
// schedule, without the calendar.
func withEvent(wq *herdgatev1alpha1.WaitingQueue, ev herdgatev1alpha1.Event) *herdgatev1alpha1.WaitingQueue {
	m := wq.DeepCopy()
	spec := &m.Spec
	spec.Events = nil
	if c := ev.Capacity; c != nil {
		if c.PoolSize != nil {
			spec.Capacity.PoolSize = *c.PoolSize
		}
		if c.RequestLatency != nil {
			spec.Capacity.RequestLatency = *c.RequestLatency
		}
		if c.UtilizationPercent != nil {
			spec.Capacity.UtilizationPercent = c.UtilizationPercent
		}
		if c.BatchSizeOverride != nil {
			spec.Capacity.BatchSizeOverride = c.BatchSizeOverride
		}
	}
	if ev.MaxActive != nil {
		spec.Capacity.MaxActive = nil
		if *ev.MaxActive > 0 {
			spec.Capacity.MaxActive = ev.MaxActive
		}
	}
	if p := ev.Page; p != nil {
		if spec.Page == nil {
			spec.Page = &herdgatev1alpha1.PageSpec{}
		}
		if p.Template != nil {
			spec.Page.Template = p.Template
		}
		if p.Message != nil {
			spec.Page.Message = *p.Message
		}
	}
	if ss := ev.Session; ss != nil {
		if spec.Pass == nil {
			spec.Pass = &herdgatev1alpha1.PassSpec{}
		}
		if ss.TTL != nil {
			spec.Pass.TTL = ss.TTL
		}
		if ss.MaxSession != nil {
			spec.Pass.MaxSession = ss.MaxSession
		}
	}
	if ev.Draw != nil {
		spec.Draw = ev.Draw
	}
	if ev.PreQueueFrom != nil {
		from := *ev.PreQueueFrom
		spec.Schedule = &herdgatev1alpha1.ScheduleSpec{OpensAt: metav1.NewTime(ev.Start.Time), PreQueueFrom: &from}
	}
	return m
}

// eventFields say which field of an event set a field of the spec it is derived from.
var eventFields = []struct{ spec, event string }{
	{"spec.capacity.maxActive", "maxActive"},
	{"spec.capacity", "capacity"},
	{"spec.page", "page"},
	{"spec.pass.ttl", "session.ttl"},
	{"spec.pass.maxSession", "session.maxSession"},
	{"spec.pass", "session"},
	{"spec.draw", "draw"},
	{"spec.schedule.opensAt", "start"},
	{"spec.schedule", "preQueueFrom"},
}

// eventFieldError names the event's field in an error of its derivation.
func eventFieldError(field string, err error) error {
	var fe *FieldError
	if !errors.As(err, &fe) {
		return fmt.Errorf("%s: %w", field, err)
	}
	for _, f := range eventFields {
		if rest, ok := strings.CutPrefix(fe.Field, f.spec); ok {
			return fieldErr(field+"."+f.event+rest, "%s", fe.Detail)
		}
	}
	return fieldErr(field, "%s: %s", fe.Field, fe.Detail)
}
