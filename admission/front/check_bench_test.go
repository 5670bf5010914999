package front

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// BenchmarkCheckAllowed is one allowed check on the fast front, as nginx's auth_request asks it
// (X-Original-*, a pass header, the site's and herdgate's cookies): the work a gateway adds to each
// protected request.
func BenchmarkCheckAllowed(b *testing.B) {
	p, _, _ := checked(b)
	f := NewFast(p, FastOptions{})
	now := time.Now()
	token := p.Config().Signer.Issue("ada", now.Add(-time.Second), now.Add(time.Hour))
	var ctx fasthttp.RequestCtx
	b.ReportAllocs()
	for b.Loop() {
		ctx.Request.Reset()
		ctx.Response.Reset()
		ctx.Request.Header.SetMethod("GET")
		ctx.Request.SetRequestURI(CheckPath)
		ctx.Request.Header.Set("X-Original-URI", "/api/v1/orders?id=7")
		ctx.Request.Header.Set("X-Original-Method", "POST")
		ctx.Request.Header.Set("X-User-Id", "ada")
		ctx.Request.Header.Set("X-Herdgate-Pass", token)
		f.serve(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("the check answered %d", ctx.Response.StatusCode())
		}
	}
}
