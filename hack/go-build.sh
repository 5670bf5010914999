#!/usr/bin/env bash
# go build with progress: a first build compiles hundreds of packages (Kubernetes' client libraries)
# for minutes, so this says what it builds and prints a line every 100 packages compiled; a build
# the cache already holds prints one line.
#
# usage: hack/go-build.sh OUTPUT PACKAGE [go build flags ...]
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,6p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
out="$1" pkg="$2"
shift 2
total="$(go list -deps "${pkg}" | wc -l)"
echo "==> go build ${pkg} into ${out}"
started=${SECONDS}
# -v names each package as it is compiled (cached ones are not named); anything else is the compiler's.
go build -v "$@" -o "${out}" "${pkg}" 2>&1 | awk -v total="${total}" '
  /^[a-zA-Z0-9._~\/-]+$/ { n++; if (n % 100 == 0) { printf "    compiled %d of up to %d packages\n", n, total; fflush() }; next }
  { print; fflush() }
  END { if (n >= 100) printf "    compiled %d packages\n", n }'
[[ $((SECONDS - started)) -lt 20 ]] || echo "    done in $((SECONDS - started)) s"
