package gatewayconfig_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herdgate/herdgate/internal/gatewayconfig"
	"github.com/herdgate/herdgate/test/builder"
)

// caddyProxy is what this test reads of a reverse_proxy handler in Caddy's own JSON: where it goes,
// the URI it asks (forward_auth's check), and its transport's connections.
type caddyProxy struct {
	Handler   string
	Upstreams []struct{ Dial string }
	Rewrite   *struct{ URI string }
	Transport *struct {
		MaxConnsPerHost int `json:"max_conns_per_host"`
		KeepAlive       *struct {
			Enabled *bool
		} `json:"keep_alive"`
	}
}

// TestCaddyAsksEachCheckOnAConnectionOfItsOwn: the Caddy site, as Caddy itself reads it (`caddy
// adapt`), asks herdgate's check on a transport that keeps no connection, and reaches the workload
// on pooled connections within the cap. Caddy releases before 2.11.5 can send a pooled check
// connection's checks to the workload (docs/guides/gateways.md, "Caddy: a check a connection");
// for a release named 2.11.5 or later (--caddy-version), the checks are pooled too.
func TestCaddyAsksEachCheckOnAConnectionOfItsOwn(t *testing.T) {
	if _, err := exec.LookPath("caddy"); err != nil {
		t.Fatalf("caddy not found; run 'make toolchain' (Debian package caddy): %v", err)
	}
	for release, ownConnection := range map[string]bool{"": true, "2.6.2": true, "v2.11.4": true, "2.11.5-beta.1": true,
		"2.11.5": false, "v2.11.9 h1:bhZtcRKQOq0fuLvEgCdPYvUxXyGn9kzjG4lh2332DTE=": false, "3.0.0": false} {
		t.Run(release, func(t *testing.T) { testCaddyChecks(t, release, ownConnection) })
	}
	for _, bad := range []string{"2.11", "latest", " ", "2.11.x"} {
		_, err := gatewayconfig.Render(builder.From(referenceQueue()).Obj(), gatewayconfig.Options{Target: "caddy", CaddyVersion: bad})
		if err == nil || !strings.Contains(err.Error(), "--caddy-version") {
			t.Errorf("--caddy-version %q: %v; want an error naming the flag", bad, err)
		}
	}
}

func testCaddyChecks(t *testing.T, release string, ownConnection bool) {
	out, err := gatewayconfig.Render(builder.From(referenceQueue()).Obj(), gatewayconfig.Options{Target: "caddy",
		Listen: "127.0.0.1:8080", HerdgateAddress: "herdgate.test:80", WorkloadAddress: "workload.test:8080", CaddyVersion: release})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	adapted, err := exec.Command("caddy", "adapt", "--config", path, "--adapter", "caddyfile").Output()
	if err != nil {
		t.Fatalf("caddy adapt: %v\n%s", err, out)
	}
	var proxies []caddyProxy
	collectCaddyProxies(t, adapted, &proxies)
	var check, workload *caddyProxy
	for i, p := range proxies {
		switch {
		case p.Rewrite != nil && p.Rewrite.URI == "/.herdgate/check":
			check = &proxies[i]
		case len(p.Upstreams) == 1 && p.Upstreams[0].Dial == "workload.test:8080":
			workload = &proxies[i]
		}
	}
	if check == nil || workload == nil {
		t.Fatalf("no forward_auth check or no workload proxy in Caddy's reading of the site:\n%s", adapted)
	}
	keeps := check.Transport == nil || check.Transport.KeepAlive == nil || check.Transport.KeepAlive.Enabled == nil || *check.Transport.KeepAlive.Enabled
	switch {
	case ownConnection && keeps:
		t.Errorf("the check's transport keeps its connections; each check should dial its own:\n%s", adapted)
	case !ownConnection && !keeps:
		t.Errorf("the check's transport keeps no connection, though this Caddy could pool them:\n%s", adapted)
	case !ownConnection && strings.Contains(string(out), "a check a connection"):
		t.Errorf("the site still says why its checks would not be pooled:\n%s", out)
	}
	if workload.Transport == nil || workload.Transport.MaxConnsPerHost != 40 || workload.Transport.KeepAlive != nil {
		t.Errorf("the workload's transport: want pooled connections, at most the pool (40) of them:\n%s", adapted)
	}
}

// collectCaddyProxies gathers every reverse_proxy handler, however deep in routes and subroutes.
func collectCaddyProxies(t *testing.T, raw json.RawMessage, into *[]caddyProxy) {
	t.Helper()
	var anything any
	if err := json.Unmarshal(raw, &anything); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["handler"] == "reverse_proxy" {
				b, _ := json.Marshal(v)
				var p caddyProxy
				if err := json.Unmarshal(b, &p); err != nil {
					t.Fatal(err)
				}
				*into = append(*into, p)
			}
			for _, child := range v {
				walk(child)
			}
		case []any:
			for _, child := range v {
				walk(child)
			}
		}
	}
	walk(anything)
}
