package testenv

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"strconv"
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
