package controlplane

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAFailedStartLeavesNothingRunning: a CRD the API server refuses fails Start after etcd and the
// API server came up; Start stops them, so that no process of a failed suite outlives it.
func TestAFailedStartLeavesNothingRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and an API server")
	}
	dir := t.TempDir()
	bad := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-validations:
            - rule: "self.no_such_function()"
`
	if err := os.WriteFile(filepath.Join(dir, "widgets.yaml"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(Options{CRDDirectoryPaths: []string{dir}}); err == nil {
		t.Fatal("Start took a CRD the API server refuses")
	}
	for pid, cmd := range children(t) {
		t.Errorf("process %s outlived the failed start: %s", pid, cmd)
	}
}

// children are the running etcd and kube-apiserver processes this test started (its children; other
// packages' control planes run beside it), by pid.
func children(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc")
	}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		cmd := strings.ReplaceAll(string(raw), "\x00", " ")
		if name := filepath.Base(strings.Fields(cmd)[0]); (name == "etcd" || name == "kube-apiserver") && parentOf(e.Name()) == os.Getpid() {
			out[e.Name()] = cmd
		}
	}
	return out
}

// parentOf is the parent's pid of the process pid, 0 when it cannot be read.
func parentOf(pid string) int {
	raw, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			ppid, _ := strconv.Atoi(strings.TrimSpace(v))
			return ppid
		}
	}
	return 0
}
