package gatewayconfig

import (
	"fmt"
	"slices"
	"strings"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// haproxy is HAProxy's frontend and backends that verify the queue's ES256 JWT passes with
// jwt_verify and the keys the operator publishes, and send refusals to herdgate's check.
func haproxy(wq *herdgatev1alpha1.WaitingQueue, opts Options) ([]byte, error) {
	if wq.Spec.EffectivePassFormat() != herdgatev1alpha1.PassFormatJWT || wq.Spec.EffectivePassAlgorithm() != herdgatev1alpha1.PassAlgorithmES256 {
		return nil, fmt.Errorf("target haproxy verifies ES256 JWT passes: set spec.pass.format JWT (algorithm ES256)")
	}
	at, err := siteOf(wq, opts, ":80")
	if err != nil {
		return nil, err
	}
	keys := opts.KeysDir
	if keys == "" {
		keys = "/etc/haproxy/herdgate/" + wq.Namespace + "/" + wq.Name
	}
	var routes strings.Builder
	for i, r := range wq.Spec.ProtectedRoutes {
		methods := make([]string, 0, len(r.Methods)+1)
		for _, m := range r.EffectiveMethods() {
			methods = append(methods, string(m))
			if m == "GET" && !slices.Contains(r.EffectiveMethods(), "HEAD") {
				methods = append(methods, "HEAD") // herdgate's GET protects HEAD too
			}
		}
		flags := "-i "
		if r.ExactCase {
			flags = ""
		}
		for _, candidate := range methodVars {
			fmt.Fprintf(&routes, "  acl route%d_method var(%s) -m str %s\n", i, candidate, strings.Join(methods, " "))
		}
		fmt.Fprintf(&routes, "  acl route%d_method var(txn.any_method) -m bool\n", i)
		switch {
		case r.Path != nil:
			fmt.Fprintf(&routes, "  acl route%d_path var(txn.path) %s-m str %s\n", i, flags, *r.Path)
		case *r.PathPrefix == "/":
			// Every path, the root too, which txn.path holds as "".
			fmt.Fprintf(&routes, "  acl route%d_path always_true\n", i)
		default:
			fmt.Fprintf(&routes, "  acl route%d_path var(txn.path) %s-m str %s\n", i, flags, *r.PathPrefix)
			fmt.Fprintf(&routes, "  acl route%d_path var(txn.path) %s-m beg %s/\n", i, flags, strings.TrimSuffix(string(*r.PathPrefix), "/"))
		}
		host := ""
		if r.Host != nil {
			fmt.Fprintf(&routes, "  acl route%d_host var(txn.host) -m str %s\n", i, *r.Host)
			host = fmt.Sprintf(" route%d_host", i)
		}
		fmt.Fprintf(&routes, "  http-request set-var(txn.protected) bool(1) if route%d_method route%d_path%s\n", i, i, host)
	}
	var strip strings.Builder
	for _, h := range herdgateHeaders {
		fmt.Fprintf(&strip, "  http-request del-header %s\n", h)
	}
	return []byte(strings.NewReplacer(
		"LISTEN", at.listen, "HERDGATE", at.herdgate, "WORKLOAD", at.workload, "KEYS", keys, "QUEUE", wq.Namespace+"/"+wq.Name, "PASS_COOKIE", wq.CookieName("herdgate_pass"),
		"CAP", fmt.Sprint(at.limit), "BUSY_BODY", busyBody, "BUSY", busyPath,
		"ROUTES\n", routes.String(), "STRIP\n", strip.String(),
	).Replace(haproxyTemplate)), nil
}

// methodVars hold the methods a request may act as; a route's methods are matched against each.
var methodVars = []string{"txn.method", "txn.method_override", "txn.method_http", "txn.method_x_override", "txn.method_param"}

const haproxyTemplate = `frontend site
  bind LISTEN
  option forwardfor
  # The path as herdgate reads it: decoded, ";parameters" cut, slashes merged, no trailing slash. A path
  # with "." or ".." segments or a backslash, which the workload might read as another, is refused.
  http-request set-var(txn.path) 'path,url_dec,regsub(";[^/]*","",g),regsub("/+","/",g),regsub("/$","")'
  http-request deny deny_status 400 if { var(txn.path) -m reg '(^|/)\.\.?(/|$)' } || { var(txn.path) -m reg '[\\]' }
  # The host as herdgate reads it, for routes with a host: no port, no final dot, lower case.
  http-request set-var(txn.host) 'req.hdr(host),regsub(":[0-9]*$",""),regsub("[.]$",""),lower'

  # The methods the request may act as upstream (docs/reference/upstream.md): its own, the one an
  # override header names once, the one the _method query parameter names when it is the only one,
  # spelled plainly; any method for a repeated override, another spelling of the parameter, a query
  # herdgate cannot parse, or a form body (which may carry a _method field).
  http-request set-var(txn.method) method,upper
  http-request set-var(txn.method_override) req.fhdr(x-http-method-override),upper if { req.fhdr_cnt(x-http-method-override) eq 1 }
  http-request set-var(txn.method_http) req.fhdr(x-http-method),upper if { req.fhdr_cnt(x-http-method) eq 1 }
  http-request set-var(txn.method_x_override) req.fhdr(x-method-override),upper if { req.fhdr_cnt(x-method-override) eq 1 }
  acl method_param query,url_dec -m reg -i '(^|&)[_. +]method(=|&|$)'
  acl method_params query,url_dec -m reg -i '(^|&)[_. +]method(=|&|$).*&[_. +]method(=|&|$)'
  acl plain_method_param query -m reg '(^|&)_method(=|&|$)'
  acl unparsed_query query -m reg '[;]|%([^0-9A-Fa-f]|[0-9A-Fa-f][^0-9A-Fa-f]|[0-9A-Fa-f]?$)'
  http-request set-var(txn.method_param) url_param(_method),url_dec,upper if method_param !method_params plain_method_param !unparsed_query
  http-request set-var(txn.any_method) bool(1) if { req.fhdr_cnt(x-http-method-override) gt 1 } || { req.fhdr_cnt(x-http-method) gt 1 } || { req.fhdr_cnt(x-method-override) gt 1 }
  http-request set-var(txn.any_method) bool(1) if method_params || method_param !plain_method_param || { query -m sub -i method } unparsed_query
  http-request set-var(txn.any_method) bool(1) if { req.fhdr(content-type,1) -m beg -i application/x-www-form-urlencoded multipart/form-data }

  # spec.protectedRoutes
ROUTES
  acl protected var(txn.protected) -m bool

  # The pass: its header, else its cookie (the room's, else the one named before cookies were named
  # per room); signed by one of the published keys; for this queue, now.
  http-request set-var(txn.pass) req.cook(herdgate_pass) if protected
  http-request set-var(txn.pass) req.cook(PASS_COOKIE) if protected { req.cook(PASS_COOKIE) -m found }
  http-request set-var(txn.pass) req.hdr(x-herdgate-pass) if protected { req.hdr(x-herdgate-pass) -m found }
  acl signed var(txn.pass_signed) -m bool
  http-request set-var(txn.pass_signed) bool(1) if protected { var(txn.pass),jwt_verify("ES256","KEYS/current.pem") -m int 1 }
  http-request set-var(txn.pass_signed) bool(1) if protected !signed { var(txn.pass),jwt_verify("ES256","KEYS/previous.pem") -m int 1 }
  http-request set-var(txn.pass_signed) bool(1) if protected !signed { var(txn.pass),jwt_verify("ES256","KEYS/next.pem") -m int 1 }
  http-request set-var(txn.now) date if signed
  http-request set-var(txn.pass_exp) var(txn.pass),jwt_payload_query('$.exp','int') if signed
  http-request set-var(txn.pass_nbf) var(txn.pass),jwt_payload_query('$.nbf','int') if signed
  acl pass_queue var(txn.pass),jwt_payload_query('$.aud') -m str QUEUE
  acl pass_issuer var(txn.pass),jwt_payload_query('$.iss') -m str herdgate
  acl pass_live var(txn.now),sub(txn.pass_exp) -m int lt 0
  acl pass_started var(txn.pass_nbf),sub(txn.now) -m int le 1
  use_backend herdgate if { path_beg /.herdgate/ }
  use_backend herdgate_refusal if protected !signed || protected !pass_queue || protected !pass_issuer || protected !pass_live || protected !pass_started
  # The second line: past the workload's cap, a request waits in its queue; once the queue is as
  # long as the cap, herdgate answers it busy.
  use_backend herdgate_busy if { queue(workload) ge CAP }
  default_backend workload

backend herdgate
  server herdgate HERDGATE

# herdgate answers the refusal as its check would for Traefik: the request goes there as its check.
backend herdgate_refusal
  http-request del-header X-Original-URI
  http-request del-header X-Original-Method
  http-request del-header X-Original-Host
  http-request set-header X-Forwarded-Host %[req.hdr(host)]
  # The visitor's scheme, so that the waiting page's Location stays on https where HAProxy ends TLS
  # (behind a load balancer that ends it, that balancer's X-Forwarded-Proto stands).
  http-request set-header X-Forwarded-Proto https if { ssl_fc }
  http-request set-header X-Forwarded-Method %[method]
  http-request set-header X-Forwarded-Uri %[url]
  http-request set-method GET
  http-request set-uri /.herdgate/check
  # herdgate would let it through (a pass HAProxy cannot verify yet): ask the client to come again.
  http-response return status 503 content-type application/json string '{"error":"retry"}' hdr Retry-After 1 if { status 200 }
  server herdgate HERDGATE

# What the cap refuses: herdgate's busy answer, 503 with Retry-After, counted.
backend herdgate_busy
  http-request set-method GET
  http-request set-uri BUSY
  server herdgate HERDGATE

# herdgate's cookies and headers never reach the workload. At most CAP requests are in flight to
# it from this HAProxy; the others wait up to a second in its queue, then get the busy answer.
backend workload
  timeout queue 1s
  http-error status 503 content-type application/json string 'BUSY_BODY' hdr Retry-After 1
STRIP
  http-request replace-header Cookie '^(.*?)(?:^|;\s*)herdgate_[^;]*(.*)$' '\1\2'
  http-request replace-header Cookie '^(.*?)(?:^|;\s*)herdgate_[^;]*(.*)$' '\1\2'
  http-request replace-header Cookie '^(.*?)(?:^|;\s*)herdgate_[^;]*(.*)$' '\1\2'
  http-request replace-header Cookie '^(.*?)(?:^|;\s*)herdgate_[^;]*(.*)$' '\1\2'
  http-request replace-header Cookie '^;\s*(.*)$' '\1'
  http-request del-header Cookie if { req.hdr(cookie) -m len 0 }
  server workload WORKLOAD maxconn CAP
`
