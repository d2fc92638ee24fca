package svgplot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Rendering is a document drawn by [Render].
type Rendering struct {
	// Image holds the shapes (text is not drawn).
	Image *image.RGBA
	// Drawn and Visible count, per series name, the pixels its lines and
	// markers painted and those still showing once everything is drawn:
	// a series with no visible pixel is hidden by the others.
	Drawn, Visible map[string]int
	// Styles holds each series' stroke, dash pattern and marker, in the
	// order drawn.
	Styles []SeriesStyle
	// Texts holds every horizontal text with the x range it takes,
	// estimated from its length and font size (text is not drawn, so this
	// is what tells whether a label runs off the image).
	Texts []TextBox
}

// TextBox is a horizontal text and the x range [X0, X1] it takes, about.
type TextBox struct {
	Text   string
	X0, X1 float64
}

// SeriesStyle is how a series is drawn.
type SeriesStyle struct {
	Name, Stroke, Dash, Marker string
}

// Render rasterises an SVG document written by [Plot.WriteSVG] (rects,
// lines, polylines, polygons and circles with their strokes, fills and dash
// patterns; text is skipped), so that tests can look at a plot as a reader
// would and check that every series shows.
func Render(svg []byte) (*Rendering, error) {
	d := xml.NewDecoder(bytes.NewReader(svg))
	type attrs map[string]string
	var stack []attrs
	get := func(k string) string {
		for i := len(stack) - 1; i >= 0; i-- {
			if v, ok := stack[i][k]; ok {
				return v
			}
		}
		return ""
	}
	var r *Rendering
	var owner []int16 // per pixel: index+1 of the series that painted it last
	var names []string
	var text *strings.Builder // the content of the <text> being read
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("svgplot: not well-formed: %v", err)
		}
		switch el := tok.(type) {
		case xml.CharData:
			if text != nil {
				text.Write(el)
			}
		case xml.EndElement:
			if el.Name.Local == "text" && text != nil && r != nil {
				a := stack[len(stack)-1]
				if _, rotated := a["transform"]; !rotated {
					r.Texts = append(r.Texts, textBox(text.String(), parseFloat(a["x"], 0), get("text-anchor"), parseFloat(get("font-size"), 12)))
				}
				text = nil
			}
			stack = stack[:len(stack)-1]
		case xml.StartElement:
			a := attrs{}
			for _, at := range el.Attr {
				a[at.Name.Local] = at.Value
			}
			stack = append(stack, a)
			if el.Name.Local == "svg" {
				w, _ := strconv.Atoi(a["width"])
				h, _ := strconv.Atoi(a["height"])
				if w <= 0 || h <= 0 || w > 10000 || h > 10000 {
					return nil, fmt.Errorf("svgplot: bad size %q×%q", a["width"], a["height"])
				}
				r = &Rendering{Image: image.NewRGBA(image.Rect(0, 0, w, h)), Drawn: map[string]int{}, Visible: map[string]int{}}
				owner = make([]int16, w*h)
				continue
			}
			if r == nil {
				return nil, fmt.Errorf("svgplot: <%s> before <svg>", el.Name.Local)
			}
			if el.Name.Local == "text" {
				text = &strings.Builder{}
				continue
			}
			if el.Name.Local == "g" && a["class"] == "series" {
				names = append(names, a["data-name"])
				r.Styles = append(r.Styles, SeriesStyle{Name: a["data-name"], Stroke: a["stroke"], Dash: a["stroke-dasharray"], Marker: a["data-marker"]})
			}
			series := 0
			for i := len(stack) - 1; i >= 0; i-- {
				if c := stack[i]["class"]; c == "series" || c == "markers" {
					series = slices.Index(names, stack[i]["data-name"]) + 1
					break
				}
			}
			pc := &painter{img: r.Image, owner: owner, series: int16(series), drawn: r.Drawn, name: ""}
			if series > 0 {
				pc.name = names[series-1]
			}
			stroke, fill := parseColor(get("stroke")), parseColor(get("fill"))
			width := parseFloat(get("stroke-width"), 1)
			dash := parseDash(get("stroke-dasharray"))
			switch el.Name.Local {
			case "rect":
				x, y := parseFloat(a["x"], 0), parseFloat(a["y"], 0)
				w, h := parseFloat(a["width"], 0), parseFloat(a["height"], 0)
				if fill != nil {
					pc.fillRect(x, y, w, h, fill, parseFloat(get("fill-opacity"), 1))
				}
				if stroke != nil {
					pts := []float64{x, y, x + w, y, x + w, y + h, x, y + h, x, y}
					pc.stroke(pts, stroke, width, nil)
				}
			case "line":
				if stroke != nil {
					pts := []float64{parseFloat(a["x1"], 0), parseFloat(a["y1"], 0), parseFloat(a["x2"], 0), parseFloat(a["y2"], 0)}
					pc.stroke(pts, stroke, width, dash)
				}
			case "polyline", "polygon":
				pts, err := parsePoints(a["points"])
				if err != nil {
					return nil, err
				}
				if el.Name.Local == "polygon" && len(pts) >= 2 {
					pts = append(pts, pts[0], pts[1])
				}
				if el.Name.Local == "polygon" && fill != nil {
					pc.fillPolygon(pts, fill)
				}
				if stroke != nil {
					pc.stroke(pts, stroke, width, dash)
				}
			case "circle":
				cx, cy, rad := parseFloat(a["cx"], 0), parseFloat(a["cy"], 0), parseFloat(a["r"], 0)
				var pts []float64
				for k := 0; k <= 24; k++ {
					t := 2 * math.Pi * float64(k) / 24
					pts = append(pts, cx+rad*math.Cos(t), cy+rad*math.Sin(t))
				}
				if fill != nil {
					pc.fillPolygon(pts, fill)
				}
				if stroke != nil {
					pc.stroke(pts, stroke, width, dash)
				}
			}
		}
	}
	if r == nil {
		return nil, fmt.Errorf("svgplot: no <svg> element")
	}
	for _, o := range owner {
		if o > 0 {
			r.Visible[names[o-1]]++
		}
	}
	return r, nil
}

