// Package charts is what the soak's and the bench's PNG charts share: a legend line, and plots
// stacked one above the other into a PNG file. It draws with gonum.org/v1/plot.
package charts

import (
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Line adds xys to p as a line of colour c, named name in the legend; nothing when xys is empty.
func Line(p *plot.Plot, xys plotter.XYs, c color.Color, name string) error {
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.LineStyle.Color, l.LineStyle.Width = c, vg.Points(1.2)
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// Series is one line of a chart: its points, colour and legend name.
type Series struct {
	XYs   plotter.XYs
	Color color.Color
	Name  string
}

// Lines draws each series on p with Line, in order.
func Lines(p *plot.Plot, series ...Series) error {
	for _, l := range series {
		if err := Line(p, l.XYs, l.Color, l.Name); err != nil {
			return err
		}
	}
	return nil
}

// WritePNG draws plots one above the other, aligned, on a page 32 cm wide and height high, and
// writes it to path as a PNG (creating its directory).
func WritePNG(path string, height vg.Length, plots ...*plot.Plot) error {
	img := vgimg.NewWith(vgimg.UseWH(32*vg.Centimeter, height), vgimg.UseDPI(110))
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	grid := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		grid[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(grid, tiles, draw.New(img))
	for i := range grid {
		grid[i][0].Draw(canvases[i][0])
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
