package gatewayconfig_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/gatewayconfig"
	"github.com/herdgate/herdgate/internal/pass"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
	"github.com/herdgate/herdgate/test/testenv/controlplane"
)

// The other projects' CRDs the generated objects are checked against, from their Go modules.
var crds = []struct{ module, version, path string }{
	{"sigs.k8s.io/gateway-api", "v1.6.3", "config/crd/experimental/gateway.networking.k8s.io_httproutes.yaml"},
	{"github.com/envoyproxy/gateway", "v1.9.1", "charts/gateway-helm/charts/crds/crds/generated/gateway.envoyproxy.io_securitypolicies.yaml"},
	{"github.com/envoyproxy/gateway", "v1.9.1", "charts/gateway-helm/charts/crds/crds/generated/gateway.envoyproxy.io_backendtrafficpolicies.yaml"},
	{"istio.io/api", "v1.32.0", "kubernetes/customresourcedefinitions.gen.yaml"},
	{"github.com/traefik/traefik/v3", "v3.6.12", "docs/content/reference/dynamic-configuration/traefik.io_middlewares.yaml"},
}

func referenceQueue() *herdgatev1alpha1.WaitingQueue {
	return builder.Queue("shop", "orders").Enforcement(herdgatev1alpha1.EnforcementGateway).
		JWTPasses(herdgatev1alpha1.PassAlgorithmES256, 0).Obj()
}

func decode(t *testing.T, stream []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("%v in\n%s", err, stream)
		}
		objs = append(objs, obj)
	}
}

