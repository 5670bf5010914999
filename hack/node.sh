#!/usr/bin/env bash
# A real single-node Kubernetes cluster on this machine, without a container engine: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, containerd, kubelet, kube-proxy and CoreDNS run as processes
# inside a network namespace of their own (no pod traffic leaves it), in a private mount namespace (the
# host's mounts and its global sysctls stay as they were) and under a cgroup of their own (/herdgate-node
# in every hierarchy), so that stopping is killing that cgroup and removing the namespace.
# Facts behind each setting: docs/architecture.md, "The node".
#
# usage: hack/node.sh start     build what is missing, start the node, import the images, wait for Ready
#        hack/node.sh stop      stop everything and remove the node's namespace, cgroups and state
#        hack/node.sh status    say whether the node runs (exit 0) or not (exit 1)
#        hack/node.sh exec CMD  run CMD inside the node's network namespace with KUBECONFIG set, and kubectl
#                               and bin/'s kubectl-herdgate on the PATH
#        hack/node.sh restart-kubelet   kill the kubelet and start a new one (the pods keep running)
#        hack/node.sh check     say why the node cannot run here (exit 1), or nothing (exit 0)
#
# Environment: NODE_IMAGES (folder of OCI archives to import; default bin/images), NODE_LOGS (default
# _artifacts/node).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NAME=herdgate-node
NETNS="/run/netns/${NAME}"
STATE="/var/lib/${NAME}"
RUN="/run/${NAME}"
CGROUP="/${NAME}"
NODE_NAME=hgnode
NODE_IP=10.250.0.2
NODE_GATEWAY=10.250.0.1
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/24
SERVICE_API_IP=10.96.0.1
SANDBOX_IMAGE=registry.k8s.io/pause:3.10
KUBE_BIN="${root}/bin/k8s/$(sed -n 's/^[[:space:]]*k8s.io\/api v0\.\([0-9.]*\)$/1.\1/p' "${root}/go.mod")"
NODE_IMAGES="${NODE_IMAGES:-${root}/bin/images}"
NODE_LOGS="${NODE_LOGS:-${root}/_artifacts/node}"
KUBECONFIG_ADMIN="${STATE}/pki/admin.kubeconfig"
# Paths the kubelet, containerd's CNI cache and iptables use whatever they are told: inside the node's
# mount namespace each is a bind mount of a folder (or file) in the node's state, so that nothing is
# written to the host's. A mount needs its mountpoint: start creates the missing ones, empty, and stop
# removes what start created.
HOST_DIRS=(/var/lib/kubelet /var/lib/cni /var/log/pods /var/log/containers /run/containerd)
HOST_FILES=(/run/xtables.lock)

log() { printf '[node] %s\n' "$*" >&2; }
die() { printf '[node] error: %s\n' "$*" >&2; exit 1; }

# why_not prints why the node cannot run on this machine, or nothing.
why_not() {
  [[ "$(uname -s)" == Linux ]] || { echo "the node needs Linux (this is $(uname -s))"; return; }
  [[ "$(id -u)" -eq 0 ]] || { echo "the node needs root (network namespaces, cgroups, mounts)"; return; }
  for c in ip nsenter unshare openssl; do
    command -v "${c}" >/dev/null 2>&1 || { echo "the node needs the ${c} command"; return; }
  done
  grep -q ' /sys/fs/cgroup/memory cgroup ' /proc/mounts || grep -q ' /sys/fs/cgroup cgroup2 ' /proc/mounts \
    || { echo "the node needs mounted cgroup hierarchies under /sys/fs/cgroup"; return; }
}

# cgroup_dirs lists the node's cgroup in every mounted hierarchy.
cgroup_dirs() {
  awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/mounts | while read -r mnt; do
    printf '%s%s\n' "${mnt}" "${CGROUP}"
  done
}

node_pids() {
  local d
  for d in $(cgroup_dirs); do
    [[ -d "${d}" ]] && find "${d}" -name cgroup.procs -exec cat {} + 2>/dev/null
  done | sort -u
}

running() { [[ -e "${NETNS}" ]] && [[ -n "$(node_pids)" ]]; }

# Commands in the node keep kubectl's discovery cache in the node's state, not in the caller's home.
# in_node runs a command in the node's network namespace as its admin: kubectl and, from bin/, the
# kubectl-herdgate plugin (make build) on the PATH, so that `kubectl herdgate` works as the docs write it.
in_node() {
  nsenter --net="${NETNS}" -- env KUBECONFIG="${KUBECONFIG_ADMIN}" KUBECACHEDIR="${RUN}/kube-cache" \
    PATH="${KUBE_BIN}:${root}/bin:${PATH}" "$@"
}

