package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/front"
	"github.com/herdgate/herdgate/admission/host"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/builder"
)

func sampleQueue(namespace, name string) *herdgatev1alpha1.WaitingQueue {
	return builder.Queue(namespace, name).Obj()
}

// proxyAccount is the proxy's ServiceAccount as the operator made it, bound only to the Role the
// operator made; it waits for the Role, which the watch needs from the start.
func proxyAccount(t *testing.T, wq *herdgatev1alpha1.WaitingQueue) *envtest.AuthenticatedUser {
	t.Helper()
	sa, err := testEnv.AddUser(envtest.User{
		Name:   "system:serviceaccount:" + wq.Namespace + ":" + wq.ProxyName(),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + wq.Namespace},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: wq.Namespace, Name: wq.ProxyName()}, &rbacv1.Role{})
		if err == nil {
			return sa
		}
		if time.Now().After(deadline) {
			t.Fatalf("no proxy Role: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// mountKey writes the queue's HMAC key where the proxy reads it, as the kubelet mounts it from the
// queue's Secret, and returns the file's path.
func mountKey(t *testing.T, wq *herdgatev1alpha1.WaitingQueue) string {
	t.Helper()
	secret := &corev1.Secret{}
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: wq.Namespace, Name: wq.SecretName()}, secret); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), herdgatev1alpha1.SecretHMACKey)
	if err := os.WriteFile(path, secret.Data[herdgatev1alpha1.SecretHMACKey], 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestProxyWatchesItsQueueWithTheOperatorsRBAC runs the proxy's watch as the ServiceAccount the
// operator made for it, bound only to the Role the operator made, and edits the WaitingQueue.
func TestProxyWatchesItsQueueWithTheOperatorsRBAC(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wq := sampleQueue("watch", "orders")
	createQueue(t, wq)
	sa := proxyAccount(t, wq)
	keyFile := mountKey(t, wq)

	var mu sync.Mutex
	var configs []*admission.Config
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := host.WatchRoom(ctx, sa.Config(), client.ObjectKeyFromObject(wq), host.WatchOptions{
			HMACKey: host.KeyFile(keyFile),
			Apply: func(c *admission.Config) {
				mu.Lock()
				configs = append(configs, c)
				mu.Unlock()
			},
			Refuse: func(generation int64, err error) { t.Errorf("generation %d refused: %v", generation, err) },
			Log:    ctrl.Log.WithName("proxy"),
		})
		if err != nil && ctx.Err() == nil {
			t.Errorf("WatchRoom: %v", err)
		}
	}()
	defer func() { cancel(); <-done }()
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

	updateSpec(t, k8sClient, wq, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.ProtectedRoutes = append(wq.Spec.ProtectedRoutes, herdgatev1alpha1.ProtectedRoute{PathPrefix: ptr.To(herdgatev1alpha1.RoutePath("/checkout"))})
		wq.Spec.Identity = &herdgatev1alpha1.IdentitySpec{Header: "X-User-Id"}
		wq.Spec.Upstream = herdgatev1alpha1.UpstreamSpec{URL: ptr.To("http://orders-v2.example:9000")}
	})
	waitFor("the edited routes, identity and upstream", func(c *admission.Config) bool {
		return len(c.Routes) == 3 && c.IdentityHeader == "X-User-Id" && c.Upstream.String() == "http://orders-v2.example:9000"
	})

	// Least privilege: the proxy's account reads no Secret at all, not even its queue's: its key is mounted.
	restricted, err := client.New(sa.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: wq.Namespace, Name: "someone-elses"}, StringData: map[string]string{"k": "v"}}
	if err := client.IgnoreAlreadyExists(k8sClient.Create(ctx, other)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{other.Name, wq.SecretName()} {
		if err := restricted.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: name}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
			t.Fatalf("the proxy's account read the Secret %s: %v", name, err)
		}
	}
}

// servingProxy runs a whole proxy as herdgate-proxy --waitingqueue does, under the proxy's account,
// and returns its address.
func servingProxy(t *testing.T, ctx context.Context, wq *herdgatev1alpha1.WaitingQueue, keyFile, replica string) (*admission.Room, string) {
	t.Helper()
	store := newStore(t)
	log := ctrl.Log.WithName(replica)
	room, err := admission.NewUnconfiguredRoom(wq.Namespace, wq.Name, store, admission.Options{Log: log, Replica: replica})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sa := proxyAccount(t, wq)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = host.WatchRoom(ctx, sa.Config(), client.ObjectKeyFromObject(wq), host.WatchOptions{
			HMACKey: host.KeyFile(keyFile), Apply: room.SetConfig, Refuse: room.RefuseConfig, Resync: 200 * time.Millisecond, Log: log,
		})
	})
	wg.Go(func() {
		if err := front.Serve(ctx, room, front.ServerOptions{Listener: ln, ShutdownTimeout: 5 * time.Second, Log: log}); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return room, "http://" + ln.Addr().String()
}

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		return 0
	}
	_ = res.Body.Close()
	return res.StatusCode
}

