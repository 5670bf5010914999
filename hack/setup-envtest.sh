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

# The Kubernetes version is the one of the client libraries in go.mod: k8s.io/api v0.X.Y is Kubernetes 1.X.Y.
if [[ -z "${KUBE_VERSION:-}" ]]; then
  api_version="$(cd "${root}" && go list -m -f '{{.Version}}' k8s.io/api)" || die "cannot read k8s.io/api's version from go.mod"
  KUBE_VERSION="1.${api_version#v0.}"
fi
dest="${1:-${root}/bin/k8s}/${KUBE_VERSION}"
staging_version="v0.${KUBE_VERSION#1.}"

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

# prepare_kube_module writes a throwaway module that can build commands of k8s.io/kubernetes.
kube_mod=""
prepare_kube_module() {
  [[ -n "${kube_mod}" ]] && return
  kube_mod="${work}/kubernetes"
  mkdir -p "${kube_mod}"
  cd "${kube_mod}"
  go mod init herdgate.local/kubernetes-build >/dev/null 2>&1

  # k8s.io/kubernetes replaces its staging modules with ./staging/...; a module that depends on it must
  # point the same paths at their published releases instead.
  local upstream_mod
  upstream_mod="$(go mod download -json "k8s.io/kubernetes@v${KUBE_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  [[ -f "${upstream_mod}" ]] || die "could not download k8s.io/kubernetes@v${KUBE_VERSION} from the module proxy"
  local staging
  staging="$(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "${upstream_mod}")"
  [[ -n "${staging}" ]] || die "found no staging replacements in k8s.io/kubernetes@v${KUBE_VERSION}'s go.mod"
  local args=()
  for m in ${staging}; do args+=("-replace=${m}=${m}@${staging_version}"); done
  go mod edit "${args[@]}" "-require=k8s.io/kubernetes@v${KUBE_VERSION}"
  log "resolving dependencies ($(wc -w <<<"${staging}") staging modules pinned to ${staging_version})"
  go get "k8s.io/kubernetes/cmd/kube-apiserver@v${KUBE_VERSION}" "k8s.io/kubernetes/cmd/kubectl@v${KUBE_VERSION}" \
      >"${kube_mod}/get.log" 2>&1 \
    || { cat "${kube_mod}/get.log" >&2; die "resolving k8s.io/kubernetes commands failed"; }
}

# build_kube_command builds k8s.io/kubernetes/cmd/<name> with the version stamped in, printing progress.
build_kube_command() {
  local name="$1" minutes="$2"
  [[ -x "${dest}/${name}" ]] && { log "${name} ${KUBE_VERSION} already built"; return; }
  log "building ${name} v${KUBE_VERSION} from the module proxy (${minutes} the first time on 2 cores)"
  prepare_kube_module
  cd "${kube_mod}"
  local pkg="k8s.io/kubernetes/cmd/${name}" total
  total="$(go list -deps "${pkg}" | wc -l)"
  log "compiling up to ${total} packages (fewer when cached); progress follows"
  # Without the version stamp the binary reports v0.0.0-master+$Format:%H$, which kubectl rejects.
  local minor="${KUBE_VERSION#*.}"
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v${KUBE_VERSION}"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=${KUBE_VERSION%%.*}"
  ldflags+=" -X k8s.io/component-base/version.gitMinor=${minor%%.*}"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=v${KUBE_VERSION}"
  # go build -v names each package as it compiles it; turn that into a line every 100 packages.
  if ! CGO_ENABLED=0 go build -v -trimpath -ldflags "${ldflags}" -o "${dest}/${name}.partial" "${pkg}" 2>&1 \
      | awk -v total="${total}" '
          /^[a-zA-Z0-9._~\/-]+$/ { n++; if (n % 100 == 0) { printf "[setup-envtest] compiled %d of up to %d packages\n", n, total > "/dev/stderr" }; next }
          { print > "/dev/stderr" }'; then
    die "building ${name} failed (see the compiler output above)"
  fi
  [[ -x "${dest}/${name}.partial" ]] || die "building ${name} produced no binary"
  mv "${dest}/${name}.partial" "${dest}/${name}"
  log "${name} ready: ${dest}/${name}"
}

build_etcd
build_kube_command kube-apiserver "about 9 minutes"
build_kube_command kubectl "about 2 minutes"
"${dest}/kube-apiserver" --version >&2
