package svgplot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// parsed is what the tests read back from an SVG document.
type parsed struct {
	root   string
	title  string
	series map[string][]int // name -> number of points of each polyline
	order  []string
	bands  int
}

func parse(t *testing.T, doc []byte) parsed {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	p := parsed{series: map[string][]int{}}
	var cur string
	var inTitle bool
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, doc)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if p.root == "" {
				p.root = el.Name.Local
				if el.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("root namespace = %q", el.Name.Space)
				}
			}
			attr := func(n string) string {
				for _, a := range el.Attr {
					if a.Name.Local == n {
						return a.Value
					}
				}
				return ""
			}
			switch {
			case el.Name.Local == "title":
				inTitle = true
			case el.Name.Local == "g" && attr("class") == "series":
				cur = attr("data-name")
				p.order = append(p.order, cur)
				p.series[cur] = p.series[cur][:0:0]
			case el.Name.Local == "g" && attr("class") == "band":
				p.bands++
			case el.Name.Local == "polyline":
				if cur == "" {
					t.Errorf("polyline outside a series")
				}
				pts := strings.Fields(attr("points"))
				for _, pt := range pts {
					var x, y float64
					if _, err := fmt.Sscanf(pt, "%g,%g", &x, &y); err != nil {
						t.Errorf("bad point %q: %v", pt, err)
					}
				}
				p.series[cur] = append(p.series[cur], len(pts))
			}
		case xml.CharData:
			if inTitle {
				p.title += string(el)
			}
		case xml.EndElement:
			if el.Name.Local == "title" {
				inTitle = false
			}
			if el.Name.Local == "g" {
				cur = ""
			}
		}
	}
	return p
}

func TestWriteSVGWellFormedWithSeries(t *testing.T) {
	p := Plot{
		Title:  `calls vs clients <"a&b">`,
		XLabel: "clients", YLabel: "calls",
		Series: []Series{
			{Name: "full", X: []float64{10, 20, 30}, Y: []float64{40, 90, 150}},
			{Name: "expo & <co>", X: []float64{10, 20, 30}, Y: []float64{50, 120, 260}},
		},
		Bands: []Band{{From: 15, To: 25, Label: "outage"}},
	}
	var buf bytes.Buffer
	if err := p.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	got := parse(t, buf.Bytes())
	if got.root != "svg" {
		t.Errorf("root element = %q, want svg", got.root)
	}
	if got.title != p.Title {
		t.Errorf("title = %q, want %q", got.title, p.Title)
	}
	if want := []string{"full", "expo & <co>"}; strings.Join(got.order, "|") != strings.Join(want, "|") {
		t.Errorf("series = %q, want %q", got.order, want)
	}
	for _, name := range got.order {
		if pl := got.series[name]; len(pl) != 1 || pl[0] != 3 {
			t.Errorf("series %q polylines = %v, want one of 3 points", name, pl)
		}
	}
	if got.bands != 1 {
		t.Errorf("bands = %d, want 1", got.bands)
	}
}

func TestLogYBreaksLineAtNonPositive(t *testing.T) {
	p := Plot{LogY: true, Series: []Series{{Name: "s", X: []float64{1, 2, 3, 4, 5}, Y: []float64{10, 100, 0, 1000, math.NaN()}}}}
	var buf bytes.Buffer
	if err := p.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	got := parse(t, buf.Bytes())
	if pl := got.series["s"]; len(pl) != 2 || pl[0] != 2 || pl[1] != 1 {
		t.Errorf("polylines = %v, want [2 1] (broken at y=0 and NaN)", pl)
	}
}

func TestWriteSVGErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Plot
		want string
	}{
		{"no series", Plot{}, "no series"},
		{"length mismatch", Plot{Series: []Series{{Name: "a", X: []float64{1}, Y: nil}}}, `series "a" has 1 x values and 0 y values`},
		{"nothing finite", Plot{Series: []Series{{Name: "a", X: []float64{math.NaN()}, Y: []float64{1}}}}, "no finite point"},
		{"too small", Plot{Width: 100, Height: 100, Series: []Series{{Name: "a", X: []float64{1}, Y: []float64{1}}}}, "too small"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.WriteSVG(io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestNiceRange(t *testing.T) {
	for _, tc := range []struct {
		lo, hi           float64
		wantLo, wantHi   float64
		wantFirst, wantN int
	}{
		{0, 97, 0, 100, 0, 6},
		{10, 190, 0, 200, 0, 5},
		{0, 0, 0, 1, 0, 6},
		// A 3 min run ends at 180, not 200; 8,021 calls end the axis at
		// 9,000, not 10,000; 0.97 at 1.
		{0, 180, 0, 180, 0, 10},
		{0, 8021, 0, 9000, 0, 10},
		{0, 0.97, 0, 1, 0, 6},
		{0, 41000, 0, 45000, 0, 10},
	} {
		lo, hi, ticks := niceRange(tc.lo, tc.hi)
		if lo != tc.wantLo || hi != tc.wantHi || len(ticks) != tc.wantN {
			t.Errorf("niceRange(%v, %v) = %v, %v, %v", tc.lo, tc.hi, lo, hi, ticks)
		}
	}
}

// Three series with the same data (as google, expo and jitter-at-cap in the
// contention experiment) must still each show: distinct styles, markers
// staggered, dashes that let the lower lines through.
func TestIdenticalSeriesStayVisible(t *testing.T) {
	x := []float64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120}
	y := []float64{100, 300, 600, 1000, 1500, 2100, 2800, 3600, 4500, 5500, 6600, 7800}
	p := Plot{Title: "t", Subtitle: "base 5ms, cap 2s", Caption: strings.Repeat("a long conclusion ", 20), XLabel: "x", YLabel: "y"}
	for _, n := range []string{"expo", "google", "jitter-at-cap", "full", "equal", "decorrelated", "none"} {
		p.Series = append(p.Series, Series{Name: n, X: x, Y: y})
	}
	p.Series = append(p.Series, Series{Name: "capacity", X: []float64{10, 120}, Y: []float64{5000, 5000}, Reference: true})
	var buf bytes.Buffer
	if err := p.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	r, err := CheckReadable(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Styles) != 8 {
		t.Fatalf("%d series rendered", len(r.Styles))
	}
	// The caption grows the image: 360 characters need several lines.
	if h := r.Image.Bounds().Dy(); h <= 500+2*captionLine {
		t.Errorf("height %d: the caption did not get its lines", h)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`class="subtitle"`)) || !bytes.Contains(buf.Bytes(), []byte(`class="caption"`)) {
		t.Error("no subtitle or caption in the SVG")
	}
}

// The old style (colour only, no dashes or markers) fails the check when
// lines coincide: the check can fail.
func TestCheckReadableCatchesHiddenSeries(t *testing.T) {
	doc := `<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100">` +
		`<g class="series" data-name="a" fill="none" stroke="#4e79a7" stroke-width="2"><polyline points="10,50 190,50"/></g>` +
		`<g class="series" data-name="b" fill="none" stroke="#f28e2b" stroke-width="2"><polyline points="10,50 190,50"/></g></svg>`
	if _, err := CheckReadable([]byte(doc)); err == nil || !strings.Contains(err.Error(), `series "a" is hidden`) {
		t.Errorf("err = %v, want series a hidden", err)
	}
	doc = strings.Replace(doc, "#f28e2b", "#4e79a7", 1)
	doc = strings.Replace(doc, "10,50 190,50\"/></g></svg>", "10,20 190,20\"/></g></svg>", 1)
	if _, err := CheckReadable([]byte(doc)); err == nil || !strings.Contains(err.Error(), "drawn alike") {
		t.Errorf("err = %v, want drawn alike", err)
	}
}

func TestLogRangeTight(t *testing.T) {
	for _, tc := range []struct{ lo, hi, wantLo, wantHi float64 }{
		{2100, 101600, 2000, 200000},
		{3, 2500, 2, 5000},
		{36, 63, 20, 100},
	} {
		lo, hi, ticks := logRange(tc.lo, tc.hi)
		if lo != tc.wantLo || hi != tc.wantHi || len(ticks) < 2 {
			t.Errorf("logRange(%v, %v) = %v, %v, %v; want %v, %v", tc.lo, tc.hi, lo, hi, ticks, tc.wantLo, tc.wantHi)
		}
	}
}

// plotOf returns a plot of the named series (the same data each), with an
// outage band, as the simulator draws them.
func plotOf(names ...string) Plot {
	p := Plot{Title: "t", XLabel: "time, s", YLabel: "y", Bands: []Band{{From: 10, To: 40, Label: "outage"}}}
	for i, n := range names {
		var x, y []float64
		for k := range 180 {
			x = append(x, float64(k))
			y = append(y, float64(100*(i+1)+k))
		}
		p.Series = append(p.Series, Series{Name: n, X: x, Y: y})
	}
	return p
}

func readable(t *testing.T, p Plot) (*Rendering, []byte, error) {
	t.Helper()
	var buf bytes.Buffer
	if err := p.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	r, err := CheckReadable(buf.Bytes())
	return r, buf.Bytes(), err
}

// The simulator's longest names (adaptive-throttle-sent-10s) used to run off
// the right edge: the legend makes room for them.
func TestLegendNamesFit(t *testing.T) {
	_, doc, err := readable(t, plotOf("none", "adaptive-throttle-sent-10s", "a-name-of-forty-characters-for-the-test"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte(">a-name-of-forty-characters-for-the-test</text>")) {
		t.Error("the long name is not in the legend")
	}
	// The check can fail: a text placed beyond the edge is reported.
	bad := bytes.Replace(doc, []byte("</svg>"), []byte(`<text x="790" y="10">off the edge</text></svg>`), 1)
	if _, err := CheckReadable(bad); err == nil || !strings.Contains(err.Error(), "runs off the image") {
		t.Errorf("err = %v, want a text that runs off the image", err)
	}
}

// Every colour of the palette stands out from white by at least 3:1; the old
// palette's yellow (#edc948, 1.6:1) and orange (#f28e2b, 2.4:1) did not.
func TestPaletteContrast(t *testing.T) {
	var names []string
	for i := range palette {
		names = append(names, fmt.Sprintf("s%d", i))
	}
	if _, _, err := readable(t, plotOf(names...)); err != nil {
		t.Error(err)
	}
	for _, c := range []string{"#edc948", "#f28e2b"} {
		doc := `<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100">` +
			`<g class="series" data-name="pale" fill="none" stroke="` + c + `" stroke-width="2"><polyline points="10,50 190,50"/></g></svg>`
		if _, err := CheckReadable([]byte(doc)); err == nil || !strings.Contains(err.Error(), "too pale") {
			t.Errorf("%s: err = %v, want too pale", c, err)
		}
	}
}

// The band's label goes into the legend, right of the plot, not on top of
// the lines inside the band.
func TestBandLabelInLegend(t *testing.T) {
	r, doc, err := readable(t, plotOf("a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	frame := regexp.MustCompile(`<rect x="80" y="58" width="([0-9.]+)" height="[0-9.]+" fill="none" stroke="#333"/>`).FindSubmatch(doc)
	if frame == nil {
		t.Fatal("no plot frame")
	}
	right, _ := strconv.ParseFloat(string(frame[1]), 64)
	right += 80
	found := false
	for _, tb := range r.Texts {
		if tb.Text == "outage" {
			found = true
			if tb.X0 < right {
				t.Errorf("the band label starts at x %.0f, inside the plot (right edge %.0f)", tb.X0, right)
			}
		}
	}
	if !found {
		t.Error("no band label")
	}
}

// The ticks of a linear axis share a unit: 0, 5k, 10k, not 0, 5000, 10k.
func TestTickLabelsShareAUnit(t *testing.T) {
	_, _, ticks := niceRange(0, 41000)
	if got, want := strings.Join(labels(ticks), " "), "0 5k 10k 15k 20k 25k 30k 35k 40k 45k"; got != want {
		t.Errorf("labels = %s, want %s", got, want)
	}
	_, _, ticks = niceRange(0, 8021)
	if got, want := strings.Join(labels(ticks), " "), "0 1000 2000 3000 4000 5000 6000 7000 8000 9000"; got != want {
		t.Errorf("labels = %s, want %s", got, want)
	}
	var buf bytes.Buffer
	p := Plot{Series: []Series{{Name: "a", X: []float64{0, 180}, Y: []float64{0, 41000}}}}
	if err := p.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(">5k</text>")) || bytes.Contains(buf.Bytes(), []byte(">5000</text>")) {
		t.Errorf("the y axis up to 45k labels 5,000 as 5000:\n%s", buf.String())
	}
}
