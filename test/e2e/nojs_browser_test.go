package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/herdgate/herdgate/test/builder"
)

// TestABrowserWithoutJavaScriptWaitsAndLands opens a protected page in headless Chromium with
// JavaScript switched off, with visitors ahead in line and the room answering waiting visitors 202:
// the waiting page sends the browser on to the page that works without JavaScript, which shows its
// place and refreshes itself by a meta tag; the operator's scheduler admits it, and a refresh takes
// it to the page it asked for.
func TestABrowserWithoutJavaScriptWaitsAndLands(t *testing.T) {
	chromium := findChromium(t)
	ctx := context.Background()
	var mu sync.Mutex
	var upstreamSaw []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		upstreamSaw = append(upstreamSaw, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>Checkout</title><h1 id="landed">Checkout page</h1>`)
	}))
	defer upstream.Close()

	// Two admissions a second behind ten visitors: the browser waits about five seconds, several
	// refreshes.
	wq := builder.Queue("nojs", "shop").BatchSizeOverride(1).Tick(500 * time.Millisecond).UpstreamURL(upstream.URL).
		Routes(builder.Route("/checkout", true, "GET")).QueueingStatusCode(202).Obj()
	createQueue(t, wq)
	frontURL, q := serveQueue(t, wq)
	for i := range 10 {
		if _, err := q.Enter(ctx, fmt.Sprintf("ahead-%02d", i), time.Hour); err != nil {
			t.Fatal(err)
		}
	}

	browserCtx, _ := startBrowser(t, chromium)
	target := frontURL + "/checkout?item=42"
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			location, _ := chromedp.Run(browserCtx, chromedp.Location())
			t.Fatalf("browser without JavaScript, %s: %v (at %s)", what, err, location)
		}
	}
	step("opening a tab", chromedp.Do(browserCtx))
	_, err := chromedp.Call(browserCtx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
	step("switching JavaScript off", err)
	step("opening the protected page", chromedp.Do(browserCtx, chromedp.Navigate(target)))
	// The page keeps refreshing itself; read it while it shows a place. Only a browser that runs no
	// script follows the <noscript> refresh to the page without JavaScript.
	var position, summary, at string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		loc, err := chromedp.Run(browserCtx, chromedp.Location())
		step("reading the address", err)
		if strings.Contains(loc, "/.herdgate/wait?") {
			p, perr := chromedp.Run(browserCtx, chromedp.Text(chromedp.ID("position"), chromedp.AtLeast(0)))
			s, serr := chromedp.Run(browserCtx, chromedp.Text(chromedp.ID("summary"), chromedp.AtLeast(0)))
			if perr == nil && serr == nil && regexp.MustCompile(`^#\d+$`).MatchString(p) {
				position, summary, at = p, s, loc
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if position == "" {
		t.Fatal("the browser without JavaScript never showed a place on the page without JavaScript")
	}
	step("waiting for admission", chromedp.Do(browserCtx, chromedp.WaitVisible(chromedp.ID("landed"))))
	location, err := chromedp.Run(browserCtx, chromedp.Location())
	step("reading the final address", err)

	t.Logf("the page without JavaScript (%s) showed %s / %q", at, position, summary)
	if !strings.HasPrefix(summary, "You are number ") {
		t.Errorf("summary = %q", summary)
	}
	if location != target {
		t.Fatalf("the browser ended at %s, want %s", location, target)
	}
	mu.Lock()
	defer mu.Unlock()
	var protected []string
	for _, s := range upstreamSaw {
		if strings.HasPrefix(s, "GET /checkout") {
			protected = append(protected, s)
		}
	}
	if len(protected) != 1 || protected[0] != "GET /checkout?item=42" {
		t.Fatalf("the upstream saw %v of the protected page; want it once, after admission", protected)
	}
}