// TestAProxyThatCannotApplyAChangeSaysSo starts a proxy before its key is mounted, then breaks the key
// under a running proxy: the proxy never exits, serves as soon as it can, and the queue's Programmed
// condition names the replica that refuses, within seconds.
func TestAProxyThatCannotApplyAChangeSaysSo(t *testing.T) {
	ctx := context.Background()
	wq := sampleQueue("refusal", "orders")
	createQueue(t, wq)
	keyFile := filepath.Join(t.TempDir(), herdgatev1alpha1.SecretHMACKey) // not mounted yet
	p, addr := servingProxy(t, ctx, wq, keyFile, "orders-herdgate-proxy-0")

	// No key: alive, not ready, and it says why.
	waitUntil(t, "a live proxy that is not ready", func() bool {
		return httpStatus(t, addr+"/.herdgate/healthz") == http.StatusOK && httpStatus(t, addr+"/.herdgate/readyz") == http.StatusServiceUnavailable
	})
	if p.Config() != nil {
		t.Fatal("the proxy has a config without a key")
	}
	waitForProgrammed(t, wq, metav1.ConditionFalse, herdgatev1alpha1.ReasonProxyRefusedConfig, "reading the HMAC key")

	// The key arrives: the proxy serves and the queue is programmed.
	good, err := os.ReadFile(mountKey(t, wq))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, good, 0o600); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a ready proxy", func() bool { return httpStatus(t, addr+"/.herdgate/readyz") == http.StatusOK })
	waitForProgrammed(t, wq, metav1.ConditionTrue, herdgatev1alpha1.ReasonProgrammed, "1 of 1 reporting proxy replicas serve generation")

	// A broken key under a running proxy, then a change: the proxy keeps the routes it has.
	if err := os.WriteFile(keyFile, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	updateSpec(t, k8sClient, wq, func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.ProtectedRoutes = append(wq.Spec.ProtectedRoutes, herdgatev1alpha1.ProtectedRoute{PathPrefix: ptr.To(herdgatev1alpha1.RoutePath("/checkout"))})
	})
	waitForProgrammed(t, wq, metav1.ConditionFalse, herdgatev1alpha1.ReasonProxyRefusedConfig,
		fmt.Sprintf("proxy replica orders-herdgate-proxy-0 cannot apply generation %d", wq.Generation))
	if n := len(p.Config().Routes); n != 2 {
		t.Fatalf("the refusing proxy serves %d routes, want the 2 it had", n)
	}
	if httpStatus(t, addr+"/.herdgate/readyz") != http.StatusOK {
		t.Fatal("the refusing proxy stopped serving")
	}
	if err := os.WriteFile(keyFile, good, 0o600); err != nil {
		t.Fatal(err)
	}
	waitForProgrammed(t, wq, metav1.ConditionTrue, herdgatev1alpha1.ReasonProgrammed, "serve generation")
	if n := len(p.Config().Routes); n != 3 {
		t.Fatalf("after the key came back the proxy serves %d routes, want 3", n)
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitForProgrammed waits until the queue's Programmed condition has this status, reason and a
// message containing msg, and reports how long it took.
func waitForProgrammed(t *testing.T, wq *herdgatev1alpha1.WaitingQueue, status metav1.ConditionStatus, reason, msg string) {
	t.Helper()
	start := time.Now()
	var last *metav1.Condition
	waitUntil(t, fmt.Sprintf("Programmed %s/%s %q", status, reason, msg), func() bool {
		got := &herdgatev1alpha1.WaitingQueue{}
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(wq), got); err != nil {
			return false
		}
		last = meta.FindStatusCondition(got.Status.Conditions, herdgatev1alpha1.ConditionProgrammed)
		return last != nil && last.Status == status && last.Reason == reason && strings.Contains(last.Message, msg)
	})
	t.Logf("Programmed %s (%s) after %s: %s", status, reason, time.Since(start).Round(100*time.Millisecond), last.Message)
}