kubectl_node() { in_node "${KUBE_BIN}/kubectl" "$@"; }

stop() {
  local pids tries=0
  # Everything the node started is in its cgroup: containerd's shims and the containers included.
  while pids="$(node_pids)"; [[ -n "${pids}" ]]; do
    # shellcheck disable=SC2086
    kill -9 ${pids} 2>/dev/null || true
    tries=$((tries + 1))
    [[ ${tries} -gt 100 ]] && die "processes of the node survive SIGKILL: ${pids}"
    sleep 0.1
  done
  local d
  for d in $(cgroup_dirs); do
    [[ -d "${d}" ]] && find "${d}" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [[ -d "${d}" ]] && { sleep 0.2; find "${d}" -depth -type d -exec rmdir {} + 2>/dev/null || true; }
    [[ -d "${d}" ]] && log "warning: could not remove the cgroup ${d}"
  done
  if [[ -e "${NETNS}" ]]; then
    ip netns delete "${NAME}" 2>/dev/null || { umount "${NETNS}" 2>/dev/null || true; rm -f "${NETNS}"; }
  fi
  # The mounts the node made lived in its private mount namespace, which died with its last process;
  # anything left on the host's table under the node's folders is from a start killed halfway.
  local m
  for m in $(awk -v s="${STATE}" -v r="${RUN}" 'index($2, s) == 1 || index($2, r) == 1 { print $2 }' /proc/mounts | sort -r); do
    umount -l "${m}" 2>/dev/null || true
  done
  # The pods' logs, for whoever reads the run afterwards.
  if [[ -d "${STATE}/host/var/log/pods" ]]; then
    rm -rf "${NODE_LOGS}/pods"
    mkdir -p "${NODE_LOGS}"
    cp -r "${STATE}/host/var/log/pods" "${NODE_LOGS}/pods" 2>/dev/null || true
  fi
  if [[ -f "${STATE}/created-on-host" ]]; then
    local p
    # Mounts first, in the order they were made, then the folders and files.
    while read -r p; do
      if [[ "${p}" == "mount "* ]]; then
        p="${p#mount }"
        [[ -z "$(ls -A "${p}" 2>/dev/null)" ]] && umount "${p}" 2>/dev/null || true
      fi
    done <"${STATE}/created-on-host"
    while read -r p; do
      [[ "${p}" == "mount "* ]] && continue
      if [[ -d "${p}" ]]; then rmdir "${p}" 2>/dev/null || log "warning: ${p} is not empty; left in place"; else rm -f "${p}"; fi
    done <"${STATE}/created-on-host"
  fi
  rm -rf "${STATE}" "${RUN}"
}

# host_paths prepares the mountpoints of HOST_DIRS and HOST_FILES and their folders in the state.
host_paths() {
  local p
  for p in "${HOST_DIRS[@]}"; do
    [[ -e "${p}" ]] || { mkdir -p "${p}"; echo "${p}" >>"${STATE}/created-on-host"; }
    mkdir -p "${STATE}/host${p}"
  done
  for p in "${HOST_FILES[@]}"; do
    [[ -e "${p}" ]] || { touch "${p}"; echo "${p}" >>"${STATE}/created-on-host"; }
    mkdir -p "$(dirname "${STATE}/host${p}")"
    touch "${STATE}/host${p}"
  done
}

# pki writes a CA, the API server's serving certificate, client certificates and the service-account key.
pki() {
  local dir="${STATE}/pki"
  mkdir -p "${dir}"
  cd "${dir}"
  openssl ecparam -genkey -name prime256v1 -noout -out ca.key 2>/dev/null
  openssl req -x509 -new -key ca.key -subj "/CN=herdgate-node-ca" -days 3650 -out ca.crt 2>/dev/null
  cert() { # name subject [sans]
    openssl ecparam -genkey -name prime256v1 -noout -out "$1.key" 2>/dev/null
    openssl req -new -key "$1.key" -subj "$2" -out "$1.csr" 2>/dev/null
    local ext="extendedKeyUsage=clientAuth,serverAuth"
    [[ -n "${3:-}" ]] && ext+=$'\n'"subjectAltName=$3"
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile <(printf '%s\n' "${ext}") -out "$1.crt" 2>/dev/null
    rm -f "$1.csr"
  }
  cert apiserver "/CN=kube-apiserver" \
    "IP:${NODE_IP},IP:${SERVICE_API_IP},IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert admin "/O=system:masters/CN=admin"
  cert kubelet-client "/O=system:nodes/CN=system:node:${NODE_NAME}"
  cert kubelet-serving "/CN=${NODE_NAME}" "IP:${NODE_IP},DNS:${NODE_NAME}"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  openssl ecparam -genkey -name prime256v1 -noout -out sa.key 2>/dev/null
  openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
  kubeconfig() { # file cert
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: ${NAME}
  cluster: {server: "https://${NODE_IP}:6443", certificate-authority: ${dir}/ca.crt}
users:
- name: $2
  user: {client-certificate: ${dir}/$2.crt, client-key: ${dir}/$2.key}
contexts:
- name: ${NAME}
  context: {cluster: ${NAME}, user: $2}
current-context: ${NAME}
EOF
  }
  kubeconfig admin.kubeconfig admin
  kubeconfig kubelet.kubeconfig kubelet-client
  cd - >/dev/null
}

