package svgplot

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// WriteFiles writes every plot to its file in order, creating the folder;
// it stops at the first file it cannot write and returns the paths written
// before it; a plot that cannot be drawn fails naming its file.
func TestWriteFiles(t *testing.T) {
	line := &Plot{Title: "t", Series: []Series{{Name: "s", X: []float64{0, 1}, Y: []float64{1, 2}}}}
	dir := filepath.Join(t.TempDir(), "new", "plots")
	paths, err := WriteFiles(dir, []File{{"a.svg", line}, {"b.svg", line}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a.svg"), filepath.Join(dir, "b.svg")}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths = %q, want %q", paths, want)
	}
	var svg bytes.Buffer
	if err := line.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, svg.Bytes()) {
			t.Errorf("%s: %d bytes, err %v; want the plot's %d bytes", p, len(b), err, svg.Len())
		}
	}

	// The second name is a folder: the first file is written and reported.
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	paths, err = WriteFiles(dir, []File{{"c.svg", line}, {"sub", line}, {"d.svg", line}})
	if err == nil || !slices.Equal(paths, []string{filepath.Join(dir, "c.svg")}) {
		t.Errorf("into a folder: paths %q, err %v; want [c.svg] and an error", paths, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "d.svg")); err == nil {
		t.Error("d.svg written after the failure")
	}

	// A plot that cannot be drawn: the error names its file.
	paths, err = WriteFiles(dir, []File{{"e.svg", &Plot{}}})
	if err == nil || !strings.Contains(err.Error(), "writing "+filepath.Join(dir, "e.svg")) || len(paths) != 0 {
		t.Errorf("empty plot: paths %q, err %v; want none and an error naming e.svg", paths, err)
	}

	// dir is a file: nothing is written.
	file := filepath.Join(dir, "a.svg")
	if paths, err := WriteFiles(filepath.Join(file, "x"), []File{{"f.svg", line}}); err == nil || paths != nil {
		t.Errorf("under a file: paths %q, err %v; want none and an error", paths, err)
	}
}
