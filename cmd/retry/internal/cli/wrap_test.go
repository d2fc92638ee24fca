package cli

import "testing"

// Wrap breaks at the width in characters; the indent of the later lines
// does not count towards it.
func TestWrap(t *testing.T) {
	for _, c := range []struct {
		s      string
		width  int
		indent string
		want   string
	}{
		{"", 10, "  ", ""},
		{"one", 10, "  ", "one"},
		{"aa bb cc dd", 5, "    ", "aa bb\n    cc dd"},
		{"aa  bb\tcc", 80, "", "aa bb cc"},
		{"ü·ä ö·ü x", 7, ">", "ü·ä ö·ü\n>x"},
		{"abcdefgh a", 3, " ", "abcdefgh\n a"},
	} {
		if got := Wrap(c.s, c.width, c.indent); got != c.want {
			t.Errorf("Wrap(%q, %d, %q) = %q, want %q", c.s, c.width, c.indent, got, c.want)
		}
	}
}
