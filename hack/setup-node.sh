#!/usr/bin/env bash
# Builds what a real single-node cluster needs beyond the control plane of hack/setup-envtest.sh:
# kubelet, kube-controller-manager, kube-scheduler and kube-proxy of the same version, and a CoreDNS
# with only the plugins cluster DNS needs, all from the Go module proxy; and, as root, installs
# containerd, runc, the CNI plugins, iptables, conntrack and socat from Debian.
# The binaries are cached in bin/k8s/<version>/ beside the control plane's; a second run returns at once.
#
# usage: hack/setup-node.sh [dest-root]     (default: <repo>/bin/k8s)
set -euo pipefail

COREDNS_VERSION="${COREDNS_VERSION:-v1.15.0}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { printf '[setup-node] %s\n' "$*" >&2; }
die() { printf '[setup-node] error: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || die "the go command is not on PATH; install Go 1.26 or newer"

LOG_TAG=setup-node
# shellcheck source=hack/lib/kube-build.sh
source "${root}/hack/lib/kube-build.sh"
KUBE_VERSION="${KUBE_VERSION:-$(kube_version_from_go_mod "${root}")}"
dest="${1:-${root}/bin/k8s}/${KUBE_VERSION}"
KUBE_COMMANDS=(kubelet kube-controller-manager kube-scheduler kube-proxy)

"${root}/hack/ensure-packages.sh" containerd=containerd ctr=containerd runc=runc \
  /usr/lib/cni/bridge=containernetworking-plugins iptables=iptables conntrack=conntrack socat=socat

all_built=1
for name in "${KUBE_COMMANDS[@]}" coredns; do [[ -x "${dest}/${name}" ]] || all_built=0; done
[[ "${all_built}" -eq 1 ]] && exit 0

mkdir -p "${dest}"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

# CoreDNS with the plugins a cluster's DNS needs and no forwarder: the node's pods resolve Service names
# and nothing outside the cluster.
build_coredns() {
  [[ -x "${dest}/coredns" ]] && { log "coredns ${COREDNS_VERSION} already built"; return; }
  log "building coredns ${COREDNS_VERSION} from the module proxy (about 4 minutes the first time on 2 cores)"
  local mod="${work}/coredns"
  mkdir -p "${mod}"
  cd "${mod}"
  go mod init herdgate.local/coredns-build >/dev/null 2>&1
  cat >main.go <<'GO'
// A CoreDNS with only the plugins a single node's cluster DNS needs.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	// The order in which the plugins handle a query, as in CoreDNS's plugin.cfg.
	dnsserver.Directives = []string{"ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes"}
}

func main() { coremain.Run() }
GO
  go get "github.com/coredns/coredns@${COREDNS_VERSION}" >"${mod}/get.log" 2>&1 \
    || { cat "${mod}/get.log" >&2; die "go get github.com/coredns/coredns@${COREDNS_VERSION} failed"; }
  go mod tidy >>"${mod}/get.log" 2>&1 || { cat "${mod}/get.log" >&2; die "go mod tidy for coredns failed"; }
  go_build_with_progress "${dest}/coredns" . "-s -w"
  log "coredns ready: ${dest}/coredns"
}

build_kube_command kube-proxy "under a minute"
build_kube_command kube-scheduler "under a minute"
build_kube_command kube-controller-manager "about 2 minutes"
build_kube_command kubelet "about 6 minutes"
build_coredns
"${dest}/kubelet" --version >&2
