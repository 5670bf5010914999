package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdgate/herdgate/test/testenv"
)

const validQueue = `
waitingQueue:
  metadata: {namespace: shop, name: orders}
  spec:
    capacity: {poolSize: 40, requestLatency: 200ms}
    upstream: {url: "http://127.0.0.1:1"}
    protectedRoutes:
      - {methods: [POST], path: /api/v1/orders}
`

// jwtPasses makes validQueue a Gateway room whose passes are ES256 JWTs.
const jwtPasses = "    enforcement: Gateway\n    pass: {format: JWT, algorithm: ES256}\n"

// passKeysLine is the passKeys line --generate-pass-keys prints for algorithm.
func passKeysLine(t *testing.T, algorithm string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--generate-pass-keys=" + algorithm}, &stdout, &stderr); code != 0 {
		t.Fatalf("--generate-pass-keys=%s: exit code %d: %s", algorithm, code, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "passKeys: '{") || stderr.Len() != 0 {
		t.Fatalf("--generate-pass-keys=%s printed %q and %q", algorithm, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "proxy.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func key() string {
	return base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
}

func TestBadFlagsAndConfigExitTwoAndNameTheField(t *testing.T) {
	good := fmt.Sprintf("redisURL: redis://127.0.0.1:6379\nhmacKey: %s\n%s", key(), validQueue)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"neither mode", nil, "exactly one of --waitingqueue, --proxy-set or --config"},
		{"both modes", []string{"--waitingqueue=a/b", "--config=x.yaml"}, "exactly one of --waitingqueue, --proxy-set or --config"},
		{"a set and a queue", []string{"--waitingqueue=a/b", "--proxy-set=a/pool", "--secret-dir=/s"}, "exactly one of --waitingqueue, --proxy-set or --config"},
		{"a set without its Secret", []string{"--proxy-set=shop/pool"}, "flag --secret-dir is required with --proxy-set"},
		{"bad set name", []string{"--proxy-set=pool", "--secret-dir=/s"}, `flag --proxy-set: "pool" is not namespace/name`},
		{"unknown flag", []string{"--config=x", "--listne=:1"}, "listne"},
		{"bad queue name", []string{"--waitingqueue=orders", "--redis-url=redis://r:1"}, `flag --waitingqueue: "orders" is not namespace/name`},
		{"no redis for a watched queue", []string{"--waitingqueue=shop/orders", "--redis-url="}, "flag --redis-url"},
		{"bad redis URL", []string{"--waitingqueue=shop/orders", "--redis-url=http://r:1"}, "flag --redis-url: redis URL http://r:1 has scheme"},
		{"Sentinel URL with a Sentinel on no port", []string{"--waitingqueue=shop/orders", "--redis-url=redis+sentinel://s1:26379,s2/mymaster"}, `flag --redis-url: redis URL redis+sentinel://s1:26379,s2/mymaster: Sentinel "s2" is not host:port`},
		{"negative drain", []string{"--config=x", "--drain-delay=-1s"}, "flag --drain-delay"},
		{"bad ext_authz address", []string{"--config=" + writeConfig(t, good), "--listen=127.0.0.1:0", "--metrics-listen=", "--ext-authz-listen=nowhere:x"}, "flag --ext-authz-listen"},
		{"missing file", []string{"--config=/nonexistent/proxy.yaml"}, "flag --config: open /nonexistent/proxy.yaml"},
		{"unknown field", []string{"--config=" + writeConfig(t, good+"    colour: blue\n")}, `unknown field "colour"`},
		{"no redis URL", []string{"--config=" + writeConfig(t, fmt.Sprintf("hmacKey: %s\n%s", key(), validQueue))}, "redisURL: required"},
		{"short key", []string{"--config=" + writeConfig(t, "redisURL: redis://r:1\nhmacKey: c2hvcnQ=\n"+validQueue)}, "hmacKey: 5 bytes, at least 32 required"},
		{"bad upstream", []string{"--config=" + writeConfig(t, strings.Replace(good, "http://127.0.0.1:1", "ftp://x", 1))}, "waitingQueue.spec.upstream.url"},
		{"unnormalised route", []string{"--config=" + writeConfig(t, strings.Replace(good, "/api/v1/orders", "/api/v1/../orders", 1))}, "waitingQueue.spec.protectedRoutes[0]"},
		{"bad redis URL in the file", []string{"--config=" + writeConfig(t, strings.Replace(good, "redis://127.0.0.1:6379", "redis://x:1?nope=1", 1))}, "redisURL: redis URL redis://x:1?nope=1: redis: unexpected option: nope"},
		{"an opening Go cannot read", []string{"--config=" + writeConfig(t, good+"    schedule: {opensAt: \"2027-03-01T10:00:00+25:00\"}\n")},
			"waitingQueue.spec.schedule.opensAt"},
		{"a tick that is no duration", []string{"--config=" + writeConfig(t, good+"    tick: soon\n")}, "waitingQueue.spec.tick"},
		{"everyone trusted", []string{"--config=" + writeConfig(t, good+"    entry: {trustedProxies: [0.0.0.0/0]}\n")},
			"waitingQueue.spec.entry.trustedProxies[0]: Invalid value: \"0.0.0.0/0\": must be a network of at most a /8"},
		{"bad listen address", []string{"--config=" + writeConfig(t, good), "--listen=256.0.0.1:1"}, "flag --listen"},
		{"JWT passes without keys", []string{"--config=" + writeConfig(t, good+jwtPasses)},
			"passKeys: required for JWT passes (spec.pass.format); herdgate-proxy --generate-pass-keys=ES256 prints the line"},
		{"JWT keys of the wrong algorithm", []string{"--config=" + writeConfig(t, good+jwtPasses+passKeysLine(t, "HS256"))},
			"passKeys: the signing key is HS256, and spec.pass.algorithm is ES256"},
		{"unreadable JWT keys", []string{"--config=" + writeConfig(t, good+jwtPasses+"passKeys: '{\"keys\": 3}'\n")}, "passKeys: pass keys: json"},
		{"keys for HMAC passes", []string{"--config=" + writeConfig(t, good+passKeysLine(t, "ES256"))}, "passKeys: set, but the queue's passes are not JWT"},
		{"keys of no algorithm", []string{"--generate-pass-keys=RS256"}, `flag --generate-pass-keys: "RS256" is neither ES256 nor HS256`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(context.Background(), tc.args, io.Discard, &stderr); code != 2 {
				t.Fatalf("exit code %d, want 2; stderr:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("stderr does not say %q:\n%s", tc.want, stderr.String())
			}
		})
	}
}

