#!/usr/bin/env bash
# Builds the control-plane binaries that envtest needs (etcd, kube-apiserver) and a kubectl of the
# same version from the Go module proxy, so that the tests and the demo work on machines where
# setup-envtest cannot download them.
# The result is cached in bin/k8s/<version>/; a second run returns at once.
#
# usage: hack/setup-envtest.sh [dest-root]     (default: <repo>/bin/k8s)
set -euo pipefail

ETCD_VERSION="${ETCD_VERSION:-v3.7.0}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { printf '[setup-envtest] %s\n' "$*" >&2; }
die() { printf '[setup-envtest] error: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || die "the go command is not on PATH; install Go 1.26 or newer"

LOG_TAG=setup-envtest
# shellcheck source=hack/lib/kube-build.sh
source "${root}/hack/lib/kube-build.sh"
KUBE_VERSION="${KUBE_VERSION:-$(kube_version_from_go_mod "${root}")}"
dest="${1:-${root}/bin/k8s}/${KUBE_VERSION}"
KUBE_COMMANDS=(kube-apiserver kubectl)

if [[ -x "${dest}/etcd" && -x "${dest}/kube-apiserver" && -x "${dest}/kubectl" ]]; then
  exit 0
fi
mkdir -p "${dest}"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

# Every build runs in a throwaway module of its own so that nothing leaks into the project's go.mod.
build_etcd() {
  [[ -x "${dest}/etcd" ]] && { log "etcd ${ETCD_VERSION} already built"; return; }
  log "building etcd ${ETCD_VERSION} from the module proxy (about a minute)"
  local mod="${work}/etcd"
  mkdir -p "${mod}"
  (
    cd "${mod}"
    go mod init herdgate.local/etcd-build >/dev/null 2>&1
    go get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" >"${mod}/get.log" 2>&1 \
      || { cat "${mod}/get.log" >&2; die "go get go.etcd.io/etcd/server/v3@${ETCD_VERSION} failed"; }
    CGO_ENABLED=0 go build -trimpath -o "${dest}/etcd.partial" go.etcd.io/etcd/server/v3 \
      || die "building etcd failed (see the compiler output above)"
  )
  mv "${dest}/etcd.partial" "${dest}/etcd"
  log "etcd ready: ${dest}/etcd"
}

build_etcd
build_kube_command kube-apiserver "about 9 minutes"
build_kube_command kubectl "about 2 minutes"
"${dest}/kube-apiserver" --version >&2
