package main

import (
	"strings"
	"testing"
)

func TestReportReadsBenchmarkLines(t *testing.T) {
	out := `goos: linux
BenchmarkStatus/batched/waiting=10000-2   	  412345	      2900 ns/op	    345000 ops/s	    380000 zrank-ops/s	         0.91 x-zrank	         0.88 x-zrank-redis-cpu	      12 allocs/op
BenchmarkAdmitLimit/limit=250/waiting=100000-2   	 400	   4087253 ns/op	      4069 p50-µs	      7092 p99-µs	      3706 redis-µs
BenchmarkMemoryPerWaitingVisitor/id=base64url22-2   	1	 1 ns/op	  139.3 usage-B/visitor	 141.0 used_memory-B/visitor
PASS
`
	b, err := parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if got := b["BenchmarkStatus/batched/waiting=10000"].get("x-zrank"); got != 0.91 {
		t.Fatalf("x-zrank = %v, want 0.91", got)
	}
	var w strings.Builder
	report(&w, b)
	for _, want := range []string{"Status batched waiting=10000             345000       380000    0.91x      0.88x", "limit=250/waiting=100000", "3706", "139.3"} {
		if !strings.Contains(w.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, w.String())
		}
	}
}