// textBox estimates the x range of a text of the given font size drawn at
// x with the given text-anchor: an average sans-serif character is about
// 0.55 em wide.
func textBox(s string, x float64, anchor string, size float64) TextBox {
	w := float64(len([]rune(strings.TrimSpace(s)))) * 0.55 * size
	switch anchor {
	case "middle":
		x -= w / 2
	case "end":
		x -= w
	}
	return TextBox{Text: s, X0: x, X1: x + w}
}

// contrast is the WCAG contrast ratio of c against white.
func contrast(c color.RGBA) float64 {
	lin := func(v uint8) float64 {
		f := float64(v) / 255
		if f <= 0.04045 {
			return f / 12.92
		}
		return math.Pow((f+0.055)/1.055, 2.4)
	}
	l := 0.2126*lin(c.R) + 0.7152*lin(c.G) + 0.0722*lin(c.B)
	return 1.05 / (l + 0.05)
}

// painter draws into an image and records which series owns each pixel.
type painter struct {
	img    *image.RGBA
	owner  []int16
	series int16
	drawn  map[string]int
	name   string
}

func (p *painter) set(x, y int, c color.RGBA, alpha float64) {
	b := p.img.Bounds()
	if x < b.Min.X || y < b.Min.Y || x >= b.Max.X || y >= b.Max.Y {
		return
	}
	if alpha < 1 {
		o := p.img.RGBAAt(x, y)
		mix := func(a, b uint8) uint8 { return uint8(float64(a)*(1-alpha) + float64(b)*alpha) }
		c = color.RGBA{mix(o.R, c.R), mix(o.G, c.G), mix(o.B, c.B), 255}
	}
	p.img.SetRGBA(x, y, c)
	i := y*b.Dx() + x
	if p.series > 0 {
		if p.owner[i] != p.series {
			p.drawn[p.name]++
		}
		p.owner[i] = p.series
	} else if alpha >= 1 {
		p.owner[i] = 0
	}
}

// fillPolygon fills the closed polygon pts by the even-odd rule.
func (p *painter) fillPolygon(pts []float64, c *color.RGBA) {
	minY, maxY := math.Inf(1), math.Inf(-1)
	for k := 1; k < len(pts); k += 2 {
		minY, maxY = math.Min(minY, pts[k]), math.Max(maxY, pts[k])
	}
	for y := int(math.Floor(minY)); y <= int(math.Ceil(maxY)); y++ {
		fy := float64(y) + 0.5
		var xs []float64
		for k := 0; k+3 < len(pts); k += 2 {
			x0, y0, x1, y1 := pts[k], pts[k+1], pts[k+2], pts[k+3]
			if (y0 <= fy) != (y1 <= fy) {
				xs = append(xs, x0+(fy-y0)/(y1-y0)*(x1-x0))
			}
		}
		slices.Sort(xs)
		for k := 0; k+1 < len(xs); k += 2 {
			for x := int(math.Round(xs[k])); x < int(math.Round(xs[k+1])); x++ {
				p.set(x, y, *c, 1)
			}
		}
	}
}

func (p *painter) fillRect(x, y, w, h float64, c *color.RGBA, alpha float64) {
	for j := int(math.Round(y)); j < int(math.Round(y+h)); j++ {
		for i := int(math.Round(x)); i < int(math.Round(x+w)); i++ {
			p.set(i, j, *c, alpha)
		}
	}
}

