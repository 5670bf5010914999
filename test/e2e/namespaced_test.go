package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/controllers"
	"github.com/herdgate/herdgate/test/testenv/controlplane"
)

// TestNamespacedModeRunsAQueueWithoutClusterWidePermissions installs the chart with watchNamespaces on
// a control plane of its own (no other manager runs there), runs the manager as the chart's
// ServiceAccount with only the RBAC the chart rendered, and runs a queue: the manager does its whole
// job with no cluster-wide permission, and could not read a Secret or create a Deployment outside its
// namespaces if it wanted to.
func TestNamespacedModeRunsAQueueWithoutClusterWidePermissions(t *testing.T) {
	cp := controlplane.New(t, controlplane.Options{})
	admin, scheme := cp.Client, cp.Scheme
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, ns := range []string{"hg-system", "team-a", "team-b", "elsewhere"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}

	tl := chartToolsOn(t, cp)
	out, err := tl.run(t, tl.helm, "template", "ns", tl.chart, "--namespace", "hg-system",
		"--set", "redis.url="+redisSrv.URL(), "--set", "watchNamespaces={team-a,team-b}")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	for _, kind := range []string{"kind: ClusterRole\n", "kind: ClusterRoleBinding\n"} {
		if strings.Contains(out, kind) {
			t.Fatalf("the namespaced mode renders a %s", strings.TrimSpace(kind))
		}
	}
	tl.apply(t, out)

	// The manager, as the chart's ServiceAccount, with the chart's flags: leader election in its own
	// namespace, caches limited to the watched namespaces.
	sa, err := cp.Env.AddUser(envtest.User{
		Name:   "system:serviceaccount:hg-system:ns-herdgate-manager",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:hg-system"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(sa.Config(), ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache:          cache.Options{DefaultNamespaces: map[string]cache.Config{"team-a": {}, "team-b": {}}},
		LeaderElection: true, LeaderElectionID: "herdgate-manager.herdgate.io", LeaderElectionNamespace: "hg-system",
		LeaderElectionReleaseOnCancel: true,
		Controller:                    config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := controllers.Setup(mgr, controllers.Options{RedisURL: redisSrv.URL(), ProxyImage: "registry.example/herdgate:e2e"}); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()

	wq := sampleQueue("team-a", "orders")
	if err := admin.Create(ctx, wq); err != nil {
		t.Fatal(err)
	}
	outside := sampleQueue("elsewhere", "orders")
	if err := admin.Create(ctx, outside); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := &herdgatev1alpha1.WaitingQueue{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(wq), got); err != nil {
			t.Fatal(err)
		}
		done := true
		for _, c := range []string{herdgatev1alpha1.ConditionAccepted, herdgatev1alpha1.ConditionProgrammed, herdgatev1alpha1.ConditionRedisAvailable, herdgatev1alpha1.ConditionAdmitting} {
			done = done && meta.IsStatusConditionTrue(got.Status.Conditions, c)
		}
		if done && got.Status.Plan != nil && got.Status.Plan.BatchSize == 14 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the namespaced manager never ran the queue: %+v", got.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, obj := range []client.Object{&corev1.Secret{}, &appsv1.Deployment{}} {
		name := wq.ProxyName()
		if _, ok := obj.(*corev1.Secret); ok {
			name = wq.SecretName()
		}
		if err := admin.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: name}, obj); err != nil {
			t.Fatalf("the namespaced manager made no %T: %v", obj, err)
		}
	}
	got := &herdgatev1alpha1.WaitingQueue{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(outside), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Finalizers) != 0 || got.Status.Plan != nil {
		t.Fatalf("the manager touched a queue outside its namespaces: %+v", got)
	}

	// What the chart granted: nothing cluster-wide, no Secret listing anywhere.
	self, err := client.New(sa.Config(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		verb, resource, group, namespace string
		allowed                          bool
	}{
		{"list", "secrets", "", "", false},
		{"watch", "secrets", "", "", false},
		{"get", "secrets", "", "elsewhere", false},
		{"list", "secrets", "", "team-a", false},
		{"get", "secrets", "", "team-a", true},
		{"create", "deployments", "apps", "", false},
		{"create", "deployments", "apps", "elsewhere", false},
		{"create", "deployments", "apps", "team-b", true},
		{"create", "roles", "rbac.authorization.k8s.io", "elsewhere", false},
		{"list", "waitingqueues", "herdgate.io", "", false},
		{"list", "waitingqueues", "herdgate.io", "team-b", true},
	} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: tc.verb, Resource: tc.resource, Group: tc.group, Namespace: tc.namespace},
		}}
		if err := self.Create(ctx, review); err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != tc.allowed {
			t.Errorf("may the manager %s %s in %q? %v, want %v", tc.verb, tc.resource, tc.namespace, review.Status.Allowed, tc.allowed)
		}
	}

	// Deleting the queue goes through the manager's finalizer, in its namespaces too.
	if err := admin.Delete(ctx, wq); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(wq), &herdgatev1alpha1.WaitingQueue{}); client.IgnoreNotFound(err) == nil && err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the queue was never finalized")
		}
	}
	cancel()
	if err := <-stopped; err != nil {
		t.Fatalf("manager: %v", err)
	}
}

// chartToolsOn is chartTools for a control plane of the test's own.
func chartToolsOn(t *testing.T, cp *controlplane.ControlPlane) tools {
	t.Helper()
	tl := chartTools(t)
	var err error
	if tl.kubeconfig, err = cp.WriteKubeconfig("chart-admin", t.TempDir()); err != nil {
		t.Fatal(err)
	}
	return tl
}
