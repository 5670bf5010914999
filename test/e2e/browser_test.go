package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/herdgate/herdgate/admission"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

// TestBrowserWaitsAndLandsOnTheProtectedPage opens a protected page in headless Chromium, with
// visitors ahead in line: the browser sees the waiting page with its position, the operator's
// scheduler admits it, and it lands on the page it asked for.
func TestBrowserWaitsAndLandsOnTheProtectedPage(t *testing.T) {
	chromium := findChromium(t)
	ctx := context.Background()

	var mu sync.Mutex
	var upstreamSaw []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		upstreamSaw = append(upstreamSaw, r.Method+" "+r.URL.RequestURI()+" cookies="+r.Header.Get("Cookie"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>Checkout</title><h1 id="landed">Checkout page</h1>`)
	}))
	defer upstream.Close()

	// Four admissions per second, so that the visitors ahead keep the browser waiting five seconds:
	// long enough for the page to show a position on a machine busy with other tests.
	wq := builder.Queue("browser", "shop").BatchSizeOverride(2).Tick(500 * time.Millisecond).UpstreamURL(upstream.URL).
		Routes(builder.Route("/checkout", true, "GET")).Obj()
	createQueue(t, wq)
	frontURL, q := serveQueue(t, wq)
	for i := range 20 {
		if _, err := q.Enter(ctx, fmt.Sprintf("ahead-%02d", i), time.Hour); err != nil {
			t.Fatal(err)
		}
	}

	artifacts, err := testenv.ArtifactsDir()
	if err != nil {
		t.Fatal(err)
	}
	shots := filepath.Join(artifacts, "browser")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}

	browserCtx, consoleErrors := startBrowser(t, chromium)
	target := frontURL + "/checkout?item=42"
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			location, _ := chromedp.Run(browserCtx, chromedp.Location())
			t.Fatalf("browser, %s: %v (at %s)", what, err, location)
		}
	}
	step("opening the protected page", chromedp.Do(browserCtx,
		chromedp.EmulateViewport(390, 844), // a phone
		chromedp.Navigate(target),
		chromedp.WaitVisible(chromedp.ID("summary")),
	))
	_, err = chromedp.Run(browserCtx, chromedp.Poll[bool](`/^#\d+$/.test(document.getElementById("position").textContent)`,
		chromedp.WithPollingTimeout(30*time.Second)))
	step("waiting for a position", err)
	position, err := chromedp.Run(browserCtx, chromedp.Text(chromedp.ID("position")))
	step("reading the position", err)
	summary, err := chromedp.Run(browserCtx, chromedp.Text(chromedp.ID("summary")))
	step("reading the summary", err)
	progress, err := chromedp.Run(browserCtx, chromedp.AttributeValue(chromedp.ID("progress"), "aria-valuenow"))
	step("reading the progress bar", err)
	waitingAt, err := chromedp.Run(browserCtx, chromedp.Location())
	step("reading the waiting page's address", err)
	waitingShot, err := chromedp.Run(browserCtx, chromedp.FullScreenshot(100))
	step("taking the waiting screenshot", err)
	step("waiting for admission", chromedp.Do(browserCtx, chromedp.WaitVisible(chromedp.ID("landed"))))
	landed, err := chromedp.Run(browserCtx, chromedp.Text(chromedp.ID("landed")))
	step("reading the landed page", err)
	location, err := chromedp.Run(browserCtx, chromedp.Location())
	step("reading the final address", err)
	landedShot, err := chromedp.Run(browserCtx, chromedp.FullScreenshot(100))
	step("taking the landed screenshot", err)
	for name, shot := range map[string][]byte{"waiting-room.png": waitingShot, "admitted.png": landedShot} {
		if err := os.WriteFile(filepath.Join(shots, name), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("waiting page %s showed %q / %q (progress %s%%); screenshots in %s", waitingAt, position, summary, progress.Value, shots)
	if !strings.HasPrefix(waitingAt, frontURL+"/.herdgate/?return=") {
		t.Errorf("the browser waited at %s, not on the waiting page", waitingAt)
	}

	if !regexp.MustCompile(`^#([1-9]|1[0-9]|2[01])$`).MatchString(position) {
		t.Errorf("the waiting page showed position %q, want #1 … #21", position)
	}
	if !strings.HasPrefix(summary, "You are number ") {
		t.Errorf("summary = %q", summary)
	}
	if location != target || landed != "Checkout page" {
		t.Fatalf("the browser ended at %s showing %q, want %s", location, landed, target)
	}
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("the waiting page threw: %v", errs)
	}
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, s := range upstreamSaw {
		if strings.HasPrefix(s, "GET /checkout?item=42 ") {
			found = true
			if strings.Contains(s, "herdgate_") {
				t.Errorf("the upstream received herdgate cookies: %s", s)
			}
		}
	}
	if !found {
		t.Fatalf("the upstream never served the page: %v", upstreamSaw)
	}
}

func findChromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium found; run 'make toolchain' (Debian package chromium)")
	return ""
}

