#!/usr/bin/env bash
# Builds Traefik from the Go module proxy for the gateway tests (there is no Debian package). Its
# go.mod holds replace directives, so `go install module@version` refuses it: the module's source is
# copied out of the module cache and built as the main module it is.
# The result is cached as bin/traefik-<version>; a second run returns at once.
#
# usage: hack/setup-traefik.sh [dest-dir]     (default: <repo>/bin)
set -euo pipefail

TRAEFIK_VERSION="${TRAEFIK_VERSION:-v3.6.12}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-${root}/bin}/traefik-${TRAEFIK_VERSION}"

log() { printf '[setup-traefik] %s\n' "$*" >&2; }
die() { printf '[setup-traefik] error: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || die "the go command is not on PATH; install Go 1.26 or newer"
[[ -x "${dest}" ]] && exit 0

work="$(mktemp -d)"
trap 'chmod -R u+w "${work}" 2>/dev/null; rm -rf "${work}"' EXIT
log "downloading github.com/traefik/traefik/v3@${TRAEFIK_VERSION} from the module proxy"
src="$(cd "${work}" && GOFLAGS=-mod=mod go mod download -json "github.com/traefik/traefik/v3@${TRAEFIK_VERSION}" \
  | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -n "${src}" && -d "${src}" ]] || die "the module proxy did not give github.com/traefik/traefik/v3@${TRAEFIK_VERSION}"
cp -r "${src}" "${work}/traefik"
chmod -R u+w "${work}/traefik"
log "building traefik ${TRAEFIK_VERSION} (about 10 minutes on two cores the first time)"
mkdir -p "$(dirname "${dest}")"
(cd "${work}/traefik" && CGO_ENABLED=0 go build -trimpath -o "${dest}.partial" ./cmd/traefik) \
  || die "building traefik failed (see the compiler output above)"
mv "${dest}.partial" "${dest}"
"${dest}" version >&2 || true
log "traefik ready: ${dest}"
