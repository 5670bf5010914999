package herd

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// EstimatesReport writes the experiment's table in Markdown.
func EstimatesReport(w io.Writer, runs []EstimateRun) {
	fmt.Fprintf(w, "| scenario | visitors (admitted, judged) | position ÷ rate: entry p50 / p90, later p50 / p90, rises | the front's advance: entry p50 / p90, later p50 / p90, rises | polls refused as too early | goal |\n")
	fmt.Fprintf(w, "| --- | ---: | --- | --- | ---: | --- |\n")
	pct := func(a EstimateAccuracy) string {
		return fmt.Sprintf("%.1f / %.1f %%, %.1f / %.1f %%, %.1f %%", 100*a.EntryP50, 100*a.EntryP90, 100*a.LaterP50, 100*a.LaterP90, 100*a.Rises)
	}
	for _, r := range runs {
		goal := "met"
		if !r.Measured.MeetsGoal() {
			goal = "missed"
		}
		fmt.Fprintf(w, "| %s | %d (%d, %d) | %s | %s | %d | %s |\n", r.Scenario.Name, r.Visitors, r.Admitted, r.Measured.Judged, pct(r.Position), pct(r.Measured), r.TooEarly, goal)
	}
	for _, r := range runs {
		if len(r.Errors) > 0 {
			fmt.Fprintf(w, "\n%s: the first visitors that failed: %v\n", r.Scenario.Name, r.Errors)
		}
	}
}

// maxChartPoints bounds the points of each estimator on the chart.
const maxChartPoints = 1200

// EstimatesChart draws the judged first estimates against the waits had, both estimators.
func EstimatesChart(path string, runs []EstimateRun) error {
	p := plot.New()
	p.Title.Text = "Waits told at entry against the waits had (every scenario)"
	p.X.Label.Text = "the wait the visitor had (s)"
	p.Y.Label.Text = "the wait it was told at entry (s)"
	var now, before plotter.XYs
	top := 0.0
	var all [][3]float64
	for _, r := range runs {
		all = append(all, r.Points...)
	}
	// Every visitor of a crowd tells the same story as its neighbours: a few hundred points a crowd
	// keep the file small.
	stride := max(1, len(all)/maxChartPoints)
	for i := 0; i < len(all); i += stride {
		pt := all[i]
		now = append(now, plotter.XY{X: pt[0], Y: pt[1]})
		before = append(before, plotter.XY{X: pt[0], Y: pt[2]})
		top = math.Max(top, math.Max(pt[0], math.Max(pt[1], pt[2])))
	}
	for _, s := range []struct {
		label string
		pts   plotter.XYs
		c     color.Color
		shape draw.GlyphDrawer
	}{
		{"position ÷ rate", before, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, draw.CrossGlyph{}},
		{"the front's advance", now, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, draw.CircleGlyph{}},
	} {
		sc, err := plotter.NewScatter(s.pts)
		if err != nil {
			return err
		}
		sc.Color, sc.Shape, sc.Radius = s.c, s.shape, vg.Points(1.5)
		p.Add(sc)
		p.Legend.Add(s.label, sc)
	}
	diagonal, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: top, Y: top}})
	if err != nil {
		return err
	}
	diagonal.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	diagonal.Color = color.Gray{Y: 0x70}
	p.Add(diagonal)
	p.Legend.Add("told = had", diagonal)
	p.Legend.Top, p.Legend.Left = true, true
	return p.Save(7*vg.Inch, 6*vg.Inch, path)
}
