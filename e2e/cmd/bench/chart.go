package main

import (
	"fmt"
	"image/color"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/spanmart/spanmart/internal/charts"
)

// bin is what the requests sent in one sampleEvery of the overload run did.
type bin struct {
	offered, accepted    int
	acceptedP99, shedP99 time.Duration
}

// binAttempts groups attempts by when they were sent, every `every` from start.
func binAttempts(attempts []attempt, start time.Time, every time.Duration) []bin {
	var took [][2][]time.Duration // per bin: accepted, shed
	var out []bin
	for _, a := range attempts {
		if a.sent.Before(start) {
			continue
		}
		i := int(a.sent.Sub(start) / every)
		for len(out) <= i {
			out = append(out, bin{})
			took = append(took, [2][]time.Duration{})
		}
		out[i].offered++
		switch a.outcome {
		case outAccepted:
			out[i].accepted++
			took[i][0] = append(took[i][0], a.took)
		case outShed:
			took[i][1] = append(took[i][1], a.took)
		}
	}
	for i := range out {
		sortDur(took[i][0])
		sortDur(took[i][1])
		out[i].acceptedP99, out[i].shedP99 = pct(took[i][0], 99), pct(took[i][1], 99)
	}
	return out
}

// writeChart draws the run as a PNG: offered, accepted and completed orders/s against the
// capacity, and the POST p99s of accepted and shed orders against their targets, every
// sampleEvery, with the windows' edges marked.
func (r *overloadRun) writeChart(path string) error {
	var attempts []attempt
	for _, ph := range r.phases {
		attempts = append(attempts, ph.pl.attempts...)
	}
	bins := binAttempts(attempts, r.start, sampleEvery)
	if len(bins) < 2 || len(r.samples) < 2 {
		return fmt.Errorf("chart: %d intervals, %d samples", len(bins), len(r.samples))
	}
	per := sampleEvery.Seconds()
	// The last interval ends with the drain, mostly before a whole sampleEvery.
	last := r.phases[len(r.phases)-1].to.Sub(r.start).Seconds() - float64(len(bins)-1)*per
	var offered, accepted, completed, accP99, shedP99 plotter.XYs
	for i, b := range bins {
		x, secs := (float64(i)+0.5)*per, per
		if i == len(bins)-1 && last > 0 {
			secs = min(per, last)
		}
		offered = append(offered, plotter.XY{X: x, Y: float64(b.offered) / secs})
		accepted = append(accepted, plotter.XY{X: x, Y: float64(b.accepted) / secs})
		if b.accepted > 0 {
			accP99 = append(accP99, plotter.XY{X: x, Y: float64(b.acceptedP99) / float64(time.Millisecond)})
		}
		if b.shedP99 > 0 {
			shedP99 = append(shedP99, plotter.XY{X: x, Y: float64(b.shedP99) / float64(time.Millisecond)})
		}
	}
	for i := 1; i < len(r.samples); i++ {
		a, b := r.samples[i-1], r.samples[i]
		completed = append(completed, plotter.XY{X: (a.at.Sub(r.start) + b.at.Sub(r.start)).Seconds() / 2, Y: completedPerSec(a, b)})
	}
	end := max(float64(len(bins))*per, r.samples[len(r.samples)-1].at.Sub(r.start).Seconds())

	top := plot.New()
	top.Title.Text = fmt.Sprintf("Spanmart overload: capacity %v orders/s, %d × %s at %v×, then %v× until drained", r.capacity, overloadWindows, r.b.o.overloadWindow, overloadFactor, drainFactor)
	top.Y.Label.Text = fmt.Sprintf("orders/s (%s means)", sampleEvery)
	top.Y.Min = 0
	if err := charts.Lines(top,
		charts.Series{XYs: offered, Color: color.NRGBA{R: 90, G: 90, B: 90, A: 255}, Name: "offered"},
		charts.Series{XYs: accepted, Color: color.NRGBA{R: 30, G: 60, B: 160, A: 255}, Name: "accepted"},
		charts.Series{XYs: completed, Color: color.NRGBA{R: 30, G: 140, B: 60, A: 255}, Name: "completed"},
	); err != nil {
		return err
	}
	if err := charts.Line(top, plotter.XYs{{X: 0, Y: goodputShare * r.capacity}, {X: end, Y: goodputShare * r.capacity}}, color.NRGBA{R: 30, G: 140, B: 60, A: 120},
		fmt.Sprintf("%.0f %% of the capacity", goodputShare*100)); err != nil {
		return err
	}

	bottom := plot.New()
	bottom.X.Label.Text = "seconds since the first overload window began"
	bottom.Y.Label.Text = "POST /v1/orders p99 (ms)"
	bottom.Y.Min = 0
	if err := charts.Lines(bottom,
		charts.Series{XYs: accP99, Color: color.NRGBA{R: 30, G: 60, B: 160, A: 255}, Name: "accepted"},
		charts.Series{XYs: shedP99, Color: color.NRGBA{R: 200, G: 50, B: 40, A: 255}, Name: "shed (503)"},
		charts.Series{XYs: plotter.XYs{{X: 0, Y: ms64(acceptedP99Goal)}, {X: end, Y: ms64(acceptedP99Goal)}}, Color: color.NRGBA{R: 30, G: 60, B: 160, A: 110}, Name: "accepted target"},
		charts.Series{XYs: plotter.XYs{{X: 0, Y: ms64(shedP99Goal)}, {X: end, Y: ms64(shedP99Goal)}}, Color: color.NRGBA{R: 200, G: 50, B: 40, A: 110}, Name: "shed target"},
	); err != nil {
		return err
	}

	for _, p := range []*plot.Plot{top, bottom} {
		p.X.Min, p.X.Max = 0, end
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, false
		p.Legend.TextStyle.Font.Size = vg.Points(8)
		for _, ph := range r.phases[1:] {
			x := ph.from.Sub(r.start).Seconds()
			edge, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: max(p.Y.Max, 1)}})
			if err != nil {
				return err
			}
			edge.LineStyle.Color, edge.LineStyle.Width, edge.LineStyle.Dashes = color.NRGBA{A: 160}, vg.Points(0.8), []vg.Length{vg.Points(3), vg.Points(2)}
			p.Add(edge)
		}
	}

	return charts.WritePNG(path, 18*vg.Centimeter, top, bottom)
}

func ms64(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
