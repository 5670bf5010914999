package queue

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/herdgate/herdgate/internal/capacity"
)

// Forecast is what the scheduler measured of a room's queues, as of At, for the proxies' wait
// estimates (docs/architecture.md, "Wait estimates"): how each queue's front advances, and what
// each holds and takes in, from which a proxy forecasts a queue's share as the others run empty.
type Forecast struct {
	At time.Time
	// Queues are the room's queues by name, the main queue as MainLane.
	Queues map[string]LaneForecast
	// Slots are the room's active passes under its cap (spec.capacity.maxActive), as last counted;
	// nil when it has none.
	Slots *capacity.Slots
}

// LaneForecast is one queue of a Forecast.
type LaneForecast struct {
	Advance capacity.Advance
	// Waiting is how many places the queue held.
	Waiting int64
	// ArrivalsPerSecond is how many visitors entered it a second, lately, counted over Counted: a
	// queue counted for a moment (a room that just woke) may be about to fill.
	ArrivalsPerSecond float64
	Counted           time.Duration
	// Line tells when the places from the front on entered; zero when unknown.
	Line ForecastLine
}

// ForecastLine is a queue's arrival line (capacity.ArrivalLine) as of the forecast: the arrival at
// the front had waited FrontAge, and LastSeq was the last arrival given out. Ages, not times, so
// that the line reads the same on every clock.
type ForecastLine struct {
	FrontSeq, LastSeq int64
	FrontAge          time.Duration
}

// At is the line as of at, the forecast's time; zero when unknown.
func (l ForecastLine) At(at time.Time) capacity.ArrivalLine {
	if l.FrontAge <= 0 || l.LastSeq < l.FrontSeq {
		return capacity.ArrivalLine{}
	}
	return capacity.ArrivalLine{FrontSeq: l.FrontSeq, LastSeq: l.LastSeq, FrontAt: at.Add(-l.FrontAge), LastAt: at}
}

// ArrivalsCountedEnough is how long a queue's arrivals are counted before its forecast tells
// whether it will run empty; a queue counted for less is taken to stay busy.
const ArrivalsCountedEnough = 5 * time.Second

// forecastField is the plan hash's field of the forecast.
const forecastField = "forecast"

// encode is f as the plan hash holds it: "atMs name=figures ...", the figures being
// "seqsPerAdmission,waiting,arrivals,countedMs,seqsPerPlace,quietShare,s10/s30/s50/s70/s90,
// frontSeq,frontAgeMs,lastSeq". The first three alone are a forecast of an older scheduler, whose
// arrivals were counted long enough (UncountedArrivals).
func (f *Forecast) encode() string {
	var b strings.Builder
	b.WriteString(strconv.FormatInt(f.At.UnixMilli(), 10))
	names := make([]string, 0, len(f.Queues))
	for name := range f.Queues {
		names = append(names, name)
	}
	slices.Sort(names)
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
	for _, name := range names {
		q := f.Queues[name]
		quiet, line := q.Advance.Quiet, q.Line
		silences := make([]string, len(quiet.Silences))
		for i, s := range quiet.Silences {
			silences[i] = g(s)
		}
		fmt.Fprintf(&b, " %s=%s,%d,%s,%d,%s,%s,%s,%d,%d,%d", name, g(q.Advance.SeqsPerAdmission), q.Waiting, g(q.ArrivalsPerSecond),
			max(0, q.Counted.Milliseconds()), g(quiet.SeqsPerPlace), g(quiet.Share), strings.Join(silences, "/"),
			line.FrontSeq, line.FrontAge.Milliseconds(), line.LastSeq)
	}
	return b.String()
}

// decodeForecast reads a forecast the plan hash holds.
func decodeForecast(s string) (*Forecast, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, fmt.Errorf("empty forecast")
	}
	at, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("forecast %q: %w", s, err)
	}
	f := &Forecast{At: time.UnixMilli(at), Queues: make(map[string]LaneForecast, len(fields)-1)}
	for _, q := range fields[1:] {
		name, figures, ok := strings.Cut(q, "=")
		lf, good := decodeLaneForecast(figures)
		if !ok || !good {
			return nil, fmt.Errorf("forecast %q: queue %q is not name=advance,waiting,arrivals[,perPlace,quiet,silences,frontSeq,frontAgeMs,lastSeq]", s, q)
		}
		f.Queues[name] = lf
	}
	return f, nil
}

