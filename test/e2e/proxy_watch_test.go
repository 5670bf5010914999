package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

func sampleQueue(namespace, name string) *herdgatev1alpha1.WaitingQueue {
	return &herdgatev1alpha1.WaitingQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: herdgatev1alpha1.WaitingQueueSpec{
			Capacity: herdgatev1alpha1.CapacitySpec{PoolSize: 40, RequestLatency: metav1.Duration{Duration: 200 * time.Millisecond}},
			Upstream: herdgatev1alpha1.UpstreamSpec{Service: &herdgatev1alpha1.ServiceUpstream{Name: "orders", Port: 8080}},
			ProtectedRoutes: []herdgatev1alpha1.ProtectedRoute{
				{Methods: []herdgatev1alpha1.HTTPMethod{"POST"}, Path: ptr.To("/api/v1/orders")},
				{Methods: []herdgatev1alpha1.HTTPMethod{"POST"}, Path: ptr.To("/api/v1/orders/direct")},
			},
		},
	}
}

// TestProxyWatchesItsQueueWithTheOperatorsRBAC runs the proxy's watch as the ServiceAccount the
// operator made for it, bound only to the Role the operator made, and edits the WaitingQueue.
func TestProxyWatchesItsQueueWithTheOperatorsRBAC(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wq := sampleQueue("watch", "orders")
	createQueue(t, wq)
	sa, err := testEnv.AddUser(envtest.User{
		Name:   "system:serviceaccount:" + wq.Namespace + ":" + wq.ProxyName(),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + wq.Namespace},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The Role exists once the operator reconciled; the watch needs it from the start.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.ProxyName()}, &rbacv1.Role{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no proxy Role: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	var mu sync.Mutex
	var configs []*admission.Config
	go func() {
		err := admission.WatchQueue(ctx, sa.Config(), client.ObjectKeyFromObject(wq), func(c *admission.Config) {
			mu.Lock()
			configs = append(configs, c)
			mu.Unlock()
		}, ctrl.Log.WithName("proxy"))
		if err != nil && ctx.Err() == nil {
			t.Errorf("WatchQueue: %v", err)
		}
	}()
	latest := func() *admission.Config {
		mu.Lock()
		defer mu.Unlock()
		if len(configs) == 0 {
			return nil
		}
		return configs[len(configs)-1]
	}
	waitFor := func(what string, ok func(*admission.Config) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if c := latest(); c != nil && ok(c) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the proxy never saw %s (latest config %+v)", what, latest())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("its queue", func(c *admission.Config) bool {
		return len(c.Routes) == 2 && c.Upstream.String() == "http://orders.watch.svc:8080" && c.IdentityHeader == ""
	})

	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(wq), wq); err != nil {
		t.Fatal(err)
	}
	wq.Spec.ProtectedRoutes = append(wq.Spec.ProtectedRoutes, herdgatev1alpha1.ProtectedRoute{PathPrefix: ptr.To("/checkout")})
	wq.Spec.Identity = &herdgatev1alpha1.IdentitySpec{Header: "X-User-Id"}
	wq.Spec.Upstream = herdgatev1alpha1.UpstreamSpec{URL: ptr.To("http://orders-v2.example:9000")}
	if err := k8sClient.Update(ctx, wq); err != nil {
		t.Fatal(err)
	}
	waitFor("the edited routes, identity and upstream", func(c *admission.Config) bool {
		return len(c.Routes) == 3 && c.IdentityHeader == "X-User-Id" && c.Upstream.String() == "http://orders-v2.example:9000"
	})

	// Least privilege: the proxy's account reads nothing else.
	restricted, err := client.New(sa.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: wq.Namespace, Name: "someone-elses"}, StringData: map[string]string{"k": "v"}}
	if err := k8sClient.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := restricted.Get(ctx, client.ObjectKeyFromObject(other), &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the proxy's account read another Secret: %v", err)
	}
}
