package retry_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestArchitectureDocListsRealPackages: every package in the first column
// of docs/architecture*.md's tables is a directory of the repository with
// Go code in it; a package that moves or disappears fails this until the
// page says so.
func TestArchitectureDocListsRealPackages(t *testing.T) {
	docs, err := filepath.Glob("docs/architecture*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/architecture*.md (%v)", err)
	}
	row := regexp.MustCompile("^\\| `([a-z0-9/]+)`")
	n := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			m := row.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			n++
			dir := m[1]
			if dir == "retry" {
				dir = "." // the root package
			}
			code, _ := filepath.Glob(filepath.Join(dir, "*.go"))
			if len(code) == 0 {
				t.Errorf("%s lists package %s: no Go file in %s", doc, m[1], dir)
			}
		}
	}
	if n < 10 {
		t.Errorf("%d packages found in %v, want the table of every library package", n, docs)
	}
}
