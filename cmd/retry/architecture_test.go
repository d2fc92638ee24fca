package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureListsRealPackages keeps docs/architecture.md true: every
// cmd/ path it names is a directory of the repository, every package under
// cmd/retry/internal has a row in its table, and each row's "imports"
// column names exactly the packages of the command that the package
// imports (go list's view).
func TestArchitectureListsRealPackages(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile("`(cmd/[a-z0-9/]+)`").FindAllStringSubmatch(string(doc), -1)
	if len(named) == 0 {
		t.Fatal("docs/architecture.md names no cmd/ path")
	}
	for _, m := range named {
		if fi, err := os.Stat(filepath.Join(root, m[1])); err != nil || !fi.IsDir() {
			t.Errorf("docs/architecture.md names %s, which is no directory (%v)", m[1], err)
		}
	}

	// The table: | `cmd/retry/internal/NAME` | owns | imports |.
	rows := map[string][]string{}
	rowRE := regexp.MustCompile("(?m)^\\| `cmd/retry/internal/([a-z0-9]+)` \\|.*\\| ([^|]*) \\|$")
	for _, m := range rowRE.FindAllStringSubmatch(string(doc), -1) {
		var imports []string
		for _, w := range regexp.MustCompile("`([a-z0-9]+)`").FindAllStringSubmatch(m[2], -1) {
			imports = append(imports, w[1])
		}
		rows[m[1]] = imports
	}
	dirs, err := os.ReadDir("internal")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, ok := rows[d.Name()]; d.IsDir() && !ok {
			t.Errorf("docs/architecture.md has no row for cmd/retry/internal/%s", d.Name())
		}
	}

	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./internal/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const prefix = "github.com/backoffkit/retry/cmd/retry/internal/"
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], prefix)
		var got []string
		for _, imp := range fields[1:] {
			if name, ok := strings.CutPrefix(imp, prefix); ok {
				got = append(got, name)
			}
		}
		want, ok := rows[pkg]
		if !ok {
			continue // reported above
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("docs/architecture.md: %s imports %v, the page says %v", pkg, got, want)
		}
	}
}
