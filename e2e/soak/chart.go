package soak

import (
	"fmt"
	"image/color"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/spanmart/spanmart/internal/charts"
)

// rateWindow is the window over which the chart's orders/s are averaged: the samples are a second
// apart, and a per-second difference of counts read a second apart is mostly noise.
const rateWindow = 5

var (
	faultShade = color.NRGBA{R: 230, G: 80, B: 60, A: 40}
	markColor  = color.NRGBA{A: 160}
	jumpColor  = color.NRGBA{R: 40, G: 110, B: 190, A: 140}
	laneColors = map[string]color.NRGBA{
		KindKill:      {R: 200, G: 50, B: 40, A: 255},
		KindTasksDown: {R: 120, G: 60, B: 170, A: 255},
		KindPause:     {R: 40, G: 110, B: 190, A: 255},
		KindWebhooks:  {R: 230, G: 140, B: 20, A: 255},
		KindProvider:  {R: 60, G: 150, B: 70, A: 255},
	}
)

// WriteChart draws the run as a PNG: the outbox lag (the oldest unpublished row's age) and the
// order throughput (placed/s and completed/s) over time, with every fault's window shaded behind
// them and drawn on its own lane below, and the end of the load and of the drain marked.
func (r *Result) WriteChart(path string) error {
	if len(r.Samples) < 2 {
		return fmt.Errorf("chart: %d samples", len(r.Samples))
	}
	secs := func(t time.Time) float64 { return t.Sub(r.Start).Seconds() }
	end := r.Samples[len(r.Samples)-1].At.Seconds()
	type mark struct {
		name string
		x    float64
	}
	marks := []mark{{"load over", secs(r.LoadEnd)}}
	if r.Drain.Drained {
		marks = append(marks, mark{"drained", secs(r.Drained)})
	}
	windows := make([][2]float64, 0, len(r.Faults))
	for _, f := range r.Faults {
		stop := f.Ended
		if stop.IsZero() {
			stop = r.Start.Add(f.At + f.For)
		}
		windows = append(windows, [2]float64{secs(f.Started), secs(stop)})
	}

	lag := make(plotter.XYs, len(r.Samples))
	var maxLag float64
	for i, s := range r.Samples {
		lag[i] = plotter.XY{X: s.At.Seconds(), Y: s.OutboxLag}
		maxLag = max(maxLag, s.OutboxLag)
	}
	placed, completed, cancelled := rate(r.Samples, func(s Sample) int64 { return s.Placed }),
		rate(r.Samples, func(s Sample) int64 { return s.Completed }), rate(r.Samples, func(s Sample) int64 { return s.Cancelled })
	var maxRate float64
	for _, xys := range []plotter.XYs{placed, completed, cancelled} {
		for _, p := range xys {
			maxRate = max(maxRate, p.Y)
		}
	}

	top := plot.New()
	top.Title.Text = fmt.Sprintf("Spanmart soak: %s at %.1f orders/s, %d faults (seed %d)", r.Config.Duration, r.Config.Rate, len(r.Faults), r.Config.Seed)
	top.Y.Label.Text = "outbox lag (s)"
	top.Y.Min, top.Y.Max = 0, max(maxLag*1.1, 1)
	if err := shade(top, windows, top.Y.Max); err != nil {
		return err
	}
	if err := charts.Line(top, lag, color.NRGBA{R: 30, G: 60, B: 160, A: 255}, "oldest unpublished outbox row"); err != nil {
		return err
	}

	mid := plot.New()
	mid.Y.Label.Text = fmt.Sprintf("orders/s (%d s mean)", rateWindow)
	mid.Y.Min, mid.Y.Max = 0, max(maxRate*1.15, 1)
	if err := shade(mid, windows, mid.Y.Max); err != nil {
		return err
	}
	if err := charts.Lines(mid,
		charts.Series{XYs: placed, Color: color.NRGBA{R: 90, G: 90, B: 90, A: 255}, Name: "placed"},
		charts.Series{XYs: completed, Color: color.NRGBA{R: 30, G: 140, B: 60, A: 255}, Name: "completed"},
		charts.Series{XYs: cancelled, Color: color.NRGBA{R: 200, G: 120, B: 20, A: 255}, Name: "cancelled"},
	); err != nil {
		return err
	}

	lanes := plot.New()
	lanes.X.Label.Text = "seconds since the load began"
	names := FaultNames()
	lane := map[string]int{}
	var ticks plot.ConstantTicks
	for i, n := range names {
		lane[n] = len(names) - 1 - i
		ticks = append(ticks, plot.Tick{Value: float64(lane[n]), Label: n})
	}
	lanes.Y.Tick.Marker = ticks
	lanes.Y.Min, lanes.Y.Max = -0.6, float64(len(names))-0.4
	lanes.Y.Tick.Label.Font.Size = vg.Points(7)
	for i, f := range r.Faults {
		y := float64(lane[f.Name()])
		bar, err := plotter.NewPolygon(plotter.XYs{{X: windows[i][0], Y: y - 0.35}, {X: windows[i][1], Y: y - 0.35}, {X: windows[i][1], Y: y + 0.35}, {X: windows[i][0], Y: y + 0.35}})
		if err != nil {
			return err
		}
		bar.Color, bar.LineStyle.Width = laneColors[f.Kind], 0
		lanes.Add(bar)
	}
	for _, jump := range r.ClockJumps {
		x := secs(jump)
		if err := markLine(lanes, x, lanes.Y.Min, lanes.Y.Max, jumpColor); err != nil {
			return err
		}
	}

	for _, p := range []*plot.Plot{top, mid, lanes} {
		p.X.Min, p.X.Max = 0, end
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, false
		p.Legend.TextStyle.Font.Size = vg.Points(8)
		for i, m := range marks {
			if err := markLine(p, m.x, p.Y.Min, p.Y.Max, markColor); err != nil {
				return err
			}
			if p == top { // one under the other: the two marks can be seconds apart
				labels, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: m.x, Y: p.Y.Max * (0.92 - 0.08*float64(i))}}, Labels: []string{" " + m.name}})
				if err != nil {
					return err
				}
				labels.TextStyle[0].Font.Size = vg.Points(8)
				p.Add(labels)
			}
		}
	}
	lanes.Title.Text = "faults (blue lines: the sandbox's clock jumps)"
	lanes.Title.TextStyle.Font.Size = vg.Points(9)

	return charts.WritePNG(path, 24*vg.Centimeter, top, mid, lanes)
}

