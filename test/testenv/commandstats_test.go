package testenv

import (
	"testing"
	"time"
)

func TestParseCommandStats(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_ping:calls=12,usec=30,usec_per_call=2.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha:calls=3,usec=1500,usec_per_call=500.00,rejected_calls=0,failed_calls=1\r\n"
	got, err := ParseCommandStats(info)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["ping"] != (CommandStat{Calls: 12, Time: 30 * time.Microsecond}) ||
		got["evalsha"] != (CommandStat{Calls: 3, Time: 1500 * time.Microsecond}) {
		t.Fatalf("ParseCommandStats = %+v", got)
	}
	if _, err := ParseCommandStats("cmdstat_ping:calls=x,usec=1\r\n"); err == nil {
		t.Fatal("a count that is no number parsed")
	}
}
