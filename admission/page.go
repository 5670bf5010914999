package admission

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/page"
	"github.com/herdgate/herdgate/internal/phase"
	"github.com/herdgate/herdgate/internal/route"
)

// pageFor is the page data of a request of cfg's room in lang, returning to ret.
func pageFor(lang, ret string, cfg *Config) page.Data {
	d := page.NewData(lang, ret)
	d.Queue, d.Message = cfg.Namespace+"/"+cfg.Name, cfg.PageMessage()
	if sc := cfg.Schedule; sc != nil {
		d.PreQueueFrom, d.OpensAt = sc.PreQueueFrom.UTC().Format(time.RFC3339), sc.OpensAt.UTC().Format(time.RFC3339)
		if !sc.ClosesAt.IsZero() {
			d.ClosesAt = sc.ClosesAt.UTC().Format(time.RFC3339)
		}
	}
	return d
}

// safeReturn accepts ?return= only as a path on this origin, so the waiting page cannot redirect a
// visitor elsewhere; anything else becomes "/".
func safeReturn(raw string) string {
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

// page is the waiting page: the site's template when the room has one, else the built-in page,
// in the visitor's language. A browser without JavaScript is sent on to the page that works
// without it (nojs.go).
func (api *visitorAPI) page(x Exchange, cfg *Config) answer {
	query, _ := url.ParseQuery(x.RawQuery())
	ret := safeReturn(query.Get("return"))
	d := pageFor(page.Language(x.Header("Accept-Language")), ret, cfg)
	d.Phase = api.pagePhase(cfg)
	d.SendWithoutScript(page.WithoutScriptURL(ret, page.CarriedOf(query), false))
	return api.renderPage(cfg, d, http.StatusOK)
}

// renderPage is the answer of the page rendered with d, and status.
func (api *visitorAPI) renderPage(cfg *Config, d page.Data, status int) answer {
	t := page.Builtin()
	if cfg.PageTemplate != nil {
		t = cfg.PageTemplate
	}
	body, err := t.Render(d)
	if err != nil {
		// The template rendered for every phase when it was checked; fall back to the built-in page.
		api.log.Error(err, "Rendering the waiting page's template failed; serving the built-in page")
		if body, err = page.Builtin().Render(d); err != nil {
			return errorAnswer(http.StatusInternalServerError, errorBody{Error: "internal", Message: "rendering the waiting page failed"})
		}
	}
	a := answer{status: status, contentType: "text/html; charset=utf-8", raw: body}
	a.setHeader("Cache-Control", "no-store")
	a.setHeader("Content-Security-Policy", page.Policy(body))
	a.setHeader("Content-Language", d.Lang)
	a.setHeader("Vary", "Accept-Language")
	a.setHeader("X-Content-Type-Options", "nosniff")
	a.setHeader("Referrer-Policy", "no-referrer")
	return a
}

// pagePhase is the room's phase by the proxy's clock, without asking Redis.
func (api *visitorAPI) pagePhase(cfg *Config) phase.Phase {
	switch cfg.Mode {
	case herdgatev1alpha1.ModeClosed:
		return phase.Closed
	case herdgatev1alpha1.ModePassthrough:
		return phase.Passthrough
	}
	if cfg.Schedule != nil {
		return cfg.phaseAt(api.now())
	}
	return phase.Open
}
