package gatewayconfig

import (
	"fmt"
	"strings"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// nginx is the server that asks herdgate's check with auth_request and, behind it, keeps the
// workload within its cap: requests the check let through are paced at the pool's rate, a burst of
// the cap waiting briefly (limit_req), and never more than the cap in flight (max_conns). Both run
// after the check (try_files hands a checked request to @workload), so that requests without a pass
// never use the workload's share. What the cap refuses goes to herdgate's busy answer.
func nginx(wq *herdgatev1alpha1.WaitingQueue, opts Options) ([]byte, error) {
	at, err := siteOf(wq, opts, "80")
	if err != nil {
		return nil, err
	}
	return []byte(strings.NewReplacer(
		"LISTEN", at.listen, "HERDGATE_SERVER", at.herdgate, "WORKLOAD_SERVER", at.workload, "ROOM", nameOf(wq),
		"CAP", fmt.Sprint(at.limit), "RATE", workloadRate(wq, at.limit), "BUSY", busyPath,
	).Replace(nginxTemplate)), nil
}

const nginxTemplate = `# The second line: at most CAP requests in flight to the workload from this nginx, paced at RATE.
map $host $ROOM_pace { default ROOM; }
limit_req_zone $ROOM_pace zone=ROOM_pace:1m rate=RATE;
upstream ROOM_herdgate { server HERDGATE_SERVER; keepalive 16; }
upstream ROOM_workload { zone ROOM_workload 64k; server WORKLOAD_SERVER max_conns=CAP; keepalive 16; }
server {
  listen LISTEN;
  location /.herdgate/ {
    proxy_pass http://ROOM_herdgate;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_set_header X-Forwarded-For $remote_addr;
  }
  location / {
    auth_request /.herdgate-check;
    auth_request_set $herdgate_location $upstream_http_location;
    auth_request_set $herdgate_cookie $upstream_http_x_herdgate_cookie;
    auth_request_set $herdgate_session $upstream_http_herdgate_session;
    error_page 401 = @herdgate_page;
    error_page 403 = @herdgate_refusal;
    # Checked: on to the workload, through the second line (no file is ever served from here).
    root /nonexistent;
    try_files /.herdgate-checked @workload;
  }
  location @workload {
    limit_req zone=ROOM_pace burst=CAP;
    limit_req_status 503;
    # nginx's own 502 and 503 (the cap full, the pace's burst past, the workload unreachable) are the
    # room's busy answer; the workload's own errors pass as they are.
    error_page 502 503 = @herdgate_busy;
    proxy_pass http://ROOM_workload;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_set_header Host $host;
    proxy_set_header X-Forwarded-For $remote_addr;
    # herdgate's cookies and headers never reach the workload.
    proxy_set_header Cookie $herdgate_cookie;
    # The session's handle, for POST /.herdgate/release; empty, the header goes.
    proxy_set_header Herdgate-Session $herdgate_session;
    proxy_set_header X-Herdgate-Pass "";
    proxy_set_header Herdgate-Place "";
    proxy_set_header X-Herdgate-Proof "";
    proxy_set_header X-Herdgate-Invitation "";
    proxy_set_header X-Herdgate-Challenge-Response "";
  }
  location = /.herdgate-check {
    internal;
    proxy_pass http://ROOM_herdgate/.herdgate/check;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_pass_request_body off;
    proxy_set_header Content-Length "";
    proxy_set_header X-Original-URI $request_uri;
    proxy_set_header X-Original-Method $request_method;
    proxy_set_header X-Original-Host $host;
    # A visitor's own forwarding headers would name another request: the check refuses both.
    proxy_set_header X-Forwarded-Uri "";
    proxy_set_header X-Forwarded-Method "";
    proxy_set_header X-Herdgate-Answer "";
    proxy_set_header X-Forwarded-For $remote_addr;
  }
  location @herdgate_page {
    absolute_redirect off;
    return 303 $herdgate_location;
  }
  location @herdgate_refusal {
    rewrite ^ /.herdgate/check break;
    proxy_pass http://ROOM_herdgate;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_method GET;
    proxy_pass_request_body off;
    proxy_set_header Content-Length "";
    proxy_set_header X-Original-URI $request_uri;
    proxy_set_header X-Original-Method $request_method;
    proxy_set_header X-Original-Host $host;
    proxy_set_header X-Herdgate-Answer full;
    proxy_set_header X-Forwarded-Uri "";
    proxy_set_header X-Forwarded-Method "";
    proxy_set_header X-Forwarded-For $remote_addr;
  }
  location @herdgate_busy {
    rewrite ^ BUSY break;
    proxy_pass http://ROOM_herdgate;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_method GET;
    proxy_pass_request_body off;
    proxy_set_header Content-Length "";
    proxy_set_header X-Forwarded-For $remote_addr;
  }
}
`