// stroke draws the polyline pts (x0, y0, x1, y1, ...) with a square brush
// of the given width, following the dash pattern along the whole line.
func (p *painter) stroke(pts []float64, c *color.RGBA, width float64, dash []float64) {
	half := math.Max(width/2, 0.5)
	var period float64
	for _, d := range dash {
		period += d
	}
	dist := 0.0
	on := func() bool {
		if period <= 0 {
			return true
		}
		t := math.Mod(dist, period)
		for i, d := range dash {
			if t < d {
				return i%2 == 0
			}
			t -= d
		}
		return true
	}
	for k := 0; k+3 < len(pts); k += 2 {
		x0, y0, x1, y1 := pts[k], pts[k+1], pts[k+2], pts[k+3]
		l := math.Hypot(x1-x0, y1-y0)
		steps := max(1, int(l*2))
		for s := 0; s <= steps; s++ {
			f := float64(s) / float64(steps)
			if s > 0 {
				dist += l / float64(steps)
			}
			if !on() {
				continue
			}
			x, y := x0+(x1-x0)*f, y0+(y1-y0)*f
			for j := int(math.Floor(y - half + 0.5)); j <= int(math.Floor(y+half-0.5)); j++ {
				for i := int(math.Floor(x - half + 0.5)); i <= int(math.Floor(x+half-0.5)); i++ {
					p.set(i, j, *c, 1)
				}
			}
		}
	}
}

func parseFloat(s string, def float64) float64 {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return def
	}
	return v
}

func parseDash(s string) []float64 {
	if s == "" || s == "none" {
		return nil
	}
	var d []float64
	for _, f := range strings.Fields(strings.ReplaceAll(s, ",", " ")) {
		d = append(d, parseFloat(f, 0))
	}
	return d
}

func parsePoints(s string) ([]float64, error) {
	var pts []float64
	for _, p := range strings.Fields(s) {
		x, y, ok := strings.Cut(p, ",")
		if !ok {
			return nil, fmt.Errorf("svgplot: bad point %q", p)
		}
		pts = append(pts, parseFloat(x, 0), parseFloat(y, 0))
	}
	return pts, nil
}

// parseColor reads #rrggbb, "white" and "none" (nil).
func parseColor(s string) *color.RGBA {
	switch s {
	case "", "none":
		return nil
	case "white":
		return &color.RGBA{255, 255, 255, 255}
	}
	if len(s) == 4 && s[0] == '#' {
		s = "#" + string([]byte{s[1], s[1], s[2], s[2], s[3], s[3]})
	}
	if len(s) != 7 || s[0] != '#' {
		return &color.RGBA{0, 0, 0, 255}
	}
	v, err := strconv.ParseUint(s[1:], 16, 32)
	if err != nil {
		return &color.RGBA{0, 0, 0, 255}
	}
	return &color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 255}
}

// CheckReadable renders svg and reports the first readability problem: two
// series drawn alike (same stroke, dash pattern and marker), a series of
// which almost nothing shows (fewer than 30 visible pixels: not even one
// marker) because others cover it, a series colour too pale to see on the
// white background (a contrast ratio below 3:1, the WCAG minimum for
// graphics), or a text (a legend entry, a caption line) that runs off the
// image.
func CheckReadable(svg []byte) (*Rendering, error) {
	r, err := Render(svg)
	if err != nil {
		return nil, err
	}
	seen := map[SeriesStyle]string{}
	for _, s := range r.Styles {
		k := SeriesStyle{Stroke: s.Stroke, Dash: s.Dash, Marker: s.Marker}
		if other, ok := seen[k]; ok {
			return r, fmt.Errorf("svgplot: series %q and %q are drawn alike (%s, dash %q, marker %q)", other, s.Name, s.Stroke, s.Dash, s.Marker)
		}
		seen[k] = s.Name
		if c := parseColor(s.Stroke); c != nil && contrast(*c) < 3 {
			return r, fmt.Errorf("svgplot: series %q: its colour %s is too pale on white (contrast %.1f:1, want at least 3:1)", s.Name, s.Stroke, contrast(*c))
		}
		if v, d := r.Visible[s.Name], r.Drawn[s.Name]; v < 30 {
			return r, fmt.Errorf("svgplot: series %q is hidden: %d of its %d pixels show", s.Name, v, d)
		}
	}
	w := float64(r.Image.Bounds().Dx())
	for _, t := range r.Texts {
		if t.X0 < 0 || t.X1 > w {
			return r, fmt.Errorf("svgplot: the text %q runs off the image (x %.0f to %.0f, width %.0f)", t.Text, t.X0, t.X1, w)
		}
	}
	return r, nil
}
