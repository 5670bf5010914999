package main

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/test/builder"
)

// TestGatewayConfigCommand: herd gateway-config reads a WaitingQueue from standard input and prints
// the target's objects; a flag it cannot use is named, and so is a queue a gateway cannot enforce.
func TestGatewayConfigCommand(t *testing.T) {
	wq := builder.Queue("", "orders").Enforcement(herdgatev1alpha1.EnforcementGateway).Obj()
	raw, err := yaml.Marshal(wq)
	if err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if code := gatewayConfigCmd([]string{"-f", "-", "-n", "shop", "--target", "istio", "--selector", "app=orders"}, bytes.NewReader(raw), &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	for _, want := range []string{"# - name: herdgate-shop-orders", "kind: AuthorizationPolicy", "namespace: shop", "app: orders", "action: CUSTOM"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--target", "traefik"}, 2, "flag -f"},
		{[]string{"-f", "-", "--target", "istio", "--selector", "orders"}, 2, "flag --selector"},
		{[]string{"-f", "-", "--target", "haproxy"}, 1, "spec.pass.format JWT"},
		{[]string{"-f", "-", "--target", "nginx", "--gateway-replicas", "0"}, 2, "flag --gateway-replicas"},
		{[]string{"-f", "-", "--target", "nginx", "--gateway-replicas", "41"}, 1, "--gateway-replicas 41 exceeds spec.capacity.poolSize 40"},
		{[]string{"-f", "-", "--target", "caddy", "--caddy-version", "latest"}, 1, `--caddy-version "latest": want a Caddy release such as 2.11.5`},
	} {
		errs.Reset()
		if code := gatewayConfigCmd(c.args, bytes.NewReader(raw), &out, &errs); code != c.code || !strings.Contains(errs.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want %d naming %q", c.args, code, errs.String(), c.code, c.want)
		}
	}
	errs.Reset()
	if code := gatewayConfigCmd([]string{"-f", "-", "--target", "traefik"}, strings.NewReader("kind: Deployment\n"), &out, &errs); code != 2 || !strings.Contains(errs.String(), "no WaitingQueue") {
		t.Errorf("a Deployment: exit %d, %q", code, errs.String())
	}
}
