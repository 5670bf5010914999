package testenv

import (
	"os/exec"
	"strings"
	"testing"
)

func TestKubeVersionIsGoModsClientVersion(t *testing.T) {
	got, err := KubeVersion()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "k8s.io/api").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "1." + strings.TrimPrefix(strings.TrimSpace(string(out)), "v0."); got != want {
		t.Fatalf("KubeVersion() = %s, want %s (from go.mod's k8s.io/api)", got, want)
	}
}
