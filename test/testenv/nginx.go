package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Nginx is an nginx (Debian's) serving the http-level configuration a test or benchmark gives it,
// from a folder of its own.
type Nginx struct{ *Process }

// StartNginx runs nginx with the http block's contents http (servers, upstreams), its files in dir.
func StartNginx(dir, http string) (*Nginx, error) {
	if _, err := exec.LookPath("nginx"); err != nil {
		return nil, fmt.Errorf("nginx not found; run 'make toolchain' (Debian package nginx-light): %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`worker_processes 2;
error_log %[1]s/nginx-error.log warn;
pid %[1]s/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  # Connections live as long as the load: no path pays for reconnects the others skip.
  keepalive_requests 1000000;
  %[2]s
}
`, dir, http)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("nginx", "-p", dir, "-c", path, "-g", "daemon off;")
	cmd.Stderr = os.Stderr
	p, err := startProcess(cmd)
	if err != nil {
		return nil, err
	}
	return &Nginx{p}, nil
}