// rate turns a cumulative count into per-second rates over rateWindow samples.
func rate(samples []Sample, count func(Sample) int64) plotter.XYs {
	var out plotter.XYs
	for i := range samples {
		j := max(i-rateWindow, 0)
		if i == j {
			continue
		}
		dt := (samples[i].At - samples[j].At).Seconds()
		if dt <= 0 {
			continue
		}
		out = append(out, plotter.XY{X: samples[i].At.Seconds(), Y: float64(count(samples[i])-count(samples[j])) / dt})
	}
	return out
}

// shade draws every fault window as a translucent band from 0 to top.
func shade(p *plot.Plot, windows [][2]float64, top float64) error {
	for _, w := range windows {
		band, err := plotter.NewPolygon(plotter.XYs{{X: w[0], Y: 0}, {X: w[1], Y: 0}, {X: w[1], Y: top}, {X: w[0], Y: top}})
		if err != nil {
			return err
		}
		band.Color, band.LineStyle.Width = faultShade, 0
		p.Add(band)
	}
	return nil
}

func markLine(p *plot.Plot, x, y0, y1 float64, c color.Color) error {
	l, err := plotter.NewLine(plotter.XYs{{X: x, Y: y0}, {X: x, Y: y1}})
	if err != nil {
		return err
	}
	l.LineStyle.Color, l.LineStyle.Width, l.LineStyle.Dashes = c, vg.Points(0.8), []vg.Length{vg.Points(3), vg.Points(2)}
	p.Add(l)
	return nil
}
