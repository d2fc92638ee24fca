package main

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
)

// displayWidth is the number of columns s takes on a terminal: one per rune,
// a tab advancing to the next multiple of 8.
func displayWidth(s string) int {
	w := 0
	for _, r := range s {
		if r == '\t' {
			w += 8 - w%8
			continue
		}
		w++
	}
	return w
}

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
			if w := displayWidth(l); w > 80 {
				t.Errorf("retry %s: line %d is %d columns:\n%s", strings.Join(args, " "), i+1, w, l)
			}
		}
	}
}

// TestSimHelpFlagStyle: the experiments' manuals write their flags as every
// other manual of retry does, --runs, not the flag package's -runs, and list
// every flag the experiment accepts.
func TestSimHelpFlagStyle(t *testing.T) {
	goStyle := regexp.MustCompile(`(?m)^\s+-[a-z]`)
	for _, e := range simExperiments {
		code, out, _ := runSimArgs(e.name, "--help")
		if code != 0 {
			t.Fatalf("%s --help: exit %d", e.name, code)
		}
		if m := goStyle.FindString(out); m != "" {
			t.Errorf("sim %s --help writes a flag the Go way (%q):\n%s", e.name, m, out)
		}
		for _, f := range []string{"--clients N", "--seed", "--json", "--plot DIR", "--strategies LIST"} {
			if !strings.Contains(out, "  "+f) {
				t.Errorf("sim %s --help lacks %q:\n%s", e.name, f, out)
			}
		}
	}
	_, out, _ := runSimArgs("contention", "--help")
	if !strings.Contains(out, "  --runs N") {
		t.Errorf("sim contention --help lacks --runs N:\n%s", out)
	}
}

// TestSimErrorsNameTheFlag: a bad value is reported with the flag as typed
// (--capacity), never with the field of package sim's configuration
// ("capacity = 0"), for every check package sim makes.
func TestSimErrorsNameTheFlag(t *testing.T) {
	fieldStyle := regexp.MustCompile(`(^|[ :])[a-z]+ = `)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"contention", "--clients", "2000000"}, "invalid value 2000000 for flag --clients: want 1 to "},
		{[]string{"contention", "--cap", "1ms", "--base", "5ms"}, "--base 5ms and --cap 1ms: want 0 < --base <= --cap"},
		{[]string{"contention", "--jitter", "-1s"}, "invalid value -1s for flag --jitter: must not be negative"},
		{[]string{"overload", "--capacity", "0"}, "invalid value 0 for flag --capacity: want more than 0"},
		{[]string{"overload", "--load", "-1"}, "invalid value -1 for flag --load: want more than 0 (a fraction of --capacity"},
		{[]string{"overload", "--queue", "-1"}, "invalid value -1 for flag --queue: must not be negative"},
		{[]string{"overload", "--hosts", "0"}, "invalid value 0 for flag --hosts: want 1 to --clients (100000)"},
		{[]string{"overload", "--duration", "0"}, "invalid value 0s for flag --duration"},
		{[]string{"overload", "--outage", "-1s"}, "--outage -1s and --outage-start 10s: must not be negative"},
		{[]string{"overload", "--outage", "2m"}, "the outage (--outage 2m0s from --outage-start 10s) must end within --duration (1m0s)"},
		{[]string{"overload", "--drop", "--timeout", "0"}, "--drop needs a --timeout above 0"},
		{[]string{"overload", "--capacity", "1e9", "--duration", "24h"}, "requests (--capacity × --load × --duration) is too many"},
		{[]string{"fleet", "--processes", "0"}, "--processes 0: want 1 to 100,000"},
		{[]string{"fleet", "--processes", "1000", "--clients", "10000"}, "--clients 10000: want at most 1,000,000 callers in all (--processes × --clients)"},
		{[]string{"fleet", "--service", "-1s"}, "--service -1s: want 0 to 1h"},
		{[]string{"fleet", "--duration", "0"}, "--duration 0s: want more than 0"},
		{[]string{"contention", "-runs"}, "flag needs an argument: --runs"},
		{[]string{"contention", "-nope"}, "flag provided but not defined: -nope"},
	} {
		code, out, errs := runSimArgs(tc.args...)
		if code != cli.ExitUsage || out != "" {
			t.Errorf("%q: exit %d, stdout %q; want %d and nothing", tc.args, code, out, cli.ExitUsage)
		}
		if !strings.Contains(errs, tc.want) {
			t.Errorf("%q: stderr %q, want %q", tc.args, errs, tc.want)
		}
		if m := fieldStyle.FindString(errs); m != "" {
			t.Errorf("%q: stderr %q names a struct field (%q)", tc.args, errs, m)
		}
	}
}

// TestSimReportsFit80Columns: what the experiments print besides their
// tables (the header line, the legend, notes and conclusion) fits 80
// columns. The tables of overload and fleet (11 and 12 columns) are wider:
// see foldReport.
func TestSimReportsFit80Columns(t *testing.T) {
	for _, args := range [][]string{
		{"contention", "--clients", "10:20:10", "--runs", "2"},
		{"overload", "--clients", "1000", "--hosts", "10", "--capacity", "500", "--queue", "50", "--duration", "20s",
			"--outage-start", "5s", "--outage", "5s", "--strategies", "none,genai,adaptive-throttle"},
		{"fleet", "--processes", "3", "--clients", "4", "--duration", "10s"},
	} {
		code, out, errs := runSimArgs(args...)
		if code != 0 {
			t.Fatalf("%q: exit %d, stderr %q", args, code, errs)
		}
		inTable := false
		for _, l := range strings.Split(out, "\n") {
			switch {
			case strings.Contains(l, " strategy "):
				inTable = true
			case l == "":
				inTable = false
			}
			if w := displayWidth(l); w > 80 && !inTable {
				t.Errorf("%s: a line of %d columns:\n%s", args[0], w, l)
			}
		}
	}
}

// TestSimFlagParseErrorsSayWhy: a value the flag package cannot parse is
// explained (it said "parse error").
func TestSimFlagParseErrorsSayWhy(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"contention", "--runs=x"}, `invalid value "x" for flag --runs: not a whole number`},
		{[]string{"contention", "--seed", "-1"}, `invalid value "-1" for flag --seed: not a whole number`},
		{[]string{"overload", "--capacity", "lots"}, `invalid value "lots" for flag --capacity: not a number`},
		{[]string{"overload", "--drop=2"}, `invalid boolean value "2" for --drop: want true or false`},
		{[]string{"overload", "--outage", "soon"}, `invalid value "soon" for flag --outage: not a duration`},
	} {
		code, _, errs := runSimArgs(tc.args...)
		if code != cli.ExitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", tc.args, code, errs, tc.want)
		}
	}
}
