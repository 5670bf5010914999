// Package gatewayconfig writes what a gateway needs to enforce a WaitingQueue (spec.enforcement
// Gateway): the Kubernetes objects of Gateway API, Envoy Gateway, Istio and Traefik, and HAProxy's
// configuration. `herd gateway-config` prints them; docs/guides/gateways.md says what each does.
package gatewayconfig

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// Targets are the gateways Render writes for.
var Targets = []string{"gateway-api", "nginx-gateway-fabric", "envoy-gateway", "istio", "traefik", "traefik-file", "nginx", "caddy", "haproxy"}

// Options say where the generated objects attach.
type Options struct {
	// Target is one of Targets.
	Target string
	// Gateway names the Gateway (namespace/name, or name in the queue's namespace) the HTTPRoutes
	// attach to (gateway-api, envoy-gateway) or the Istio AuthorizationPolicy targets.
	Gateway string
	// Hostnames, when set, limit the HTTPRoutes to these host names.
	Hostnames []string
	// Selector, for istio without a Gateway, selects the workload's pods (key=value).
	Selector map[string]string
	// HAProxy's addresses and paths; the defaults are the cluster's Service names and
	// /etc/haproxy/herdgate/<namespace>/<name> for the published keys.
	Listen, HerdgateAddress, WorkloadAddress, KeysDir string
	// GatewayReplicas is how many instances of the gateway share the workload's pool; each keeps
	// its share as its own cap (WorkloadCap). Unset means one.
	GatewayReplicas int
	// CaddyVersion is the Caddy release the caddy site is for: from caddyPooledChecksSince on, its
	// checks ride pooled connections. Unset means any release.
	CaddyVersion string
}

func (o Options) replicas() int {
	if o.GatewayReplicas == 0 {
		return 1
	}
	return o.GatewayReplicas
}

// herdgateHeaders are the request headers of herdgate's own a gateway must never pass upstream.
var herdgateHeaders = []string{"Herdgate-Session", "X-Herdgate-Pass", "Herdgate-Place", "X-Herdgate-Proof", "X-Herdgate-Invitation", "X-Herdgate-Challenge-Response"}

// Render writes the objects (a YAML stream) or the configuration for the target.
func Render(wq *herdgatev1alpha1.WaitingQueue, opts Options) ([]byte, error) {
	if wq.Name == "" || wq.Namespace == "" {
		return nil, errors.New("the WaitingQueue needs metadata.name and metadata.namespace")
	}
	if wq.Spec.EffectiveEnforcement() != herdgatev1alpha1.EnforcementGateway {
		return nil, fmt.Errorf("WaitingQueue %s/%s has spec.enforcement %s: set it to Gateway before a gateway enforces it",
			wq.Namespace, wq.Name, wq.Spec.EffectiveEnforcement())
	}
	var objs []map[string]any
	var err error
	switch opts.Target {
	case "nginx":
		return nginx(wq, opts)
	case "caddy":
		return caddy(wq, opts)
	case "traefik-file":
		return traefikFile(wq, opts)
	case "gateway-api":
		objs, err = gatewayAPI(wq, opts)
	case "nginx-gateway-fabric":
		objs, err = fabric(wq, opts)
	case "envoy-gateway":
		objs, err = envoyGateway(wq, opts)
	case "istio":
		objs, err = istio(wq, opts)
	case "traefik":
		objs, err = traefik(wq, opts)
	case "haproxy":
		return haproxy(wq, opts)
	default:
		return nil, fmt.Errorf("unknown target %q: one of %s", opts.Target, strings.Join(Targets, ", "))
	}
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for i, obj := range objs {
		if i > 0 {
			out.WriteString("---\n")
		}
		raw, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		out.Write(raw)
	}
	return out.Bytes(), nil
}

// site is what a configuration that names hosts needs: where the gateway listens, where herdgate
// and the workload are (the options', else the cluster's Service names), and the cap it keeps on
// the workload.
type site struct {
	listen, herdgate, workload string
	limit                      int64
}

func siteOf(wq *herdgatev1alpha1.WaitingQueue, opts Options, listen string) (site, error) {
	limit, err := WorkloadCap(wq, opts.replicas())
	if err != nil {
		return site{}, err
	}
	s := site{listen: listen, herdgate: opts.HerdgateAddress, workload: opts.WorkloadAddress, limit: limit}
	if opts.Listen != "" {
		s.listen = opts.Listen
	}
	if s.herdgate == "" {
		s.herdgate = fmt.Sprintf("%s.%s.svc:80", wq.ServiceName(), wq.Namespace)
	}
	if s.workload == "" {
		svc := wq.Spec.Upstream.Service
		if svc == nil {
			return site{}, fmt.Errorf("spec.upstream.url: give the workload's address (--workload-address)")
		}
		s.workload = fmt.Sprintf("%s.%s.svc:%d", svc.Name, wq.Namespace, svc.Port)
	}
	return s, nil
}