// TestGeneratedObjectsApply: what `herd gateway-config` prints for the reference queue passes a
// server-side dry run against Gateway API's experimental CRDs, Envoy Gateway's and Istio's, and
// Traefik's, each from its Go module; an object the CRDs refuse is refused, so the check can fail.
func TestGeneratedObjectsApply(t *testing.T) {
	var paths []string
	for _, c := range crds {
		p, err := testenv.ModuleFile(c.module, c.version, c.path)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	cp := controlplane.New(t, controlplane.Options{CRDDirectoryPaths: paths})
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ns := range []string{"shop", "infra"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, target := range []struct {
		opts  gatewayconfig.Options
		kinds []string
	}{
		{gatewayconfig.Options{Target: "gateway-api", Gateway: "eg", Hostnames: []string{"shop.example"}}, []string{"HTTPRoute", "HTTPRoute"}},
		{gatewayconfig.Options{Target: "nginx-gateway-fabric", Gateway: "eg"}, []string{"HTTPRoute", "HTTPRoute", "SnippetsFilter"}},
		{gatewayconfig.Options{Target: "envoy-gateway", Gateway: "infra/eg"}, []string{"HTTPRoute", "HTTPRoute", "SecurityPolicy", "BackendTrafficPolicy"}},
		{gatewayconfig.Options{Target: "istio", Gateway: "eg"}, []string{"AuthorizationPolicy", "DestinationRule"}},
		{gatewayconfig.Options{Target: "istio", Gateway: "infra/eg"}, []string{"AuthorizationPolicy", "DestinationRule"}},
		{gatewayconfig.Options{Target: "istio", Selector: map[string]string{"app": "orders"}}, []string{"AuthorizationPolicy", "DestinationRule"}},
		{gatewayconfig.Options{Target: "traefik"}, []string{"Middleware", "Middleware", "Middleware", "Middleware", "Middleware"}},
	} {
		out, err := gatewayconfig.Render(referenceQueue(), target.opts)
		if err != nil {
			t.Fatalf("%s: %v", target.opts.Target, err)
		}
		objs := decode(t, out)
		if target.opts.Target == "istio" && target.opts.Gateway == "infra/eg" && objs[0].GetNamespace() != "infra" {
			t.Errorf("istio --gateway infra/eg: the policy is in namespace %q, not the Gateway's", objs[0].GetNamespace())
		}
		var kinds []string
		for _, obj := range objs {
			kinds = append(kinds, obj.GetKind())
			if obj.GetKind() == "SnippetsFilter" {
				// NGINX Gateway Fabric's CRDs are not in a Go module the proxy serves: its
				// rendering test runs the filter in nginx instead (admission/gateway_fabric_test.go).
				continue
			}
			if err := c.Create(ctx, obj, client.DryRunAll); err != nil {
				t.Errorf("%s: the API server refuses %s %s: %v\n%s", target.opts.Target, obj.GetKind(), obj.GetName(), err, out)
			}
		}
		if strings.Join(kinds, ",") != strings.Join(target.kinds, ",") {
			t.Errorf("%s: wrote %v, want %v", target.opts.Target, kinds, target.kinds)
		}
	}

	// The dry run checks the CRDs' schemas: an ExternalAuth filter of an unknown protocol is refused.
	out, _ := gatewayconfig.Render(referenceQueue(), gatewayconfig.Options{Target: "gateway-api", Gateway: "eg"})
	bad := decode(t, bytes.Replace(out, []byte("protocol: GRPC"), []byte("protocol: SOAP"), 1))[1]
	if err := c.Create(ctx, bad, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "protocol") {
		t.Errorf("an ExternalAuth of protocol SOAP: %v", err)
	}
}

// TestGatewayConfigRefusesWhatCannotWork names what is missing.
func TestGatewayConfigRefusesWhatCannotWork(t *testing.T) {
	proxied := builder.Queue("shop", "orders").Obj()
	byURL := builder.From(referenceQueue()).UpstreamURL("http://orders.example:8080").Obj()
	hmac := builder.Queue("shop", "orders").Enforcement(herdgatev1alpha1.EnforcementGateway).Obj()
	for _, c := range []struct {
		wq   *herdgatev1alpha1.WaitingQueue
		opts gatewayconfig.Options
		want string
	}{
		{proxied, gatewayconfig.Options{Target: "traefik"}, "spec.enforcement Proxy"},
		{referenceQueue(), gatewayconfig.Options{Target: "kong"}, `unknown target "kong"`},
		{referenceQueue(), gatewayconfig.Options{Target: "gateway-api"}, "--gateway"},
		{byURL, gatewayconfig.Options{Target: "envoy-gateway", Gateway: "eg"}, "spec.upstream.url"},
		{referenceQueue(), gatewayconfig.Options{Target: "istio"}, "--selector"},
		{hmac, gatewayconfig.Options{Target: "haproxy"}, "spec.pass.format JWT"},
	} {
		if _, err := gatewayconfig.Render(c.wq, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.opts.Target, err, c.want)
		}
	}
}

// TestHAProxyConfigOfEveryRouteKind: HAProxy accepts the configuration of a queue with every kind of
// route (an exact-case path, a prefix, the whole site, methods other than POST), and the whole site
// takes the root path too.
func TestHAProxyConfigOfEveryRouteKind(t *testing.T) {
	wq := builder.From(referenceQueue()).Routes(
		herdgatev1alpha1.ProtectedRoute{Methods: []herdgatev1alpha1.HTTPMethod{"PUT", "DELETE"}, Path: ptr.To(herdgatev1alpha1.RoutePath("/Cart/Items")), ExactCase: true},
		builder.Route("/checkout", true, "GET"),
		builder.Route("/", true, "POST"),
	).Obj()
	keysDir := t.TempDir()
	keys := &pass.KeySet{}
	if _, err := keys.Rotate(time.Now(), pass.Rotation{Algorithm: pass.ES256, Every: time.Hour, Keep: time.Hour}); err != nil {
		t.Fatal(err)
	}
	pems, err := keys.PublicPEMs(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for slot, pem := range pems {
		if err := os.WriteFile(filepath.Join(keysDir, slot+".pem"), pem, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	out, err := gatewayconfig.Render(wq, gatewayconfig.Options{Target: "haproxy", Listen: fmt.Sprintf("127.0.0.1:%d", port),
		HerdgateAddress: "127.0.0.1:1", WorkloadAddress: "127.0.0.1:1", KeysDir: keysDir})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"acl route0_method var(txn.method) -m str PUT DELETE\n", "acl route0_method var(txn.method_param) -m str PUT DELETE\n",
		"acl route0_method var(txn.any_method) -m bool\n", "acl route0_path var(txn.path) -m str /Cart/Items\n",
		"acl route1_method var(txn.method_override) -m str GET HEAD\n", "acl route1_path var(txn.path) -i -m beg /checkout/\n",
		"acl route2_path always_true\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the configuration lacks %q:\n%s", want, out)
		}
	}
	hp, err := testenv.StartHAProxy(t.TempDir(), string(out))
	if err != nil {
		t.Fatal(err)
	}
	hp.Stop()
}

// TestEveryGatewayGetsItsSecondLine: each target but the portable Gateway API's writes its gateway's
// own cap on the requests in flight to the workload, the pool shared out among --gateway-replicas
// instances (40 among 3: 13 each); nginx paces at the cap's worth per request latency.
func TestEveryGatewayGetsItsSecondLine(t *testing.T) {
	wq := builder.From(referenceQueue()).Obj()
	for target, want := range map[string][]string{
		"nginx":         {"max_conns=13;", "rate=65r/s;", "burst=13;"},
		"caddy":         {"max_conns_per_host 13\n"},
		"traefik":       {"amount: 13\n", "requestHeaderName: X-Herdgate-Pool\n", "X-Herdgate-Pool: \"\"\n", "query: /.herdgate/busy\n"},
		"traefik-file":  {"amount: 13\n", "requestHeaderName: X-Herdgate-Pool\n", "X-Herdgate-Pool: \"\"\n", "query: /.herdgate/busy\n"},
		"haproxy":       {"maxconn 13\n", "queue(workload) ge 13 }", "set-uri /.herdgate/busy\n", "hdr Retry-After 1\n"},
		"envoy-gateway": {"maxParallelRequests: 13\n", "maxPendingRequests: 13\n", "name: Retry-After\n"},
		"istio":         {"http2MaxRequests: 13\n", "http1MaxPendingRequests: 13\n", "host: orders.shop.svc.cluster.local\n"},
	} {
		out, err := gatewayconfig.Render(wq, gatewayconfig.Options{Target: target, Gateway: "eg", GatewayReplicas: 3})
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s lacks %q:\n%s", target, w, out)
			}
		}
	}
	// A slow workload: 4 slots held 2 s each is 2 requests a second, written per minute.
	slow := builder.From(referenceQueue()).Capacity(4, 2*time.Second, 70).Obj()
	if out, err := gatewayconfig.Render(slow, gatewayconfig.Options{Target: "nginx"}); err != nil || !strings.Contains(string(out), "rate=120r/m;") {
		t.Errorf("nginx for 4 slots of 2 s: %v\n%s", err, out)
	}
	for replicas, want := range map[int]string{0: "at least one instance", 41: "--gateway-replicas 41 exceeds spec.capacity.poolSize 40"} {
		if _, err := gatewayconfig.WorkloadCap(wq, replicas); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%d replicas: %v, want an error naming %q", replicas, err, want)
		}
	}
	if n, err := gatewayconfig.WorkloadCap(wq, 40); err != nil || n != 1 {
		t.Errorf("40 replicas of a pool of 40: %d, %v; want 1 each", n, err)
	}
}
