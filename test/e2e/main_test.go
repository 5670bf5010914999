// Package e2e runs the operator, the admission proxy and a real browser together: a control plane
// (envtest), a redis-server, the manager with its scheduler, the proxy and headless Chromium.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/front"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/controllers"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/testenv"
	"github.com/herdgate/herdgate/test/testenv/controlplane"
)

var (
	testEnv   *envtest.Environment
	adminCfg  *rest.Config
	k8sClient client.Client
	redisSrv  *testenv.Redis
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.Level(zapLevel()))))
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		return fail(err)
	}
	defer func() { _ = cp.Stop() }()
	testEnv, adminCfg, k8sClient = cp.Env, cp.Config, cp.Client
	scheme := cp.Scheme
	dir, err := os.MkdirTemp("", "herdgate-e2e-redis-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	if redisSrv, err = testenv.NewRedis(dir); err != nil {
		return fail(err)
	}
	defer redisSrv.Stop()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := ctrl.NewManager(adminCfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return fail(err)
	}
	if _, err := controllers.Setup(mgr, controllers.Options{RedisURL: redisSrv.URL(), ProxyImage: "registry.example/herdgate:e2e"}); err != nil {
		return fail(err)
	}
	go func() { _ = mgr.Start(ctx) }()
	return m.Run()
}

func zapLevel() int8 {
	if os.Getenv("HERDGATE_E2E_VERBOSE") != "" {
		return -1
	}
	return 1 // errors only
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "e2e set-up:", err)
	return 1
}

// createQueue creates a WaitingQueue and waits until the operator made its Secret and Role.
func createQueue(t *testing.T, wq *herdgatev1alpha1.WaitingQueue) {
	t.Helper()
	ctx := context.Background()
	_ = k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wq.Namespace}})
	if err := k8sClient.Create(ctx, wq); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), wq) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		secret := &corev1.Secret{}
		err := k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.SecretName()}, secret)
		if err == nil && len(secret.Data[herdgatev1alpha1.SecretHMACKey]) == 32 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the operator made no Secret for %s/%s: %v", wq.Namespace, wq.Name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(wq), wq); err != nil {
		t.Fatal(err)
	}
}

// updateSpec changes the WaitingQueue as mutate says, on its newest version: the manager writes
// status and finalizers meanwhile, so an update is retried on a conflict. wq ends as updated.
func updateSpec(t *testing.T, c client.Client, wq *herdgatev1alpha1.WaitingQueue, mutate func(*herdgatev1alpha1.WaitingQueue)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(wq), wq); err != nil {
			return err
		}
		mutate(wq)
		return c.Update(context.Background(), wq)
	})
	if err != nil {
		t.Fatalf("updating %s/%s: %v", wq.Namespace, wq.Name, err)
	}
}

// newStore is a Store on the suite's Redis, closed when the test ends.
func newStore(t *testing.T) *queue.Store {
	t.Helper()
	rdb, err := queue.NewClient(redisSrv.URL(), queue.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	store := queue.NewStore(rdb, queue.StoreOptions{})
	t.Cleanup(store.Close)
	return store
}

// serveFront serves p on the front herdgate-proxy runs, on a loopback port, until the test ends, and
// returns its base URL.
func serveFront(t *testing.T, room *admission.Room) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	front := front.NewFast(room, front.FastOptions{})
	served := make(chan error, 1)
	go func() { served <- front.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := errors.Join(front.Shutdown(ctx), <-served); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("front: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}
