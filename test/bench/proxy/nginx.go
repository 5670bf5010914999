package main

import (
	"path/filepath"

	"github.com/herdgate/herdgate/test/testenv"
)

// startNginx starts an nginx serving the given server blocks from its own directory under dir, and
// returns how to stop it and its process group.
func startNginx(dir, name, servers string) (stop func(), pgid int, err error) {
	n, err := testenv.StartNginx(filepath.Join(dir, name), servers)
	if err != nil {
		return nil, 0, err
	}
	return n.Stop, n.PGID(), nil
}

// The backend and nginx's proxy_pass run as two nginx instances. In one instance a worker could
// answer its own upstream connection inside one event loop, where herdgate-proxy must wake another
// process for every request; two instances make both proxies cross processes to the same backend.
// nginx does the forwarding work herdgate-proxy must do: it sets the X-Forwarded-* headers and keeps
// the pass from the upstream, so the backend receives the same request from both.
const (
	backendServer = `server {
    listen 127.0.0.1:%d;
    location / { return 200 "ok\n"; }
  }`
	proxyPassServer = `upstream backend { server 127.0.0.1:%d; keepalive 256; keepalive_requests 1000000; }
  server {
    listen 127.0.0.1:%d;
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For $remote_addr;
      proxy_set_header X-Forwarded-Host $http_host;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header %s "";
    }
  }`
)

// checkName is the path of --gateway in the report: nginx asking herdgate-proxy's check.
const checkName = "nginx + herdgate check"

// checkServer is nginx in front of the backend, asking herdgate-proxy's check about every request
// with auth_request (placeholders: the proxy's port, the backend's, the gateway's own).
const checkServer = `upstream herdgate { server 127.0.0.1:%[1]d; keepalive 256; keepalive_requests 1000000; }
  upstream checked { server 127.0.0.1:%[2]d; keepalive 256; keepalive_requests 1000000; }
  server {
    listen 127.0.0.1:%[3]d;
    location /.herdgate/ { proxy_pass http://herdgate; proxy_http_version 1.1; proxy_set_header Connection ""; }
    location / {
      auth_request /.herdgate-check;
      auth_request_set $herdgate_cookie $upstream_http_x_herdgate_cookie;
      proxy_pass http://checked;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For $remote_addr;
      proxy_set_header Cookie $herdgate_cookie;
      proxy_set_header X-Herdgate-Pass "";
    }
    location = /.herdgate-check {
      internal;
      proxy_pass http://herdgate/.herdgate/check;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Original-URI $request_uri;
      proxy_set_header X-Original-Method $request_method;
    }
  }`

// baselineName is the path of the --baseline proxy in the report.
const baselineName = "herdgate-proxy (baseline)"