func TestServesFromAConfigFileAndDrains(t *testing.T) {
	r := testenv.StartRedis(t)
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, fmt.Sprintf("redisURL: %s\nhmacKey: %s\n%s", r.URL(), key(), validQueue))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--config=" + path, fmt.Sprintf("--listen=127.0.0.1:%d", port), "--metrics-listen=", "--drain-delay=0s"}, io.Discard, &stderr)
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	var res *http.Response
	for range 100 {
		if res, err = http.Post(base+"/.herdgate/enter", "", nil); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the proxy never answered: %v\n%s", err, stderr.String())
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("enter: %d", res.StatusCode)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit code %d after SIGTERM-like cancel:\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the proxy did not stop")
	}
}

// TestServesAJWTGatewayRoomFromAFile: a Gateway room with JWT passes, as the API accepts it, is
// served from a file with the keys --generate-pass-keys printed: it publishes their public half for
// the gateways, and forwards nothing.
func TestServesAJWTGatewayRoomFromAFile(t *testing.T) {
	r := testenv.StartRedis(t)
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, fmt.Sprintf("redisURL: %s\nhmacKey: %s\n%s%s%s", r.URL(), key(), validQueue, jwtPasses, passKeysLine(t, "ES256")))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--config=" + path, fmt.Sprintf("--listen=127.0.0.1:%d", port), "--metrics-listen=", "--drain-delay=0s"}, io.Discard, &stderr)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit code %d:\n%s", code, stderr.String())
		}
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	var res *http.Response
	for range 100 {
		if res, err = http.Get(base + "/.herdgate/jwks.json"); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the proxy never answered: %v\n%s", err, stderr.String())
	}
	var jwks struct {
		Keys []struct {
			Kty, Crv, Alg string
		} `json:"keys"`
	}
	err = json.NewDecoder(res.Body).Decode(&jwks)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK || len(jwks.Keys) != 1 || jwks.Keys[0].Crv != "P-256" {
		t.Fatalf("jwks.json: %d %+v %v", res.StatusCode, jwks, err)
	}
	res, err = http.Post(base+"/api/v1/orders", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a protected request to a Gateway room: %d, want 421", res.StatusCode)
	}
}

// TestNoOutputRepeatsTheRedisPassword: whatever is wrong with the Redis URL (the flag's, or the
// config file's), the proxy says so without its password: a malformed URL at start, and a URL it
// cannot use (nothing listening, a wrong password) in the log while it serves and retries.
func TestNoOutputRepeatsTheRedisPassword(t *testing.T) {
	r := testenv.StartRedis(t)
	closed, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	config := func(u string) string {
		raw, _ := json.Marshal(u) // a YAML string, whatever the URL holds
		return writeConfig(t, fmt.Sprintf("redisURL: %s\nhmacKey: %s\n%s", raw, key(), validQueue))
	}
	for _, u := range testenv.MalformedRedisURLs() {
		for _, args := range [][]string{{"--waitingqueue=shop/orders", "--redis-url=" + u}, {"--config=" + config(u)}} {
			var stderr bytes.Buffer
			if code := run(context.Background(), args, io.Discard, &stderr); code != 2 {
				t.Errorf("%s: exit code %d, want 2; stderr:\n%s", u, code, stderr.String())
			}
			if strings.Contains(stderr.String(), testenv.KnownPassword) {
				t.Errorf("%s: stderr repeats the password:\n%s", u, stderr.String())
			}
		}
	}
	for _, u := range testenv.UnusableRedisURLs(closed, strings.TrimPrefix(r.URL(), "redis://")) {
		port, err := testenv.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int, 1)
		var stderr, stdout testenv.LockedBuffer
		go func() {
			done <- run(ctx, []string{"--config=" + config(u), fmt.Sprintf("--listen=127.0.0.1:%d", port), "--metrics-listen=", "--drain-delay=0s", "--zap-log-level=debug"}, &stdout, &stderr)
		}()
		// A visitor enters (Redis is asked, and fails), then the proxy stops.
		entered := false
		for range 100 {
			if res, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/.herdgate/enter", port), "", nil); err == nil {
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if strings.Contains(string(body), testenv.KnownPassword) {
					t.Errorf("%s: enter answered with the password: %s", u, body)
				}
				entered = true
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(time.Second) // the background loops meet Redis too
		cancel()
		<-done
		if !entered {
			t.Errorf("%s: the proxy never answered:\n%s", u, stderr.String())
		}
		if !strings.Contains(strings.ToLower(stderr.String()), "redis") {
			t.Errorf("%s: the proxy logged nothing of Redis failing, so the sweep saw nothing:\n%s\n%s", u, stderr.String(), stdout.String())
		}
		if out := stdout.String() + stderr.String(); strings.Contains(out, testenv.KnownPassword) {
			t.Errorf("%s: the proxy's output repeats the password:\n%s", u, out)
		}
	}
}
