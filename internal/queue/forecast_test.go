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
	if want := "1800000000500 club=3,0,0.25,0,0,0,0/0/0/0/0,0,0,0 main=1.42857,12000,140,0,0,0,0/0/0/0/0,0,0,0"; s != want {
		t.Fatalf("encoded %q, want %q", s, want)
	}
	got, err := decodeForecast(s)
	if err != nil {
		t.Fatal(err)
	}
	f.Queues[MainLane] = LaneForecast{Advance: capacity.Advance{SeqsPerAdmission: 1.42857}, Waiting: 12_000, ArrivalsPerSecond: 140}
	// An older scheduler's forecast was counted long enough.
	old, err := decodeForecast("1800000000500 main=1.5,400,28")
	if err != nil || old.Queues[MainLane] != (LaneForecast{Advance: capacity.Advance{SeqsPerAdmission: 1.5}, Waiting: 400, ArrivalsPerSecond: 28, Counted: ArrivalsCountedEnough}) {
		t.Errorf("an older scheduler's forecast reads %+v, %v", old, err)
	}
	if diff := cmp.Diff(f, got); diff != "" {
		t.Fatalf("decoded (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "soon", "1 main", "1 main=1,2", "1 main=x,2,3", "1 main=1,-2,3", "1 main=1,2,-3", "1 main=-1,2,3"} {
		if _, err := decodeForecast(bad); err == nil {
			t.Errorf("decoded %q", bad)
		}
	}
	for _, bad := range []string{"1 main=1,2,3,4,1,0.3,1/1/1/1,5,6,7", "1 main=1,2,3,4,1,1.5,1/1/1/1/1,5,6,7", "1 main=1,2,3,4,1,0.3,1/1/1/1/1,5,-6,7",
		"1 main=1,2,3,-4,1,0.3,1/1/1/1/1,5,6,7", "1 main=1,2,3,1"} {
		if _, err := decodeForecast(bad); err == nil {
			t.Errorf("decoded %q", bad)
		}
	}
}

func TestAForecastCarriesHowPlacesGoQuietAndWhenTheyEntered(t *testing.T) {
	at := time.UnixMilli(1_800_000_000_500)
	quiet := capacity.Quiet{SeqsPerPlace: 1.25, Share: 0.3, Silences: [5]float64{0.5, 0.9, 1, 1, 1}}
	f := &Forecast{At: at, Queues: map[string]LaneForecast{
		MainLane: {Advance: capacity.Advance{SeqsPerAdmission: 1.5, Quiet: quiet}, Waiting: 400, ArrivalsPerSecond: 28, Counted: 10 * time.Second,
			Line: ForecastLine{FrontSeq: 1000, FrontAge: 8 * time.Second, LastSeq: 1400}},
	}}
	s := f.encode()
	if want := "1800000000500 main=1.5,400,28,10000,1.25,0.3,0.5/0.9/1/1/1,1000,8000,1400"; s != want {
		t.Fatalf("encoded %q, want %q", s, want)
	}
	got, err := decodeForecast(s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(f, got); diff != "" {
		t.Fatalf("decoded (-want +got):\n%s", diff)
	}
	line := got.Queues[MainLane].Line.At(at)
	if !line.FrontAt.Equal(at.Add(-8*time.Second)) || !line.LastAt.Equal(at) || !line.EnteredAt(1200).Equal(at.Add(-4*time.Second)) {
		t.Errorf("arrival line %+v: the front entered 8 s before the forecast, the middle 4 s", line)
	}
}

func TestSlotsReadBackAsWritten(t *testing.T) {
	s := &capacity.Slots{Max: 200, Active: 180, Held: 72 * time.Second, ReleasedPerSecond: 1.25, Counted: 90 * time.Second}
	for i := range s.Ages {
		s.Ages[i] = time.Duration(i) * 9 * time.Second
	}
	at := time.UnixMilli(1_800_000_000_123)
	f := &Forecast{At: at, Slots: s}
	if got := encodeSlots(f); got != "1800000000123 200,180,72000,1.25,90000,0/9000/18000/27000/36000/45000/54000/63000/72000" {
		t.Fatalf("encoded %q", got)
	}
	if got := decodeSlots(encodeSlots(f), at); got == nil || *got != *s {
		t.Fatalf("decoded %+v, want %+v", got, s)
	}
	// Slots counted for another forecast are not this one's.
	if got := decodeSlots(encodeSlots(f), at.Add(2*time.Second)); got != nil {
		t.Errorf("slots of the forecast of %v read for the next one: %+v", at, got)
	}
	if got := encodeSlots(&Forecast{At: at}); got != "" {
		t.Fatalf("no slots encoded as %q", got)
	}
	const stamp, ages = "1800000000123 ", ",0/1/2/3/4/5/6/7/8"
	for _, bad := range []string{"", stamp, "200,180,2500,1.25,9" + ages, stamp + "200,180,2500,1.25,9", stamp + "0,0,0,0,0" + ages,
		stamp + "200,-1,2500,1.25,9" + ages, stamp + "200,180,2.5,1.25,9" + ages, stamp + "200,180,2500,NaN,9" + ages,
		stamp + "200,180,2500,-1,9" + ages, stamp + "200,180,2500,1.25,x" + ages, stamp + "200,180,2500,1.25,9,0/1/2",
		stamp + "200,180,2500,1.25,9,0/1/2/3/4/5/6/7/-8"} {
		if got := decodeSlots(bad, at); got != nil {
			t.Errorf("decoded %q as %+v", bad, got)
		}
	}
}
