package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herdgate/herdgate/test/testenv"
)

func TestBadFlagsExitTwoAndNameTheFlag(t *testing.T) {
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--proxy-image=x", "--redis-uri=redis://r:6379"}, "redis-uri"},
		{"no proxy image", []string{"--redis-url=redis://r:6379"}, "--proxy-image is required"},
		{"bad redis URL", []string{"--proxy-image=x", "--redis-url=http://r:6379"}, `flag --redis-url: redis URL http://r:6379 has scheme "http"`},
		{"Sentinel URL without a master", []string{"--proxy-image=x", "--redis-url=redis+sentinel://s1:26379,s2:26379"}, "flag --redis-url: redis URL redis+sentinel://s1:26379,s2:26379 names no master"},
		{"missing CA file", []string{"--proxy-image=x", "--redis-ca-file=/nonexistent/ca.pem"}, "flag --redis-ca-file"},
		{"CA file without a certificate", []string{"--proxy-image=x", "--redis-ca-file=" + notPEM}, "holds no PEM certificate"},
		{"bad boolean", []string{"--proxy-image=x", "--leader-elect=maybe"}, "leader-elect"},
		{"bad namespace", []string{"--proxy-image=x", "--namespaces=shop,Tickets"}, `flag --namespaces: "Tickets" is not a namespace name`},
		{"empty namespace in the list", []string{"--proxy-image=x", "--namespaces=shop,,tickets"}, `flag --namespaces: "" is not a namespace name`},
		{"no API rate", []string{"--proxy-image=x", "--kube-api-qps=0"}, "flag --kube-api-qps: 0 is not a positive rate"},
		{"an API rate that is no number", []string{"--proxy-image=x", "--kube-api-qps=fast"}, "kube-api-qps"},
		{"no API burst", []string{"--proxy-image=x", "--kube-api-burst=-1"}, "flag --kube-api-burst: -1 is not a positive number of requests"},
		{"no workers", []string{"--proxy-image=x", "--max-concurrent-reconciles=0"}, "flag --max-concurrent-reconciles: 0 is not a positive number of workers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tc.args, &stderr); code != 2 {
				t.Fatalf("exit code %d, want 2; stderr:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("stderr does not say %q:\n%s", tc.want, stderr.String())
			}
		})
	}
}

// TestFlagErrorsNeverRepeatTheRedisPassword: a malformed --redis-url is refused, naming the flag,
// without its password.
func TestFlagErrorsNeverRepeatTheRedisPassword(t *testing.T) {
	for _, u := range testenv.MalformedRedisURLs() {
		var stderr bytes.Buffer
		if code := run([]string{"--proxy-image=x", "--redis-url=" + u}, &stderr); code != 2 {
			t.Errorf("--redis-url=%s: exit code %d, want 2; stderr:\n%s", u, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "flag --redis-url") || strings.Contains(stderr.String(), testenv.KnownPassword) {
			t.Errorf("--redis-url=%s: stderr must name the flag and not the password:\n%s", u, stderr.String())
		}
	}
}
