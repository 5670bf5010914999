package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"text/template"

	"sigs.k8s.io/yaml"

	"github.com/herdgate/herdgate/internal/kubectl"
)

// TestTheKrewManifestNamesThePlugin renders krew.yaml as a release does and checks what krew reads.
func TestTheKrewManifestNamesThePlugin(t *testing.T) {
	raw, err := os.ReadFile("krew.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := template.New("krew").Funcs(template.FuncMap{
		"addURIAndSha": func(uri, tag string) string {
			return "uri: " + strings.ReplaceAll(uri, "{{ .TagName }}", tag) + "\n      sha256: \"" + strings.Repeat("0", 64) + "\""
		},
	}).Parse(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, map[string]string{"TagName": "v0.1.0"}); err != nil {
		t.Fatal(err)
	}
	var m struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Version   string `json:"version"`
			Platforms []struct {
				URI, Sha256, Bin string
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("the rendered manifest: %v\n%s", err, out.String())
	}
	if m.Kind != "Plugin" || m.Metadata.Name != "herdgate" || m.Spec.Version != "v0.1.0" || len(m.Spec.Platforms) == 0 {
		t.Fatalf("the rendered manifest reads %+v", m)
	}
	for _, p := range m.Spec.Platforms {
		if p.Bin != "kubectl-herdgate" || !strings.Contains(p.URI, "/v0.1.0/kubectl-herdgate_") || len(p.Sha256) != 64 {
			t.Errorf("platform %+v: want the kubectl-herdgate binary from the release's archive", p)
		}
	}
}

// TestHelpNamesEveryCommand: kubectl herdgate --help lists what it does.
func TestHelpNamesEveryCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := kubectl.Run(context.Background(), []string{"--help"}, &out, &errOut); code != 0 {
		t.Fatalf("--help: exit %d, %s", code, errOut.String())
	}
	for _, cmd := range []string{"status", "open", "queue", "close", "passthrough", "draw", "pass", "--kubeconfig", "--namespace", "--context"} {
		if !strings.Contains(out.String(), cmd) {
			t.Errorf("--help does not name %s:\n%s", cmd, out.String())
		}
	}
}
