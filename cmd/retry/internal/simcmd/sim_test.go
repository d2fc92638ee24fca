package simcmd

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/cmd/retry/internal/clitest"
	"github.com/backoffkit/retry/redisretry/fleetsim"
)

func runSimArgs(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// runSimOK runs sim with args, which must exit 0, and returns its standard
// output.
func runSimOK(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := runSimArgs(args...)
	if code != 0 {
		t.Fatalf("%q: exit %d, stderr %q", args, code, errs)
	}
	return out
}

func TestSimContentionJSON(t *testing.T) {
	args := []string{"contention", "--clients", "10:20:10", "--runs", "3", "--seed", "9", "--json"}
	out := runSimOK(t, args...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 14 {
		t.Fatalf("%d JSON lines, want 7 strategies × 2 sizes:\n%s", len(lines), out)
	}
	seen := map[string]int{}
	for _, l := range lines {
		var row struct {
			Experiment string   `json:"experiment"`
			Strategy   string   `json:"strategy"`
			Clients    int      `json:"clients"`
			Runs       int      `json:"runs"`
			Calls      *float64 `json:"calls_mean"`
			Time       *float64 `json:"time_ms_mean"`
		}
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("bad JSON line %q: %v", l, err)
		}
		if row.Experiment != "contention" || row.Runs != 3 || (row.Clients != 10 && row.Clients != 20) || row.Calls == nil || row.Time == nil || *row.Calls < float64(row.Clients) {
			t.Errorf("bad row %q", l)
		}
		seen[row.Strategy]++
	}
	for _, s := range []string{"none", "expo", "google", "full", "equal", "decorrelated", "jitter-at-cap"} {
		if seen[s] != 2 {
			t.Errorf("strategy %s: %d rows, want 2", s, seen[s])
		}
	}
	// Same seed, same bytes; another seed, other numbers.
	if _, again, _ := runSimArgs(args...); again != out {
		t.Error("same flags printed different JSON")
	}
	args[6] = "10"
	if _, other, _ := runSimArgs(args...); other == out {
		t.Error("seeds 9 and 10 printed the same JSON")
	}
}

func TestSimContentionTableAndPlot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plots")
	code, out, errs := runSimArgs("contention", "--clients", "30", "--runs", "2", "--strategies", "full,expo", "--plot", dir)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if !strings.Contains(out, "calls_mean") || !strings.Contains(out, "full") || !strings.Contains(out, "expo") || strings.Contains(out, "decorrelated") {
		t.Errorf("table:\n%s", out)
	}
	for _, f := range []string{"contention-calls.svg", "contention-time.svg"} {
		p := filepath.Join(dir, f)
		if !strings.Contains(errs, "wrote "+p) {
			t.Errorf("stderr %q does not name %s", errs, p)
		}
		checkSVG(t, p, 2)
	}
}

func checkSVG(t *testing.T, path string, wantSeries int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(b))
	n := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: not well-formed: %v", path, err)
		}
		if el, ok := tok.(xml.StartElement); ok && el.Name.Local == "g" {
			for _, a := range el.Attr {
				if a.Name.Local == "class" && a.Value == "series" {
					n++
				}
			}
		}
	}
	if n != wantSeries {
		t.Errorf("%s: %d series, want %d", path, n, wantSeries)
	}
}

func TestSimOverload(t *testing.T) {
	dir := t.TempDir()
	out := runSimOK(t, "overload", "--clients", "1000", "--hosts", "10", "--capacity", "500", "--queue", "50",
		"--duration", "30s", "--outage-start", "5s", "--outage", "10s", "--strategies", "none,genai,ratio-budget", "--json", "--plot", dir)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), out)
	}
	amp := map[string]float64{}
	for _, l := range lines {
		var row map[string]any
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("bad JSON %q: %v", l, err)
		}
		for _, k := range []string{"strategy", "clients", "runs", "amplification", "goodput", "failed_ratio", "recovery_s", "p99_ms"} {
			if _, ok := row[k]; !ok {
				t.Errorf("row lacks %q: %s", k, l)
			}
		}
		amp[row["strategy"].(string)] = row["amplification"].(float64)
	}
	if !(amp["none"] == 1 && amp["genai"] > 3 && amp["ratio-budget"] < amp["genai"]) {
		t.Errorf("amplification %v: want none 1 < ratio-budget < genai", amp)
	}
	checkSVG(t, filepath.Join(dir, "overload-load.svg"), 4) // 3 strategies + capacity
	checkSVG(t, filepath.Join(dir, "overload-ontime.svg"), 3)
}

func TestSimUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "Usage"},
		{[]string{"bogus"}, `unknown experiment "bogus"`},
		{[]string{"contention", "--clients", "0"}, "--clients: 0: want at least 1"},
		{[]string{"contention", "--clients", "50:10:10"}, "the end 10 is below the start 50"},
		{[]string{"contention", "--clients", "ten"}, `"ten" is not a whole number`},
		{[]string{"contention", "--clients", "1:2"}, "want N or FROM:TO:STEP"},
		{[]string{"contention", "--runs", "0"}, "--runs: want at least 1"},
		{[]string{"contention", "--strategies", "full,bogus"}, `unknown contention strategy "bogus"`},
		{[]string{"contention", "--base", "0s"}, "--base 0s and --cap 2s: want 0 < --base <= --cap"},
		{[]string{"contention", "--nope"}, "flag provided but not defined: --nope"},
		{[]string{"contention", "extra"}, `unexpected argument "extra"`},
		{[]string{"overload", "--hosts", "0"}, "invalid value 0 for flag --hosts: want 1 to --clients"},
		{[]string{"overload", "--load", "0"}, "invalid value 0 for flag --load"},
		{[]string{"overload", "--outage", "2m"}, "must end within --duration"},
		{[]string{"overload", "--strategies", "profile:nope"}, "unknown profile"},
		{[]string{"overload", "--strategies", ""}, "--strategies is empty"},
	} {
		code, out, errs := runSimArgs(tc.args...)
		if code != cli.ExitUsage {
			t.Errorf("%q: exit %d, want %d", tc.args, code, cli.ExitUsage)
		}
		if out != "" && tc.args != nil {
			t.Errorf("%q: stdout %q, want nothing", tc.args, out)
		}
		if !strings.Contains(errs, tc.want) {
			t.Errorf("%q: stderr %q, want it to contain %q", tc.args, errs, tc.want)
		}
		if tc.args != nil && strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: stderr %q, want one line", tc.args, errs)
		}
	}
}

func TestSimHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"contention", "--help"}, {"overload", "-h"}} {
		code, out, errs := runSimArgs(args...)
		if code != 0 || errs != "" || !strings.Contains(out, "Usage") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	_, out, _ := runSimArgs("overload", "--help")
	for _, f := range []string{"--hosts", "--capacity", "--outage", "--drop", "--strategies", "--clients", "--seed", "--json", "--plot"} {
		if !strings.Contains(out, strings.TrimPrefix(f, "-")) {
			t.Errorf("overload help lacks %s", f)
		}
	}
}

// --plot is checked before the run: a path that is a file is bad usage
// (exit 2), reported at once, with nothing on stdout.
func TestSimPlotCheckedFirst(t *testing.T) {
	file := filepath.Join(t.TempDir(), "taken")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, exp := range [][]string{
		{"overload", "--clients", "100", "--hosts", "1", "--capacity", "50", "--duration", "10s", "--outage-start", "2s", "--outage", "2s"},
		{"contention", "--clients", "5", "--runs", "1"},
	} {
		progress := simEnv{progressAfter: 0, progressEvery: time.Hour}
		var out, errb bytes.Buffer
		code := runSimEnv(progress, append(exp, "--plot", file), &out, &errb)
		if code != cli.ExitUsage || out.Len() != 0 || !strings.Contains(errb.String(), "--plot "+file+": exists and is not a directory") {
			t.Errorf("%s --plot FILE: exit %d, stdout %q, stderr %q; want exit 2 before the run", exp[0], code, out.String(), errb.String())
		}
		if strings.Contains(errb.String(), "simulated") {
			t.Errorf("%s: the simulation ran before --plot was checked: %q", exp[0], errb.String())
		}
	}
}

// Without an outage nothing is amplified: the table says 1.00, not 0.00.
func TestSimOverloadNoOutage(t *testing.T) {
	out := runSimOK(t, "overload", "--clients", "200", "--hosts", "2", "--capacity", "100", "--duration", "10s",
		"--outage", "0", "--strategies", "none,genai")
	rows := 0
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) > 5 && (f[0] == "none" || f[0] == "genai") {
			rows++
			if f[1] != "1.00" { // amp
				t.Errorf("amplification %q without an outage, want 1.00: %s", f[1], l)
			}
		}
	}
	if rows != 2 {
		t.Errorf("%d rows for none and genai, want 2:\n%s", rows, out)
	}
	if !strings.Contains(out, "Conclusion: without an outage") {
		t.Errorf("no conclusion for a run without an outage:\n%s", out)
	}
}

