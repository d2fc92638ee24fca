package sim

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// svgSeries parses an SVG file with encoding/xml and returns the data-name
// of each <g class="series"> in order, failing if it is not well-formed.
func svgSeries(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(b))
	var names []string
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed: %v", path, err)
		}
		if el, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = el.Name.Local
			}
			var class, name string
			for _, a := range el.Attr {
				switch a.Name.Local {
				case "class":
					class = a.Value
				case "data-name":
					name = a.Value
				}
			}
			if el.Name.Local == "g" && class == "series" {
				names = append(names, name)
			}
		}
	}
	if root != "svg" {
		t.Errorf("%s: root element %q, want svg", path, root)
	}
	return names
}

func TestContentionPlotsAndTable(t *testing.T) {
	res, err := RunContention(ContentionConfig{Clients: []int{10, 20}, Runs: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	paths, err := WriteContentionPlots(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "contention-calls.svg"), filepath.Join(dir, "contention-time.svg")}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths = %v, want %v", paths, want)
	}
	for _, p := range paths {
		if got := svgSeries(t, p); !slices.Equal(got, ContentionNames) {
			t.Errorf("%s: series %v, want %v", p, got, ContentionNames)
		}
	}
	var buf bytes.Buffer
	if err := WriteContentionTable(&buf, res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1+len(res) || !strings.Contains(lines[0], "calls_mean") || !strings.Contains(buf.String(), "jitter-at-cap") {
		t.Errorf("table:\n%s", buf.String())
	}
}

func TestOverloadPlotsAndTable(t *testing.T) {
	c := small()
	c.Strategies = strategies(t, "none", "genai")
	res, err := RunOverload(c)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	paths, err := WriteOverloadPlots(dir, "n2000", c, res)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 || filepath.Base(paths[0]) != "overload-load-n2000.svg" || filepath.Base(paths[1]) != "overload-goodput-n2000.svg" {
		t.Fatalf("paths = %v", paths)
	}
	if got := svgSeries(t, paths[0]); !slices.Equal(got, []string{"none", "genai", "capacity"}) {
		t.Errorf("load plot series %v", got)
	}
	if got := svgSeries(t, paths[1]); !slices.Equal(got, []string{"none", "genai"}) {
		t.Errorf("goodput plot series %v", got)
	}
	if n := len(res[0].Load); n != int(c.Duration/c.Bin) {
		t.Errorf("%d load bins, want %d", n, int(c.Duration/c.Bin))
	}
	var buf bytes.Buffer
	if err := WriteOverloadTable(&buf, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "amplification") || strings.Count(buf.String(), "\n") != 3 {
		t.Errorf("table:\n%s", buf.String())
	}
}
