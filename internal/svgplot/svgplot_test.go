package svgplot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
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
	} {
		lo, hi, ticks := niceRange(tc.lo, tc.hi)
		if lo != tc.wantLo || hi != tc.wantHi || len(ticks) != tc.wantN {
			t.Errorf("niceRange(%v, %v) = %v, %v, %v", tc.lo, tc.hi, lo, hi, ticks)
		}
	}
	lo, hi, ticks := logRange(3, 2500)
	if lo != 1 || hi != 10000 || len(ticks) != 5 {
		t.Errorf("logRange(3, 2500) = %v, %v, %v", lo, hi, ticks)
	}
}
