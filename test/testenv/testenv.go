// Package testenv finds and starts the real servers that herdgate's tests run against: the
// control-plane binaries for envtest, and redis-server processes on free loopback ports.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// KubeVersion is the version of the control-plane binaries hack/setup-envtest.sh builds: the one of
// the client libraries in go.mod (k8s.io/api v0.X.Y is Kubernetes 1.X.Y), where the Makefile and the
// script take it from too.
func KubeVersion() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(mod), "\n") {
		if fields := strings.Fields(line); len(fields) >= 2 && fields[0] == "k8s.io/api" {
			if v, ok := strings.CutPrefix(fields[1], "v0."); ok {
				return "1." + v, nil
			}
			return "", fmt.Errorf("go.mod requires k8s.io/api %s, not v0.X.Y", fields[1])
		}
	}
	return "", errors.New("go.mod does not require k8s.io/api, whose version names the Kubernetes version")
}

// RepoRoot returns the root of the herdgate source tree (the folder holding go.mod).
func RepoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the testenv package source")
	}
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the testenv package")
		}
		dir = parent
	}
}

// EnvtestAssets returns the folder holding etcd, kube-apiserver and kubectl: $KUBEBUILDER_ASSETS when
// set, else bin/k8s/<KubeVersion> of the source tree. It fails with the command that builds them.
func EnvtestAssets() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		version, err := KubeVersion()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin", "k8s", version)
	}
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return "", fmt.Errorf("control-plane binary %s not found in %s; run 'make toolchain' (or hack/setup-envtest.sh) to build it", bin, dir)
		}
	}
	return dir, nil
}

// Kubectl returns the kubectl built next to the control plane (its version matches the server), or
// the one on PATH when there is none.
func Kubectl() (string, error) {
	if assets, err := EnvtestAssets(); err == nil {
		p := filepath.Join(assets, "kubectl")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("kubectl")
	if err != nil {
		return "", errors.New("kubectl not found next to the control plane or on PATH; run 'make toolchain'")
	}
	return p, nil
}

// Helm finds the helm binary the tests run: $HERDGATE_HELM when set (make test sets it), else the
// one make toolchain keeps under bin/.
func Helm() (string, error) {
	helm := os.Getenv("HERDGATE_HELM")
	if helm == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		helm = filepath.Join(root, "bin", "helm-v3.22.0")
	}
	if _, err := os.Stat(helm); err != nil {
		return "", fmt.Errorf("helm not found at %s; run 'make toolchain'", helm)
	}
	return helm, nil
}

// ArtifactsDir returns the folder where tests keep what a person should look at afterwards
// (screenshots, reports): $HERDGATE_ARTIFACTS when set, else _artifacts/ in the source tree.
func ArtifactsDir() (string, error) {
	dir := os.Getenv("HERDGATE_ARTIFACTS")
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "_artifacts")
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// Deps are the packages pkg depends on, itself included, as `go list -deps` lists them.
func Deps(pkg string) ([]string, error) {
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps %s: %w", pkg, err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		return nil, fmt.Errorf("go list -deps %s listed %d packages: %q", pkg, len(deps), out)
	}
	return deps, nil
}
