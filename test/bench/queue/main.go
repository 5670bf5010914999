// Command bench-queue reads the output of the queue engine's benchmarks (make bench-queue runs them)
// and prints the report: each engine call's rate beside redis-benchmark's on the same server, in rate
// and in Redis CPU per call, the Admit ticks' latency beside a PING's, Redis' time per tick at the
// tick limit, and the memory per waiting visitor.
//
//	go run ./test/bench/queue < _artifacts/bench-queue.txt
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// metrics are the values of one benchmark line, by unit.
type metrics map[string]float64

// get is the value printed before unit, or 0.
func (m metrics) get(units ...string) float64 {
	for _, u := range units {
		if v, ok := m[u]; ok {
			return v
		}
	}
	return 0
}

var cpuSuffix = regexp.MustCompile(`-[0-9]+$`)

// parse reads the benchmark lines of go test's output: name, iterations, then value-unit pairs.
func parse(r io.Reader) (map[string]metrics, error) {
	out := map[string]metrics{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		m := metrics{}
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			m[fields[i+1]] = v
		}
		out[cpuSuffix.ReplaceAllString(fields[0], "")] = m
	}
	return out, sc.Err()
}

func report(w io.Writer, b map[string]metrics) {
	sizes := []string{"0", "10000", "1000000"}
	fmt.Fprintf(w, "\n%-34s %12s %12s %8s %10s   %s\n", "engine call (32 concurrent)", "ops/s", "baseline", "ratio", "CPU ratio", "goal")
	fmt.Fprintln(w, "(baseline: redis-benchmark ZRANK for Status, ZADD for Enter, run right after each;")
	fmt.Fprintln(w, " CPU ratio: Redis CPU per baseline command / per engine call, the rate ratio where Redis is the limit)")
	for _, size := range sizes {
		for _, mode := range []string{"direct", "batched"} {
			st, en := b["BenchmarkStatus/"+mode+"/waiting="+size], b["BenchmarkEnter/"+mode+"/waiting="+size]
			fmt.Fprintf(w, "%-34s %12.0f %12.0f %7.2fx %9.2fx   %s\n", "Status "+mode+" waiting="+size,
				st.get("ops/s"), st.get("zrank-ops/s"), st.get("x-zrank"), st.get("x-zrank-redis-cpu"), "Status >= 0.7x ZRANK")
			fmt.Fprintf(w, "%-34s %12.0f %12.0f %7.2fx %9.2fx\n", "Enter "+mode+" waiting="+size,
				en.get("ops/s"), en.get("zadd-ops/s"), en.get("x-zadd"), en.get("x-zadd-redis-cpu"))
		}
	}
	fmt.Fprintln(w, "(waiting=0: the queue holds only the pollers' own 128 entries, and the ZRANK set as many members)")

	fmt.Fprintf(w, "\n%-34s %10s %10s %12s %12s   %s\n", "Admit(14) tick, one scheduler", "p50 µs", "p99 µs", "PING p50 µs", "PING p99 µs", "goal")
	fmt.Fprintln(w, "(baseline: a bare PING to the same server between the same ticks)")
	for i, size := range sizes {
		a := b["BenchmarkAdmit14/waiting="+size]
		goal := ""
		if i == len(sizes)-1 {
			goal = "p99 <= 1000 µs"
		}
		fmt.Fprintf(w, "%-34s %10.0f %10.0f %12.0f %12.0f   %s\n", "waiting="+size, a.get("p50-µs"), a.get("p99-µs"), a.get("ping-p50-µs"), a.get("ping-p99-µs"), goal)
	}

	fmt.Fprintf(w, "\n%-34s %10s %10s %12s\n", "Admit at the tick limit", "p50 µs", "p99 µs", "Redis µs")
	for _, name := range []string{"limit=14/waiting=0", "limit=250/waiting=0", "limit=14/waiting=100000", "limit=250/waiting=100000"} {
		a := b["BenchmarkAdmitLimit/"+name]
		fmt.Fprintf(w, "%-34s %10.0f %10.0f %12.0f\n", name, a.get("p50-µs"), a.get("p99-µs"), a.get("redis-µs"))
	}

	fmt.Fprintf(w, "\n%-34s %10s %10s   %s\n", "memory per waiting visitor", "USAGE B", "used B", "goal")
	for _, form := range []struct{ label, name, goal string }{
		{"10^6 visitors, 22-char IDs", "id=base64url22", "<= 200 B"},
		{"10^6 visitors, 32-char hex IDs", "id=hex32", ""},
	} {
		m := b["BenchmarkMemoryPerWaitingVisitor/"+form.name]
		fmt.Fprintf(w, "%-34s %10.1f %10.1f   %s\n", form.label, m.get("usage-B/visitor"), m.get("used_memory-B/visitor"), form.goal)
	}
	if d, ok := b["BenchmarkDrawPreQueue"]; ok {
		fmt.Fprintf(w, "\n%-34s %10s %10s %10s %10s   %s\n", "draw of a 10^6 pre-queue", "p50 µs", "p99 µs", "max µs", "Redis µs", "goal")
		fmt.Fprintln(w, "(a draw call as the scheduler waits for it; Redis: the longest by Redis' own clock, from its slow log)")
		fmt.Fprintf(w, "%-34s %10.0f %10.0f %10.0f %10.0f   %s\n", fmt.Sprintf("%.0f calls, %.1f s (ordering %.2f s)", d.get("calls"), d.get("draw-s"), d.get("order-s")),
			d.get("call-p50-µs"), d.get("call-p99-µs"), d.get("longest-call-µs"), max(d.get("redis-longest-draw-call-µs"), d.get("redis-longest-read-µs")), "Redis <= 5000 µs")
		fmt.Fprintf(w, "%-34s %10.0f %10.0f %10.0f\n", "polls during the draw", d.get("poll-p50-µs"), d.get("poll-p99-µs"), d.get("poll-max-µs"))
		fmt.Fprintf(w, "%-34s %10.0f %10.0f\n", "polls before it (baseline)", d.get("idle-poll-p50-µs"), d.get("idle-poll-p99-µs"))
		fmt.Fprintf(w, "(by Redis' clock: the longest chunk placed %.0f µs, the longest page read %.0f µs, %.0f calls over 1 ms)\n",
			d.get("redis-longest-draw-call-µs"), d.get("redis-longest-read-µs"), d.get("calls-over-1ms"))
	}
	fmt.Fprintf(w, "\nallocations per Status call: direct %.0f, batched %.0f (waiting=10000)\n",
		b["BenchmarkStatus/direct/waiting=10000"].get("allocs/op"), b["BenchmarkStatus/batched/waiting=10000"].get("allocs/op"))
}

func main() {
	b, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-queue:", err)
		os.Exit(1)
	}
	if len(b) == 0 {
		fmt.Fprintln(os.Stderr, "bench-queue: no benchmark lines on standard input")
		os.Exit(1)
	}
	report(os.Stdout, b)
}
