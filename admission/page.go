package admission

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"golang.org/x/text/language"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/queue"
	"github.com/herdgate/herdgate/internal/route"
)

var (
	//go:embed page/waiting.html
	waitingHTML string
	//go:embed page/script.js
	pageScript string
	//go:embed page/style.css
	pageStyle string
	//go:embed page/texts.en.json
	textsEN []byte
	//go:embed page/texts.ko.json
	textsKO []byte
)

// MaxPageTemplate bounds a page template of the site's own.
const MaxPageTemplate = 256 << 10

// The page's languages: English, the default, and Korean.
var (
	pageLanguages = []language.Tag{language.English, language.Korean}
	pageMatcher   = language.NewMatcher(pageLanguages)
	pageTexts     = map[string]map[string]string{"en": mustTexts(textsEN), "ko": mustTexts(textsKO)}
	builtinPage   = template.Must(template.New("waiting").Parse(waitingHTML))
)

func mustTexts(raw []byte) map[string]string {
	m := map[string]string{}
	if err := json.Unmarshal(raw, &m); err != nil {
		panic(err)
	}
	return m
}

// PageData is what the waiting page renders with, the built-in page or a template of the site's own
// (spec.page.template). The page is rendered when a visitor opens it; from then on its script keeps it
// current from enter and status.
type PageData struct {
	// Lang is the page's language, "en" or "ko", from the browser's Accept-Language.
	Lang string
	// Phase is the room's phase when the page was opened: Open, Closed or Passthrough, or with a
	// schedule Scheduled, PreQueue, Opening (by the proxy's clock).
	Phase string
	// Queue is the WaitingQueue as namespace/name.
	Queue string
	// Return is where the visitor goes once admitted: a path on this origin.
	Return string
	// Message is spec.page.message ("" when unset).
	Message string
	// PreQueueFrom, OpensAt and ClosesAt are the schedule's times, RFC 3339 ("" when unset).
	PreQueueFrom, OpensAt, ClosesAt string
	// Texts are the built-in page's texts in Lang, by key (page/texts.en.json).
	Texts map[string]string
	// TextsJSON is Texts as JSON, for the script: put it in the body's data-texts attribute.
	TextsJSON string
	// Script is the built-in page's script, which enters, solves a proof of work when asked, polls
	// and fills the elements with the ids title, message, position, countdown, summary, progress,
	// fill and wait (any of them may be left out); Style the built-in style.
	Script, Style template.HTML
}

// pageTemplate is a page of the site's own, parsed.
type pageTemplate struct {
	t *template.Template
}

// parsePageTemplate parses a page template and renders it for every phase and language, so that one
// that fails does so here, where its error names the spot, not in front of a visitor.
func parsePageTemplate(text string) (*pageTemplate, error) {
	if len(text) > MaxPageTemplate {
		return nil, fmt.Errorf("the template has %d bytes, at most %d allowed", len(text), MaxPageTemplate)
	}
	t, err := template.New("page").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	pt := &pageTemplate{t: t}
	for _, phase := range []string{phaseOpen, phaseClosed, phasePassthrough, string(queue.PhaseScheduled), string(queue.PhasePreQueue), string(queue.PhaseOpening)} {
		for lang := range pageTexts {
			d := pageDataFor(lang, "/", nil)
			d.Phase, d.Queue, d.Message = phase, "namespace/name", "a message"
			if phase != phaseOpen {
				d.OpensAt, d.PreQueueFrom = time.Unix(0, 0).UTC().Format(time.RFC3339), time.Unix(0, 0).UTC().Format(time.RFC3339)
			}
			var buf bytes.Buffer
			if err := t.Execute(&buf, d); err != nil {
				return nil, err
			}
		}
	}
	return pt, nil
}

// CheckPageTemplate tells why a page template cannot serve, or returns nil: what the manager runs
// before it hands a template to the proxies.
func CheckPageTemplate(text string) error {
	_, err := parsePageTemplate(text)
	return err
}

func pageDataFor(lang, ret string, cfg *Config) PageData {
	texts := pageTexts[lang]
	raw, _ := json.Marshal(texts)
	d := PageData{Lang: lang, Return: ret, Texts: texts, TextsJSON: string(raw),
		Script: template.HTML("<script>\n" + pageScript + "</script>"), Style: template.HTML("<style>\n" + pageStyle + "</style>")}
	if cfg != nil {
		d.Queue, d.Message = cfg.Namespace+"/"+cfg.Name, cfg.PageMessage
		if sc := cfg.Schedule; sc != nil {
			d.PreQueueFrom, d.OpensAt = sc.PreQueueFrom.UTC().Format(time.RFC3339), sc.OpensAt.UTC().Format(time.RFC3339)
			if !sc.ClosesAt.IsZero() {
				d.ClosesAt = sc.ClosesAt.UTC().Format(time.RFC3339)
			}
		}
	}
	return d
}

