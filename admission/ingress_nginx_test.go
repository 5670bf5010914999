package admission_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/testenv"
)

// ingressNginx is the guide's ingress-nginx recipe (the block "yaml ingress-nginx": a ConfigMap and
// two Ingresses) on a real nginx, in the configuration ingress-nginx's template renders for those
// annotations. ingress-nginx passes on a check's 401 (as the sign-in redirect) and 403 only, so a
// refusal is any answer of 300 or more that reaches nothing upstream (coarse).
var ingressNginx = gateway{coarse: true, start: renderedInNginx(func(block, fill func(string) string) (string, error) {
	return ingressNginxConfig(block("yaml ingress-nginx"), fill("LISTEN_ADDRESS"), fill("WORKLOAD_ADDRESS"))
})}

// renderedInNginx starts a real nginx with the configuration a controller would render from
// objects (render reads them from a block of the guide, its placeholders filled in).
func renderedInNginx(render func(block, fill func(string) string) (string, error)) func(t *testing.T, dir string, block, fill func(string) string) func() {
	return func(t *testing.T, dir string, block, fill func(string) string) func() {
		conf, err := render(block, fill)
		if err != nil {
			t.Fatal(err)
		}
		n, err := testenv.StartNginx(dir, conf)
		if err != nil {
			t.Fatalf("%v\n%s", err, conf)
		}
		return n.Stop
	}
}

// ingressObject is what the renderer reads of the recipe's objects.
type ingressObject struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
	Spec struct {
		Rules []struct {
			HTTP struct {
				Paths []struct {
					Path    string `json:"path"`
					Backend struct {
						Service struct {
							Name string `json:"name"`
						} `json:"service"`
					} `json:"backend"`
				} `json:"paths"`
			} `json:"http"`
		} `json:"rules"`
	} `json:"spec"`
}

