package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"k8s.io/utils/ptr"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/builder"
)

// TestABrowserFarFromTheFront: headless Chromium enters behind 5,100 visitors of a queue whose exact
// zone is 5,000; the waiting page keeps the place cookie the proxy sets, and its next poll is
// answered from the proxy's snapshot: the page says the visitor is at most that far back, at a
// position never below the exact one.
func TestABrowserFarFromTheFront(t *testing.T) {
	chromium := findChromium(t)
	ctx := context.Background()
	wq := builder.Queue("browser", "far").BatchSizeOverride(1).Tick(time.Second).UpstreamURL("http://127.0.0.1:9").
		Routes(builder.Route("/checkout", true, "GET")).Obj()
	wq.Spec.Polling = &herdgatev1alpha1.PollingSpec{ExactPositions: ptr.To[int32](5000)}
	createQueue(t, wq)
	frontURL, q, proxy := serveQueueProxy(t, wq)
	loop, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); proxy.Run(loop, 0) }()
	t.Cleanup(func() { stop(); <-done })
	for i := range 5100 {
		if _, err := q.Enter(ctx, fmt.Sprintf("ahead-%04d", i), time.Hour); err != nil {
			t.Fatal(err)
		}
	}

	browserCtx, consoleErrors := startBrowser(t, chromium)
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			location, _ := chromedp.Run(browserCtx, chromedp.Location())
			t.Fatalf("browser, %s: %v (at %s)", what, err, location)
		}
	}
	step("opening the protected page", chromedp.Do(browserCtx, chromedp.Navigate(frontURL+"/checkout"), chromedp.WaitVisible(chromedp.ID("summary"))))
	_, err := chromedp.Run(browserCtx, chromedp.Poll[bool](`document.getElementById("summary").textContent.startsWith("You are at most number ")`,
		chromedp.WithPollingTimeout(40*time.Second)))
	step("waiting for a bounded position", err)
	position, err := chromedp.Run(browserCtx, chromedp.Text(chromedp.ID("position")))
	step("reading the position", err)
	summary, err := chromedp.Run(browserCtx, chromedp.Text(chromedp.ID("summary")))
	step("reading the summary", err)
	cookies, err := chromedp.Run(browserCtx, chromedp.Evaluate[string](`document.cookie`))
	step("reading the page's cookies", err)
	t.Logf("the far browser saw %q / %q", position, summary)

	m := regexp.MustCompile(`^#(\d+)$`).FindStringSubmatch(position)
	if m == nil {
		t.Fatalf("position %q", position)
	}
	shown, _ := strconv.ParseInt(m[1], 10, 64)
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The browser is last in line; some ahead may have been admitted since it was answered.
	if shown < st.Depth || float64(shown) > 1.05*float64(5101) {
		t.Fatalf("shown #%d with %d waiting (the browser last)", shown, st.Depth)
	}
	if strings.Contains(cookies, "herdgate_place") {
		t.Fatalf("the place cookie is readable by the page's script: %q", cookies)
	}
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("the waiting page threw: %v", errs)
	}
}
