// Package svgplot writes simple line plots as standalone SVG files that any
// browser shows. It has no dependencies beyond the standard library, so the
// root module stays free of third-party code.
//
// The output is deliberately plain and easy to check: one <g class="series">
// element per series, with a data-name attribute and its style (stroke,
// stroke-dasharray, data-marker), holding one <polyline> per unbroken run of
// points and its markers. Every series has its own colour, dash pattern and
// marker, so that no line can hide another. [Render] rasterises such a
// document, for tests.
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

	"github.com/backoffkit/retry/internal/textwrap"
)

// Series is one line of a plot. X and Y must have the same length.
type Series struct {
	Name string
	X, Y []float64
	// Reference draws the series as a thin grey dashed line without
	// markers (a capacity, a limit), apart from the data series.
	Reference bool
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
	// Subtitle (the parameters) goes under the title, Caption (the
	// conclusion) under the plot, wrapped to its width.
	Subtitle, Caption string
	// LogY draws the y axis on a log10 scale; points with y <= 0 break the
	// line.
	LogY bool
	// Width and Height in pixels (0: 800×500).
	Width, Height int
	Series        []Series
	Bands         []Band
}

// palette is ten distinct colours in the order of Tableau 10 (blue,
// orange, red, teal, green, gold, purple, pink, brown, grey), darkened
// where needed so that each stands out from the white background by a
// contrast ratio of at least 3:1 (the WCAG minimum for graphics;
// [CheckReadable] checks it): Tableau's own yellow, pink, teal, orange and
// grey are too pale for thin dashed lines.
var palette = []string{"#1f77b4", "#d95f02", "#c8303a", "#178078", "#3a7d22", "#a67c00", "#7b4fa0", "#d0427f", "#8c564b", "#5f5f5f"}

// dashes and markers give every series its own look: series i has
// palette[i%10], dashes[i%7] and markers[i%7].
var (
	dashes  = []string{"", "9 4", "2 3", "12 3 3 3", "5 5", "1 5", "14 4 4 4 4 4"}
	markers = []string{"circle", "square", "triangle", "diamond", "cross", "x", "down"}
)

const (
	marginLeft   = 80
	marginRight  = 190 // at least: wider when a legend entry needs it
	marginTop    = 58
	marginBottom = 55
	captionLine  = 16 // px per caption line
	charWidth    = 6.5
)

// style is what tells a series apart.
type style struct {
	stroke, dash, marker string
	width                float64
}

