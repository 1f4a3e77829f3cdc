package charts_test

import (
	"bytes"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/spanmart/spanmart/internal/charts"
)

// Two plots stacked into a PNG of the page's size, in a directory WritePNG creates; an empty line
// is no error.
func TestWritePNG(t *testing.T) {
	top, bottom := plot.New(), plot.New()
	if err := charts.Line(top, plotter.XYs{{X: 0, Y: 1}, {X: 1, Y: 2}}, color.Black, "a line"); err != nil {
		t.Fatal(err)
	}
	if err := charts.Line(bottom, nil, color.Black, "nothing"); err != nil {
		t.Fatalf("an empty line: %v", err)
	}
	path := filepath.Join(t.TempDir(), "sub", "chart.png")
	if err := charts.WritePNG(path, 10*vg.Centimeter, top, bottom); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	// 32 × 10 cm at 110 dpi.
	if got := img.Bounds().Size(); got.X != 1386 || got.Y != 433 {
		t.Errorf("size %v, want 1386 × 433 pixels", got)
	}
}
