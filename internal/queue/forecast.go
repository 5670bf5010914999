package queue

import (
	"fmt"
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
}

// LaneForecast is one queue of a Forecast.
type LaneForecast struct {
	Advance capacity.Advance
	// Waiting is how many places the queue held.
	Waiting int64
	// ArrivalsPerSecond is how many visitors entered it a second, lately.
	ArrivalsPerSecond float64
}

// forecastField is the plan hash's field of the forecast.
const forecastField = "forecast"

// encode is f as the plan hash holds it: "atMs name=seqsPerAdmission,waiting,arrivals ...".
func (f *Forecast) encode() string {
	var b strings.Builder
	b.WriteString(strconv.FormatInt(f.At.UnixMilli(), 10))
	names := make([]string, 0, len(f.Queues))
	for name := range f.Queues {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		q := f.Queues[name]
		fmt.Fprintf(&b, " %s=%s,%d,%s", name, strconv.FormatFloat(q.Advance.SeqsPerAdmission, 'g', 6, 64), q.Waiting,
			strconv.FormatFloat(q.ArrivalsPerSecond, 'g', 6, 64))
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
		parts := strings.Split(figures, ",")
		if !ok || len(parts) != 3 {
			return nil, fmt.Errorf("forecast %q: queue %q is not name=advance,waiting,arrivals", s, q)
		}
		d, err1 := strconv.ParseFloat(parts[0], 64)
		w, err2 := strconv.ParseInt(parts[1], 10, 64)
		a, err3 := strconv.ParseFloat(parts[2], 64)
		if err1 != nil || err2 != nil || err3 != nil || d < 0 || w < 0 || a < 0 {
			return nil, fmt.Errorf("forecast %q: queue %q is not name=advance,waiting,arrivals", s, q)
		}
		f.Queues[name] = LaneForecast{Advance: capacity.Advance{SeqsPerAdmission: d}, Waiting: w, ArrivalsPerSecond: a}
	}
	return f, nil
}
