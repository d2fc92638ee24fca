// Package textwrap breaks prose into lines for the terminal and for plot
// captions.
package textwrap

import (
	"strings"
	"unicode/utf8"
)

// Lines breaks s into lines of at most width characters (runes) at spaces;
// the lines after the first start with indent, which counts towards width. A
// word longer than width stands on a line of its own. Runs of white space
// become one space; s with no words gives no lines.
func Lines(s string, width int, indent string) []string {
	var lines []string
	line, n := "", 0 // n: the runes of line
	for _, w := range strings.Fields(s) {
		wn := utf8.RuneCountInString(w)
		switch {
		case line == "":
			line, n = w, wn
		case n+1+wn > width:
			lines = append(lines, line)
			line, n = indent+w, utf8.RuneCountInString(indent)+wn
		default:
			line, n = line+" "+w, n+1+wn
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
