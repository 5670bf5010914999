#!/usr/bin/env bash
# Runs the node suite: compiles it (the node's namespace cannot reach the module proxy), starts the
# node of hack/node.sh, runs the suite inside it and stops the node whatever happens (passed, failed,
# interrupted), leaving no process, namespace, mount or cgroup. Where the node cannot run (not root,
# not Linux), it says why and skips.
#
# usage: test/node/run.sh     (make test-node; the images come from make images)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "${root}"

if ! why="$(hack/node.sh check)"; then
  echo "[node-suite] skipped: ${why}"
  exit 0
fi
mkdir -p bin _artifacts
go test -c -o bin/node.test ./test/node
GOTESTSUM="${GOTESTSUM:-$(ls bin/gotestsum-* 2>/dev/null | tail -1)}"

trap 'hack/node.sh stop' EXIT
trap 'exit 130' INT TERM
hack/node.sh start
echo "[node-suite] running the drills inside the node"
runner=(bin/node.test -test.v=test2json -test.timeout "${NODE_TEST_TIMEOUT:-15m}" -test.count=1)
if [[ -n "${GOTESTSUM}" ]]; then
  hack/node.sh exec env HERDGATE_NODE=1 HERDGATE_ARTIFACTS="${root}/_artifacts" HERDGATE_HELM="${HERDGATE_HELM:-}" \
    "${GOTESTSUM}" --format standard-verbose --junitfile _artifacts/junit-node.xml \
    --raw-command -- go tool test2json -t -p test/node "${runner[@]}"
else
  hack/node.sh exec env HERDGATE_NODE=1 HERDGATE_ARTIFACTS="${root}/_artifacts" HERDGATE_HELM="${HERDGATE_HELM:-}" \
    bin/node.test -test.v -test.timeout "${NODE_TEST_TIMEOUT:-15m}" -test.count=1
fi