func seriesStyle(i int, s Series) style {
	if s.Reference {
		return style{stroke: "#555555", dash: "4 4", width: 1.2}
	}
	return style{stroke: palette[i%len(palette)], dash: dashes[i%len(dashes)], marker: markers[i%len(markers)], width: 2}
}

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
	// The legend (a key 30 px wide, then the name) decides the right
	// margin: a long name narrows the plot instead of running off the image.
	right := marginRight
	for _, s := range p.Series {
		right = max(right, legendWidth(s.Name))
	}
	for _, band := range p.Bands {
		right = max(right, legendWidth(band.Label))
	}
	if width < marginLeft+right+50 {
		return fmt.Errorf("svgplot: %d×%d is too small for the legend", width, height)
	}
	caption := textwrap.Lines(p.Caption, int(float64(width-2*20)/charWidth), "")
	plotHeight := height
	height += len(caption) * captionLine
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
	pw := float64(width - marginLeft - right)
	ph := float64(plotHeight - marginTop - marginBottom)
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
		// The label goes into the legend: inside the plot it would sit on
		// the data.
		f(`<g class="band"><rect x="%s" y="%d" width="%s" height="%s" fill="%s" fill-opacity="%s"/></g>`+"\n", num(x0), marginTop, num(x1-x0), num(ph), bandFill, bandOpacity)
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
	for i, l := range labels(xt) {
		f(`<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(px(xt[i])), num(marginTop+ph+16), esc(l))
	}
	ylabels := labels(yt)
	if p.LogY {
		// A log axis spans decades: each tick in its own unit (500, 2k).
		for i, y := range yt {
			ylabels[i] = label(y)
		}
	}
	for i, y := range yt {
		f(`<text x="%d" y="%s" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", marginLeft-6, num(py(y)), esc(ylabels[i]))
	}
	f(`<text class="xlabel" x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", num(marginLeft+pw/2), plotHeight-12, esc(p.XLabel))
	f(`<text class="ylabel" transform="translate(18 %s) rotate(-90)" text-anchor="middle">%s</text>`+"\n", num(marginTop+ph/2), esc(p.YLabel))
	f(`<text class="title" x="%s" y="22" text-anchor="middle" font-size="16">%s</text>`+"\n", num(float64(width)/2), esc(p.Title))
	if p.Subtitle != "" {
		f(`<text class="subtitle" x="%s" y="42" text-anchor="middle" font-size="12" fill="#555">%s</text>`+"\n", num(float64(width)/2), esc(p.Subtitle))
	}
	f("</g>\n")
	if len(caption) > 0 {
		f(`<g class="caption" font-size="12" fill="#222">` + "\n")
		for i, l := range caption {
			f(`<text x="20" y="%d">%s</text>`+"\n", plotHeight+4+captionLine*i, esc(l))
		}
		f("</g>\n")
	}
	// Series: one polyline per unbroken run of plottable points.
	for i, s := range p.Series {
		st := seriesStyle(i, s)
		f(`<g class="series" data-name="%s" data-marker="%s" fill="none" stroke="%s" stroke-width="%s"%s>`+"\n",
			esc(s.Name), st.marker, st.stroke, num(st.width), dashAttr(st.dash))
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
	// Markers on top of every line, on about ten points per series (at
	// least one point in len(Series)), staggered between series so that
	// lines drawn on top of each other still show each series' markers.
	for i, s := range p.Series {
		st := seriesStyle(i, s)
		if st.marker == "" || len(s.X) == 0 {
			continue
		}
		f(`<g class="markers" data-name="%s" fill="white" stroke="%s" stroke-width="1.5">`+"\n", esc(s.Name), st.stroke)
		step := max(len(s.X)/10, len(p.Series), 1)
		for j := i * step / len(p.Series); j < len(s.X); j += step {
			x, y := s.X[j], s.Y[j]
			if !finite(x) || !finite(y) || (p.LogY && y <= 0) {
				continue
			}
			f("%s\n", markerSVG(st.marker, px(x), py(y)))
		}
		f("</g>\n")
	}
	// Legend.
	f(`<g class="legend">` + "\n")
	for i, s := range p.Series {
		st := seriesStyle(i, s)
		y := marginTop + 10 + 20*i
		lx := marginLeft + int(pw) + 12
		f(`<g class="key" data-name="%s" fill="none" stroke="%s" stroke-width="%s"%s><line x1="%d" y1="%d" x2="%d" y2="%d"/>`,
			esc(s.Name), st.stroke, num(st.width), dashAttr(st.dash), lx, y, lx+30, y)
		if st.marker != "" {
			f("%s", markerSVG(st.marker, float64(lx+15), float64(y)))
		}
		f(`</g><text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", lx+36, y, esc(s.Name))
	}
	for i, band := range p.Bands {
		if band.Label == "" {
			continue
		}
		y := marginTop + 10 + 20*(len(p.Series)+i)
		lx := marginLeft + int(pw) + 12
		f(`<g class="band-key"><rect x="%d" y="%d" width="30" height="12" fill="%s" fill-opacity="%s"/></g>`, lx, y-6, bandFill, bandOpacity)
		f(`<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", lx+36, y, esc(band.Label))
	}
	f("</g>\n</svg>\n")
	return b.Flush()
}

// bandFill and bandOpacity shade a band, in the plot and in the legend.
const (
	bandFill    = "#e15759"
	bandOpacity = "0.12"
)

// legendWidth is the right margin a legend entry needs: 12 px of gap, the
// 30 px key, 6 px, the name, 8 px to the edge.
func legendWidth(name string) int {
	return 12 + 36 + int(math.Ceil(float64(len([]rune(name)))*charWidth)) + 8
}

func dashAttr(d string) string {
	if d == "" {
		return ""
	}
	return ` stroke-dasharray="` + d + `"`
}

// markerSVG draws a marker of about 8 px centred on (x, y), without dashes.
func markerSVG(kind string, x, y float64) string {
	const r = 4.0
	poly := func(pts ...float64) string {
		var b strings.Builder
		for i := 0; i < len(pts); i += 2 {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(num(x+pts[i]) + "," + num(y+pts[i+1]))
		}
		return `<polygon class="marker" stroke-dasharray="none" points="` + b.String() + `"/>`
	}
	switch kind {
	case "circle":
		return `<circle class="marker" stroke-dasharray="none" cx="` + num(x) + `" cy="` + num(y) + `" r="` + num(r) + `"/>`
	case "square":
		return poly(-r, -r, r, -r, r, r, -r, r)
	case "triangle":
		return poly(0, -r-1, r+1, r, -r-1, r)
	case "down":
		return poly(0, r+1, r+1, -r, -r-1, -r)
	case "diamond":
		return poly(0, -r-1, r+1, 0, 0, r+1, -r-1, 0)
	case "cross":
		return `<polyline class="marker" stroke-dasharray="none" points="` + num(x-r) + "," + num(y) + " " + num(x+r) + "," + num(y) +
			`"/><polyline class="marker" stroke-dasharray="none" points="` + num(x) + "," + num(y-r) + " " + num(x) + "," + num(y+r) + `"/>`
	default: // "x"
		return `<polyline class="marker" stroke-dasharray="none" points="` + num(x-r) + "," + num(y-r) + " " + num(x+r) + "," + num(y+r) +
			`"/><polyline class="marker" stroke-dasharray="none" points="` + num(x-r) + "," + num(y+r) + " " + num(x+r) + "," + num(y-r) + `"/>`
	}
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }

// num formats a coordinate with at most one decimal.
func num(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// labels formats the ticks of a linear axis in one unit, the one label
// picks for the largest: 0, 5k, 10k … rather than 0, 5000, 10k.
func labels(ticks []float64) []string {
	top := 0.0
	for _, t := range ticks {
		top = math.Max(top, math.Abs(t))
	}
	unit, suffix := 1.0, ""
	switch {
	case top >= 1e9:
		unit, suffix = 1e9, "G"
	case top >= 1e6:
		unit, suffix = 1e6, "M"
	case top >= 1e4:
		unit, suffix = 1e3, "k"
	}
	out := make([]string, len(ticks))
	for i, t := range ticks {
		if t == 0 {
			out[i] = "0"
			continue
		}
		out[i] = strconv.FormatFloat(t/unit, 'g', 4, 64) + suffix
	}
	return out
}

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
	// The next smaller round step may fit the data more tightly (0–180:
	// ticks of 20 up to 180 instead of 50 up to 200); take it when it does,
	// with at most 10 intervals.
	span := func(s float64) (float64, float64) { return math.Floor(lo/s) * s, math.Ceil(hi/s) * s }
	if s := smallerStep(step); s > 0 {
		l0, h0 := span(step)
		l1, h1 := span(s)
		if h1-l1 < h0-l0-step/1e9 && (h1-l1)/s <= 10+1e-9 {
			step = s
		}
	}
	lo, hi = span(step)
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

// smallerStep returns the round step below step (5 → 2 → 1 → 0.5 times a
// power of ten).
func smallerStep(step float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(step)+1e-9))
	switch m := math.Round(step / p); m {
	case 1:
		return p / 2
	case 2:
		return p
	case 5:
		return 2 * p
	}
	return 0
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

// logRange widens [lo, hi] (both > 0) only to the nearest 1, 2 or 5 times
// a power of ten, so the axis stays tight around the data, with ticks at
// 1, 2 and 5 (at 1 only beyond three decades).
func logRange(lo, hi float64) (float64, float64, []float64) {
	down := func(v float64) float64 {
		p := math.Pow(10, math.Floor(math.Log10(v)))
		for _, m := range []float64{5, 2, 1} {
			if m*p <= v*(1+1e-12) {
				return m * p
			}
		}
		return p
	}
	up := func(v float64) float64 {
		p := math.Pow(10, math.Floor(math.Log10(v)))
		for _, m := range []float64{1, 2, 5, 10} {
			if m*p >= v*(1-1e-12) {
				return m * p
			}
		}
		return 10 * p
	}
	a, b := down(lo), up(hi)
	if a == b {
		b = up(b * 1.01)
	}
	mults := []float64{1, 2, 5}
	if math.Log10(b/a) > 3 {
		mults = []float64{1}
	}
	var ticks []float64
	for e := math.Floor(math.Log10(a)); e <= math.Ceil(math.Log10(b)); e++ {
		for _, m := range mults {
			if t := m * math.Pow(10, e); t >= a*(1-1e-12) && t <= b*(1+1e-12) {
				ticks = append(ticks, t)
			}
		}
	}
	return a, b, ticks
}
