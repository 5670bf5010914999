package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// HAProxy is an HAProxy (Debian's) serving the proxies (frontends, backends) a test or benchmark
// gives it, from a folder of its own.
type HAProxy struct{ *Process }

// StartHAProxy runs haproxy in the foreground with the global and default sections it needs and
// proxies after them, its files in dir. The configuration is checked first, so that a mistake in it
// is an error naming the line rather than a gateway that never listens.
func StartHAProxy(dir, proxies string) (*HAProxy, error) {
	if _, err := exec.LookPath("haproxy"); err != nil {
		return nil, fmt.Errorf("haproxy not found; run 'make toolchain' (Debian package haproxy): %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`global
  nbthread 2
  pidfile %[1]s/haproxy.pid
defaults
  mode http
  option http-keep-alive
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  timeout http-keep-alive 30s
%[2]s
`, dir, proxies)
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.Command("haproxy", "-c", "-f", path).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("haproxy refuses its configuration: %w\n%s", err, out)
	}
	cmd := exec.Command("haproxy", "-db", "-f", path)
	cmd.Stderr, _ = os.Create(filepath.Join(dir, "haproxy.log"))
	p, err := startProcess(cmd)
	if err != nil {
		return nil, err
	}
	return &HAProxy{p}, nil
}
