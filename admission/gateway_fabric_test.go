package admission_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// nginxGatewayFabric is what `herd gateway-config --target nginx-gateway-fabric` writes for the
// room (the block "yaml nginx-gateway-fabric": two HTTPRoutes and a SnippetsFilter) on a real nginx,
// in the configuration NGINX Gateway Fabric's template renders for them. A deny of its
// ExternalAuth can only be nginx's own 401 or 403 page, so a refusal is any answer of 300 or more
// that reaches nothing upstream (coarse).
var nginxGatewayFabric = gateway{coarse: true, firstOfRepeated: true, start: renderedInNginx(func(block, fill func(string) string) (string, error) {
	return fabricNginxConfig(block("yaml nginx-gateway-fabric"), fill("LISTEN_ADDRESS"), fill("HERDGATE_ADDRESS"), fill("WORKLOAD_ADDRESS"))
})}

// fabricObject is what the renderer reads of the generated objects.
type fabricObject struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name, Namespace string
	} `json:"metadata"`
	Spec struct {
		Rules []struct {
			Matches []struct {
				Path struct{ Value string } `json:"path"`
			} `json:"matches"`
			Filters []struct {
				Type         string `json:"type"`
				ExternalAuth *struct {
					Protocol string `json:"protocol"`
					HTTP     struct {
						Path                   string   `json:"path"`
						AllowedHeaders         []string `json:"allowedHeaders"`
						AllowedResponseHeaders []string `json:"allowedResponseHeaders"`
					} `json:"http"`
				} `json:"externalAuth"`
				ExtensionRef *struct{ Kind, Name string } `json:"extensionRef"`
			} `json:"filters"`
		} `json:"rules"`
		Snippets []struct{ Context, Value string } `json:"snippets"`
	} `json:"spec"`
}

// nginxVar is nginx's variable name of a header: lower case, '-' as '_'.
func nginxVar(header string) string { return strings.ReplaceAll(strings.ToLower(header), "-", "_") }

