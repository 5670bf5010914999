#!/usr/bin/env bash
# Benchmarks the queue engine against redis-benchmark on the same redis-server, in one run, and
# prints the ratios. Usage: hack/bench-queue.sh [benchtime]   (default 3s)
set -euo pipefail
cd "$(dirname "$0")/.."
benchtime="${1:-3s}"
out="${ARTIFACTS:-_artifacts}/bench-queue.txt"
mkdir -p "$(dirname "${out}")"

echo "[bench-queue] go test -bench (Enter and Status, each with redis-benchmark right after it; Admit14; memory); raw output in ${out}" >&2
go test -run '^$' -bench 'Enter|Status|Admit14|AdmitLimit' -benchtime "${benchtime}" -benchmem -count 1 ./internal/queue | tee "${out}"
go test -run '^$' -bench 'MemoryPerWaitingVisitor' -benchtime 1x -count 1 ./internal/queue | tee -a "${out}"

awk '
  # metric(line, unit) returns the number printed before unit on a benchmark line.
  function metric(unit,   i) { for (i = 3; i <= NF; i++) if ($(i) == unit) return $(i - 1); return "" }
  /^Benchmark/ {
    name = $1; sub(/-[0-9]+$/, "", name)
    ops[name] = metric("ops/s"); allocs[name] = metric("allocs/op"); p99[name] = metric("p99-µs"); p50[name] = metric("p50-µs")
    ping99[name] = metric("ping-p99-µs"); ping50[name] = metric("ping-p50-µs")
    base[name] = metric("zrank-ops/s") metric("zadd-ops/s"); ratio[name] = metric("x-zrank") metric("x-zadd")
    cpuratio[name] = metric("x-zrank-redis-cpu") metric("x-zadd-redis-cpu")
    usage[name] = metric("usage-B/visitor"); used[name] = metric("used_memory-B/visitor")
  }
  END {
    split("0 10000 1000000", sizes, " ")
    printf "\n%-34s %12s %12s %8s %10s   %s\n", "engine call (32 concurrent)", "ops/s", "baseline", "ratio", "CPU ratio", "goal"
    printf "%-34s\n", "(baseline: redis-benchmark ZRANK for Status, ZADD for Enter, run right after each;"
    printf "%-34s\n", " CPU ratio: Redis CPU per baseline command / per engine call, the rate ratio where Redis is the limit)"
    for (s = 1; s <= 3; s++) {
      w = "waiting=" sizes[s]
      for (m = 1; m <= 2; m++) {
        mode = (m == 1) ? "direct" : "batched"
        st = "BenchmarkStatus/" mode "/" w; en = "BenchmarkEnter/" mode "/" w
        printf "%-34s %12.0f %12.0f %7.2fx %9.2fx   %s\n", "Status " mode " " w, ops[st], base[st], ratio[st], cpuratio[st], "Status >= 0.7x ZRANK"
        printf "%-34s %12.0f %12.0f %7.2fx %9.2fx\n", "Enter " mode " " w, ops[en], base[en], ratio[en], cpuratio[en]
      }
    }
    printf "(waiting=0: the queue holds only the pollers\047 own 128 entries, and the ZRANK set as many members)\n"
    printf "\n%-34s %10s %10s %12s %12s   %s\n", "Admit(14) tick, one scheduler", "p50 µs", "p99 µs", "PING p50 µs", "PING p99 µs", "goal"
    printf "%-34s\n", "(baseline: a bare PING to the same server between the same ticks)"
    for (s = 1; s <= 3; s++) {
      n = "BenchmarkAdmit14/waiting=" sizes[s]
      printf "%-34s %10s %10s %12s %12s   %s\n", "waiting=" sizes[s], p50[n], p99[n], ping50[n], ping99[n], (s == 3 ? "p99 <= 1000 µs" : "")
    }
    printf "\n%-34s %10s %10s   %s\n", "memory per waiting visitor", "USAGE B", "used B", "goal"
    printf "%-34s %10s %10s   %s\n", "10^6 visitors, 22-char IDs", usage["BenchmarkMemoryPerWaitingVisitor/id=base64url22"], used["BenchmarkMemoryPerWaitingVisitor/id=base64url22"], "<= 200 B"
    printf "%-34s %10s %10s\n", "10^6 visitors, 32-char hex IDs", usage["BenchmarkMemoryPerWaitingVisitor/id=hex32"], used["BenchmarkMemoryPerWaitingVisitor/id=hex32"]
    printf "\nallocations per Status call: direct %s, batched %s (waiting=10000)\n", allocs["BenchmarkStatus/direct/waiting=10000"], allocs["BenchmarkStatus/batched/waiting=10000"]
  }' "${out}"