configs() {
  local etc="${STATE}/etc"
  mkdir -p "${etc}/cni" "${STATE}/sysctl"
  cat >"${etc}/containerd.toml" <<EOF
version = 2
root = "${STATE}/containerd"
state = "${RUN}/containerd"
[grpc]
  address = "${RUN}/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "${STATE}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${SANDBOX_IMAGE}"
  # Without CAP_SYS_RESOURCE a negative oom_score_adj is refused and every sandbox fails to start.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${etc}/cni"
EOF
  cat >"${etc}/cni/10-herdgate-node.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "${NAME}",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "${POD_CIDR}"}]], "routes": [{"dst": "0.0.0.0/0"}],
              "dataDir": "${STATE}/cni-ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  : >"${etc}/resolv.conf"
  cat >"${etc}/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${STATE}/pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: ${STATE}/pki/kubelet-serving.crt
tlsPrivateKeyFile: ${STATE}/pki/kubelet-serving.key
containerRuntimeEndpoint: unix://${RUN}/containerd.sock
# The machine mounts cgroup v1 hierarchies; the node's pods live under its own cgroup.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: ${CGROUP}
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
oomScoreAdj: 0
failSwapOn: false
protectKernelDefaults: false
clusterDNS: [${NODE_IP}]
clusterDomain: cluster.local
resolvConf: ${etc}/resolv.conf
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
# The images were imported, and no registry can be reached: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
serializeImagePulls: false
rotateCertificates: false
EOF
  cat >"${etc}/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: ${KUBECONFIG_ADMIN}}
mode: iptables
hostnameOverride: ${NODE_NAME}
clusterCIDR: ${POD_CIDR}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# Zero leaves the conntrack sysctls alone: they are global, not the namespace's.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
  cat >"${etc}/Corefile" <<EOF
.:53 {
    errors
    health 127.0.0.1:8080
    ready 127.0.0.1:8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig ${KUBECONFIG_ADMIN}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 30
    loadbalance
}
EOF
  # kubelet writes these global sysctls; inside the node's mount namespace it writes to these files.
  printf '1\n' >"${STATE}/sysctl/overcommit_memory"
  printf '10\n' >"${STATE}/sysctl/panic"
  printf '1\n' >"${STATE}/sysctl/panic_on_oops"
}

network() {
  # ip netns makes /run/netns a mount of its own; stop undoes that (and the folder) when start did it.
  [[ -d /run/netns ]] || echo /run/netns >>"${STATE}/created-on-host"
  grep -q ' /run/netns ' /proc/mounts || echo "mount /run/netns" >>"${STATE}/created-on-host"
  ip netns add "${NAME}"
  ip -n "${NAME}" link set lo up
  # Both ends of the pair stay inside: the node gets an address, and nothing routes out of the namespace.
  ip -n "${NAME}" link add hg0 type veth peer name hg1
  ip -n "${NAME}" addr add "${NODE_IP}/24" dev hg0
  ip -n "${NAME}" link set hg0 up
  ip -n "${NAME}" link set hg1 up
  # A default route to an address nothing answers: the components need one, and it leads nowhere.
  ip -n "${NAME}" route add default via "${NODE_GATEWAY}" dev hg0
  nsenter --net="${NETNS}" -- sh -c 'echo 1 >/proc/sys/net/ipv4/ip_forward'
}

cgroups() {
  local d mnt
  for d in $(cgroup_dirs); do
    mnt="${d%"${CGROUP}"}"
    mkdir -p "${d}/system"
    if [[ -f "${mnt}/cpuset.cpus" ]]; then
      cat "${mnt}/cpuset.cpus" >"${d}/cpuset.cpus"
      cat "${mnt}/cpuset.mems" >"${d}/cpuset.mems"
      cat "${mnt}/cpuset.cpus" >"${d}/system/cpuset.cpus"
      cat "${mnt}/cpuset.mems" >"${d}/system/cpuset.mems"
    fi
  done
}