// fabricNginxConfig renders, for nginx's http {} block, what NGINX Gateway Fabric's template
// (internal/controller/nginx/config/servers_template.go, the ExternalAuth filter of protocol HTTP,
// and SnippetsFilter's http.server and http.server.location contexts) writes for the objects: the
// route without a filter to herdgate, the other to the workload with auth_request, its internal
// auth location (Path, Method, Authorization and the allowed headers only), and the snippets. One
// thing differs: upstreams stand for the Services the routes name, at the test's addresses.
func fabricNginxConfig(objects, listen, herdgate, workload string) (string, error) {
	var routes []fabricObject
	snippets := map[string]fabricObject{}
	for _, doc := range strings.Split(objects, "\n---\n") {
		var o fabricObject
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return "", err
		}
		switch o.Kind {
		case "HTTPRoute":
			routes = append(routes, o)
		case "SnippetsFilter":
			snippets[o.Metadata.Name] = o
		}
	}
	var b, server strings.Builder
	// NGF's nginx.conf sets the variables' hash as large, for the auth response's variables.
	fmt.Fprintf(&b, `variables_hash_bucket_size 512;
variables_hash_max_size 1024;
map $http_host $gw_api_compliant_host {
  '' $host;
  default $http_host;
}
upstream herdgate { server %s; keepalive 16; }
upstream workload { server %s; keepalive 16; }
`, herdgate, workload)
	base := `proxy_http_version 1.1;
    proxy_set_header "Host" "$gw_api_compliant_host";
    proxy_set_header "X-Forwarded-For" "$proxy_add_x_forwarded_for";
    proxy_set_header "X-Real-IP" "$remote_addr";
    proxy_set_header "X-Forwarded-Proto" "$scheme";
    proxy_set_header "X-Forwarded-Host" "$host";
    proxy_set_header "X-Forwarded-Port" "$server_port";
    proxy_set_header "Connection" "";`
	for _, r := range routes {
		if len(r.Spec.Rules) != 1 || len(r.Spec.Rules[0].Matches) != 1 {
			return "", fmt.Errorf("route %s: want one rule of one match", r.Metadata.Name)
		}
		rule := r.Spec.Rules[0]
		if len(rule.Filters) == 0 {
			fmt.Fprintf(&server, "  location %s {\n    %s\n    proxy_pass http://herdgate;\n  }\n", rule.Matches[0].Path.Value, base)
			continue
		}
		var auth, extra []string
		for _, f := range rule.Filters {
			switch {
			case f.ExternalAuth != nil && f.ExternalAuth.Protocol == "HTTP":
				internal := fmt.Sprintf("/_ngf-internal-extauth-%s-%s-routerule0", r.Metadata.Namespace, r.Metadata.Name)
				auth = append(auth, "auth_request "+internal+";")
				for _, h := range f.ExternalAuth.HTTP.AllowedResponseHeaders {
					auth = append(auth, fmt.Sprintf("auth_request_set $ext_auth_response_%[1]s $upstream_http_%[1]s;\n    proxy_set_header %[2]s $ext_auth_response_%[1]s;", nginxVar(h), h))
				}
				headers := []string{`"Host" "$gw_api_compliant_host"`, `"Path" "$request_uri"`, `"Method" "$request_method"`, `"Authorization" "$http_authorization"`}
				for _, h := range f.ExternalAuth.HTTP.AllowedHeaders {
					headers = append(headers, fmt.Sprintf(`"%s" "$http_%s"`, h, nginxVar(h)))
				}
				fmt.Fprintf(&server, "  location %s {\n    internal;\n    proxy_set_header %s;\n    proxy_pass http://herdgate%s;\n    proxy_pass_request_body off;\n    proxy_set_header Content-Length \"\";\n    proxy_pass_request_headers off;\n  }\n",
					internal, strings.Join(headers, ";\n    proxy_set_header "), f.ExternalAuth.HTTP.Path)
			case f.ExtensionRef != nil && f.ExtensionRef.Kind == "SnippetsFilter":
				sf, ok := snippets[f.ExtensionRef.Name]
				if !ok {
					return "", fmt.Errorf("route %s names SnippetsFilter %s, which is not among the objects", r.Metadata.Name, f.ExtensionRef.Name)
				}
				for _, s := range sf.Spec.Snippets {
					switch s.Context {
					case "http.server.location":
						extra = append(extra, s.Value)
					case "http.server":
						server.WriteString("  " + s.Value + "\n")
					default:
						return "", fmt.Errorf("snippet context %s", s.Context)
					}
				}
			default:
				return "", fmt.Errorf("route %s: filter %s is not one the renderer knows", r.Metadata.Name, f.Type)
			}
		}
		if len(auth) == 0 {
			return "", fmt.Errorf("route %s has no ExternalAuth of protocol HTTP", r.Metadata.Name)
		}
		// NGF includes a location's snippets before its auth_request.
		fmt.Fprintf(&server, "  location %s {\n    %s\n    %s\n    %s\n    proxy_pass http://workload;\n  }\n",
			rule.Matches[0].Path.Value, strings.Join(extra, "\n    "), strings.Join(auth, "\n    "), base)
	}
	if !slices.ContainsFunc(routes, func(r fabricObject) bool { return len(r.Spec.Rules) == 1 && len(r.Spec.Rules[0].Filters) == 0 }) {
		return "", fmt.Errorf("no route to herdgate's own paths")
	}
	fmt.Fprintf(&b, "server {\n  listen %s;\n%s}\n", listen, server.String())
	return b.String(), nil
}

// TestNGINXGatewayFabricSendsABrowserToTheWaitingPage: through the objects herd gateway-config
// writes for NGINX Gateway Fabric, rendered as it renders them, a browser without a pass is sent
// to the waiting page by the SnippetsFilter, an API client gets nginx's 403, herdgate's paths are
// herdgate's, and a visitor with a pass reaches the workload.
func TestNGINXGatewayFabricSendsABrowserToTheWaitingPage(t *testing.T) {
	h, gateway := throughGateway(t, nginxGatewayFabric, func(*herdgatev1alpha1.WaitingQueue) {})
	if loc := withoutAPass(t, gateway, "", http.StatusSeeOther); strings.TrimPrefix(loc, gateway) != "/.herdgate/?return=%2Fcheckout%2Fcart" {
		t.Errorf("a browser was sent to %q, want the waiting page with the way back", loc)
	}
	cfg := h.room.Config()
	req, _ := http.NewRequest(http.MethodPost, gateway+"/api/v1/orders", nil)
	req.Header.Set("X-Herdgate-Pass", cfg.Passes.Issue("someone", time.Now(), time.Now().Add(time.Minute)))
	res, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || len(h.upstream.all()) != 1 {
		t.Errorf("an order with a pass: %d, the workload got %d requests; want it through", res.StatusCode, len(h.upstream.all()))
	}
}
