package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/gatewayconfig"
)

// gatewayConfigCmd prints what a gateway needs to enforce a WaitingQueue: `kubectl get wq orders -o
// yaml | herd gateway-config --target envoy-gateway --gateway eg -f -`.
func gatewayConfigCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("herd gateway-config", flag.ContinueOnError)
	file := fs.String("f", "", "the WaitingQueue, as YAML or JSON; - reads standard input")
	namespace := fs.String("n", "default", "the WaitingQueue's namespace when its metadata names none")
	var opts gatewayconfig.Options
	fs.StringVar(&opts.Target, "target", "", "what to print for: "+strings.Join(gatewayconfig.Targets, ", "))
	fs.StringVar(&opts.Gateway, "gateway", "", "the Gateway the routes attach to, name or namespace/name (gateway-api, nginx-gateway-fabric, envoy-gateway; istio targets it)")
	hostnames := fs.String("hostnames", "", "comma-separated host names the routes answer for (gateway-api, envoy-gateway)")
	selector := fs.String("selector", "", "the workload's pod labels, key=value[,key=value] (istio without --gateway)")
	fs.StringVar(&opts.Listen, "listen", "", "haproxy, nginx, caddy: where the gateway listens; haproxy's bind line may add options, TLS included (\":443 ssl crt /etc/haproxy/site.pem\"; default :80)")
	fs.StringVar(&opts.HerdgateAddress, "herdgate-address", "", "haproxy, nginx, caddy, traefik-file: herdgate's Service address (default <name>-herdgate.<namespace>.svc:80)")
	fs.StringVar(&opts.WorkloadAddress, "workload-address", "", "haproxy, nginx, caddy, traefik-file: the workload's address (default its spec.upstream.service)")
	fs.IntVar(&opts.GatewayReplicas, "gateway-replicas", 1, "how many instances of the gateway share the workload's pool: each caps the requests in flight to the workload at its share")
	fs.StringVar(&opts.CaddyVersion, "caddy-version", "", "caddy: the Caddy release that serves the site; from 2.11.5 on, checks ride pooled connections (default: any release, each check on a connection of its own)")
	fs.StringVar(&opts.KeysDir, "keys-dir", "", "haproxy: where the ConfigMap <name>-herdgate-pass-keys is mounted (default /etc/haproxy/herdgate/<namespace>/<name>)")
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	if *file == "" {
		fmt.Fprintln(stderr, "flag -f: give the WaitingQueue's file, or - for standard input")
		return 2
	}
	if opts.GatewayReplicas < 1 {
		fmt.Fprintf(stderr, "flag --gateway-replicas: %d; the gateway runs at least one instance\n", opts.GatewayReplicas)
		return 2
	}
	if *hostnames != "" {
		opts.Hostnames = strings.Split(*hostnames, ",")
	}
	if *selector != "" {
		opts.Selector = map[string]string{}
		for _, kv := range strings.Split(*selector, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				fmt.Fprintf(stderr, "flag --selector: %q is not key=value\n", kv)
				return 2
			}
			opts.Selector[k] = v
		}
	}
	var raw []byte
	var err error
	if *file == "-" {
		raw, err = io.ReadAll(stdin)
	} else {
		raw, err = os.ReadFile(*file)
	}
	if err != nil {
		fmt.Fprintf(stderr, "flag -f: %v\n", err)
		return 2
	}
	wq := &herdgatev1alpha1.WaitingQueue{}
	if err := yaml.Unmarshal(raw, wq); err != nil || wq.Kind != "WaitingQueue" {
		fmt.Fprintf(stderr, "flag -f: %s holds no WaitingQueue: %v\n", *file, err)
		return 2
	}
	if wq.Namespace == "" {
		wq.Namespace = *namespace
	}
	out, err := gatewayconfig.Render(wq, opts)
	if err != nil {
		fmt.Fprintf(stderr, "herd gateway-config: %v\n", err)
		return 1
	}
	if opts.Target == "istio" {
		provider := strings.TrimSuffix(gatewayconfig.MeshConfigProvider(wq), "\n")
		fmt.Fprintf(stdout, "# Add to Istio's meshConfig.extensionProviders:\n# %s\n", strings.ReplaceAll(provider, "\n", "\n# "))
	}
	_, _ = stdout.Write(out)
	return 0
}
