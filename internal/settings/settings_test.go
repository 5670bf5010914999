package settings_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/capacity"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/settings"
	"github.com/herdgate/herdgate/test/builder"
)

func reference() *herdgatev1alpha1.WaitingQueue {
	return builder.Queue("shop", "orders").Generation(3).UID("uid-1").
		Routes(builder.Route("/api/v1/orders", false), builder.Route("/checkout", true, "GET")).Obj()
}

func TestDeriveTheReferenceQueue(t *testing.T) {
	s, err := settings.Derive(reference())
	if err != nil {
		t.Fatal(err)
	}
	type view struct {
		Generation                    int64
		Batch, EffectiveBatch         int64
		Rate                          string
		Capped                        bool
		Window, Lead, PassTTL         time.Duration
		PollMin, PollMax, Abandon     time.Duration
		Upstream, Identity            string
		Routes                        int
		ProtectsHeadOfGet, ExactRoute bool
	}
	got := view{
		s.Generation, s.Plan.BatchSize(), s.Effective.BatchSize(), s.Plan.RateString(), s.Capped,
		s.JitterWindow, s.Lead, s.PassTTL, s.PollMin, s.PollMax, s.AbandonAfter, s.Upstream.String(), s.IdentityHeader,
		len(s.Routes), s.Routes[1].Matches("HEAD", "/checkout/pay"), s.Routes[0].Matches("POST", "/api/v1/orders"),
	}
	want := view{3, 14, 14, "140", false, 100 * time.Millisecond, 600 * time.Millisecond, 5 * time.Minute,
		500 * time.Millisecond, 5 * time.Second, 5 * time.Minute, "http://orders.shop.svc:8080", "", 2, true, true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("settings (-want +got):\n%s", diff)
	}
}

func TestDeriveCapsThePlanAtWhatATickAdmits(t *testing.T) {
	wq := reference()
	wq.Spec.Capacity = herdgatev1alpha1.CapacitySpec{PoolSize: 1_000_000, RequestLatency: metav1.Duration{Duration: time.Millisecond}, UtilizationPercent: ptr.To[int32](100)}
	wq.Spec.Tick = &metav1.Duration{Duration: 10 * time.Second}
	s, err := settings.Derive(wq)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Capped || s.Plan.BatchSize() != 10_000_000_000 || s.Effective.BatchSize() != capacity.MaxAdmitPerTick || s.Effective.RateString() != "25" {
		t.Fatalf("plan %d per tick, effective %d (%s/s), capped %v; want 10^10, %d (25/s), true",
			s.Plan.BatchSize(), s.Effective.BatchSize(), s.Effective.RateString(), s.Capped, capacity.MaxAdmitPerTick)
	}
}

func TestDeriveAnAdaptiveCapacity(t *testing.T) {
	wq := reference()
	if s, err := settings.Derive(wq); err != nil || s.Adaptive != nil || s.TargetInFlight != 28 {
		t.Fatalf("a Declared capacity: adaptive %+v, target %v (%v); want none, 28", s.Adaptive, s.TargetInFlight, err)
	}
	wq.Spec.Capacity.Mode = herdgatev1alpha1.CapacityAdaptive
	s, err := settings.Derive(wq)
	if err != nil {
		t.Fatal(err)
	}
	// The plan is 140/s; the pool's full rate, 40 ÷ 200 ms, is the ceiling; the floor a tenth of the plan.
	want := capacity.AdaptiveLimits{Declared: 140, Ceiling: 200, Floor: 14, TargetInFlight: 28, Tick: 100 * time.Millisecond}
	if diff := cmp.Diff(&want, s.Adaptive); diff != "" {
		t.Fatalf("limits (-want +got):\n%s", diff)
	}
	// A floor above the plan is the plan.
	wq.Spec.Capacity.MinAdmissionsPerSecond = ptr.To[int32](141)
	if s, err = settings.Derive(wq); err != nil || s.Adaptive.Floor != 140 {
		t.Fatalf("a floor of 141 under a plan of 140: %+v (%v); want the floor at 140", s.Adaptive, err)
	}
	// An override above the pool's full rate is its own ceiling; a floor of 0 is allowed.
	wq.Spec.Capacity.BatchSizeOverride, wq.Spec.Capacity.MinAdmissionsPerSecond = ptr.To[int32](50), ptr.To[int32](0)
	if s, err = settings.Derive(wq); err != nil || s.Adaptive.Declared != 500 || s.Adaptive.Ceiling != 500 || s.Adaptive.Floor != 0 {
		t.Fatalf("override 50 per tick: %+v (%v); want declared and ceiling 500, floor 0", s.Adaptive, err)
	}
}

func TestDeriveNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*herdgatev1alpha1.WaitingQueue)
		field  string
		detail string
	}{
		{"a route with a trailing slash", func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.ProtectedRoutes[0].Path = ptr.To(herdgatev1alpha1.RoutePath("/api/"))
		},
			"spec.protectedRoutes[0].path", "must be absolute and normalised"},
		{"a prefix with a newline", func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.ProtectedRoutes[1].PathPrefix = ptr.To(herdgatev1alpha1.RoutePath("/checkout\n"))
		},
			"spec.protectedRoutes[1].pathPrefix", "control character"},
		{"a route with both forms", func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.ProtectedRoutes[0].PathPrefix = ptr.To(herdgatev1alpha1.RoutePath("/x"))
		},
			"spec.protectedRoutes[0]", "exactly one of path or pathPrefix"},
		{"a lower-case method", func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.ProtectedRoutes[0].Methods = []herdgatev1alpha1.HTTPMethod{"post"}
		}, "spec.protectedRoutes[0].methods[0]", "Unsupported value"},
		{"no route", func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.ProtectedRoutes = nil }, "spec.protectedRoutes", "Required value"},
		{"Cookie as identity", func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Identity = &herdgatev1alpha1.IdentitySpec{Header: "cookie"}
		},
			"spec.identity.header", "cannot identify a visitor"},
		{"an upstream with credentials", func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Upstream = herdgatev1alpha1.UpstreamSpec{URL: ptr.To("https://u:p@orders")}
		}, "spec.upstream.url", "credentials"},
		{"an upstream with a query", func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Upstream = herdgatev1alpha1.UpstreamSpec{URL: ptr.To("https://orders/?a=b")}
		}, "spec.upstream.url", "query"},
		{"an upstream port out of range", func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Upstream = herdgatev1alpha1.UpstreamSpec{URL: ptr.To("https://orders:65536")}
		}, "spec.upstream.url", "port"},
		{"both upstream forms", func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Upstream.URL = ptr.To("http://x") },
			"spec.upstream", "exactly one"},
		{"no capacity", func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Capacity = herdgatev1alpha1.CapacitySpec{} },
			"spec.capacity.poolSize", "greater than or equal to 1"},
		{"a jitter window beyond the tick", func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Jitter = &herdgatev1alpha1.JitterSpec{Window: &metav1.Duration{Duration: time.Second}}
		}, "spec.jitter.window", "must not be longer than tick"},
		{"a schedule that closes before it opens", func(wq *herdgatev1alpha1.WaitingQueue) {
			opens := time.Date(2027, 3, 1, 10, 0, 0, 0, time.UTC)
			wq.Spec.Schedule = &herdgatev1alpha1.ScheduleSpec{OpensAt: metav1.NewTime(opens), ClosesAt: ptr.To(metav1.NewTime(opens))}
		}, "spec.schedule.closesAt", "opensAt must be before schedule.closesAt"},
		{"a pre-queue of a day and a second", func(wq *herdgatev1alpha1.WaitingQueue) {
			opens := time.Date(2027, 3, 1, 10, 0, 0, 0, time.UTC)
			wq.Spec.Schedule = &herdgatev1alpha1.ScheduleSpec{OpensAt: metav1.NewTime(opens), PreQueueFrom: ptr.To(metav1.NewTime(opens.Add(-24*time.Hour - time.Second)))}
		}, "spec.schedule.preQueueFrom", "at most 24h"},
		{"a trusted proxy that is no CIDR", func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{TrustedProxies: []herdgatev1alpha1.CIDR{"10.0.0.0/8", "10.0.0.1"}}
		}, "spec.entry.trustedProxies[1]", "must be a CIDR"},
		{"an entry burst of 0", func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{PerClient: &herdgatev1alpha1.PerClientLimit{Burst: ptr.To[int32](0)}}
		}, "spec.entry.perClient.burst", "greater than or equal to 1"},
		{"an IPv6 client of 8 bits", func(wq *herdgatev1alpha1.WaitingQueue) {
			wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{PerClient: &herdgatev1alpha1.PerClientLimit{IPv6PrefixLength: ptr.To[int32](8)}}
		}, "spec.entry.perClient.ipv6PrefixLength", "greater than or equal to 16"},
		{"an unknown capacity mode", func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Capacity.Mode = "Fast" },
			"spec.capacity.mode", "Unsupported value"},
		{"no name", func(wq *herdgatev1alpha1.WaitingQueue) { wq.Name = "" }, "metadata", "required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wq := reference()
			tc.mutate(wq)
			_, err := settings.Derive(wq)
			var fe *settings.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Derive = %v, want a FieldError", err)
			}
			if fe.Field != tc.field || !strings.Contains(fe.Detail, tc.detail) {
				t.Fatalf("Derive = %q, want field %s and a detail containing %q", err, tc.field, tc.detail)
			}
		})
	}
}

