package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/controllers"
	"github.com/herdgate/herdgate/internal/scheduler"
	"github.com/herdgate/herdgate/test/testenv"
	"github.com/herdgate/herdgate/test/testenv/controlplane"
)

// TestTheManagerRefusesWhatAnOlderCRDLetsThrough installs a CRD without the route path rules, as a
// cluster whose CRD is older than its manager has, and edits a route into one the proxy could not serve:
// the manager says so in Accepted, naming the field, applies nothing of that generation and keeps
// admitting on the last accepted one; the fixed spec is accepted again.
func TestTheManagerRefusesWhatAnOlderCRDLetsThrough(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", "herdgate.io_waitingqueues.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	route := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["protectedRoutes"].Items.Schema
	for _, field := range []string{"path", "pathPrefix"} {
		p := route.Properties[field]
		p.XValidations = nil
		route.Properties[field] = p
	}
	older, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "crd.yaml"), older, 0o600); err != nil {
		t.Fatal(err)
	}
	cp := controlplane.New(t, controlplane.Options{CRDDirectoryPaths: []string{dir}})
	admin, cfg, scheme := cp.Client, cp.Config, cp.Scheme
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	generations := make(chan int64, 1000)
	observe := scheduler.WithTickObserver(func(r scheduler.TickReport) {
		if r.Err == nil {
			select {
			case generations <- r.Generation:
			default:
			}
		}
	})
	if _, err := controllers.Setup(mgr, controllers.Options{RedisURL: redisSrv.URL(), ProxyImage: "registry.example/herdgate:e2e",
		Scheduler: []scheduler.Option{observe}}); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "older"}}); err != nil {
		t.Fatal(err)
	}
	wq := sampleQueue("older", "orders")
	if err := admin.Create(ctx, wq); err != nil {
		t.Fatal(err)
	}
	waitCondition := func(what string, ok func(*herdgatev1alpha1.WaitingQueue) bool) *herdgatev1alpha1.WaitingQueue {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := &herdgatev1alpha1.WaitingQueue{}
			if err := admin.Get(ctx, client.ObjectKeyFromObject(wq), got); err != nil {
				t.Fatal(err)
			}
			if ok(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("never saw %s: %+v", what, got.Status.Conditions)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	first := waitCondition("the first generation accepted and admitting", func(got *herdgatev1alpha1.WaitingQueue) bool {
		return meta.IsStatusConditionTrue(got.Status.Conditions, herdgatev1alpha1.ConditionAccepted) &&
			meta.IsStatusConditionTrue(got.Status.Conditions, herdgatev1alpha1.ConditionAdmitting)
	})

	acceptedGeneration := first.Generation
	// A trailing slash: the older CRD takes it, the proxy would refuse it.
	updateSpec(t, admin, first, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.ProtectedRoutes[0].Path = ptr.To(herdgatev1alpha1.RoutePath("/api/v1/orders/"))
		wq.Spec.Capacity.BatchSizeOverride = ptr.To[int32](3)
	})
	refused := waitCondition("the refusal", func(got *herdgatev1alpha1.WaitingQueue) bool {
		c := meta.FindStatusCondition(got.Status.Conditions, herdgatev1alpha1.ConditionAccepted)
		return c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == got.Generation
	})
	accepted := meta.FindStatusCondition(refused.Status.Conditions, herdgatev1alpha1.ConditionAccepted)
	if accepted.Reason != herdgatev1alpha1.ReasonInvalidSpec || !strings.Contains(accepted.Message, "spec.protectedRoutes[0].path") {
		t.Fatalf("Accepted = %s: %s; want InvalidSpec naming spec.protectedRoutes[0].path", accepted.Reason, accepted.Message)
	}
	programmed := meta.FindStatusCondition(refused.Status.Conditions, herdgatev1alpha1.ConditionProgrammed)
	if programmed.Status != metav1.ConditionFalse || programmed.Reason != herdgatev1alpha1.ReasonNotAccepted {
		t.Fatalf("Programmed = %s %s, want False NotAccepted", programmed.Status, programmed.Reason)
	}
	if meta.IsStatusConditionTrue(refused.Status.Conditions, herdgatev1alpha1.ConditionReady) {
		t.Fatal("Ready is true for a generation nothing applies")
	}
	if refused.Status.Plan == nil || refused.Status.Plan.BatchSize != 14 {
		t.Fatalf("status shows the refused generation's plan: %+v", refused.Status.Plan)
	}
	// The scheduler keeps the last accepted generation: its ticks still carry generation 1.
	for range len(generations) {
		<-generations
	}
	select {
	case g := <-generations:
		if g != acceptedGeneration {
			t.Fatalf("a tick ran with generation %d, want the accepted %d", g, acceptedGeneration)
		}
	case <-time.After(15 * time.Second): // an idle room ticks once per idle sleep, 10 s
		t.Fatal("the scheduler stopped ticking")
	}

	updateSpec(t, admin, refused, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.ProtectedRoutes[0].Path = ptr.To(herdgatev1alpha1.RoutePath("/api/v1/orders"))
	})
	waitCondition("the fixed spec accepted with its plan", func(got *herdgatev1alpha1.WaitingQueue) bool {
		return meta.IsStatusConditionTrue(got.Status.Conditions, herdgatev1alpha1.ConditionAccepted) &&
			got.Status.Plan != nil && got.Status.Plan.BatchSize == 3
	})
	if err := admin.Delete(ctx, wq); err != nil {
		t.Fatal(err)
	}
}
