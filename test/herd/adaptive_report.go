package herd

import (
	"fmt"
	"image/color"
	"io"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// DeclaredRate and PoolRate are the reference queue's plan and its pool's full rate (the ceiling of
// an adaptive rate that makes up for no-shows), per second.
const (
	DeclaredRate = 140.0
	PoolRate     = 200.0
)

// WorkloadFindings are what a workload run shows.
type WorkloadFindings struct {
	PeakInFlight int
	PoolWaitP95  time.Duration
	// PoolWaitP95Bad is the pool wait p95 of the orders that got a connection during the bad stretch
	// and the 5 s after it.
	PoolWaitP95Bad time.Duration
	// Served is the orders per second that reached the service from 5 s after the start to the end;
	// MeanInFlight the orders in the service over that stretch, on average.
	Served, MeanInFlight float64
	// MinRate and MaxRate are the lowest and highest rate the ticks ran at.
	MinRate, MaxRate float64
	// BrakeTicks is how many ticks after the first failure the rate was at most half the rate before
	// it; -1 without failures or without such a tick.
	BrakeTicks int
	// Recovery is how long after the bad stretch the rate was back at the plan (98 %); -1 when it was
	// not within the run.
	Recovery time.Duration
}

// Analyse works out the findings of a run of w.
func Analyse(w Workload, r WorkloadRun) WorkloadFindings {
	f := WorkloadFindings{PeakInFlight: r.Backend.PeakInFlight, PoolWaitP95: p95(sortedCopy(r.Backend.Waits)), BrakeTicks: -1, Recovery: -1}
	var bad []time.Duration
	for i, at := range r.Backend.WaitsAt {
		if at >= w.From && at < w.To+5*time.Second && i < len(r.Backend.Waits) {
			bad = append(bad, r.Backend.Waits[i])
		}
	}
	f.PoolWaitP95Bad = p95(sortedCopy(bad))
	from := 5 * time.Second
	arrived := 0
	for _, a := range r.Backend.Arrivals {
		if a >= from && a < w.Length {
			arrived++
		}
	}
	f.Served = float64(arrived) / (w.Length - from).Seconds()
	f.MeanInFlight = meanInFlight(r.Backend.Series, from, w.Length)
	f.MinRate, f.MaxRate = -1, 0
	for _, t := range r.Ticks {
		if f.MinRate < 0 || t.Rate < f.MinRate {
			f.MinRate = t.Rate
		}
		f.MaxRate = max(f.MaxRate, t.Rate)
	}
	if len(r.Backend.Failures) > 0 {
		first := r.Backend.Failures[0]
		before := -1.0
		n := 0
		for _, t := range r.Ticks {
			if t.At < first {
				before = t.Rate
				continue
			}
			n++
			if before > 0 && t.Rate <= before/2 {
				f.BrakeTicks = n
				break
			}
		}
	}
	if w.To < w.Length {
		for _, t := range r.Ticks {
			if t.At >= w.To && t.Rate >= 0.98*DeclaredRate {
				f.Recovery = t.At - w.To
				break
			}
		}
	}
	return f
}

func sortedCopy(d []time.Duration) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}

// meanInFlight is the time-weighted mean of a step series over [from, to).
func meanInFlight(series []Sample, from, to time.Duration) float64 {
	var area float64
	prevAt, prev := from, 0
	for _, s := range series {
		if s.At < from {
			prev = s.InFlight
			continue
		}
		if s.At >= to {
			break
		}
		area += float64(prev) * (s.At - prevAt).Seconds()
		prevAt, prev = s.At, s.InFlight
	}
	area += float64(prev) * (to - prevAt).Seconds()
	return area / (to - from).Seconds()
}

var modeColors = map[herdgatev1alpha1.CapacityMode]color.Color{
	herdgatev1alpha1.CapacityDeclared: color.RGBA{R: 0xd9, G: 0x4a, B: 0x38, A: 0xff},
	herdgatev1alpha1.CapacityAdaptive: color.RGBA{R: 0x2f, G: 0x6f, B: 0xde, A: 0xff},
}

