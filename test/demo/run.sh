#!/usr/bin/env bash
# make demo: the demo on the real single-node cluster of hack/node.sh where it can run (root, Linux),
# else on a local control plane with the proxy as a local process. Ctrl-C, an error or the end of
# the demo stops the node and leaves nothing behind.
#
# usage: test/demo/run.sh [--once] [--visitors N] [--gateway nginx|traefik] [--host-port P]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "${root}"

# A gateway in front of the room (--gateway): the one named is installed or built first.
gateway=""
args=("$@")
for i in "${!args[@]}"; do
  case "${args[$i]}" in
    --gateway=*) gateway="${args[$i]#--gateway=}" ;;
    --gateway) gateway="${args[$((i + 1))]:-}" ;;
  esac
done
case "${gateway}" in
  "") ;;
  nginx) hack/ensure-packages.sh nginx=nginx-light ;;
  traefik) hack/setup-traefik.sh bin ;;
  *) echo "demo: flag --gateway: \"${gateway}\" is not one of [nginx traefik]" >&2; exit 2 ;;
esac

if ! why="$(hack/node.sh check)"; then
  echo "==> The node cannot run here (${why}): running the demo on a local control plane, the proxy as a local process"
  exec bin/demo "$@"
fi
echo "==> Building herdgate and the node's images (make images; the first build takes about 4 minutes on 2 cores)"
"${MAKE:-make}" --no-print-directory images
trap 'hack/node.sh stop' EXIT
# Ctrl-C (or SIGTERM) is how an open demo ends: the demo stops, the node goes, and that is a clean
# end, not an error. One that stops the setup half-way still fails it.
stopping=""
trap 'stopping=1' INT TERM
echo "==> Starting a single-node cluster (hack/node.sh start; logs in _artifacts/node)"
hack/node.sh start
[[ -z "${stopping}" ]] || exit 130
status=0
# The host's network namespace is this script's: the open demo listens there for a browser.
hack/node.sh exec env HERDGATE_HELM="${HERDGATE_HELM:-}" HERDGATE_HOST_NETNS="/proc/$$/ns/net" bin/demo --on-node "$@" || status=$?
if [[ -n "${stopping}" && (${status} -eq 0 || ${status} -eq 130) ]]; then
  status=0
fi
exit "${status}"
