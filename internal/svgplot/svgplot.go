// Package svgplot writes simple line plots as standalone SVG files that any
// browser shows. It has no dependencies beyond the standard library, so the
// root module stays free of third-party code.
//
// The output is deliberately plain and easy to check: one <g class="series">
// element per series, with a data-name attribute, holding one <polyline> per
// unbroken run of points.
package svgplot

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Series is one line of a plot. X and Y must have the same length.
type Series struct {
	Name string
	X, Y []float64
}

// Band shades the x range [From, To], for example an outage.
type Band struct {
	From, To float64
	Label    string
}

// Plot is a line plot with a title, labelled axes, a legend and optional
// shaded bands.
type Plot struct {
	Title, XLabel, YLabel string
	// LogY draws the y axis on a log10 scale; points with y <= 0 break the
	// line.
	LogY bool
	// Width and Height in pixels (0: 800×500).
	Width, Height int
	Series        []Series
	Bands         []Band
}

// palette is Tableau 10, readable and distinct.
var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

const (
	marginLeft   = 80
	marginRight  = 170
	marginTop    = 40
	marginBottom = 55
)

// WriteSVG writes the plot to w as a standalone SVG document.
func (p *Plot) WriteSVG(w io.Writer) error {
	if len(p.Series) == 0 {
		return errors.New("svgplot: no series to plot")
	}
	width, height := p.Width, p.Height
	if width == 0 {
		width = 800
	}
	if height == 0 {
		height = 500
	}
	if width < marginLeft+marginRight+50 || height < marginTop+marginBottom+50 {
		return fmt.Errorf("svgplot: %d×%d is too small", width, height)
	}
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range p.Series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("svgplot: series %q has %d x values and %d y values", s.Name, len(s.X), len(s.Y))
		}
		for i := range s.X {
			x, y := s.X[i], s.Y[i]
			if !finite(x) || !finite(y) || (p.LogY && y <= 0) {
				continue
			}
			xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
			ymin, ymax = math.Min(ymin, y), math.Max(ymax, y)
		}
	}
	if xmin > xmax {
		return errors.New("svgplot: no finite point to plot")
	}
	var yt []float64
	var xt []float64
	xmin, xmax, xt = niceRange(xmin, xmax)
	if p.LogY {
		ymin, ymax, yt = logRange(ymin, ymax)
	} else {
		ymin, ymax, yt = niceRange(math.Min(ymin, 0), ymax)
	}
	pw := float64(width - marginLeft - marginRight)
	ph := float64(height - marginTop - marginBottom)
	px := func(x float64) float64 { return marginLeft + (x-xmin)/(xmax-xmin)*pw }
	py := func(y float64) float64 {
		if p.LogY {
			return marginTop + ph - (math.Log10(y)-math.Log10(ymin))/(math.Log10(ymax)-math.Log10(ymin))*ph
		}
		return marginTop + ph - (y-ymin)/(ymax-ymin)*ph
	}

	b := bufio.NewWriter(w)
	f := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	f(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	f("<title>%s</title>\n", esc(p.Title))
	f(`<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	for _, band := range p.Bands {
		x0, x1 := px(clamp(band.From, xmin, xmax)), px(clamp(band.To, xmin, xmax))
		f(`<g class="band"><rect x="%s" y="%d" width="%s" height="%s" fill="#e15759" fill-opacity="0.12"/>`, num(x0), marginTop, num(x1-x0), num(ph))
		f(`<text x="%s" y="%d" fill="#b03030">%s</text></g>`+"\n", num(x0+4), marginTop+14, esc(band.Label))
	}
	// Grid, ticks and labels.
	f(`<g class="axes" stroke="#ccc" stroke-width="1">` + "\n")
	for _, x := range xt {
		f(`<line x1="%s" y1="%d" x2="%s" y2="%s"/>`+"\n", num(px(x)), marginTop, num(px(x)), num(marginTop+ph))
	}
	for _, y := range yt {
		f(`<line x1="%d" y1="%s" x2="%s" y2="%s"/>`+"\n", marginLeft, num(py(y)), num(marginLeft+pw), num(py(y)))
	}
	f(`<rect x="%d" y="%d" width="%s" height="%s" fill="none" stroke="#333"/>`+"\n", marginLeft, marginTop, num(pw), num(ph))
	f("</g>\n")
	f(`<g class="ticks" fill="#333">` + "\n")
	for _, x := range xt {
		f(`<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(px(x)), num(marginTop+ph+16), esc(label(x)))
	}
	for _, y := range yt {
		f(`<text x="%d" y="%s" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", marginLeft-6, num(py(y)), esc(label(y)))
	}
	f(`<text class="xlabel" x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", num(marginLeft+pw/2), height-12, esc(p.XLabel))
	f(`<text class="ylabel" transform="translate(18 %s) rotate(-90)" text-anchor="middle">%s</text>`+"\n", num(marginTop+ph/2), esc(p.YLabel))
	f(`<text class="title" x="%s" y="24" text-anchor="middle" font-size="16">%s</text>`+"\n", num(marginLeft+pw/2), esc(p.Title))
	f("</g>\n")
	// Series: one polyline per unbroken run of plottable points.
	for i, s := range p.Series {
		f(`<g class="series" data-name="%s" fill="none" stroke="%s" stroke-width="2"%s>`+"\n", esc(s.Name), palette[i%len(palette)], dash(i))
		var pts []string
		flush := func() {
			if len(pts) > 0 {
				f(`<polyline points="%s"/>`+"\n", strings.Join(pts, " "))
				pts = pts[:0]
			}
		}
		for j := range s.X {
			x, y := s.X[j], s.Y[j]
			if !finite(x) || !finite(y) || (p.LogY && y <= 0) {
				flush()
				continue
			}
			pts = append(pts, num(px(x))+","+num(py(y)))
		}
		flush()
		f("</g>\n")
	}
	// Legend.
	f(`<g class="legend">` + "\n")
	for i, s := range p.Series {
		y := marginTop + 10 + 20*i
		lx := marginLeft + int(pw) + 15
		f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"%s/>`, lx, y, lx+24, y, palette[i%len(palette)], dash(i))
		f(`<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", lx+30, y, esc(s.Name))
	}
	f("</g>\n</svg>\n")
	return b.Flush()
}

// dash tells apart the series that reuse a colour: the second round of the
// palette is dashed, the third dotted.
func dash(i int) string {
	switch (i / len(palette)) % 3 {
	case 1:
		return ` stroke-dasharray="8 4"`
	case 2:
		return ` stroke-dasharray="2 3"`
	}
	return ""
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }

// num formats a coordinate with at most one decimal.
func num(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// label formats a tick value compactly (1500 → 1500, 2e6 → 2M, 0.25 → 0.25).
func label(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return strconv.FormatFloat(v/1e9, 'g', 4, 64) + "G"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 4, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'g', 4, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func esc(s string) string {
	var sb strings.Builder
	xml.EscapeText(&sb, []byte(s))
	return sb.String()
}

// niceRange widens [lo, hi] to round numbers and returns about 5 ticks.
func niceRange(lo, hi float64) (float64, float64, []float64) {
	if hi == lo {
		if lo == 0 {
			hi = 1
		} else {
			lo, hi = lo-math.Abs(lo)/2, hi+math.Abs(hi)/2
		}
	}
	step := niceStep((hi - lo) / 5)
	lo = math.Floor(lo/step) * step
	hi = math.Ceil(hi/step) * step
	var ticks []float64
	for i := 0; ; i++ {
		t := lo + float64(i)*step
		if t > hi+step/2 {
			break
		}
		ticks = append(ticks, math.Round(t/step)*step)
	}
	return lo, hi, ticks
}

// niceStep rounds a raw step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / p; {
	case f <= 1:
		return p
	case f <= 2:
		return 2 * p
	case f <= 5:
		return 5 * p
	}
	return 10 * p
}

// logRange widens [lo, hi] (both > 0) to whole decades, one tick each.
func logRange(lo, hi float64) (float64, float64, []float64) {
	a, b := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if a == b {
		b++
	}
	var ticks []float64
	for e := a; e <= b; e++ {
		ticks = append(ticks, math.Pow(10, e))
	}
	return math.Pow(10, a), math.Pow(10, b), ticks
}
