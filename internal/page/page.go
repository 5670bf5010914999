// Package page is the waiting page: the built-in page (layout, script, style, English and Korean
// texts) and the site's own templates, the data they render with, the language a visitor gets and
// the Content-Security-Policy of a rendered page. The proxy serves it; the manager checks a site's
// template with it before handing it to the proxies, without linking the proxy.
package page

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"regexp"
	"strings"
	"time"

	"golang.org/x/text/language"

	"github.com/herdgate/herdgate/internal/phase"
)

var (
	//go:embed waiting.html
	waitingHTML string
	//go:embed script.js
	script string
	//go:embed style.css
	style string
	//go:embed texts.en.json
	textsEN []byte
	//go:embed texts.ko.json
	textsKO []byte
)

// MaxTemplate bounds a page template of the site's own.
const MaxTemplate = 256 << 10

// The page's languages: English, the default, and Korean.
var (
	languages = []language.Tag{language.English, language.Korean}
	matcher   = language.NewMatcher(languages)
	texts     = map[string]map[string]string{"en": mustTexts(textsEN), "ko": mustTexts(textsKO)}
	builtin   = &Template{t: template.Must(template.New("waiting").Parse(waitingHTML))}
)

func mustTexts(raw []byte) map[string]string {
	m := map[string]string{}
	if err := json.Unmarshal(raw, &m); err != nil {
		panic(err)
	}
	return m
}

// Data is what the waiting page renders with, the built-in page or a template of the site's own
// (spec.page.template). The page is rendered when a visitor opens it; from then on its script keeps it
// current from enter and status.
type Data struct {
	// Lang is the page's language, "en" or "ko", from the browser's Accept-Language.
	Lang string
	// Phase is the room's phase when the page was opened (by the proxy's clock).
	Phase phase.Phase
	// Queue is the WaitingQueue as namespace/name.
	Queue string
	// Return is where the visitor goes once admitted: a path on this origin.
	Return string
	// Message is spec.page.message ("" when unset).
	Message string
	// PreQueueFrom, OpensAt and ClosesAt are the schedule's times, RFC 3339 ("" when unset).
	PreQueueFrom, OpensAt, ClosesAt string
	// Texts are the built-in page's texts in Lang, by key (texts.en.json).
	Texts map[string]string
	// TextsJSON is Texts as JSON, for the script: put it in the body's data-texts attribute.
	TextsJSON string
	// Script is the built-in page's script, which enters, solves a proof of work when asked, polls
	// and fills the elements with the ids title, message, position, countdown, summary, progress,
	// fill and wait (any of them may be left out); Style the built-in style. Script is empty on the
	// page without JavaScript.
	Script, Style template.HTML
	// Head is for browsers without JavaScript, and goes in the page's head: on the page with the
	// script, a redirect to the page that works without it; on that page, its refresh at the
	// visitor's next poll.
	Head template.HTML
	// Title, Position, Summary, Wait and Progress (a percentage) are what the page shows as it
	// opens: "joining the queue" on the page with the script, which keeps them current from then
	// on; where the visitor stands on the page without JavaScript.
	Title, Position, Summary, Wait string
	Progress                       int
}

// NewData is the data of a page in lang (see Language) that returns the visitor to ret.
func NewData(lang, ret string) Data {
	t, ok := texts[lang]
	if !ok {
		lang, t = "en", texts["en"]
	}
	raw, _ := json.Marshal(t)
	return Data{Lang: lang, Return: ret, Texts: t, TextsJSON: string(raw),
		Script: template.HTML("<script>\n" + script + "</script>"), Style: template.HTML("<style>\n" + style + "</style>"),
		Title: t["title"], Position: "…", Summary: t["summaryJoining"]}
}

// Template is a waiting page, parsed.
type Template struct {
	t *template.Template
}

// Builtin is the built-in page.
func Builtin() *Template { return builtin }

// Parse parses a page template of the site's own and renders it for every phase and language, so
// that one that fails does so here, where its error names the spot, not in front of a visitor.
func Parse(text string) (*Template, error) {
	if len(text) > MaxTemplate {
		return nil, fmt.Errorf("the template has %d bytes, at most %d allowed", len(text), MaxTemplate)
	}
	t, err := template.New("page").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	sample := time.Unix(0, 0).UTC().Format(time.RFC3339)
	for _, phase := range phase.All {
		for lang := range texts {
			d := NewData(lang, "/")
			d.Phase, d.Queue, d.Message = phase, "namespace/name", "a message"
			if phase != "Open" {
				d.PreQueueFrom, d.OpensAt, d.ClosesAt = sample, sample, sample
			}
			var buf bytes.Buffer
			if err := t.Execute(&buf, d); err != nil {
				return nil, err
			}
		}
	}
	return &Template{t: t}, nil
}

// Check tells why a page template cannot serve, or returns nil.
func Check(text string) error {
	_, err := Parse(text)
	return err
}

// Render renders the page with d.
func (t *Template) Render(d Data) ([]byte, error) {
	var buf bytes.Buffer
	if err := t.t.Execute(&buf, d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Language is the language of the bundled texts the Accept-Language header asks for: "en" or "ko".
func Language(accept string) string {
	tags, _, err := language.ParseAcceptLanguage(accept)
	if err != nil || len(tags) == 0 {
		return "en"
	}
	_, i, confidence := matcher.Match(tags...)
	if confidence == language.No {
		return "en"
	}
	base, _ := languages[i].Base()
	return base.String()
}

var inlineBlocks = regexp.MustCompile(`(?is)<(script|style)(\s[^>]*)?>(.*?)</(?:script|style)>`)

// Policy is a rendered page's Content-Security-Policy: its inline scripts and styles exactly as
// rendered, calls to its own origin, images from it or data:, and nothing else.
func Policy(rendered []byte) string {
	var scripts, styles []string
	for _, m := range inlineBlocks.FindAllSubmatch(rendered, -1) {
		attrs := bytes.ToLower(m[2])
		if bytes.Contains(attrs, []byte("src=")) || bytes.Contains(attrs, []byte("application/json")) {
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
