package testenv

import "testing"

func TestRedisBenchmarkRate(t *testing.T) {
	out := []byte("\"test\",\"rps\",\"avg_latency_ms\"\n\"ZRANK zrank-baseline __rand_int__\",\"61349.70\",\"0.503\"\n")
	if rps, err := RedisBenchmarkRate(out); err != nil || rps != 61349.70 {
		t.Errorf("RedisBenchmarkRate = %v, %v; want 61349.70", rps, err)
	}
	for _, bad := range []string{"", "\"test\",\"rps\"\n", "\"test\",\"rps\"\n\"ZRANK\",\"fast\"\n"} {
		if _, err := RedisBenchmarkRate([]byte(bad)); err == nil {
			t.Errorf("RedisBenchmarkRate(%q) gave no error", bad)
		}
	}
}
