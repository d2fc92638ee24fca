package fleetsim

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/backoffkit/retry/internal/svgplot"
)

// row is one line of the table: a label and how to show a Result's value.
type row struct {
	label string
	value func(r *Result) string
}

var rows = []row{
	{"quota", func(r *Result) string { return r.Quota }},
	{"processes", func(r *Result) string { return fmt.Sprint(r.Processes) }},
	{"calls offered per s", func(r *Result) string { return fmt.Sprintf("%.2f", r.Offered) }},
	{"attempts sent per s", func(r *Result) string { return fmt.Sprintf("%.2f", float64(r.Attempts)/r.Measured) }},
	{"utilisation", func(r *Result) string { return pct(r.Utilisation) }},
	{"wait p50", func(r *Result) string { return secs(r.WaitP50) }},
	{"wait p99", func(r *Result) string { return secs(r.WaitP99) }},
	{"refused at the deadline", func(r *Result) string { return pct(r.RefusedShare) }},
	{"  of which meetable", func(r *Result) string { return pct(r.MeetableShare) }},
	{"expired in an attempt", func(r *Result) string { return fmt.Sprint(r.Expired) }},
	{"answered 429", func(r *Result) string { return fmt.Sprint(r.Rejected) }},
	{"max per second (server)", func(r *Result) string { return fmt.Sprint(r.MaxSecond) }},
	{"seconds over quota+2%", func(r *Result) string { return fmt.Sprint(r.SecondsOver) }},
	{"max per period (server)", func(r *Result) string { return fmt.Sprint(r.MaxPeriod) }},
	{"Jain's fairness", func(r *Result) string { return fmt.Sprintf("%.3f", r.Jain) }},
	{"slots reserved/attempt", func(r *Result) string { return fmt.Sprintf("%.2f", r.SlotsPerAttempt) }},
	{"schedule ahead, max", func(r *Result) string { return secs(r.AheadMax) }},
	{"Redis calls/attempt", func(r *Result) string { return fmt.Sprintf("%.2f", r.PerAttempt) }},
	{"fallbacks (log lines)", func(r *Result) string { return fmt.Sprintf("%d (%d)", r.Fallbacks, r.LogLines) }},
	{"decided without Redis", func(r *Result) string { return fmt.Sprint(r.Local) }},
}

func pct(x float64) string { return fmt.Sprintf("%.1f %%", 100*x) }

func secs(s float64) string {
	switch {
	case s == 0:
		return "0"
	case s < 1:
		return fmt.Sprintf("%.0fms", s*1000)
	}
	return fmt.Sprintf("%.1fs", s)
}

// Table layout: a label column and up to four runs of 12 columns: 76.
const (
	labelWidth = 26
	colWidth   = 12
	perBlock   = 4
)

// WriteTable writes the results as a table of at most 80 columns: one line
// per measure, one column per run (in blocks of four runs), headed by each
// run's Name.
func WriteTable(w io.Writer, rs ...*Result) error {
	var b strings.Builder
	for start := 0; start < len(rs); start += perBlock {
		block := rs[start:min(start+perBlock, len(rs))]
		if start > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%-*s", labelWidth, "")
		for i, r := range block {
			name := r.Name
			if name == "" {
				name = fmt.Sprintf("run %d", start+i+1)
			}
			fmt.Fprintf(&b, "%*s", colWidth, clip(name, colWidth-1))
		}
		b.WriteByte('\n')
		for _, row := range rows {
			fmt.Fprintf(&b, "%-*s", labelWidth, row.label)
			for _, r := range block {
				fmt.Fprintf(&b, "%*s", colWidth, clip(row.value(r), colWidth-1))
			}
			b.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// WriteJSON writes the results as a JSON array, one object per run.
func WriteJSON(w io.Writer, rs ...*Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rs)
}

// Plot files written by [WritePlots].
const (
	PlotLoad    = "fleetsim-load.svg"
	PlotRejects = "fleetsim-429.svg"
	PlotAhead   = "fleetsim-ahead.svg"
)

// WritePlots writes three SVG plots of the runs' series into dir (made if
// needed): requests per second reaching the server with the quota's rate,
// 429s per second, and how far the schedule ran ahead of the server's
// clock. It returns the paths written.
func WritePlots(dir string, rs ...*Result) ([]string, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	sub := fmt.Sprintf("quota %s, %d processes, seed %d", rs[0].Quota, rs[0].Processes, rs[0].Seed)
	load := &svgplot.Plot{Title: "Requests reaching the server, per second", Subtitle: sub, XLabel: "time (s)", YLabel: "requests per second"}
	rej := &svgplot.Plot{Title: "Requests answered 429, per second", Subtitle: sub, XLabel: "time (s)", YLabel: "429s per second"}
	ahead := &svgplot.Plot{Title: "How far the schedule runs ahead of now", Subtitle: sub, XLabel: "time (s)", YLabel: "seconds ahead"}
	end := 0.0
	for i, r := range rs {
		name := r.Name
		if name == "" {
			name = fmt.Sprintf("run %d", i+1)
		}
		x := make([]float64, len(r.Load))
		for j := range x {
			x[j] = float64(j) * r.BinS
		}
		end = max(end, r.Seconds)
		load.Series = append(load.Series, svgplot.Series{Name: name, X: x, Y: r.Load})
		rej.Series = append(rej.Series, svgplot.Series{Name: name, X: x, Y: r.Rejects})
		ahead.Series = append(ahead.Series, svgplot.Series{Name: name, X: x, Y: r.Ahead})
	}
	rate := rs[0].QuotaRate
	load.Series = append(load.Series, svgplot.Series{Name: "quota", X: []float64{0, end}, Y: []float64{rate, rate}, Reference: true})
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, f := range []struct {
		name string
		p    *svgplot.Plot
	}{{PlotLoad, load}, {PlotRejects, rej}, {PlotAhead, ahead}} {
		path := filepath.Join(dir, f.name)
		out, err := os.Create(path)
		if err != nil {
			return paths, err
		}
		err = f.p.WriteSVG(out)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return paths, fmt.Errorf("fleetsim: writing %s: %w", path, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}
