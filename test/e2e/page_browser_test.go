package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

const siteTemplate = `<!doctype html>
<html lang="{{.Lang}}"><head><meta charset="utf-8"><title>Shop — {{index .Texts "title"}}</title>{{.Style}}
<style>header{background:#0b3d2e;color:#fff;padding:1rem;border-radius:.5rem} #message{font-weight:700}</style></head>
<body data-return="{{.Return}}" data-texts="{{.TextsJSON}}"><main>
<header><h1 id="brand">The Shop</h1><p>{{.Queue}} · {{.Phase}}</p></header>
<p id="message"{{if not .Message}} hidden{{end}}>{{.Message}}</p>
<p class="position" id="position">…</p><p id="summary">{{index .Texts "summaryJoining"}}</p><p id="wait"></p>
</main>{{.Script}}</body></html>`

// TestTheSitesOwnPage serves a waiting page from a ConfigMap template, through the operator's copy, in
// Korean: Chromium shows it with its position and the operator's message, sees a changed message
// at the next poll, and a broken template is refused with a condition naming the error while the
// page in force stays.
func TestTheSitesOwnPage(t *testing.T) {
	chromium := findChromium(t)
	ctx := context.Background()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "checkout") }))
	defer upstream.Close()

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "browser", Name: "shop-page"}, Data: map[string]string{"page.html": siteTemplate}}
	_ = k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "browser"}})
	if err := k8sClient.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), cm) })
	// Nobody is admitted (suspended): the browser stays on the page.
	wq := builder.Queue("browser", "site-page").Suspend(true).UpstreamURL(upstream.URL).Routes(builder.Route("/checkout", true, "GET")).Obj()
	wq.Spec.Page = &herdgatev1alpha1.PageSpec{Message: "판매는 18시에 종료됩니다",
		Template: &herdgatev1alpha1.ConfigMapValueRef{Name: "shop-page", Key: "page.html"}}
	createQueue(t, wq)
	copyKey := herdgatev1alpha1.ConfigMapRefKey("shop-page", "page.html")
	queueSecret := func() *corev1.Secret {
		t.Helper()
		s := &corev1.Secret{}
		if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: wq.Namespace, Name: wq.SecretName()}, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	waitUntil(t, "the operator's copy of the template", func() bool { return string(queueSecret().Data[copyKey]) == siteTemplate })
	frontURL, q, proxy := serveQueueProxy(t, wq)
	for i := range 3 {
		if _, err := q.Enter(ctx, fmt.Sprintf("ahead-%02d", i), time.Hour); err != nil {
			t.Fatal(err)
		}
	}

	browserCtx, consoleErrors := startBrowser(t, chromium)
	// A Korean browser.
	if _, err := chromedp.Call(browserCtx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(browserCtx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{"Accept-Language": "ko-KR,ko;q=0.9"}}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(browserCtx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(frontURL+"/checkout")); err != nil {
		t.Fatal(err)
	}
	wait := func(what, js string) {
		t.Helper()
		if _, err := chromedp.Run(browserCtx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
			summary, _ := chromedp.Run(browserCtx, chromedp.Text(chromedp.ID("summary")))
			t.Fatalf("the browser never showed %s (summary %q): %v", what, summary, err)
		}
	}
	wait("its position on the site's page", `document.getElementById("brand") !== null && document.getElementById("position").textContent === "#4"`)
	summary, err := chromedp.Run(browserCtx, chromedp.Text(chromedp.ID("summary")))
	if err != nil || summary != "대기 순번 4번 / 전체 4명" {
		t.Fatalf("summary %q (%v), want the Korean line", summary, err)
	}
	message, _ := chromedp.Run(browserCtx, chromedp.Text(chromedp.ID("message")))
	if message != "판매는 18시에 종료됩니다" {
		t.Fatalf("message %q", message)
	}
	shot, err := chromedp.Run(browserCtx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	artifacts, err := testenv.ArtifactsDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(artifacts, "browser"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(artifacts, "browser", "site-page-ko.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}

	// A new message reaches the open page at its next poll (the proxy applies a new spec as its
	// watch would).
	updateSpec(t, k8sClient, wq, func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Page.Message = "곧 매진됩니다" })
	proxyCfg, err := configFromSecret(wq, queueSecret())
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetConfig(proxyCfg)
	wait("the changed message", `document.getElementById("message").textContent === "곧 매진됩니다"`)

	// A broken template: the condition names the error, and the copy the proxies serve stays.
	broken := cm.DeepCopy()
	broken.Data["page.html"] = `<p>{{.Nope}}</p>`
	if err := k8sClient.Update(ctx, broken); err != nil {
		t.Fatal(err)
	}
	// The manager does not watch ConfigMaps: it reads the template at its next resync (a minute), or
	// at once on a change of the spec, as here.
	updateSpec(t, k8sClient, wq, func(wq *herdgatev1alpha1.WaitingQueue) { wq.Spec.Page.Message = "잠시 후 다시 열립니다" })
	var cond *metav1.Condition
	waitUntil(t, "the PageTemplateInvalid condition", func() bool {
		cur := &herdgatev1alpha1.WaitingQueue{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(wq), cur); err != nil {
			return false
		}
		cond = meta.FindStatusCondition(cur.Status.Conditions, herdgatev1alpha1.ConditionProgrammed)
		return cond != nil && cond.Reason == herdgatev1alpha1.ReasonPageTemplateInvalid
	})
	if cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, "spec.page.template: ConfigMap shop-page key page.html: template: page:1:") ||
		!strings.Contains(cond.Message, "can't evaluate field Nope") {
		t.Fatalf("condition %+v", cond)
	}
	if got := string(queueSecret().Data[copyKey]); got != siteTemplate {
		t.Fatalf("the copy became %q; the page in force must stay", got)
	}
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("the page threw: %v", errs)
	}
}