func meta(wq *herdgatev1alpha1.WaitingQueue, name string) map[string]any {
	return map[string]any{"name": name, "namespace": wq.Namespace, "labels": map[string]any{
		"app.kubernetes.io/managed-by": "herd-gateway-config", "herdgate.io/waitingqueue": wq.Name,
	}}
}

// gatewayRef splits "namespace/name" or "name".
func gatewayRef(opts Options) (map[string]any, error) {
	if opts.Gateway == "" {
		return nil, fmt.Errorf("target %s needs the Gateway the routes attach to (--gateway)", opts.Target)
	}
	ref := map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": opts.Gateway}
	if ns, name, ok := strings.Cut(opts.Gateway, "/"); ok {
		ref["namespace"], ref["name"] = ns, name
	}
	return ref, nil
}

// workloadBackend is the workload's Service as a backendRef: a route can only point at a Service.
func workloadBackend(wq *herdgatev1alpha1.WaitingQueue) (map[string]any, error) {
	svc := wq.Spec.Upstream.Service
	if svc == nil {
		return nil, errors.New("spec.upstream.url: a generated route points at the workload's Service; give spec.upstream.service")
	}
	return map[string]any{"name": svc.Name, "port": int64(svc.Port)}, nil
}

// routes are the HTTPRoutes both Gateway API targets use: herdgate's own paths to herdgate, and
// every other request to the workload, through filter when one is given. The check judges every
// path, so that no spelling of a protected path the gateway would route otherwise slips past it.
func routes(wq *herdgatev1alpha1.WaitingQueue, opts Options, filters ...map[string]any) ([]map[string]any, error) {
	parent, err := gatewayRef(opts)
	if err != nil {
		return nil, err
	}
	backend, err := workloadBackend(wq)
	if err != nil {
		return nil, err
	}
	spec := func(rule map[string]any) map[string]any {
		s := map[string]any{"parentRefs": []any{parent}, "rules": []any{rule}}
		if len(opts.Hostnames) > 0 {
			s["hostnames"] = toAny(opts.Hostnames)
		}
		return s
	}
	own := map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": meta(wq, wq.Name+"-herdgate"),
		"spec": spec(map[string]any{
			"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/.herdgate/"}}},
			"backendRefs": []any{map[string]any{"name": wq.ServiceName(), "port": int64(80)}},
		}),
	}
	rule := map[string]any{
		"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"}}},
		"backendRefs": []any{backend},
	}
	if len(filters) > 0 {
		var fs []any
		for _, f := range filters {
			fs = append(fs, f)
		}
		rule["filters"] = fs
	}
	workload := map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": meta(wq, wq.Name+"-herdgate-workload"),
		"spec": spec(rule),
	}
	return []map[string]any{own, workload}, nil
}

// gatewayAPI is the HTTPRoute ExternalAuth filter (GEP-1494, the experimental channel) over gRPC:
// the queue's herdgate Service answers Envoy's ext_authz for its own queue.
func gatewayAPI(wq *herdgatev1alpha1.WaitingQueue, opts Options) ([]map[string]any, error) {
	return routes(wq, opts, map[string]any{
		"type": "ExternalAuth",
		"externalAuth": map[string]any{
			"protocol":   "GRPC",
			"backendRef": map[string]any{"name": wq.ServiceName(), "port": int64(extAuthzPort)},
			"grpc":       map[string]any{},
		},
	})
}

// extAuthzPort is the herdgate Service's gRPC check port (controllers.ProxyExtAuthzPort).
const extAuthzPort = 9191

