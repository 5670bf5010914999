package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

// TestBrowserCountsDownToTheOpeningAndLands opens a protected page of a scheduled room in headless
// Chromium before its pre-queue opens: the waiting page counts down to the opening, takes a
// pre-queue place by itself when the pre-queue opens, shows the place the draw gave it, and lands
// on the page once admitted. Admission is suspended until the test has seen the place, so that the
// browser's drawn place does not decide what it sees.
func TestBrowserCountsDownToTheOpeningAndLands(t *testing.T) {
	chromium := findChromium(t)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>Drop</title><h1 id="landed">The drop</h1>`)
	}))
	defer upstream.Close()

	// The browser starts first: on a busy machine it is the slow part of the set-up, and the schedule
	// is measured from the end of it.
	browserCtx, consoleErrors := startBrowser(t, chromium)
	now := time.Now().Truncate(time.Second)
	preQueueFrom, opensAt := now.Add(8*time.Second), now.Add(14*time.Second)
	wq := builder.Queue("browser", "drop").UpstreamURL(upstream.URL).Routes(builder.Route("/drop", true, "GET")).
		Polling(500*time.Millisecond, time.Second).Schedule(preQueueFrom, opensAt, time.Time{}).Suspend(true).Obj()
	createQueue(t, wq)
	frontURL, q := serveQueue(t, wq)
	text := func(id string) string {
		t.Helper()
		s, err := chromedp.Run(browserCtx, chromedp.Text(chromedp.ID(id)))
		if err != nil {
			t.Fatalf("reading #%s: %v", id, err)
		}
		return s
	}
	waitFor := func(what, js string, timeout time.Duration) {
		t.Helper()
		if _, err := chromedp.Run(browserCtx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(timeout))); err != nil {
			location, _ := chromedp.Run(browserCtx, chromedp.Location())
			summary, _ := chromedp.Run(browserCtx, chromedp.Text(chromedp.ID("summary")))
			t.Fatalf("browser, waiting for %s: %v (at %s, summary %q, thrown %q)", what, err, location, summary, consoleErrors())
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
	shoot := func(name string) {
		t.Helper()
		shot, err := chromedp.Run(browserCtx, chromedp.FullScreenshot(100))
		if err == nil {
			err = os.WriteFile(filepath.Join(shots, name), shot, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	if time.Now().After(preQueueFrom.Add(-2 * time.Second)) {
		t.Fatalf("the set-up took until %s; the pre-queue opens at %s", time.Now(), preQueueFrom)
	}
	target := frontURL + "/drop?size=m"
	if err := chromedp.Do(browserCtx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(target)); err != nil {
		t.Fatal(err)
	}
	waitFor("the countdown", `!document.getElementById("countdown").hidden && /^\d+:\d\d$/.test(document.getElementById("countdown").textContent)`, 10*time.Second)
	first := text("countdown")
	title, summary := text("title"), text("summary")
	shoot("countdown.png")
	seconds := func(c string) int {
		m, s, _ := strings.Cut(c, ":")
		mi, _ := strconv.Atoi(m)
		si, _ := strconv.Atoi(s)
		return 60*mi + si
	}
	// The page ticks once a second; Chromium may run a tick late (a screenshot holds its main
	// thread), so wait for the next value rather than for a fixed time.
	waitFor("the countdown to move", fmt.Sprintf(`(function () {
		var c = document.getElementById("countdown").textContent.split(":");
		return 60 * parseInt(c[0], 10) + parseInt(c[1], 10) < %d;
	})()`, seconds(first)), 5*time.Second)
	later := text("countdown")
	if title != "Opening soon" || !strings.Contains(summary, "pre-queue") {
		t.Errorf("before the pre-queue the page said %q / %q", title, summary)
	}
	if left := time.Until(opensAt).Seconds(); float64(seconds(later)) < left-2 || float64(seconds(later)) > left+2 || seconds(later) >= seconds(first) {
		t.Errorf("the countdown read %s, then %s; %.1f s are left", first, later, left)
	}

	// From preQueueFrom the page takes a place by itself; others come too.
	waitFor("the pre-queue", `document.getElementById("title").textContent === "You are in the pre-queue"`, 15*time.Second)
	for i := range 5 {
		if _, err := q.Enter(context.Background(), fmt.Sprintf("other-%d", i), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	preQueue := text("summary")
	shoot("pre-queue.png")
	if !strings.Contains(preQueue, "fair draw") {
		t.Errorf("in the pre-queue the page said %q", preQueue)
	}

	// At the opening the draw gives the browser its place; admission waits for the test.
	waitFor("a place in line", `/^#[1-6]$/.test(document.getElementById("position").textContent)`, 20*time.Second)
	position, inLine := text("position"), text("summary")
	shoot("drawn-place.png")
	if !regexp.MustCompile(`^You are number [1-6] of 6 in line\.$`).MatchString(inLine) {
		t.Errorf("after the draw the page said %q", inLine)
	}
	updateSpec(t, k8sClient, wq, func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Suspend = nil })
	if err := chromedp.Do(browserCtx, chromedp.WaitVisible(chromedp.ID("landed"))); err != nil {
		t.Fatalf("browser, waiting for the protected page: %v", err)
	}
	location, err := chromedp.Run(browserCtx, chromedp.Location())
	if err != nil || location != target {
		t.Fatalf("the browser ended at %s (%v), want %s", location, err, target)
	}
	if time.Now().Before(opensAt) {
		t.Fatalf("the browser landed before the opening")
	}
	shoot("landed.png")
	t.Logf("countdown %s → %s, pre-queue %q, drawn place %s, landed at %s; screenshots in %s", first, later, preQueue, position, location, shots)
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("the waiting page threw: %v", errs)
	}
}
