package main

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/backoffkit/retry/cmd/retry/internal/clitest"
)

// helpInvocations are every way to ask retry for a manual.
var helpInvocations = [][]string{
	{"--help"}, {"-h"}, {"help"}, {"help", "http"}, {"http", "--help"}, {"http", "-h"},
	{"help", "sim"}, {"sim", "--help"}, {"sim", "help"},
	{"sim", "contention", "--help"}, {"sim", "overload", "--help"}, {"sim", "fleet", "--help"},
	{"help", "demo"}, {"demo", "--help"},
}

// TestHelpFits80Columns: every manual fits an 80-column terminal (review 3,
// item 22: lines of up to 418 columns).
func TestHelpFits80Columns(t *testing.T) {
	for _, args := range helpInvocations {
		r := runRetry(t, "", nil, args...)
		if r.code != 0 || r.stdout == "" {
			t.Errorf("retry %q: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
			continue
		}
		if !utf8.ValidString(r.stdout) {
			t.Errorf("retry %q: not UTF-8", args)
		}
		for i, l := range strings.Split(r.stdout, "\n") {
			if w := clitest.DisplayWidth(l); w > 80 {
				t.Errorf("retry %s: line %d is %d columns:\n%s", strings.Join(args, " "), i+1, w, l)
			}
		}
	}
}