func decodeLaneForecast(figures string) (LaneForecast, bool) {
	parts := strings.Split(figures, ",")
	if len(parts) != 3 && len(parts) != 10 {
		return LaneForecast{}, false
	}
	floats := func(ss ...string) ([]float64, bool) {
		out := make([]float64, len(ss))
		for i, x := range ss {
			v, err := strconv.ParseFloat(x, 64)
			if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, false
			}
			out[i] = v
		}
		return out, true
	}
	ints := func(ss ...string) ([]int64, bool) {
		out := make([]int64, len(ss))
		for i, x := range ss {
			v, err := strconv.ParseInt(x, 10, 64)
			if err != nil || v < 0 {
				return nil, false
			}
			out[i] = v
		}
		return out, true
	}
	head, ok1 := floats(parts[0], parts[2])
	waiting, ok2 := ints(parts[1])
	if !ok1 || !ok2 {
		return LaneForecast{}, false
	}
	lf := LaneForecast{Advance: capacity.Advance{SeqsPerAdmission: head[0]}, Waiting: waiting[0], ArrivalsPerSecond: head[1]}
	if len(parts) == 3 {
		lf.Counted = ArrivalsCountedEnough
		return lf, true
	}
	counted, ok0 := ints(parts[3])
	quiet, ok1 := floats(parts[4], parts[5])
	silences, ok2 := floats(strings.Split(parts[6], "/")...)
	line, ok3 := ints(parts[7], parts[8], parts[9])
	if !ok0 || !ok1 || !ok2 || !ok3 || len(silences) != len(capacity.QuietQuantiles) || quiet[1] > 1 {
		return LaneForecast{}, false
	}
	lf.Counted = time.Duration(counted[0]) * time.Millisecond
	lf.Advance.Quiet = capacity.Quiet{SeqsPerPlace: quiet[0], Share: quiet[1]}
	copy(lf.Advance.Quiet.Silences[:], silences)
	lf.Line = ForecastLine{FrontSeq: line[0], FrontAge: time.Duration(line[1]) * time.Millisecond, LastSeq: line[2]}
	return lf, true
}

// slotsField is the plan hash's field of the forecast's slots, beside the forecast so that a proxy
// that knows no slots reads the forecast as before. Each forecast writes it, empty without a cap,
// stamped with the forecast's time: a manager that knows no slots (one rolled back) writes its
// forecasts and leaves the field alone, and slots counted for another forecast are not read.
const slotsField = "slots"

// encodeSlots is the slots of forecast f as the plan hash holds them: "atMs
// max,active,heldMs,releasedPerSecond,countedMs,age0Ms/age1Ms/.../age8Ms", "" for none.
func encodeSlots(f *Forecast) string {
	s := f.Slots
	if s == nil {
		return ""
	}
	ages := make([]string, len(s.Ages))
	for i, a := range s.Ages {
		ages[i] = strconv.FormatInt(max(0, a.Milliseconds()), 10)
	}
	return fmt.Sprintf("%d %d,%d,%d,%s,%d,%s", f.At.UnixMilli(), s.Max, s.Active, max(0, s.Held.Milliseconds()),
		strconv.FormatFloat(s.ReleasedPerSecond, 'g', 6, 64), max(0, s.Counted.Milliseconds()), strings.Join(ages, "/"))
}

// decodeSlots reads the slots the plan hash holds for the forecast of time at; nil for none, for
// another forecast's, or for figures it cannot read: waits are then told from the plan alone.
func decodeSlots(s string, at time.Time) *capacity.Slots {
	stamp, figures, ok := strings.Cut(s, " ")
	if !ok || stamp != strconv.FormatInt(at.UnixMilli(), 10) {
		return nil
	}
	parts := strings.Split(figures, ",")
	if len(parts) != 6 {
		return nil
	}
	ages := strings.Split(parts[5], "/")
	if len(ages) != capacity.SlotAgeSteps+1 {
		return nil
	}
	ints := make([]int64, 0, 4+len(ages))
	for _, x := range append([]string{parts[0], parts[1], parts[2], parts[4]}, ages...) {
		v, err := strconv.ParseInt(x, 10, 64)
		if err != nil || v < 0 {
			return nil
		}
		ints = append(ints, v)
	}
	released, err := strconv.ParseFloat(parts[3], 64)
	if err != nil || released < 0 || math.IsNaN(released) || math.IsInf(released, 0) || ints[0] == 0 {
		return nil
	}
	slots := &capacity.Slots{Max: ints[0], Active: ints[1], Held: time.Duration(ints[2]) * time.Millisecond, ReleasedPerSecond: released,
		Counted: time.Duration(ints[3]) * time.Millisecond}
	for i := range slots.Ages {
		slots.Ages[i] = time.Duration(ints[4+i]) * time.Millisecond
	}
	return slots
}
