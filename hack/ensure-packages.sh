#!/usr/bin/env bash
# Makes sure the Debian packages that tests, benchmarks and the demo run are installed.
# As root it installs the missing ones with apt-get; otherwise it names them and fails.
#
# usage: hack/ensure-packages.sh <command>=<package> ...
#   e.g. hack/ensure-packages.sh redis-server=redis-server redis-cli=redis-tools
#   A <command> with a slash is a file that must exist (e.g. /usr/lib/cni/bridge=containernetworking-plugins).
set -euo pipefail

missing=()
for pair in "$@"; do
  cmd="${pair%%=*}"
  pkg="${pair#*=}"
  if [[ "${cmd}" == */* ]]; then
    [[ -e "${cmd}" ]] || missing+=("${pkg}")
  else
    command -v "${cmd}" >/dev/null 2>&1 || missing+=("${pkg}")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

# Deduplicate: several commands may come from one package.
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)

if [[ "$(id -u)" -ne 0 ]]; then
  printf '[ensure-packages] error: missing Debian packages: %s\n' "${missing[*]}" >&2
  printf '[ensure-packages] install them with: sudo apt-get install -y %s\n' "${missing[*]}" >&2
  exit 1
fi
command -v apt-get >/dev/null 2>&1 || {
  printf '[ensure-packages] error: missing packages %s and no apt-get to install them\n' "${missing[*]}" >&2
  exit 1
}
printf '[ensure-packages] installing %s with apt-get\n' "${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2 || printf '[ensure-packages] apt-get update failed; trying the cached package lists\n' >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
