package herd

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// ArrivalWindow is the window of the arrival-peak column: how many orders reach the service within
// 10 ms at worst.
const ArrivalWindow = 10 * time.Millisecond

// Table writes the results as a markdown table.
func Table(w io.Writer, runs []RunResult) {
	fmt.Fprintln(w, "| test | visitors | batch | jitter | request p95 | pass wait p95 | order p95 | orders ok | iteration mean | peak in flight | pool wait p95 | timeouts | peak arrivals / 10 ms |")
	fmt.Fprintln(w, "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range runs {
		v, b := r.Visitors, r.Backend
		fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s | %s | %.1f %% | %s | %d | %s | %d | %d |\n",
			r.Test, r.RunSpec.Visitors, r.Batch, r.Jitter, seconds(v.RequestP95), seconds(v.PassWaitP95), seconds(v.OrderP95),
			v.SuccessRate(), seconds(v.IterationMean), b.PeakInFlight, seconds(b.PoolWaitP95), b.Timeouts, b.PeakArrivals(ArrivalWindow))
	}
}

func seconds(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// Machine describes the machine a run was measured on.
func Machine() string {
	var parts []string
	if out, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "model name") {
				parts = append(parts, strings.TrimSpace(strings.SplitN(line, ":", 2)[1]))
				break
			}
		}
	}
	parts = append(parts, fmt.Sprintf("%d CPUs", runtime.NumCPU()), runtime.GOOS+"/"+runtime.GOARCH, runtime.Version())
	if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
		fields := strings.Fields(string(out))
		for _, f := range fields {
			if strings.HasPrefix(f, "v=") {
				parts = append(parts, "Redis "+strings.TrimPrefix(f, "v="))
			}
		}
	}
	return strings.Join(parts, ", ")
}

// InFlightChart draws the orders inside the service over time for the runs given (one line each,
// e.g. jitter against none), with the pool size as a dashed line, and writes it as SVG.
func InFlightChart(path, title string, runs []RunResult) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time since the first order (s)"
	p.Y.Label.Text = "orders in the service (holding or waiting for a connection)"
	colors := map[herdgatev1alpha1.JitterMode]color.Color{
		herdgatev1alpha1.JitterUniform: color.RGBA{R: 0x2f, G: 0x6f, B: 0xde, A: 0xff},
		herdgatev1alpha1.JitterNone:    color.RGBA{R: 0xd9, G: 0x4a, B: 0x38, A: 0xff},
	}
	maxX := 0.0
	for _, r := range runs {
		series := r.Backend.Series
		if len(series) == 0 {
			continue
		}
		origin := series[0].At
		pts := make(plotter.XYs, 0, 2*len(series))
		prev := 0.0
		for _, s := range series {
			x := (s.At - origin).Seconds()
			pts = append(pts, plotter.XY{X: x, Y: prev}, plotter.XY{X: x, Y: float64(s.InFlight)}) // a step line
			prev = float64(s.InFlight)
			maxX = max(maxX, x)
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		line.Color = colors[r.Jitter]
		line.Width = vg.Points(1)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("jitter %s (peak %d)", r.Jitter, r.Backend.PeakInFlight), line)
	}
	pool, err := plotter.NewLine(plotter.XYs{{X: 0, Y: PoolSize}, {X: maxX, Y: PoolSize}})
	if err != nil {
		return err
	}
	pool.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	pool.Color = color.Gray{Y: 0x70}
	p.Add(pool)
	p.Legend.Add(fmt.Sprintf("connection pool (%d)", PoolSize), pool)
	p.Legend.Top = true
	return p.Save(8*vg.Inch, 4*vg.Inch, path)
}

// Summary writes one run's measurements as a small table.
func Summary(w io.Writer, r RunResult) {
	v, b := r.Visitors, r.Backend
	fmt.Fprintf(w, "| %s | value |\n| --- | ---: |\n", v.Scenario)
	rows := [][2]string{
		{"visitors", fmt.Sprint(v.Visitors)},
		{"request duration p95", seconds(v.RequestP95)},
		{"pass wait p95", seconds(v.PassWaitP95)},
		{"order latency p95", seconds(v.OrderP95)},
		{"orders succeeded", fmt.Sprintf("%d (%.1f %%)", v.OrdersOK, v.SuccessRate())},
		{"iteration mean", seconds(v.IterationMean)},
		{"status polls (429 too early)", fmt.Sprintf("%d (%d)", v.Polls, v.TooEarly)},
	}
	if v.Busy > 0 {
		rows = append(rows, [2]string{"orders refused busy by the gateway's cap, then tried again", fmt.Sprint(v.Busy)})
	}
	if b.Pool > 0 {
		rows = append(rows,
			[2]string{"service: peak orders in flight", fmt.Sprintf("%d (pool %d)", b.PeakInFlight, b.Pool)},
			[2]string{"service: pool wait p95", seconds(b.PoolWaitP95)},
			[2]string{"service: connection timeouts", fmt.Sprint(b.Timeouts)},
			[2]string{"service: peak arrivals per 10 ms", fmt.Sprint(b.PeakArrivals(ArrivalWindow))},
		)
	}
	for _, row := range rows {
		fmt.Fprintf(w, "| %s | %s |\n", row[0], row[1])
	}
}

// Findings checks the experiment's claims against its own numbers and writes what holds.
func Findings(w io.Writer, runs []RunResult) {
	find := func(test string, batch int, j herdgatev1alpha1.JitterMode) *RunResult {
		for i := range runs {
			if runs[i].Test == test && runs[i].Batch == batch && runs[i].Jitter == j {
				return &runs[i]
			}
		}
		return nil
	}
	fmt.Fprintln(w, "\n## What the numbers say")
	for _, test := range []string{"A", "B"} {
		if r := find(test, 14, herdgatev1alpha1.JitterUniform); r != nil {
			fmt.Fprintf(w, "\n* Test %s, batch 14 with jitter: at most %d orders in the service (pool %d), %.1f %% of orders succeeded, %d timeouts.",
				test, r.Backend.PeakInFlight, PoolSize, r.Visitors.SuccessRate(), r.Backend.Timeouts)
		}
		for _, batch := range []int{500, 1000} {
			if r := find(test, batch, herdgatev1alpha1.JitterUniform); r != nil {
				fmt.Fprintf(w, "\n* Test %s, batch %d: up to %d orders in the service against a pool of %d; pool wait p95 %s, %d timeouts.",
					test, batch, r.Backend.PeakInFlight, PoolSize, seconds(r.Backend.PoolWaitP95), r.Backend.Timeouts)
			}
		}
		on, off := find(test, 14, herdgatev1alpha1.JitterUniform), find(test, 14, herdgatev1alpha1.JitterNone)
		if on != nil && off != nil {
			a, b := on.Backend.PeakArrivals(ArrivalWindow), off.Backend.PeakArrivals(ArrivalWindow)
			fmt.Fprintf(w, "\n* Test %s, batch 14: the most orders arriving within 10 ms were %d with jitter and %d without (%.1f×).",
				test, a, b, float64(b)/float64(max(1, a)))
		}
	}
	fmt.Fprintln(w)
}
