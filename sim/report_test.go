package sim

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/backoffkit/retry/internal/svgplot"
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
	cfg := ContentionConfig{Clients: Sizes(10, 60, 10), Runs: 3, Seed: 1}
	res, err := RunContention(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	paths, err := WriteContentionPlots(dir, cfg, res)
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
		checkReadable(t, p, "base 5ms, cap 2s, google", "runs per point, seed 1", ">At 60 clients ")
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
	c := tiny()
	c.Strategies = strategies(t, "none", "genai", "ratio-budget", "adaptive-throttle", "adaptive-throttle-sent-10s")
	res, err := RunOverload(c)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	paths, err := WriteOverloadPlots(dir, "n500", c, res)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 || filepath.Base(paths[0]) != "overload-load-n500.svg" || filepath.Base(paths[1]) != "overload-ontime-n500.svg" ||
		filepath.Base(paths[2]) != "overload-throttle-n500.svg" {
		t.Fatalf("paths = %v", paths)
	}
	names := []string{"none", "genai", "ratio-budget", "adaptive-throttle", "adaptive-throttle-sent-10s"}
	if got := svgSeries(t, paths[0]); !slices.Equal(got, append(slices.Clone(names), "capacity")) {
		t.Errorf("load plot series %v", got)
	}
	if got := svgSeries(t, paths[1]); !slices.Equal(got, names) {
		t.Errorf("on-time plot series %v", got)
	}
	if got := svgSeries(t, paths[2]); !slices.Equal(got, names[3:]) {
		t.Errorf("throttle plot series %v", got)
	}
	for _, p := range paths {
		checkReadable(t, p, "500 clients in 10 processes, capacity 250/s", "outage")
	}
	// The table's conclusion says "(see why)" for the note under it; a
	// plot has no such note. (The caption is wrapped: compare its words.)
	for _, p := range paths[:2] {
		b, _ := os.ReadFile(p)
		words := strings.Join(strings.Fields(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(string(b), " ")), " ")
		if strings.Contains(words, "see why") || !strings.Contains(words, "(see the throttle plot)") {
			t.Errorf("%s: the caption points to a note the plot does not have", p)
		}
	}
	if n := len(res[0].Load); n != int(c.Duration/c.Bin) {
		t.Errorf("%d load bins, want %d", n, int(c.Duration/c.Bin))
	}
	var buf bytes.Buffer
	if err := WriteOverloadTable(&buf, res); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), "500 clients in 10 processes, ") || !regexp.MustCompile(`\n +strategy +amp +peak +goodput +failed +recovery_s +p99_ms\n`).MatchString(buf.String()) ||
		strings.Count(buf.String(), "\n") != 2+len(names) {
		t.Errorf("table:\n%s", buf.String())
	}
}

// TestOverloadOnTimePlot: the second overload plot shows what the
// conclusion under it says. After the outage, the share of requests that
// succeed within the on-time limit stays low for a strategy that did not
// recover within the run (genai here, working off its backlog of retries)
// and is back to 1 for those that recovered at once. The old plot, of
// successes per second, showed genai highest there.
func TestOverloadOnTimePlot(t *testing.T) {
	c := tiny()
	c.Strategies = strategies(t, "none", "genai", "ratio-budget")
	res, err := RunOverload(c)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]OverloadResult{}
	for _, r := range res {
		by[r.Strategy] = r
	}
	if by["genai"].RecoveryS >= 0 || by["none"].RecoveryS != 0 || by["ratio-budget"].RecoveryS != 0 {
		t.Fatalf("recovery: genai %v, none %v, ratio-budget %v; the scenario no longer has one that does not recover",
			by["genai"].RecoveryS, by["none"].RecoveryS, by["ratio-budget"].RecoveryS)
	}
	_, plot, _ := overloadPlots(c, res)
	if !strings.Contains(plot.Title, "succeeded within 1s") || !strings.Contains(plot.Caption, "genai") {
		t.Errorf("title %q, caption %q", plot.Title, plot.Caption)
	}
	// The mean of each series over the 5 s after the outage.
	after := map[string]float64{}
	for _, s := range plot.Series {
		sum, n := 0.0, 0
		for i, x := range s.X {
			if x >= (c.OutageStart+c.Outage).Seconds()+0.5 && x < (c.OutageStart+c.Outage).Seconds()+5 && !math.IsNaN(s.Y[i]) {
				sum, n = sum+s.Y[i], n+1
			}
		}
		after[s.Name] = sum / float64(n)
	}
	t.Logf("share on time in the 5 s after the outage: %v", after)
	if after["none"] < 0.99 || after["ratio-budget"] < 0.99 || after["genai"] > 0.8 {
		t.Errorf("after the outage: none %.2f, ratio-budget %.2f, genai %.2f; want the two that recovered at 1 and genai well below",
			after["none"], after["ratio-budget"], after["genai"])
	}
	// Before the outage every strategy serves every request on time;
	// during it none does.
	for _, r := range res {
		for i, v := range r.OnTime {
			x := float64(i) * r.BinS
			if (x < c.OutageStart.Seconds()-1 && v != 1) || (x >= c.OutageStart.Seconds() && x < (c.OutageStart+c.Outage).Seconds()-10 && v > 0.05) {
				t.Errorf("%s: on time %.2f at %.1f s", r.Strategy, v, x)
				break
			}
		}
	}
}

