package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/front"
	"github.com/herdgate/herdgate/admission/host"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
)

// TestAProxySetServesItsRoomsUnderItsAccount runs a shared proxy set as herdgate-proxy --proxy-set
// does, under the account the operator made for the set, with the set's Secret copied into a
// directory as the kubelet mounts it: the scheduler admits a visitor of one room, whose pass opens
// that room and not the other; an edit of a room applies live; a room that joins is served once its
// values are mounted, and one that is deleted is no longer served.
func TestAProxySetServesItsRoomsUnderItsAccount(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "sets"
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream %s", r.URL.Path)
	}))
	defer upstream.Close()
	room := func(name string) *herdgatev1alpha1.WaitingQueue {
		return builder.Queue(ns, name).UpstreamURL(upstream.URL+"/"+name).Routes(builder.Route("/api/orders", false, "POST")).
			PageMessage("notice of "+name).Shared("pool", name+".shop.example").Obj()
	}
	a, b := room("room-a"), room("room-b")
	createQueue(t, a)
	createQueue(t, b)

	// The kubelet's part: the set's Secret, copied into a directory and kept up to date.
	dir := t.TempDir()
	mounted := mirrorSecret(t, ctx, types.NamespacedName{Namespace: ns, Name: herdgatev1alpha1.ProxySetName("pool")}, dir)
	waitUntil(t, "the set's Secret to hold both rooms' keys", func() bool {
		return mounted(herdgatev1alpha1.ProxySetKey("room-a", herdgatev1alpha1.SecretHMACKey)) && mounted(herdgatev1alpha1.ProxySetKey("room-b", herdgatev1alpha1.SecretHMACKey))
	})
	account := setAccount(t, ns, "pool")

	set := admission.NewSet(ctrl.Log.WithName("set"))
	store := newStore(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		err := host.WatchSet(ctx, account.Config(), ns, "pool", set, host.SetWatchOptions{
			Dir: dir, Store: func(string) (*queue.Store, error) { return store, nil }, Resync: 200 * time.Millisecond,
			Proxy: admission.Options{Log: ctrl.Log.WithName("set"), Replica: "set-0"}, Log: ctrl.Log.WithName("set"),
		})
		if err != nil && ctx.Err() == nil {
			t.Errorf("WatchSet: %v", err)
		}
	})
	wg.Go(func() {
		if err := front.Serve(ctx, set, front.ServerOptions{Listener: ln, ShutdownTimeout: 5 * time.Second, Log: ctrl.Log.WithName("set")}); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	base := "http://" + ln.Addr().String()
	do := func(method, host, path string, header ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	// A room is served when its host shows its page; the probes answer on any host.
	serves := func(room string) bool {
		code, body := do(http.MethodGet, room+".shop.example", "/.herdgate/")
		return code == http.StatusOK && strings.Contains(body, "notice of "+room)
	}
	waitUntil(t, "both rooms to be served", func() bool { return serves("room-a") && serves("room-b") })

	// A visitor of room-a is admitted by the scheduler; the pass opens room-a, not room-b.
	req, _ := http.NewRequest(http.MethodPost, base+"/.herdgate/enter", nil)
	req.Host = "room-a.shop.example"
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	var visitor string
	for _, c := range res.Cookies() {
		if c.Name == admission.CookieNamesOf(ns, "room-a").Visitor {
			visitor = c.Value
		}
	}
	var pass string
	waitUntil(t, "room-a's visitor to be admitted", func() bool {
		code, body := do(http.MethodGet, "room-a.shop.example", "/.herdgate/status", "Cookie", admission.CookieNamesOf(ns, "room-a").Visitor+"="+visitor)
		var st map[string]any
		if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil || st["admitted"] != true {
			return false
		}
		pass = st["pass"].(string)
		return true
	})
	if code, body := do(http.MethodPost, "room-a.shop.example", "/api/orders", admission.PassHeader, pass); code != http.StatusOK || body != "upstream /room-a/api/orders" {
		t.Fatalf("room-a's route with its pass: %d %s", code, body)
	}
	if code, body := do(http.MethodPost, "room-b.shop.example", "/api/orders", admission.PassHeader, pass, "Accept", "application/json"); code != http.StatusForbidden {
		t.Fatalf("room-b's route with room-a's pass: %d %s", code, body)
	}

	// An edit of room-b applies live.
	updateSpec(t, k8sClient, b, func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Page.Message = "room-b moved its sale" })
	waitUntil(t, "room-b's new notice", func() bool {
		_, body := do(http.MethodGet, "room-b.shop.example", "/.herdgate/")
		return strings.Contains(body, "room-b moved its sale")
	})

	// A room that joins is served once its values are mounted; one that is deleted is not.
	c := room("room-c")
	createQueue(t, c)
	waitUntil(t, "room-c to be served", func() bool { return serves("room-c") })
	if err := k8sClient.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "room-a to be gone from the set", func() bool {
		code, body := do(http.MethodGet, "room-a.shop.example", "/.herdgate/status")
		return code == http.StatusMisdirectedRequest && strings.Contains(body, `"error":"unknown_host"`)
	})
	if got := set.Names(); strings.Join(got, ",") != ns+"/room-b,"+ns+"/room-c" {
		t.Fatalf("the set serves %v", got)
	}

	// The set's account reads WaitingQueues, and no Secret.
	restricted, err := client.New(account.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{herdgatev1alpha1.ProxySetName("pool"), b.SecretName()} {
		if err := restricted.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
			t.Fatalf("the set's account read the Secret %s: %v", name, err)
		}
	}
}

// mirrorSecret copies the Secret's keys into files of dir every 100 ms until ctx ends, as the kubelet
// keeps a mounted Secret (slower); the returned function says whether a key's file is there.
func mirrorSecret(t *testing.T, ctx context.Context, name types.NamespacedName, dir string) func(key string) bool {
	t.Helper()
	var mu sync.Mutex
	have := map[string]bool{}
	copyOnce := func() {
		secret := &corev1.Secret{}
		if err := k8sClient.Get(ctx, name, secret); err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for key := range have {
			if _, ok := secret.Data[key]; !ok {
				_ = os.Remove(filepath.Join(dir, key))
				delete(have, key)
			}
		}
		for key, v := range secret.Data {
			tmp := filepath.Join(dir, "."+key)
			if os.WriteFile(tmp, v, 0o600) == nil && os.Rename(tmp, filepath.Join(dir, key)) == nil {
				have[key] = true
			}
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			copyOnce()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { <-done })
	return func(key string) bool {
		mu.Lock()
		defer mu.Unlock()
		return have[key]
	}
}

// setAccount is the shared set's ServiceAccount as the operator made it, bound only to the set's
// Role; it waits for the Role.
func setAccount(t *testing.T, namespace, set string) *envtest.AuthenticatedUser {
	t.Helper()
	name := herdgatev1alpha1.ProxySetName(set)
	waitUntil(t, "the set's Role", func() bool {
		return k8sClient.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: name}, &rbacv1.Role{}) == nil
	})
	sa, err := testEnv.AddUser(envtest.User{
		Name:   "system:serviceaccount:" + namespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sa
}
