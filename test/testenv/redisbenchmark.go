package testenv

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// RedisBenchmarkRate reads the requests per second of the first test in redis-benchmark's --csv
// output (a header row, then one row per test with the rate second).
func RedisBenchmarkRate(out []byte) (float64, error) {
	rows, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		return 0, fmt.Errorf("reading redis-benchmark CSV: %w", err)
	}
	for i, row := range rows {
		if i > 0 && len(row) > 1 {
			return strconv.ParseFloat(row[1], 64)
		}
	}
	return 0, fmt.Errorf("no result row in redis-benchmark output:\n%s", out)
}

// UsedMemory reads Redis' used_memory from INFO memory, as info returns it, once Redis has freed
// what UNLINK handed to its background thread.
func UsedMemory(tb TB, info func() (string, error)) int64 {
	tb.Helper()
	for range 1000 {
		text, err := info()
		if err != nil {
			tb.Fatal(err)
		}
		fields := map[string]string{}
		for _, line := range strings.Split(text, "\r\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				fields[k] = v
			}
		}
		if fields["lazyfree_pending_objects"] != "0" {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		n, err := strconv.ParseInt(fields["used_memory"], 10, 64)
		if err != nil {
			tb.Fatalf("used_memory %q: %v", fields["used_memory"], err)
		}
		return n
	}
	tb.Fatal("Redis kept freeing memory for 10 s")
	return 0
}
