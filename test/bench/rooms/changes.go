package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/testenv"
)

// suspend sets spec.suspend of rooms and waits until each has observed it.
func (r *run) suspend(ctx context.Context, rooms []string, suspended bool) error {
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspended))
	if err := parallel(ctx, 32, len(rooms), func(i int) error {
		wq := &herdgatev1alpha1.WaitingQueue{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: rooms[i]}}
		return r.admin.Patch(ctx, wq, patch)
	}); err != nil {
		return err
	}
	// The manager's scheduler has the change once every room has observed it.
	return waitFor(ctx, 2*time.Minute, "the rooms to observe suspend", func() (bool, error) {
		for _, name := range rooms {
			wq := &herdgatev1alpha1.WaitingQueue{}
			if err := r.admin.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, wq); err != nil {
				return false, err
			}
			if wq.Status.ObservedGeneration != wq.Generation {
				return false, nil
			}
		}
		return true, nil
	})
}

// timeModeChanges runs the admission proxy for room, as its Deployment would, and times each of
// r.modeChanges changes of spec.mode (Closed, then Queue again, ...) from the write to the proxy
// serving the new generation.
func (r *run) timeModeChanges(ctx context.Context, room string) ([]time.Duration, error) {
	key := types.NamespacedName{Namespace: namespace, Name: room}
	wq := &herdgatev1alpha1.WaitingQueue{}
	if err := r.admin.Get(ctx, key, wq); err != nil {
		return nil, err
	}
	secret := &corev1.Secret{}
	if err := r.admin.Get(ctx, types.NamespacedName{Namespace: namespace, Name: wq.SecretName()}, secret); err != nil {
		return nil, err
	}
	keyDir := filepath.Join(r.dir, "key-"+room)
	if err := os.MkdirAll(keyDir, 0o700); err != nil {
		return nil, err
	}
	keyFile := filepath.Join(keyDir, herdgatev1alpha1.SecretHMACKey)
	if err := os.WriteFile(keyFile, secret.Data[herdgatev1alpha1.SecretHMACKey], 0o600); err != nil {
		return nil, err
	}
	listen, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	metrics, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	pid, err := r.startProcess(ctx, "proxy-"+room, r.proxyBin, "--waitingqueue="+key.String(), "--kubeconfig="+r.kubecfg, "--redis-url="+r.redis.URL(),
		"--hmac-key-file="+keyFile, fmt.Sprintf("--listen=127.0.0.1:%d", listen), fmt.Sprintf("--metrics-listen=127.0.0.1:%d", metrics),
		"--drain-delay=0s", "--zap-log-level=error")
	if err != nil {
		return nil, err
	}
	defer func() {
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Kill()
		}
	}()
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)
	serves := func(generation int64) bool {
		families, err := scrape(ctx, metricsURL)
		if err != nil {
			return false // not listening yet
		}
		for _, m := range families["herdgate_proxy_config_generation"].GetMetric() {
			if int64(m.GetGauge().GetValue()) == generation {
				return true
			}
		}
		return false
	}
	if err := waitFor(ctx, 30*time.Second, "the proxy to serve "+room, func() (bool, error) { return serves(wq.Generation), nil }); err != nil {
		return nil, err
	}
	var out []time.Duration
	modes := []herdgatev1alpha1.Mode{herdgatev1alpha1.ModeClosed, herdgatev1alpha1.ModeQueue}
	for i := range r.modeChanges {
		began := time.Now()
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"mode":%q}}`, modes[i%2]))
		changed := &herdgatev1alpha1.WaitingQueue{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: room}}
		if err := r.admin.Patch(ctx, changed, patch); err != nil {
			return nil, err
		}
		if err := waitForEvery(ctx, time.Millisecond, 30*time.Second, "the proxy to serve the new mode", func() (bool, error) { return serves(changed.Generation), nil }); err != nil {
			return nil, err
		}
		out = append(out, time.Since(began))
	}
	if len(out)%2 == 1 { // leave the room open
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"mode":"Queue"}}`))
		if err := r.admin.Patch(ctx, &herdgatev1alpha1.WaitingQueue{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: room}}, patch); err != nil {
			return nil, err
		}
	}
	return out, nil
}