// ingressNginxConfig renders, for nginx's http {} block, what ingress-nginx's template (controller
// v1.15, rootfs/etc/nginx/template/nginx.tmpl, the auth_request path: no auth-keepalive) writes for
// the recipe's objects: the unchecked Ingress's paths to herdgate, and the checked one's location
// with its internal auth location and its sign-in location. Two things differ, for nginx as Debian
// builds it: upstreams stand for ingress-nginx's Lua balancer, and $escaped_request_uri (set by
// set-misc's set_escape_uri there) is the request's URI as it came.
func ingressNginxConfig(objects, listen, workload string) (string, error) {
	var headers map[string]string
	var open, checked []ingressObject
	for _, doc := range strings.Split(objects, "\n---\n") {
		var o ingressObject
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return "", err
		}
		switch {
		case o.Kind == "ConfigMap":
			headers = o.Data
		case o.Metadata.Annotations["nginx.ingress.kubernetes.io/auth-url"] != "":
			checked = append(checked, o)
		default:
			open = append(open, o)
		}
	}
	if len(checked) != 1 || len(open) != 1 {
		return "", fmt.Errorf("the recipe has %d checked and %d unchecked Ingresses, want one each", len(checked), len(open))
	}
	ann := func(name string) string { return checked[0].Metadata.Annotations["nginx.ingress.kubernetes.io/"+name] }
	authURL, err := url.Parse(ann("auth-url"))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "upstream herdgate { server %s; keepalive 16; }\nupstream workload { server %s; keepalive 16; }\nserver {\n  listen %s;\n", authURL.Host, workload, listen)
	for _, p := range open[0].Spec.Rules[0].HTTP.Paths {
		fmt.Fprintf(&b, `  location %s {
    proxy_set_header Host $host;
    proxy_set_header X-Real-IP $remote_addr;
    proxy_set_header X-Forwarded-For $remote_addr;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_pass http://herdgate;
  }
`, p.Path)
	}
	var setHeaders []string
	for name, value := range headers {
		setHeaders = append(setHeaders, fmt.Sprintf("proxy_set_header %q %q;", name, value))
	}
	slices.Sort(setHeaders)
	method := ""
	if m := ann("auth-method"); m != "" {
		method = fmt.Sprintf("proxy_method %s;\n    proxy_set_header X-Original-URI $request_uri;\n    proxy_set_header X-Scheme $scheme;", m)
	}
	fmt.Fprintf(&b, `  location = /_external-auth-Lw-Prefix {
    internal;
    access_log off;
    proxy_intercept_errors off;
    proxy_pass_request_body off;
    proxy_set_header Content-Length "";
    proxy_set_header X-Forwarded-Proto "";
    proxy_set_header X-Request-ID $request_id;
    %s
    proxy_set_header Host %s;
    proxy_set_header X-Original-URL $scheme://$http_host$request_uri;
    proxy_set_header X-Original-Method $request_method;
    proxy_set_header X-Sent-From "nginx-ingress-controller";
    proxy_set_header X-Real-IP $remote_addr;
    proxy_set_header X-Forwarded-For $remote_addr;
    proxy_set_header X-Auth-Request-Redirect $request_uri;
    proxy_buffering off;
    proxy_ssl_server_name on;
    proxy_pass_request_headers on;
    %s
    proxy_http_version 1.1;
    set $target %q;
    proxy_pass $target;
  }
`, method, authURL.Hostname(), strings.Join(setHeaders, "\n    "), ann("auth-url"))
	signin := ann("auth-signin")
	if signin != "" {
		param := cmpOr(ann("auth-signin-redirect-param"), "rd")
		u, err := url.Parse(signin)
		if err != nil {
			return "", err
		}
		switch {
		case len(u.Query()) == 0:
			signin += "?" + param + "=$scheme://$http_host$escaped_request_uri"
		case u.Query().Get(param) == "":
			signin += "&" + param + "=$scheme://$http_host$escaped_request_uri"
		}
		fmt.Fprintf(&b, "  location @signin {\n    internal;\n    add_header Set-Cookie $auth_cookie;\n    return 302 %s;\n  }\n", signin)
	}
	var responseHeaders []string
	for i, h := range strings.Split(ann("auth-response-headers"), ",") {
		if h = strings.TrimSpace(h); h != "" {
			responseHeaders = append(responseHeaders, fmt.Sprintf("auth_request_set $authHeader%d $upstream_http_%s;\n    proxy_set_header '%s' $authHeader%d;",
				i, strings.ReplaceAll(strings.ToLower(h), "-", "_"), h, i))
		}
	}
	errorPage := ""
	if signin != "" {
		errorPage = "set $escaped_request_uri $request_uri;\n    error_page 401 = @signin;"
	}
	for _, p := range checked[0].Spec.Rules[0].HTTP.Paths {
		fmt.Fprintf(&b, `  location %s {
    auth_request /_external-auth-Lw-Prefix;
    auth_request_set $auth_cookie $upstream_http_set_cookie;
    add_header Set-Cookie $auth_cookie;
    %s
    %s
    proxy_set_header Host $host;
    proxy_set_header X-Request-ID $request_id;
    proxy_set_header X-Real-IP $remote_addr;
    proxy_set_header X-Forwarded-For $remote_addr;
    proxy_set_header X-Forwarded-Host $host;
    proxy_set_header X-Forwarded-Proto $scheme;
    proxy_set_header X-Scheme $scheme;
    proxy_set_header X-Original-URI $request_uri;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_pass http://workload;
  }
`, p.Path, strings.Join(responseHeaders, "\n    "), errorPage)
	}
	b.WriteString("}\n")
	return b.String(), nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestIngressNginxSendsABrowserToTheWaitingPage: through the recipe, a browser without a pass is
// sent to the waiting page with its way back, an API client is refused, and herdgate's paths are
// herdgate's.
func TestIngressNginxSendsABrowserToTheWaitingPage(t *testing.T) {
	_, gateway := throughGateway(t, ingressNginx, func(*herdgatev1alpha1.WaitingQueue) {})
	if loc := withoutAPass(t, gateway, "shop.example", http.StatusFound); loc != "https://shop.example/.herdgate/?return=/checkout/cart" {
		t.Errorf("a browser was sent to %q, want the waiting page with the way back", loc)
	}
}

// withoutAPass asks gateway, as host (or the gateway's own address), for a protected page as a
// browser, for an order as an API client, and for herdgate's health, none with a pass: the browser
// must get browser (a redirect), the client 403, herdgate's path 200. It returns the browser's
// Location.
func withoutAPass(t *testing.T, gateway, host string, browser int) string {
	t.Helper()
	location := ""
	for _, c := range []struct {
		method, target, accept string
		want                   int
	}{
		{"GET", "/checkout/cart", "text/html", browser},
		{"POST", "/api/v1/orders", "application/json", http.StatusForbidden},
		{"GET", "/.herdgate/healthz", "", http.StatusOK},
	} {
		req, _ := http.NewRequest(c.method, gateway+c.target, nil)
		req.Header.Set("Accept", c.accept)
		if host != "" {
			req.Host = host
		}
		res, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.target, res.StatusCode, c.want)
		}
		if c.want == browser {
			location = res.Header.Get("Location")
		}
	}
	return location
}
