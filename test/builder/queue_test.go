package builder

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/testenv"
)

// The reference queue and config/samples are the same queue: users apply the one, tests run the other.
func TestTheReferenceQueueIsTheSample(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "samples", "herdgate_v1alpha1_waitingqueue.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sample := &herdgatev1alpha1.WaitingQueue{}
	if err := yaml.UnmarshalStrict(raw, sample); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sample, Queue("", "orders").Obj()); diff != "" {
		t.Fatalf("config/samples and the reference queue differ (-sample +builder):\n%s", diff)
	}
	if s := Queue("shop", "orders").Settings(); s.Plan.BatchSize() != 14 || s.Plan.RateString() != "140" {
		t.Fatalf("the reference queue admits %d per tick, %s/s; want 14 and 140", s.Plan.BatchSize(), s.Plan.RateString())
	}
}

// TestEverySpecSectionHasASetter: each field of the spec is set by a builder method, so that tests
// change queues through the builder rather than by hand. A new spec field fails here until its
// setter is added beside it.
func TestEverySpecSectionHasASetter(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	setters := map[string]func(*QueueBuilder){
		"Capacity": func(b *QueueBuilder) { b.Capacity(10, time.Second, 50).MaxActive(3).Adaptive(2).BatchSizeOverride(5) },
		"Tick":     func(b *QueueBuilder) { b.Tick(time.Second) },
		"Jitter":   func(b *QueueBuilder) { b.Jitter(herdgatev1alpha1.JitterUniform, 50*time.Millisecond) },
		"Pass": func(b *QueueBuilder) {
			b.PassTTL(time.Minute).JWTPasses(herdgatev1alpha1.PassAlgorithmHS256, time.Hour)
		},
		"Polling":            func(b *QueueBuilder) { b.Polling(time.Second, 10*time.Second).PollBudget(50).ExactPositions(100) },
		"AbandonAfter":       func(b *QueueBuilder) { b.AbandonAfter(time.Minute) },
		"AbandonAtTurnAfter": func(b *QueueBuilder) { b.AbandonAtTurnAfter(20 * time.Second) },
		"Suspend":            func(b *QueueBuilder) { b.Suspend(true) },
		"Mode":               func(b *QueueBuilder) { b.Mode(herdgatev1alpha1.ModeClosed) },
		"Enforcement":        func(b *QueueBuilder) { b.Enforcement(herdgatev1alpha1.EnforcementGateway) },
		"Schedule":           func(b *QueueBuilder) { b.Schedule(now, now.Add(time.Hour), time.Time{}) },
		"Entry": func(b *QueueBuilder) {
			b.Entry(&herdgatev1alpha1.EntrySpec{PerClient: &herdgatev1alpha1.PerClientLimit{}})
		},
		"Bypass": func(b *QueueBuilder) {
			b.Bypass(herdgatev1alpha1.BypassRule{Name: "health", Path: ptr.To(herdgatev1alpha1.RoutePath("/healthz"))})
		},
		"Page":            func(b *QueueBuilder) { b.PageMessage("soon") },
		"Upstream":        func(b *QueueBuilder) { b.UpstreamService("shop", 80) },
		"ProtectedRoutes": func(b *QueueBuilder) { b.Routes(Route("/checkout", true, "GET")) },
		"Identity":        func(b *QueueBuilder) { b.Identity("X-User-Id") },
		"Redis":           func(b *QueueBuilder) { b.Redis("redis", "url") },
		"Proxy":           func(b *QueueBuilder) { b.Proxy(&herdgatev1alpha1.ProxySpec{Replicas: ptr.To[int32](3)}) },
		"Events":          func(b *QueueBuilder) { b.Events(Event("launch", now, now.Add(time.Hour))) },
		"Lanes":           func(b *QueueBuilder) { b.Lanes(LaneByCode("members", 20, "codes", "key")) },
		"Draw": func(b *QueueBuilder) {
			b.Beacon("https://beacon.example", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 0)
		},
	}
	spec := reflect.TypeFor[herdgatev1alpha1.WaitingQueueSpec]()
	for i := range spec.NumField() {
		name := spec.Field(i).Name
		set, ok := setters[name]
		if !ok {
			t.Errorf("spec.%s has no builder setter", spec.Field(i).Tag.Get("json"))
			continue
		}
		before := Queue("shop", "orders").Obj()
		b := Queue("shop", "orders")
		set(b)
		if reflect.DeepEqual(reflect.ValueOf(before.Spec).Field(i).Interface(), reflect.ValueOf(b.Obj().Spec).Field(i).Interface()) {
			t.Errorf("the setter of spec.%s leaves it as it was", name)
		}
	}
	if len(setters) != spec.NumField() {
		t.Errorf("%d setters for %d spec fields", len(setters), spec.NumField())
	}
}
