package admission_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/herdgate/herdgate/admission"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/page"
)

func TestPageLanguage(t *testing.T) {
	for accept, want := range map[string]string{
		"":                          "en",
		"ko":                        "ko",
		"ko-KR,ko;q=0.9,en;q=0.8":   "ko",
		"en-US,en;q=0.9,ko;q=0.8":   "en",
		"fr-FR,fr;q=0.9":            "en",
		"fr;q=0.9, ko;q=0.5":        "ko",
		"*":                         "en",
		"garbage;;;q=x":             "en",
		"ja,ko;q=0.9":               "ko",
		strings.Repeat("a-", 10000): "en",
	} {
		if got := page.Language(accept); got != want {
			t.Errorf("Accept-Language %.40q: %s, want %s", accept, got, want)
		}
	}
}

func TestTheBuiltInPageSpeaksKorean(t *testing.T) {
	h := newMemoryHarness(t, nil)
	ko := h.visitor().do(http.MethodGet, "/.herdgate/", nil, "Accept-Language", "ko-KR,ko;q=0.9")
	if ko.StatusCode != http.StatusOK || !strings.Contains(string(ko.body), `<html lang="ko">`) ||
		!strings.Contains(string(ko.body), "대기열에서 기다리는 중입니다") || ko.Header.Get("Content-Language") != "ko" {
		t.Fatalf("Accept-Language: ko: %d %s\n%.400s", ko.StatusCode, ko.Header.Get("Content-Language"), ko.body)
	}
	en := h.visitor().do(http.MethodGet, "/.herdgate/", nil, "Accept-Language", "de")
	if !strings.Contains(string(en.body), `<html lang="en">`) || !strings.Contains(string(en.body), "You are in line") {
		t.Fatalf("Accept-Language: de: want the English page\n%.400s", en.body)
	}
	if !strings.Contains(en.Header.Get("Vary"), "Accept-Language") {
		t.Fatalf("Vary %q: caches must keep the languages apart", en.Header.Get("Vary"))
	}
}

const sitePage = `<!doctype html><html lang="{{.Lang}}"><head><title>Shop queue</title>{{.Style}}<style>h1{color:#c00}</style></head>
<body data-return="{{.Return}}" data-texts="{{.TextsJSON}}"><h1 id="brand">Shop {{.Queue}} ({{.Phase}})</h1>
<p id="message">{{.Message}}</p><p id="position"></p><p id="summary">{{index .Texts "summaryJoining"}}</p>
{{if .OpensAt}}<p id="opens">{{.OpensAt}}</p>{{end}}{{.Script}}</body></html>`

func pageQueue(message string) func(*herdgatev1alpha1.WaitingQueue) {
	return func(wq *herdgatev1alpha1.WaitingQueue) {
		wq.Spec.Page = &herdgatev1alpha1.PageSpec{Message: message,
			Template: &herdgatev1alpha1.ConfigMapValueRef{Name: "shop-page", Key: "page.html"}}
	}
}

func TestASitePageTemplate(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{memory: true}, nil)
	fc := &admission.FileConfig{ConfigMaps: map[string]map[string]string{"shop-page": {"page.html": sitePage}}}
	cfg, err := admission.NewConfigWithSecrets(changed(h.wq, pageQueue("Sales end at 18:00")), h.key, fc.Values())
	if err != nil {
		t.Fatal(err)
	}
	h.room.SetConfig(cfg)
	r := h.visitor().do(http.MethodGet, "/.herdgate/?return=/checkout", nil, "Accept-Language", "ko")
	body := string(r.body)
	for _, want := range []string{`<html lang="ko">`, `Shop shop/orders (Open)`, `Sales end at 18:00`, `data-return="/checkout"`, "대기열에 들어가는 중…", "herdgate = { solve: solve }"} {
		if !strings.Contains(body, want) {
			t.Fatalf("the site's page lacks %q:\n%s", want, body)
		}
	}
	csp := r.Header.Get("Content-Security-Policy")
	for _, tag := range []string{"script", "style"} {
		if !strings.Contains(csp, inlineHash(body, tag)) {
			t.Fatalf("the CSP %q does not allow the page's first %s", csp, tag)
		}
	}
	if !strings.Contains(csp, inlineHashNth(body, "style", 1)) {
		t.Fatalf("the CSP %q does not allow the site's own style", csp)
	}

	// The operator's message reaches pollers as notice, with every answer of enter and status.
	v := h.visitor()
	if got := v.enter().json(t)["notice"]; got != "Sales end at 18:00" {
		t.Fatalf("enter's notice %v", got)
	}
	cfg2, err := admission.NewConfigWithSecrets(changed(h.wq, pageQueue("Sold out soon")), h.key, fc.Values())
	if err != nil {
		t.Fatal(err)
	}
	h.room.SetConfig(cfg2)
	if got := h.visitor().status().json(t)["notice"]; got != "Sold out soon" {
		t.Fatalf("a status refusal's notice %v, want the changed message", got)
	}
}

func TestBrokenPageTemplatesAreRefused(t *testing.T) {
	for name, tc := range map[string]struct{ text, want string }{
		"a parse error":   {`<p>{{.Message</p>`, `template: page:1: `},
		"an unknown name": {`<p>{{.Nope}}</p>`, `can't evaluate field Nope`},
		"an unknown text": {`<p>{{.Texts.nope}}</p>`, `map has no entry for key "nope"`},
		"too large":       {strings.Repeat("a", page.MaxTemplate+1), `at most 262144 allowed`},
	} {
		err := page.Check(tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", name, err, tc.want)
		}
	}
	wq := changed(testQueue("http://127.0.0.1:1"), pageQueue(""))
	fc := &admission.FileConfig{ConfigMaps: map[string]map[string]string{"shop-page": {"page.html": `{{.Nope}}`}}}
	// In the proxy a template that cannot serve leaves the built-in page, and says why.
	cfg, err := admission.NewConfigWithSecrets(wq, make([]byte, 32), fc.Values())
	if err != nil || cfg.PageTemplate != nil || cfg.PageProblem == nil ||
		!strings.Contains(cfg.PageProblem.Error(), "spec.page.template: ConfigMap shop-page key page.html: ") {
		t.Fatalf("a broken template in the config: %v, %v", err, cfg)
	}
	if cfg, err := admission.NewConfigWithSecrets(wq, make([]byte, 32), (&admission.FileConfig{}).Values()); err != nil || cfg.PageProblem == nil {
		t.Fatalf("a template with no copy to read: %v, %v", err, cfg)
	}
}