// WorkloadCharts draws a workload's runs: the orders in the service against the pool, and the
// admissions per second against the plan and the ceiling, Declared against Adaptive.
func WorkloadCharts(inFlightPath, ratePath string, w Workload, runs []WorkloadRun) error {
	shade := func(p *plot.Plot, top float64) error {
		if w.From == 0 && w.To >= w.Length {
			return nil
		}
		band, err := plotter.NewPolygon(plotter.XYs{{X: w.From.Seconds(), Y: 0}, {X: w.To.Seconds(), Y: 0}, {X: w.To.Seconds(), Y: top}, {X: w.From.Seconds(), Y: top}})
		if err != nil {
			return err
		}
		band.Color = color.RGBA{R: 0xee, G: 0xee, B: 0xee, A: 0xff}
		band.Width = 0
		p.Add(band)
		return nil
	}
	dashed := func(p *plot.Plot, y float64, label string) error {
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: y}, {X: w.Length.Seconds(), Y: y}})
		if err != nil {
			return err
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		l.Color = color.Gray{Y: 0x70}
		p.Add(l)
		p.Legend.Add(label, l)
		return nil
	}

	p := plot.New()
	p.Title.Text = w.Title + ": orders in the service"
	p.X.Label.Text = "time since the visitors came (s)"
	p.Y.Label.Text = "orders in the service (holding or waiting for a connection)"
	top := float64(PoolSize)
	for _, r := range runs {
		top = max(top, float64(r.Backend.PeakInFlight))
	}
	if err := shade(p, top); err != nil {
		return err
	}
	for _, r := range runs {
		pts := plotter.XYs{}
		prev := 0.0
		for _, s := range r.Backend.Series {
			x := s.At.Seconds()
			pts = append(pts, plotter.XY{X: x, Y: prev}, plotter.XY{X: x, Y: float64(s.InFlight)})
			prev = float64(s.InFlight)
		}
		if err := modeLine(p, r.Mode, fmt.Sprintf("%s (peak %d)", r.Mode, r.Backend.PeakInFlight), pts); err != nil {
			return err
		}
	}
	if err := dashed(p, PoolSize, fmt.Sprintf("connection pool (%d)", PoolSize)); err != nil {
		return err
	}
	p.Legend.Top = true
	if err := p.Save(8*vg.Inch, 4*vg.Inch, inFlightPath); err != nil {
		return err
	}

	p = plot.New()
	p.Title.Text = w.Title + ": admissions"
	p.X.Label.Text = "time since the visitors came (s)"
	p.Y.Label.Text = "visitors admitted per second (0.5 s bins)"
	if err := shade(p, PoolRate*1.1); err != nil {
		return err
	}
	for _, r := range runs {
		const bin = 500 * time.Millisecond
		counts := map[int]int{}
		last := 0
		for _, t := range r.Ticks {
			b := int(t.At / bin)
			counts[b] += t.Admitted
			last = max(last, b)
		}
		pts := plotter.XYs{}
		for b := 0; b <= last; b++ {
			pts = append(pts, plotter.XY{X: (time.Duration(b)*bin + bin/2).Seconds(), Y: float64(counts[b]) / bin.Seconds()})
		}
		if err := modeLine(p, r.Mode, string(r.Mode), pts); err != nil {
			return err
		}
	}
	if err := dashed(p, DeclaredRate, fmt.Sprintf("the plan (%.0f/s)", DeclaredRate)); err != nil {
		return err
	}
	if w.NoShows > 0 {
		if err := dashed(p, PoolRate, fmt.Sprintf("the ceiling: the pool's full rate (%.0f/s)", PoolRate)); err != nil {
			return err
		}
	}
	p.Legend.Top = true
	return p.Save(8*vg.Inch, 4*vg.Inch, ratePath)
}

// WorkloadTable writes a workload's runs as a markdown table.
func WorkloadTable(out io.Writer, w Workload, runs []WorkloadRun) {
	fmt.Fprintln(out, "| capacity | peak in service | pool wait p95 | pool wait p95, bad stretch + 5 s | orders/s reaching the service (5 s on) | mean in service | rate min … max | brake (ticks) | back at the plan after |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		f := Analyse(w, r)
		brake, back := "—", "—"
		if f.BrakeTicks >= 0 && r.Mode == herdgatev1alpha1.CapacityAdaptive {
			brake = fmt.Sprint(f.BrakeTicks)
		}
		if f.Recovery >= 0 && w.To < w.Length && r.Mode == herdgatev1alpha1.CapacityAdaptive {
			back = seconds(f.Recovery)
		}
		fmt.Fprintf(out, "| %s | %d | %s | %s | %.1f | %.1f | %.0f … %.0f | %s | %s |\n", r.Mode, f.PeakInFlight, seconds(f.PoolWaitP95),
			seconds(f.PoolWaitP95Bad), f.Served, f.MeanInFlight, f.MinRate, f.MaxRate, brake, back)
	}
}

// modeLine draws a run's points in its mode's colour, under label in the legend; no points, no line.
func modeLine(p *plot.Plot, mode herdgatev1alpha1.CapacityMode, label string, pts plotter.XYs) error {
	if len(pts) == 0 {
		return nil
	}
	line, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	line.Color, line.Width = modeColors[mode], vg.Points(1)
	p.Add(line)
	p.Legend.Add(label, line)
	return nil
}