// serveQueue serves the queue made by createQueue through a proxy on the front herdgate-proxy runs,
// with the HMAC key of the Secret the operator made; it returns the proxy's URL and the engine.
func serveQueue(t *testing.T, wq *herdgatev1alpha1.WaitingQueue) (string, *queue.Queue) {
	t.Helper()
	url, q, _ := serveQueueProxy(t, wq)
	return url, q
}

// serveQueueProxy is serveQueue that also returns the proxy, for tests that apply a new config.
func serveQueueProxy(t *testing.T, wq *herdgatev1alpha1.WaitingQueue) (string, *queue.Queue, *admission.Room) {
	t.Helper()
	secret := &corev1.Secret{}
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: wq.Namespace, Name: wq.SecretName()}, secret); err != nil {
		t.Fatal(err)
	}
	cfg, err := configFromSecret(wq, secret)
	if err != nil {
		t.Fatal(err)
	}
	store := newStore(t)
	proxy, err := admission.NewRoom(cfg, store, admission.Options{Log: ctrl.Log.WithName("proxy")})
	if err != nil {
		t.Fatal(err)
	}
	q, err := store.Queue(wq.Namespace, wq.Name)
	if err != nil {
		t.Fatal(err)
	}
	return serveFront(t, proxy), q, proxy
}

// configFromSecret builds the proxy's config as a proxy pod would from its mount of the queue's
// Secret: the HMAC key and the copies of the values the spec refers to.
func configFromSecret(wq *herdgatev1alpha1.WaitingQueue, secret *corev1.Secret) (*admission.Config, error) {
	return admission.NewConfigWithSecrets(wq, secret.Data[herdgatev1alpha1.SecretHMACKey], func(key string) ([]byte, error) {
		v, ok := secret.Data[key]
		if !ok {
			return nil, fmt.Errorf("the queue's Secret has no key %s", key)
		}
		return v, nil
	})
}

// startBrowser starts headless Chromium for at most 90 s; consoleErrors returns what pages threw.
func startBrowser(t testing.TB, chromium string) (browserCtx context.Context, consoleErrors func() []string) {
	t.Helper()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		// Chromium keeps its single-instance socket under TMPDIR: in a directory of the test's it goes
		// with the test. A short one: a Unix socket's path holds at most 107 bytes.
		chromedp.Env("TMPDIR="+shortTempDir(t)),
	)
	t.Cleanup(cancelAlloc)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	browserCtx, cancelTimeout := context.WithTimeout(browserCtx, 90*time.Second)
	t.Cleanup(cancelTimeout)
	var mu sync.Mutex
	var thrown []string
	if err := chromedp.Listen(browserCtx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			mu.Lock()
			thrown = append(thrown, e.ExceptionDetails.Text)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return browserCtx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), thrown...)
	}
}

// shortTempDir is a new directory with a short path, removed when t ends.
func shortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
