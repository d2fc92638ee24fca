package fleetsim

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

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
	{"    with a slot to spare", func(r *Result) string { return pct(r.ClearShare) }},
	{"refused saturated", func(r *Result) string { return fmt.Sprint(r.RefusedSaturated) }},
	{"expired in an attempt", func(r *Result) string { return fmt.Sprint(r.Expired) }},
	{"answered 429", func(r *Result) string { return fmt.Sprint(r.Rejected) }},
	{"max per second (server)", func(r *Result) string { return fmt.Sprint(r.MaxSecond) }},
	{"seconds over quota+2%", func(r *Result) string { return fmt.Sprint(r.SecondsOver) }},
	{"max per period (server)", func(r *Result) string { return fmt.Sprint(r.MaxPeriod) }},
	{"Jain's fairness", func(r *Result) string { return fmt.Sprintf("%.3f", r.Jain) }},
	{"  of the shares started", func(r *Result) string { return fmt.Sprintf("%.3f", r.JainShare) }},
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

// pad pads s with spaces to n runes (%-*s counts bytes).
func pad(s string, n int) string {
	return s + strings.Repeat(" ", max(n-utf8.RuneCountInString(s), 0))
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
	PlotRate    = "fleetsim-rate.svg"
)

// WritePlots writes three SVG plots of the runs' series into dir (made if
// needed): requests per second reaching the server with the quota's rate
// (or the server's Capacity), 429s per second, and how far the schedule ran
// ahead of the server's clock; and a fourth, PlotRate, when a run learnt a
// rate (Auto, Adaptive): the rate it paced at against the server's
// Capacity. It returns the paths written.
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
	ref := svgplot.Series{Name: "quota", X: []float64{0, end}, Y: []float64{rate, rate}, Reference: true}
	if capX, capY := capacitySteps(rs[0]); capX != nil {
		ref = svgplot.Series{Name: "capacity", X: capX, Y: capY, Reference: true}
	}
	load.Series = append(load.Series, ref)
	plots := []svgplot.File{{Name: PlotLoad, Plot: load}, {Name: PlotRejects, Plot: rej}, {Name: PlotAhead, Plot: ahead}}
	if learnt := ratePlot(rs, ref); learnt != nil {
		plots = append(plots, svgplot.File{Name: PlotRate, Plot: learnt})
	}
	paths, err := svgplot.WriteFiles(dir, plots)
	if err != nil {
		return paths, fmt.Errorf("fleetsim: %w", err)
	}
	return paths, nil
}

// capacitySteps returns the server's Capacity of r as a step line (nil if
// the run had none).
func capacitySteps(r *Result) (x, y []float64) {
	if len(r.Steps) == 0 {
		return nil, nil
	}
	for _, st := range r.Steps {
		x = append(x, st.At, st.End)
		y = append(y, st.PerSecond, st.PerSecond)
	}
	return x, y
}

// ratePlot returns the plot of the rates learnt (nil if no run learnt
// one) with ref, the capacity: each learning run's rate, clipped at twice
// the highest capacity (a fleet that starts at its ceiling, 10,000 a
// second by default, would flatten the rest).
func ratePlot(rs []*Result, ref svgplot.Series) *svgplot.Plot {
	top := 0.0
	for _, y := range ref.Y {
		top = max(top, 2*y)
	}
	p := &svgplot.Plot{
		Title:    "The rate the fleet paced at, against the server's capacity",
		Subtitle: fmt.Sprintf("%d processes, seed %d; auto: the processes' median; adaptive: the sum of their buckets; clipped at %.0f/s", rs[0].Processes, rs[0].Seed, top),
		XLabel:   "time (s)", YLabel: "requests per second",
	}
	for i, r := range rs {
		if r.Learnt == nil {
			continue
		}
		name := r.Name
		if name == "" {
			name = fmt.Sprintf("run %d", i+1)
		}
		x := make([]float64, len(r.Learnt))
		y := make([]float64, len(r.Learnt))
		for j, v := range r.Learnt {
			x[j], y[j] = float64(j)*r.BinS, min(v, top)
		}
		p.Series = append(p.Series, svgplot.Series{Name: name, X: x, Y: y})
	}
	if len(p.Series) == 0 {
		return nil
	}
	p.Series = append(p.Series, ref)
	return p
}

// WriteSteps writes, per run and per step of the Server's Capacity, the
// 429s' share of the attempts (in the whole step, and after Settle), the
// goodput after Settle and its share of the capacity, and when the fleet
// re-converged (see [StepResult]); per run, the 429s' share of all the
// attempts and their number, and the calls refused saturated if any.
func WriteSteps(w io.Writer, rs ...*Result) error {
	var b strings.Builder
	names, width := make([]string, len(rs)), 10 // the names in full: two alike but for their ends stay apart
	for i, r := range rs {
		names[i] = r.Name
		if names[i] == "" {
			names[i] = fmt.Sprintf("run %d", i+1)
		}
		width = max(width, utf8.RuneCountInString(names[i]))
	}
	fmt.Fprintf(&b, "%-*s %6s %6s %7s %8s %9s %9s %10s\n", width, "pacing", "step", "cap/s", "429", "settled", "goodput/s", "of cap", "converged")
	for i, r := range rs {
		name := pad(names[i], width)
		for _, st := range r.Steps {
			conv := "never"
			if st.Converged >= 0 {
				conv = fmt.Sprintf("%.0fs", st.Converged)
			}
			fmt.Fprintf(&b, "%s %5.0fs %6.0f %7s %8s %9.1f %9s %10s\n", name, st.At, st.PerSecond, pct(st.RejectedShare), pct(st.SettledShare), st.Goodput, pct(st.GoodputShare), conv)
		}
		share := 0.0
		if r.Attempts > 0 {
			share = float64(r.Rejected) / float64(r.Attempts)
		}
		fmt.Fprintf(&b, "%s %6s %6s %7s %8s %9s %9s %10s", name, "all", "", pct(share), "", "", "", fmt.Sprintf("%d att.", r.Attempts))
		b.WriteByte('\n')
		if r.RefusedSaturated > 0 {
			fmt.Fprintf(&b, "%s %6s  %d calls refused saturated\n", name, "", r.RefusedSaturated)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
