# Shared by hack/setup-envtest.sh and hack/setup-node.sh: builds commands of k8s.io/kubernetes from the
# Go module proxy in a throwaway module, with the version stamped in and progress printed, so that the
# control plane and the node's binaries come from one recipe and share one Go build cache.
#
# The caller sets: root (the repository), KUBE_VERSION (1.X.Y), dest (the folder binaries go to), work
# (a scratch folder it removes), and defines log and die.

# prepare_kube_module writes a throwaway module that can build commands of k8s.io/kubernetes.
kube_mod=""
prepare_kube_module() {
  [[ -n "${kube_mod}" ]] && return
  local staging_version="v0.${KUBE_VERSION#1.}"
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
  local args=() m
  for m in ${staging}; do args+=("-replace=${m}=${m}@${staging_version}"); done
  go mod edit "${args[@]}" "-require=k8s.io/kubernetes@v${KUBE_VERSION}"
  log "resolving dependencies ($(wc -w <<<"${staging}") staging modules pinned to ${staging_version})"
  local pkgs=() name
  for name in "${KUBE_COMMANDS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/${name}@v${KUBE_VERSION}"); done
  go get "${pkgs[@]}" >"${kube_mod}/get.log" 2>&1 \
    || { cat "${kube_mod}/get.log" >&2; die "resolving k8s.io/kubernetes commands failed"; }
}

# go_build_with_progress <output> <package> <ldflags>: a static build with hack/go-build.sh's progress
# (a line every 100 packages), on stderr; the binary takes its place only once whole.
go_build_with_progress() {
  local out="$1" pkg="$2" ldflags="$3"
  CGO_ENABLED=0 "${root}/hack/go-build.sh" "${out}.partial" "${pkg}" -trimpath -ldflags "${ldflags}" >&2 \
    || die "building ${pkg} failed (see the compiler output above)"
  [[ -x "${out}.partial" ]] || die "building ${pkg} produced no binary"
  mv "${out}.partial" "${out}"
}

# build_kube_command <name> <how long>: builds k8s.io/kubernetes/cmd/<name> into ${dest}/<name>.
build_kube_command() {
  local name="$1" minutes="$2"
  [[ -x "${dest}/${name}" ]] && { log "${name} ${KUBE_VERSION} already built"; return; }
  log "building ${name} v${KUBE_VERSION} from the module proxy (${minutes} the first time on 2 cores)"
  prepare_kube_module
  cd "${kube_mod}"
  # Without the version stamp the binary reports v0.0.0-master+$Format:%H$, which kubectl rejects.
  local minor="${KUBE_VERSION#*.}"
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v${KUBE_VERSION}"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=${KUBE_VERSION%%.*}"
  ldflags+=" -X k8s.io/component-base/version.gitMinor=${minor%%.*}"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=v${KUBE_VERSION}"
  go_build_with_progress "${dest}/${name}" "k8s.io/kubernetes/cmd/${name}" "${ldflags}"
  log "${name} ready: ${dest}/${name}"
}

# kube_version_from_go_mod prints the Kubernetes version of the client libraries in go.mod:
# k8s.io/api v0.X.Y is Kubernetes 1.X.Y.
kube_version_from_go_mod() {
  local api_version
  api_version="$(cd "$1" && go list -m -f '{{.Version}}' k8s.io/api)" || die "cannot read k8s.io/api's version from go.mod"
  printf '1.%s\n' "${api_version#v0.}"
}