// The overload table explains itself: a legend of its columns, a note on
// each throttle with its measured reject probability and why it recovers
// late, and a conclusion computed from the rows.
func TestSimOverloadReport(t *testing.T) {
	var out, errb bytes.Buffer
	env := simEnv{progressAfter: 0, progressEvery: time.Hour}
	code := runSimEnv(env, []string{"overload", "--clients", "1000", "--hosts", "10", "--capacity", "500", "--queue", "50",
		"--duration", "40s", "--outage-start", "5s", "--outage", "15s",
		"--strategies", "none,genai,ratio-budget,adaptive-throttle,adaptive-throttle-sent-10s"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	s := flat(out.String())
	checkProseFits(t, out.String())
	for _, want := range []string{
		"amp attempts per request", "recovery_s from the end of the outage", "served); never: not within the run",
		"note: adaptive-throttle rejected requests locally with p = ", "note: adaptive-throttle-sent-10s rejected",
		"why: the SRE throttle counts the requests it rejects as requests",
		"Conclusion: genai multiplied the load ", "ratio-budget held it to 1.",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	// Progress on stderr: with progressAfter 0 the last line is shown.
	if !strings.Contains(errb.String(), "retry sim overload: 5/5 strategies simulated") {
		t.Errorf("stderr %q: want the final progress line", errb.String())
	}
}

func TestSimContentionReport(t *testing.T) {
	out := runSimOK(t, "contention", "--clients", "10:40:30", "--runs", "3")
	checkProseFits(t, out)
	for _, want := range []string{"calls_mean conditional writes per run", "Conclusion: at 40 clients ", "did the least work",
		"backoff without jitter (expo) needed "} {
		if !strings.Contains(flat(out), want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestSimFleet(t *testing.T) {
	// retry sim fleet runs the real limiters (redisretry/fleetsim), not a
	// copy of their models (issue 21 phase 3): the fleet's quota keeps the
	// server within its quota, the processes alone do not.
	dir := t.TempDir()
	args := []string{"fleet", "--processes", "4", "--clients", "5", "--think", "200ms", "--duration", "30s", "--quota", "60/10s", "--json", "--plot", dir}
	out := runSimOK(t, args...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(fleetStrategies) {
		t.Fatalf("%d lines, want %d strategies:\n%s", len(lines), len(fleetStrategies), out)
	}
	rows := map[string]map[string]any{}
	for _, l := range lines {
		var row map[string]any
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("bad JSON %q: %v", l, err)
		}
		for _, k := range []string{"name", "clients", "processes", "attempts", "rejected_429", "utilisation", "seed"} {
			if _, ok := row[k]; !ok {
				t.Errorf("row lacks %q: %.200s", k, l)
			}
		}
		rows[row["name"].(string)] = row
	}
	for _, s := range []string{"fleet", "fleet-quota"} {
		if rows[s]["rejected_429"].(float64) != 0 || rows[s]["seconds_over"].(float64) != 0 || rows[s]["attempts"].(float64) == 0 {
			t.Errorf("%s: %v answered 429, %v seconds over the quota, %v attempts; want 0, 0, some", s, rows[s]["rejected_429"], rows[s]["seconds_over"], rows[s]["attempts"])
		}
	}
	if rows["local"]["rejected_429"].(float64) == 0 || rows["local"]["clients"].(float64) != 5 {
		t.Errorf("local: %v answered 429 (want some), clients %v", rows["local"]["rejected_429"], rows["local"]["clients"])
	}
	checkSVG(t, filepath.Join(dir, "fleetsim-load.svg"), len(fleetStrategies)+1) // the strategies + the quota
	checkSVG(t, filepath.Join(dir, "fleetsim-429.svg"), len(fleetStrategies))
	checkSVG(t, filepath.Join(dir, "fleetsim-ahead.svg"), len(fleetStrategies))
	if _, again, _ := runSimArgs(args...); again != out {
		t.Error("same flags printed different JSON")
	}

	out = runSimOK(t, "fleet", "--processes", "3", "--clients", "2:4:2", "--duration", "20s", "--quota", "20/5s", "--strategies", "local,fleet")
	for _, want := range []string{"3 processes × 2 callers (think 1s, deadline 30s), quota 20/5s", "3 processes × 4 callers", "the real redisretry limiters",
		"answered 429", "seconds over quota+2%", "decided without Redis"} {
		if !strings.Contains(flat(out), want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fleet", "--quota", "fast"}, `invalid value "fast" for flag --quota: want COUNT/PERIOD`},
		{[]string{"fleet", "--quota", "0/1s"}, "the count must be a whole number > 0"},
		{[]string{"fleet", "--quota", "99999999999/1s"}, "more than 1 per nanosecond (at most 1000000000 per 1s)"},
		{[]string{"fleet", "--processes", "0"}, "--processes 0: want 1 to 100,000"},
		{[]string{"fleet", "--processes", "100001"}, "--processes 100001: want 1 to 100,000"},
		{[]string{"fleet", "--clients", "0"}, "--clients"},
		{[]string{"fleet", "--duration", "0s"}, "--duration 0s: want more than 0"},
		{[]string{"fleet", "--think", "-1s"}, "--think"},
		{[]string{"fleet", "--deadline", "-1s"}, "--deadline -1s: want 0 (none) or more"},
		{[]string{"fleet", "--window", "-1s"}, "--window -1s"},
		{[]string{"fleet", "--strategies", "local,bogus"}, `unknown fleet strategy "bogus"`},
		{[]string{"fleet", "--strategies", ""}, "--strategies is empty"},
		{[]string{"fleet", "--jobs", "10"}, "flag provided but not defined: --jobs"},
	} {
		code, out, errs := runSimArgs(tc.args...)
		if code != cli.ExitUsage || out != "" || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", tc.args, code, out, errs, tc.want)
		}
	}
}

// flat joins a report's folded lines: every run of white space becomes one
// space.
func flat(s string) string { return strings.Join(strings.Fields(s), " ") }

// checkProseFits checks that a report's legend, notes and conclusion (all
// after the table's blank line) fit 80 columns (review 3, item 22: lines
// of up to 339 columns).
// TestSimTablesFit80Columns: every line of the overload and fleet reports,
// their tables included, fits 80 columns with the default strategies (the
// tables were 134 and 127 columns wide and wrapped row by row).
func TestSimTablesFit80Columns(t *testing.T) {
	for _, args := range [][]string{
		{"overload", "--clients", "1000", "--hosts", "10", "--capacity", "500", "--queue", "50", "--duration", "20s", "--outage-start", "5s", "--outage", "5s"},
		{"overload", "--clients", "200:400:200", "--hosts", "10", "--capacity", "500", "--queue", "50", "--duration", "10s", "--outage-start", "2s", "--outage", "2s"},
		{"fleet", "--processes", "4", "--clients", "5", "--duration", "20s", "--quota", "60/10s"},
	} {
		out := runSimOK(t, args...)
		for _, l := range strings.Split(out, "\n") {
			if w := clitest.DisplayWidth(l); w > 80 {
				t.Errorf("%q: a line of %d columns: %q", args, w, l)
			}
		}
		if !strings.Contains(out, "strategy") && !strings.Contains(out, "answered 429") {
			t.Errorf("%q: no table:\n%s", args, out)
		}
	}
}

func checkProseFits(t *testing.T, report string) {
	t.Helper()
	_, prose, ok := strings.Cut(report, "\n\n")
	if !ok {
		t.Fatalf("no blank line after the table:\n%s", report)
	}
	for _, l := range strings.Split(prose, "\n") {
		if w := clitest.DisplayWidth(l); w > 80 {
			t.Errorf("a line of %d columns:\n%s", w, l)
		}
	}
}

// TestSimFleetStep: retry sim fleet --scenario step runs issue 24's
// comparison (fleetsim.StepScenario) and prints its table.
func TestSimFleetStep(t *testing.T) {
	out := runSimOK(t, "fleet", "--scenario", "step", "--seed", "3")
	// The command prints the library's own report of the same runs: the
	// auto and quota rows of seed 3, as fleetsim.WriteSteps writes them.
	for _, p := range []fleetsim.Pacing{fleetsim.PaceAuto, fleetsim.PaceQuota} {
		r, err := fleetsim.Run(fleetsim.StepScenario(p, 3))
		if err != nil {
			t.Fatal(err)
		}
		var want strings.Builder
		if err := fleetsim.WriteSteps(&want, r); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimRight(want.String(), "\n"), "\n") {
			if !strings.Contains(out, line+"\n") {
				t.Errorf("report lacks %q:\n%s", line, out)
			}
		}
	}
	if !strings.Contains(out, "seed 3:") {
		t.Errorf("report does not name seed 3:\n%s", out)
	}
	code, out, errs := runSimArgs("fleet", "--scenario", "ramp")
	if code != cli.ExitUsage || out != "" || !strings.Contains(errs, `--scenario "ramp": want step`) {
		t.Errorf("--scenario ramp: exit %d, stdout %q, stderr %q", code, out, errs)
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
		out := runSimOK(t, args...)
		inTable := false
		for _, l := range strings.Split(out, "\n") {
			switch {
			case strings.Contains(l, " strategy "):
				inTable = true
			case l == "":
				inTable = false
			}
			if w := clitest.DisplayWidth(l); w > 80 && !inTable {
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
