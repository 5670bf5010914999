package gatewayconfig

import (
	"fmt"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// NGINX Gateway Fabric implements the Gateway API's ExternalAuth over HTTP only, with nginx's
// auth_request: it names the request in the Path and Method headers, sends no header of the
// visitor's but those the filter allows, and passes a deny on as nginx's own 401 or 403 page,
// without herdgate's Location or body. A SnippetsFilter (NGF's snippets must be enabled) gives
// the check's 401 its redirect to the waiting page, as the nginx configuration does.

// fabricCheckHeaders are the visitor's request headers the check reads to judge a protected
// request: its pass and cookies, what says it is a browser, and what may change the method the
// workload acts as (routes.go); the room's identity and bypass headers are added to them.
var fabricCheckHeaders = []string{"Cookie", "Accept", "Content-Type", "X-Herdgate-Pass", "X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"}

// fabric is the two HTTPRoutes, the workload's through the ExternalAuth filter over HTTP and the
// SnippetsFilter of the waiting page's redirect.
func fabric(wq *herdgatev1alpha1.WaitingQueue, opts Options) ([]map[string]any, error) {
	allowed := append([]string(nil), fabricCheckHeaders...)
	if id := wq.Spec.Identity; id != nil && id.Header != "" {
		allowed = append(allowed, id.Header)
	}
	for _, b := range wq.Spec.Bypass {
		if b.Header != nil {
			allowed = append(allowed, b.Header.Name)
		}
	}
	snippets := wq.Name + "-herdgate-page"
	objs, err := routes(wq, opts, map[string]any{
		"type": "ExternalAuth",
		"externalAuth": map[string]any{
			"protocol":   "HTTP",
			"backendRef": map[string]any{"name": wq.ServiceName(), "port": int64(80)},
			"http": map[string]any{
				"path":           "/.herdgate/check",
				"allowedHeaders": toAny(allowed),
				// The check's Cookie (the visitor's without herdgate's) and session handle replace
				// the visitor's; herdgate's other headers, which it never answers with, are emptied.
				"allowedResponseHeaders": toAny(append([]string{"Cookie"}, herdgateHeaders...)),
			},
		},
	}, map[string]any{
		"type":         "ExtensionRef",
		"extensionRef": map[string]any{"group": "gateway.nginx.org", "kind": "SnippetsFilter", "name": snippets},
	})
	if err != nil {
		return nil, err
	}
	id := nameOf(wq)
	page := map[string]any{
		"apiVersion": "gateway.nginx.org/v1alpha1", "kind": "SnippetsFilter", "metadata": meta(wq, snippets),
		"spec": map[string]any{"snippets": []any{
			map[string]any{"context": "http.server.location", "value": fmt.Sprintf(
				"auth_request_set $herdgate_location_%[1]s $upstream_http_location; error_page 401 = @herdgate_page_%[1]s;", id)},
			map[string]any{"context": "http.server", "value": fmt.Sprintf(
				"location @herdgate_page_%[1]s { absolute_redirect off; return 303 $herdgate_location_%[1]s; }", id)},
		}},
	}
	return append(objs, page), nil
}