// envoyGateway is the two HTTPRoutes and a SecurityPolicy whose extAuth asks herdgate's gRPC check
// about every request of the workload's route.
func envoyGateway(wq *herdgatev1alpha1.WaitingQueue, opts Options) ([]map[string]any, error) {
	objs, err := routes(wq, opts)
	if err != nil {
		return nil, err
	}
	policy := map[string]any{
		"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "SecurityPolicy", "metadata": meta(wq, wq.Name+"-herdgate"),
		"spec": map[string]any{
			"targetRefs": []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": wq.Name + "-herdgate-workload"}},
			"extAuth": map[string]any{
				"grpc":     map[string]any{"backendRefs": []any{map[string]any{"name": wq.ServiceName(), "port": int64(extAuthzPort)}}},
				"failOpen": false,
			},
		},
	}
	limit, err := WorkloadCap(wq, opts.replicas())
	if err != nil {
		return nil, err
	}
	// The second line: Envoy's circuit breaker holds the requests in flight to the workload at the
	// cap, queues as many again, and answers the rest 503 (x-envoy-overloaded), which the override
	// shapes as herdgate's busy answer. Envoy Gateway applies it per Envoy replica.
	traffic := map[string]any{
		"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "BackendTrafficPolicy", "metadata": meta(wq, wq.Name+"-herdgate"),
		"spec": map[string]any{
			"targetRefs": []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": wq.Name + "-herdgate-workload"}},
			"circuitBreaker": map[string]any{
				"maxConnections": limit, "maxParallelRequests": limit, "maxPendingRequests": limit,
			},
			"responseOverride": []any{map[string]any{
				"match": map[string]any{
					"statusCodes":     []any{map[string]any{"type": "Value", "value": int64(503)}},
					"responseHeaders": []any{map[string]any{"name": "x-envoy-overloaded", "value": map[string]any{"type": "Exact", "value": "true"}}},
				},
				"response": map[string]any{
					"contentType": "application/json",
					"body":        map[string]any{"type": "Inline", "inline": busyBody + "\n"},
					"header":      map[string]any{"set": []any{map[string]any{"name": "Retry-After", "value": "1"}}},
				},
			}},
		},
	}
	return append(objs, policy, traffic), nil
}

// istio is an AuthorizationPolicy CUSTOM that sends every request but herdgate's own to the
// extension provider ProviderName, which the mesh config must declare (see the comment Render's
// caller prints, MeshConfigProvider).
func istio(wq *herdgatev1alpha1.WaitingQueue, opts Options) ([]map[string]any, error) {
	spec := map[string]any{
		"action":   "CUSTOM",
		"provider": map[string]any{"name": ProviderName(wq)},
		"rules":    []any{map[string]any{"to": []any{map[string]any{"operation": map[string]any{"notPaths": []any{"/.herdgate/*"}}}}}},
	}
	policy := meta(wq, wq.Name+"-herdgate")
	switch {
	case opts.Gateway != "":
		ref, err := gatewayRef(opts)
		if err != nil {
			return nil, err
		}
		// A policy targets a Gateway of its own namespace: it goes where the Gateway is.
		if ns, ok := ref["namespace"].(string); ok && ns != wq.Namespace {
			policy = meta(wq, wq.Namespace+"-"+wq.Name+"-herdgate")
			policy["namespace"] = ns
		}
		delete(ref, "namespace")
		spec["targetRefs"] = []any{ref}
	case len(opts.Selector) > 0:
		labels := map[string]any{}
		for k, v := range opts.Selector {
			labels[k] = v
		}
		spec["selector"] = map[string]any{"matchLabels": labels}
	default:
		return nil, errors.New("target istio needs the Gateway (--gateway) or the workload's pod labels (--selector key=value)")
	}
	limit, err := WorkloadCap(wq, opts.replicas())
	if err != nil {
		return nil, err
	}
	objs := []map[string]any{{
		"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy", "metadata": policy, "spec": spec,
	}}
	// The second line: each client proxy of the workload (the gateway's, and every sidecar) holds
	// its requests in flight to it at the cap and queues as many again; past them Envoy answers 503.
	if svc := wq.Spec.Upstream.Service; svc != nil {
		objs = append(objs, map[string]any{
			"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule", "metadata": meta(wq, wq.Name+"-herdgate"),
			"spec": map[string]any{
				"host": fmt.Sprintf("%s.%s.svc.cluster.local", svc.Name, wq.Namespace),
				"trafficPolicy": map[string]any{"connectionPool": map[string]any{
					"tcp":  map[string]any{"maxConnections": limit},
					"http": map[string]any{"http1MaxPendingRequests": limit, "http2MaxRequests": limit},
				}},
			},
		})
	}
	return objs, nil
}

// ProviderName is the mesh config's extension provider of the queue's check.
func ProviderName(wq *herdgatev1alpha1.WaitingQueue) string {
	return "herdgate-" + wq.Namespace + "-" + wq.Name
}

// MeshConfigProvider is the extension provider to add to Istio's meshConfig.extensionProviders.
func MeshConfigProvider(wq *herdgatev1alpha1.WaitingQueue) string {
	return fmt.Sprintf("- name: %s\n  envoyExtAuthzGrpc:\n    service: %s.%s.svc.cluster.local\n    port: %d\n",
		ProviderName(wq), wq.ServiceName(), wq.Namespace, extAuthzPort)
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