kubelet_command() {
  exec "${KUBE_BIN}/kubelet" --config "${STATE}/etc/kubelet.yaml" \
    --kubeconfig "${STATE}/pki/kubelet.kubeconfig" --hostname-override "${NODE_NAME}" --node-ip "${NODE_IP}" \
    --root-dir "${STATE}/kubelet" --cert-dir "${STATE}/kubelet-pki" --v 1
}

# restart_kubelet kills the kubelet and starts another in the node's namespaces and cgroup, as a
# kubelet restarts on a real node; the containers, children of containerd's shims, keep running.
restart_kubelet() {
  running || die "the node is not running; start it with hack/node.sh start"
  local old supervisor
  old="$(cat "${RUN}/kubelet.pid")"
  supervisor="$(cat "${RUN}/supervisor.pid")"
  kill -9 "${old}" 2>/dev/null || true
  while kill -0 "${old}" 2>/dev/null && [[ "$(ps -o stat= -p "${old}")" != Z* ]]; do sleep 0.05; done
  (
    for d in $(cgroup_dirs); do echo "${BASHPID}" >"${d}/system/cgroup.procs"; done
    exec setsid nsenter --target "${supervisor}" --mount --net -- "${BASH_SOURCE[0]}" _kubelet \
      </dev/null >>"${NODE_LOGS}/kubelet.log" 2>&1
  ) &
  echo $! >"${RUN}/kubelet.pid"
  log "kubelet restarted (pid ${old} killed, pid $(cat "${RUN}/kubelet.pid") started)"
}

# inside runs in the node's network and private mount namespaces and supervises the components.
inside() {
  echo $$ >"${RUN}/supervisor.pid"
  local s
  for s in vm/overcommit_memory kernel/panic kernel/panic_on_oops; do
    mount --bind "${STATE}/sysctl/${s#*/}" "/proc/sys/${s}"
  done
  for s in "${HOST_DIRS[@]}" "${HOST_FILES[@]}"; do
    mount --bind "${STATE}/host${s}" "${s}"
  done
  cd "${STATE}"
  local pki="${STATE}/pki"
  start_component() { # name args...
    local name="$1"
    shift
    "$@" >"${NODE_LOGS}/${name}.log" 2>&1 &
    echo $! >"${RUN}/${name}.pid"
  }
  wait_for() { # what command...
    local what="$1" i
    shift
    for i in $(seq 1 600); do
      "$@" >/dev/null 2>&1 && return 0
      sleep 0.1
    done
    echo "${what} did not come up; see ${NODE_LOGS}" >&2
    return 1
  }
  start_component etcd "${KUBE_BIN}/etcd" --data-dir "${STATE}/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --unsafe-no-fsync
  wait_for etcd curl_like http://127.0.0.1:2379/health
  start_component kube-apiserver "${KUBE_BIN}/kube-apiserver" \
    --etcd-servers http://127.0.0.1:2379 --bind-address 0.0.0.0 --secure-port 6443 \
    --advertise-address "${NODE_IP}" --service-cluster-ip-range "${SERVICE_CIDR}" \
    --tls-cert-file "${pki}/apiserver.crt" --tls-private-key-file "${pki}/apiserver.key" \
    --client-ca-file "${pki}/ca.crt" \
    --kubelet-client-certificate "${pki}/apiserver-kubelet-client.crt" \
    --kubelet-client-key "${pki}/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "${pki}/sa.pub" --service-account-signing-key-file "${pki}/sa.key" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --allow-privileged=true --profiling=false
  wait_for kube-apiserver "${KUBE_BIN}/kubectl" --kubeconfig "${KUBECONFIG_ADMIN}" get --raw /readyz
  start_component kube-controller-manager "${KUBE_BIN}/kube-controller-manager" \
    --kubeconfig "${KUBECONFIG_ADMIN}" --authentication-kubeconfig "${KUBECONFIG_ADMIN}" \
    --authorization-kubeconfig "${KUBECONFIG_ADMIN}" --leader-elect=false \
    --root-ca-file "${pki}/ca.crt" --service-account-private-key-file "${pki}/sa.key" \
    --cluster-signing-cert-file "${pki}/ca.crt" --cluster-signing-key-file "${pki}/ca.key" \
    --bind-address 127.0.0.1
  start_component kube-scheduler "${KUBE_BIN}/kube-scheduler" \
    --kubeconfig "${KUBECONFIG_ADMIN}" --authentication-kubeconfig "${KUBECONFIG_ADMIN}" \
    --authorization-kubeconfig "${KUBECONFIG_ADMIN}" --leader-elect=false --bind-address 127.0.0.1
  start_component containerd containerd --config "${STATE}/etc/containerd.toml"
  wait_for containerd ctr --address "${RUN}/containerd.sock" version
  start_component coredns "${KUBE_BIN}/coredns" -conf "${STATE}/etc/Corefile"
  start_component kubelet kubelet_command
  start_component kube-proxy "${KUBE_BIN}/kube-proxy" --config "${STATE}/etc/kube-proxy.yaml"
  touch "${RUN}/started"
  # The supervisor stays, so that the mount namespace lives as long as the node; stop kills the cgroup.
  wait
}

