package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// TraefikVersion is the Traefik hack/setup-traefik.sh builds from the Go module proxy. (Later v3
// releases cannot be built from it: a nested module of theirs is not in the module's zip.)
const TraefikVersion = "v3.6.12"

// TraefikBinary is the Traefik hack/setup-traefik.sh built into bin/, or an error that says how to
// build it.
func TraefikBinary() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, "bin", "traefik-"+TraefikVersion)
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("traefik %s not found in bin/; run 'make toolchain' (or hack/setup-traefik.sh) to build it", TraefikVersion)
	}
	return bin, nil
}

// Traefik is a Traefik serving a static and a dynamic configuration (file provider) a test gives it.
type Traefik struct{ *Process }

// StartTraefik runs Traefik with the static configuration static, whose file provider reads
// DYNAMIC_FILE (replaced by the path it writes dynamic to), its files in dir.
func StartTraefik(dir, static, dynamic string) (*Traefik, error) {
	bin, err := TraefikBinary()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	dynamicPath, staticPath := filepath.Join(dir, "dynamic.yml"), filepath.Join(dir, "traefik.yml")
	if err := os.WriteFile(dynamicPath, []byte(dynamic), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(staticPath, []byte(strings.ReplaceAll(static, "DYNAMIC_FILE", dynamicPath)), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--configFile="+staticPath)
	cmd.Dir = dir
	cmd.Stdout, _ = os.Create(filepath.Join(dir, "traefik.log"))
	cmd.Stderr = cmd.Stdout
	p, err := startProcess(cmd)
	if err != nil {
		return nil, err
	}
	return &Traefik{p}, nil
}
