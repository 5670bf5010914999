#!/usr/bin/env bash
# build-at.sh REF PACKAGE OUT builds the Go package PACKAGE as it is at the commit REF into the file
# OUT, in a worktree of its own that it removes afterwards: a benchmark's baseline, built from an
# earlier commit beside the working tree.
set -euo pipefail
if [[ $# -ne 3 ]]; then
	echo "usage: $0 REF PACKAGE OUT" >&2
	exit 2
fi
ref=$1 pkg=$2 out=$(realpath -m "$3")
dir=$(mktemp -d)
trap 'git worktree remove --force "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
echo "[build-at] building $pkg at $ref"
git worktree add --detach --quiet "$dir" "$ref"
mkdir -p "$(dirname "$out")"
(cd "$dir" && go build -o "$out" "$pkg")
