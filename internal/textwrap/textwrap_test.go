package textwrap

import (
	"slices"
	"testing"
)

func TestLines(t *testing.T) {
	for _, c := range []struct {
		name, s string
		width   int
		indent  string
		want    []string
	}{
		{"empty", "", 10, "", nil},
		{"only spaces", "  \n\t ", 10, "", nil},
		{"fits", "a bc def", 8, "", []string{"a bc def"}},
		{"breaks at the width", "a bc def", 7, "", []string{"a bc", "def"}},
		{"folds white space", "a \n\t bc", 10, "", []string{"a bc"}},
		{"long word alone", "a abcdefghijk b", 5, "", []string{"a", "abcdefghijk", "b"}},
		{"counts runes, not bytes", "ä·ö ü·ä", 7, "", []string{"ä·ö ü·ä"}},
		{"indent counts", "aa bb cc dd", 5, "  ", []string{"aa bb", "  cc", "  dd"}},
		{"indent then fits", "aa bb cc", 8, " ", []string{"aa bb cc"}},
	} {
		if got := Lines(c.s, c.width, c.indent); !slices.Equal(got, c.want) {
			t.Errorf("%s: Lines(%q, %d, %q) = %q, want %q", c.name, c.s, c.width, c.indent, got, c.want)
		}
	}
}
