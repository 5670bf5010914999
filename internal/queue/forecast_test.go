package queue

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/herdgate/herdgate/internal/capacity"
)

func TestAForecastReadsBackAsWritten(t *testing.T) {
	f := &Forecast{At: time.UnixMilli(1_800_000_000_500), Queues: map[string]LaneForecast{
		MainLane: {Advance: capacity.Advance{SeqsPerAdmission: 1.4285714}, Waiting: 12_000, ArrivalsPerSecond: 140},
		"club":   {Advance: capacity.Advance{SeqsPerAdmission: 3}, Waiting: 0, ArrivalsPerSecond: 0.25},
	}}
	s := f.encode()
	if want := "1800000000500 club=3,0,0.25 main=1.42857,12000,140"; s != want {
		t.Fatalf("encoded %q, want %q", s, want)
	}
	got, err := decodeForecast(s)
	if err != nil {
		t.Fatal(err)
	}
	f.Queues[MainLane] = LaneForecast{Advance: capacity.Advance{SeqsPerAdmission: 1.42857}, Waiting: 12_000, ArrivalsPerSecond: 140}
	if diff := cmp.Diff(f, got); diff != "" {
		t.Fatalf("decoded (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "soon", "1 main", "1 main=1,2", "1 main=x,2,3", "1 main=1,-2,3", "1 main=1,2,-3", "1 main=-1,2,3"} {
		if _, err := decodeForecast(bad); err == nil {
			t.Errorf("decoded %q", bad)
		}
	}
}
