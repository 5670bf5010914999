package admission

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/herdgate/herdgate/internal/route"
)

//go:embed page/waiting.html
var waitingHTML string

var (
	waitingPage = template.Must(template.New("waiting").Parse(waitingHTML))
	// The page's only script and style are inline; the policy allows exactly them, as the template
	// renders them (it drops comments from scripts, for one).
	pagePolicy = "default-src 'none'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
		"script-src " + inlineHash(renderedPage(), "script") + "; style-src " + inlineHash(renderedPage(), "style")
)

// renderedPage is the waiting page as served; its script and style do not depend on the return path.
func renderedPage() string {
	var buf bytes.Buffer
	if err := waitingPage.Execute(&buf, struct{ Return string }{"/"}); err != nil {
		panic(err)
	}
	return buf.String()
}

func inlineHash(page, tag string) string {
	m := regexp.MustCompile(`(?s)<` + tag + `>(.*?)</` + tag + `>`).FindStringSubmatch(page)
	sum := sha256.Sum256([]byte(m[1]))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
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

func servePage(x exchange) {
	query, _ := url.ParseQuery(x.RawQuery())
	var buf bytes.Buffer
	if err := waitingPage.Execute(&buf, struct{ Return string }{SafeReturn(query.Get("return"))}); err != nil {
		replyJSON(x, http.StatusInternalServerError, errorBody{Error: "internal", Message: "rendering the waiting page failed"})
		return
	}
	x.SetHeader("Cache-Control", "no-store")
	x.SetHeader("Content-Security-Policy", pagePolicy)
	x.SetHeader("X-Content-Type-Options", "nosniff")
	x.SetHeader("Referrer-Policy", "no-referrer")
	x.Reply(http.StatusOK, "text/html; charset=utf-8", buf.Bytes())
}