func TestPhaseAtFollowsTheSchedule(t *testing.T) {
	opens := time.Date(2027, 3, 1, 10, 0, 0, 0, time.UTC)
	pre, closes := opens.Add(-time.Hour), opens.Add(2*time.Hour)
	wq := builder.Queue("shop", "orders").Schedule(pre, opens, closes).Obj()
	s, err := settings.Derive(wq)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at   time.Time
		want phase.Phase
	}{
		{pre.Add(-time.Millisecond), phase.Scheduled},
		{pre, phase.PreQueue},
		{opens.Add(-time.Millisecond), phase.PreQueue},
		{opens, phase.Open},
		{closes.Add(-time.Millisecond), phase.Open},
		{closes, phase.Closed},
	} {
		if got := s.PhaseAt(tc.at); got != tc.want {
			t.Errorf("PhaseAt(%s) = %s, want %s", tc.at.Format(time.RFC3339Nano), got, tc.want)
		}
	}

	wq.Spec.Schedule.PreQueueFrom, wq.Spec.Schedule.ClosesAt = nil, nil
	if s, err = settings.Derive(wq); err != nil {
		t.Fatal(err)
	}
	if got := s.PhaseAt(opens.Add(-herdgatev1alpha1.DefaultPreQueue - time.Millisecond)); got != phase.Scheduled {
		t.Errorf("just before the default pre-queue: %s, want Scheduled", got)
	}
	if got := s.PhaseAt(opens.Add(-herdgatev1alpha1.DefaultPreQueue)); got != phase.PreQueue {
		t.Errorf("at the default pre-queue: %s, want PreQueue", got)
	}
	if got := s.PhaseAt(opens.Add(1000 * time.Hour)); got != phase.Open {
		t.Errorf("long after an opening without closesAt: %s, want Open", got)
	}
	if got := (&settings.Settings{}).PhaseAt(pre); got != phase.Open {
		t.Errorf("without a schedule: %s, want Open", got)
	}
}

// TestThePhasesAreTheConditionReasons: the Open condition's reasons name the schedule's phases as
// visitors are told them, so that a status and an answer never call one phase two names.
func TestThePhasesAreTheConditionReasons(t *testing.T) {
	for phase, reason := range map[phase.Phase]string{
		phase.Scheduled: herdgatev1alpha1.ReasonScheduled,
		phase.PreQueue:  herdgatev1alpha1.ReasonPreQueue,
		phase.Opening:   herdgatev1alpha1.ReasonOpening,
		phase.Open:      herdgatev1alpha1.ReasonOpen,
		phase.Closed:    herdgatev1alpha1.ReasonClosed,
	} {
		if string(phase) != reason {
			t.Errorf("phase %q has the condition reason %q", phase, reason)
		}
	}
	if len(phase.All) != 6 {
		t.Errorf("Phases lists %d phases, want the five of a schedule and Passthrough", len(phase.All))
	}
}

// TestTheLaneLimitsAreTheEngines: the derivation refuses what the engine would.
func TestTheLaneLimitsAreTheEngines(t *testing.T) {
	if settings.MaxLanes != queue.MaxLanes || settings.MainLane != queue.MainLane {
		t.Fatalf("settings: %d lanes, main %q; the engine: %d, %q", settings.MaxLanes, settings.MainLane, queue.MaxLanes, queue.MainLane)
	}
}