// pageLanguage is the language of the bundled texts the Accept-Language header asks for.
func pageLanguage(accept string) string {
	tags, _, err := language.ParseAcceptLanguage(accept)
	if err != nil || len(tags) == 0 {
		return "en"
	}
	_, i, confidence := pageMatcher.Match(tags...)
	if confidence == language.No {
		return "en"
	}
	base, _ := pageLanguages[i].Base()
	return base.String()
}

// inlinePolicy is the page's Content-Security-Policy: its inline scripts and styles, exactly as
// rendered, and nothing else but calls to this origin and its own or inline images.
var inlineBlocks = regexp.MustCompile(`(?is)<(script|style)(\s[^>]*)?>(.*?)</(?:script|style)>`)

func inlinePolicy(page []byte) string {
	var scripts, styles []string
	for _, m := range inlineBlocks.FindAllSubmatch(page, -1) {
		if bytes.Contains(bytes.ToLower(m[2]), []byte("src=")) || bytes.Contains(bytes.ToLower(m[2]), []byte("application/json")) {
			continue
		}
		sum := sha256.Sum256(m[3])
		h := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
		if strings.EqualFold(string(m[1]), "script") {
			scripts = append(scripts, h)
		} else {
			styles = append(styles, h)
		}
	}
	list := func(hashes []string) string {
		if len(hashes) == 0 {
			return "'none'"
		}
		return strings.Join(hashes, " ")
	}
	return "default-src 'none'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
		"script-src " + list(scripts) + "; style-src " + list(styles)
}

// SafeReturn accepts ?return= only as a path on this origin, so the waiting page cannot redirect a
// visitor elsewhere; anything else becomes "/".
func SafeReturn(raw string) string {
	if raw == "" || raw[0] != '/' || strings.HasPrefix(raw, "//") || strings.HasPrefix(raw, "/\\") {
		return "/"
	}
	for _, c := range raw {
		if c < 0x20 || c == 0x7f || c == '\\' {
			return "/"
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/"
	}
	if p, err := route.Normalize(u.EscapedPath()); err != nil || p == reservedPrefix || strings.HasPrefix(p, reservedPrefix+"/") {
		return "/"
	}
	return raw
}

// servePage renders the waiting page: the site's template when the queue has one, else the built-in
// page, in the visitor's language.
func (p *Proxy) servePage(x exchange, cfg *Config) {
	query, _ := url.ParseQuery(x.RawQuery())
	d := pageDataFor(pageLanguage(x.Header("Accept-Language")), SafeReturn(query.Get("return")), cfg)
	d.Phase = p.pagePhase(cfg)
	t := builtinPage
	if cfg.Page != nil {
		t = cfg.Page.t
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, d); err != nil {
		// The template rendered for every phase when it was checked; fall back to the built-in page.
		p.log.Error(err, "Rendering the waiting page's template failed; serving the built-in page")
		buf.Reset()
		if err := builtinPage.Execute(&buf, d); err != nil {
			replyJSON(x, http.StatusInternalServerError, errorBody{Error: "internal", Message: "rendering the waiting page failed"})
			return
		}
	}
	x.SetHeader("Cache-Control", "no-store")
	x.SetHeader("Content-Security-Policy", inlinePolicy(buf.Bytes()))
	x.SetHeader("Content-Language", d.Lang)
	x.SetHeader("Vary", "Accept-Language")
	x.SetHeader("X-Content-Type-Options", "nosniff")
	x.SetHeader("Referrer-Policy", "no-referrer")
	x.Reply(http.StatusOK, "text/html; charset=utf-8", buf.Bytes())
}

// pagePhase is the room's phase by the proxy's clock, without asking Redis.
func (p *Proxy) pagePhase(cfg *Config) string {
	switch cfg.Mode {
	case herdgatev1alpha1.ModeClosed:
		return phaseClosed
	case herdgatev1alpha1.ModePassthrough:
		return phasePassthrough
	}
	if cfg.Schedule != nil {
		return string(cfg.phaseAt(p.now()))
	}
	return phaseOpen
}