// checkReadable renders the SVG at path as a reader would see it (every
// series in its own style and visible, see svgplot.CheckReadable), checks
// that its text includes want, and writes the PNG into $RETRY_PLOT_PNG when
// that is set, to look at.
func checkReadable(t *testing.T, path string, want ...string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := svgplot.CheckReadable(b)
	if err != nil {
		t.Errorf("%s: %v", path, err)
	}
	for _, w := range want {
		if !bytes.Contains(b, []byte(w)) {
			t.Errorf("%s lacks %q", path, w)
		}
	}
	if !bytes.Contains(b, []byte(`class="caption"`)) || !bytes.Contains(b, []byte(`class="subtitle"`)) {
		t.Errorf("%s: no subtitle or caption", path)
	}
	if dir := os.Getenv("RETRY_PLOT_PNG"); dir != "" && r != nil {
		f, err := os.Create(filepath.Join(dir, strings.TrimSuffix(filepath.Base(path), ".svg")+".png"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := png.Encode(f, r.Image); err != nil {
			t.Fatal(err)
		}
	}
}

// With too few clients to contend every strategy does the same work: the
// conclusion must not claim that jitter stopped mattering.
func TestContentionConclusionWithoutContention(t *testing.T) {
	var rows []ContentionResult
	for _, s := range ContentionNames {
		rows = append(rows, ContentionResult{Strategy: s, Clients: 5, Runs: 1, CallsMean: 15, TimeMsMean: 300})
	}
	got := contentionConclusion(rows)
	if strings.Contains(got, "stops mattering") || !strings.Contains(got, "at 5 clients there is little contention") {
		t.Errorf("conclusion without contention: %q", got)
	}
	// "none did the least work" would read as "no strategy did".
	if !strings.HasPrefix(got, "at 5 clients none (no backoff) did the least work") {
		t.Errorf("conclusion does not say what none is: %q", got)
	}
	// With contention it still says so.
	for i := range rows {
		switch rows[i].Strategy {
		case "expo", "google":
			rows[i].CallsMean = 600
		case "full":
			rows[i].CallsMean = 300
		default:
			rows[i].CallsMean = 400
		}
	}
	if got := contentionConclusion(rows); !strings.Contains(got, "full did the least work") || !strings.Contains(got, "google 600 did about as much: a jitter that does not grow") {
		t.Errorf("conclusion with contention: %q", got)
	}
}

// The throttle plot's caption gives each throttle's p and recovery in a line
// and the reason in two sentences, not the notes under the table.
func TestThrottleCaption(t *testing.T) {
	c := DefaultOverload()
	p := func(end float64) []float64 {
		return append(make([]float64, int((c.OutageStart+c.Outage)/c.Bin)), end, 0)
	}
	rows := []OverloadResult{
		{Strategy: "none", RecoveryS: 0},
		{Strategy: "adaptive-throttle", RecoveryS: -1, RejectP: p(0.74)},
		{Strategy: "adaptive-throttle-sent-10s", RecoveryS: 2.4, RejectP: p(0.97)},
	}
	got := throttleCaption(c, rows)
	want := "p when the outage ended, and the time to recover: adaptive-throttle 0.74, never; adaptive-throttle-sent-10s 0.97, 2.4 s. The SRE throttle counts"
	if !strings.HasPrefix(got, want) || strings.Contains(got, "note:") || len(got) > 450 {
		t.Errorf("caption (%d bytes) = %q, want it to start %q, without notes", len(got), got, want)
	}
	rows[1].RecoveryS = 1
	if got := throttleCaption(c, rows); strings.Contains(got, "SRE throttle counts") {
		t.Errorf("no throttle recovered late, yet the caption explains why: %q", got)
	}
}