# curl_like GETs a plain-HTTP URL with bash alone (the node's set-up needs no curl).
curl_like() {
  local url="${1#http://}" host port path
  host="${url%%/*}"
  path="/${url#*/}"
  port="${host##*:}"
  host="${host%%:*}"
  exec 3<>"/dev/tcp/${host}/${port}" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "${path}" "${host}" >&3
  local status
  read -r _ status _ <&3 || { exec 3<&-; return 1; }
  exec 3<&-
  [[ "${status}" == 200 ]]
}

import_images() {
  local archive n=0
  shopt -s nullglob
  for archive in "${NODE_IMAGES}"/*.tar; do
    ctr --address "${RUN}/containerd.sock" -n k8s.io images import "${archive}" >/dev/null \
      || die "importing ${archive} failed"
    n=$((n + 1))
  done
  shopt -u nullglob
  log "imported ${n} images from ${NODE_IMAGES}"
}

start() {
  local why
  why="$(why_not)"
  [[ -z "${why}" ]] || die "${why}"
  "${root}/hack/setup-envtest.sh" "${root}/bin/k8s"
  "${root}/hack/setup-node.sh" "${root}/bin/k8s"
  if [[ -e "${NETNS}" || -d "${STATE}" || -d "${RUN}" || -n "$(node_pids)" ]]; then
    log "removing what a previous run left"
    stop
  fi
  local began=${SECONDS}
  mkdir -p "${STATE}" "${RUN}" "${NODE_LOGS}"
  rm -f "${NODE_LOGS}"/*.log
  pki
  configs
  host_paths
  network
  cgroups
  log "starting the node's components (logs in ${NODE_LOGS})"
  # The supervisor joins the node's cgroup before it starts anything, so that every process of the node
  # (containerd's shims and the containers too) is found there by stop.
  (
    for d in $(cgroup_dirs); do echo "${BASHPID}" >"${d}/system/cgroup.procs"; done
    exec setsid nsenter --net="${NETNS}" -- unshare --mount --propagation private -- \
      env NODE_LOGS="${NODE_LOGS}" "${BASH_SOURCE[0]}" _inside </dev/null >"${NODE_LOGS}/supervisor.log" 2>&1
  ) &
  # The supervisor keeps this PID through its execs. Asked too early, the node's cgroup is still empty
  # (the supervisor has not joined it yet), so it is the PID that says whether the supervisor lives.
  local supervisor=$! i
  for i in $(seq 1 900); do
    [[ -e "${RUN}/started" ]] && break
    if ! kill -0 "${supervisor}" 2>/dev/null && [[ -z "$(node_pids)" ]]; then
      cat "${NODE_LOGS}/supervisor.log" >&2 2>/dev/null || true
      die "the node's supervisor exited; see ${NODE_LOGS}"
    fi
    sleep 0.1
  done
  [[ -e "${RUN}/started" ]] || die "the node's components did not start in 90 s; see ${NODE_LOGS}"
  import_images
  for i in $(seq 1 600); do
    kubectl_node get node "${NODE_NAME}" \
      -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -q True && break
    sleep 0.2
  done
  kubectl_node get node "${NODE_NAME}" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null \
    | grep -q True || die "the node did not become Ready in 120 s; see ${NODE_LOGS}/kubelet.log"
  log "node ${NODE_NAME} Ready in $((SECONDS - began)) s; run commands in it with: hack/node.sh exec kubectl get pods -A"
}

case "${1:-}" in
  start) start ;;
  stop) stop; log "stopped; no process, namespace, cgroup or state of the node remains" ;;
  status) if running; then log "running"; else log "not running"; exit 1; fi ;;
  exec) shift; running || die "the node is not running; start it with hack/node.sh start"; in_node "$@" ;;
  check) why="$(why_not)"; [[ -z "${why}" ]] || { echo "${why}"; exit 1; } ;;
  restart-kubelet) restart_kubelet ;;
  _inside) inside ;;
  _kubelet) kubelet_command ;;
  *) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
