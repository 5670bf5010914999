package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/herdgate/herdgate/admission"
	"github.com/herdgate/herdgate/admission/entry"
	"github.com/herdgate/herdgate/admission/front"
	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

// TestBrowserSolvesTheProofOfWork opens a protected page of a queue that asks a proof of work: the
// waiting page fetches a challenge, solves it with WebCrypto, enters with it, is admitted by the
// operator's scheduler and lands on the page; an API client without a proof is refused.
func TestBrowserSolvesTheProofOfWork(t *testing.T) {
	const visitorsAhead = 20
	chromium := findChromium(t)
	var mu sync.Mutex
	var landed int
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/checkout" {
			mu.Lock()
			landed++
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>Checkout</title><h1 id="landed">Checkout page</h1>`)
	}))
	defer upstream.Close()

	wq := builder.Queue("browser", "proof").BatchSizeOverride(2).Tick(500 * time.Millisecond).UpstreamURL(upstream.URL).
		Routes(builder.Route("/checkout", true, "GET")).Obj()
	wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{
		ProofOfWork: &herdgatev1alpha1.ProofOfWorkSpec{Difficulty: 14}}}
	createQueue(t, wq)
	frontURL, q := serveQueue(t, wq)
	ctx := context.Background()

	res, err := http.Post(frontURL+"/.herdgate/enter", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an API client without a proof: %d, want 401 challenge_required", res.StatusCode)
	}

	browserCtx, consoleErrors := startBrowser(t, chromium)
	// Visitors ahead, so that the browser waits in line and shows the waiting page: they enter once
	// Chromium runs, and are enough for the few seconds it takes to solve and enter (4 a second leave).
	// Entered before, they could all be admitted while Chromium starts, and the browser admitted at once.
	if err := chromedp.Do(browserCtx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	for i := range visitorsAhead {
		if _, err := q.Enter(ctx, fmt.Sprintf("ahead-%02d", i), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	target := frontURL + "/checkout"
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			location, _ := chromedp.Run(browserCtx, chromedp.Location())
			t.Fatalf("browser, %s: %v (at %s)", what, err, location)
		}
	}
	step("opening the protected page", chromedp.Do(browserCtx, chromedp.Navigate(target), chromedp.WaitVisible(chromedp.ID("summary"))))
	step("waiting for admission", chromedp.Do(browserCtx, chromedp.WaitVisible(chromedp.ID("landed"))))
	location, err := chromedp.Run(browserCtx, chromedp.Location())
	step("reading the final address", err)
	if location != target {
		t.Fatalf("the browser ended at %s, want %s", location, target)
	}
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("the waiting page threw: %v", errs)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.AdmittedTotal < visitorsAhead+1 {
		t.Fatalf("stats %+v: the browser's entry was not admitted behind the %d ahead", st, visitorsAhead)
	}
	mu.Lock()
	defer mu.Unlock()
	if landed != 1 {
		t.Fatalf("the upstream served %d pages, want the browser's one", landed)
	}
}

// BenchmarkSolveInTheBrowser times the waiting page's own solver (WebCrypto, in headless Chromium)
// at each difficulty, beside admission's BenchmarkSolve in Go: make bench-pow prints both.
func BenchmarkSolveInTheBrowser(b *testing.B) {
	chromium := findChromium(b)
	// A closed room serves the page and takes nobody: the page's own loop stays idle.
	wq := builder.Queue("bench", "proof").Obj()
	wq.Spec.Mode = herdgatev1alpha1.ModeClosed
	wq.Spec.Entry = &herdgatev1alpha1.EntrySpec{Challenge: &herdgatev1alpha1.ChallengeSpec{
		ProofOfWork: &herdgatev1alpha1.ProofOfWorkSpec{Difficulty: 16}}}
	cfg, err := admission.NewConfig(wq, []byte(strings.Repeat("k", 32)))
	if err != nil {
		b.Fatal(err)
	}
	srv := testenv.StartRedis(b)
	rdb, err := queue.NewClient(srv.URL(), queue.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer rdb.Close()
	store := queue.NewStore(rdb, queue.StoreOptions{})
	defer store.Close()
	proxy, err := admission.NewRoom(cfg, store, admission.Options{})
	if err != nil {
		b.Fatal(err)
	}
	server := httptest.NewServer(front.NewNetHTTP(proxy, front.NetHTTPOptions{}))
	defer server.Close()
	browserCtx, _ := startBrowser(b, chromium)
	if err := chromedp.Do(browserCtx, chromedp.Navigate(server.URL+"/.herdgate")); err != nil {
		b.Fatal(err)
	}
	if _, err := chromedp.Run(browserCtx, chromedp.Poll[bool](`typeof window.herdgate === "object"`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		b.Fatal(err)
	}
	for _, d := range []int{8, 12, 14, 16, 18} {
		b.Run(fmt.Sprintf("difficulty=%d", d), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				js := fmt.Sprintf(`herdgate.solve({challenge: "bench-%d-%d", difficulty: %d})`, d, i, d)
				proof, err := chromedp.Run(browserCtx, chromedp.Evaluate[string](js, func(p *runtime.EvaluateParams) { p.AwaitPromise = new(true) }))
				if err != nil {
					b.Fatal(err)
				}
				sep := strings.LastIndexByte(proof, ':')
				if entry.LeadingZeroBits(proof[:sep], proof[sep+1:]) < d {
					b.Fatalf("the browser's solution %q does not solve difficulty %d", proof, d)
				}
			}
		})
	}
}
