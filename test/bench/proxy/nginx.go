package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// startNginx starts an nginx serving the given server blocks from its own directory under dir, and
// returns how to stop it and its process group.
func startNginx(dir, name, servers string) (stop func(), pgid int, err error) {
	dir = filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, 0, err
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
`, dir, servers)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, 0, err
	}
	cmd := exec.Command("nginx", "-p", dir, "-c", path, "-g", "daemon off;")
	cmd.Stderr = os.Stderr
	// Its own process group, so that the workers go with the master: killed alone, the master
	// leaves its workers running, holding their ports.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	return func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) // nginx's fast shutdown: the master stops its workers
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}, cmd.Process.Pid, nil
}
