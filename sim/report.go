package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/backoffkit/retry/internal/svgplot"
)

// WriteJSON writes one JSON object per row, one per line.
func WriteJSON[T any](w io.Writer, rows []T) error {
	enc := json.NewEncoder(w)
	for i := range rows {
		if err := enc.Encode(&rows[i]); err != nil {
			return err
		}
	}
	return nil
}

// WriteContentionTable writes the results as an aligned text table.
func WriteContentionTable(w io.Writer, rows []ContentionResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tclients\truns\tcalls_mean\tcalls_sd\ttime_ms_mean\ttime_ms_sd\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t\n", r.Strategy, r.Clients, r.Runs, r.CallsMean, r.CallsSD, r.TimeMsMean, r.TimeMsSD)
	}
	return tw.Flush()
}

// WriteContentionPlots writes contention-calls.svg (work against clients)
// and contention-time.svg (completion time against clients) into dir, like
// the figures of the AWS post, and returns the paths written. The time axis
// is logarithmic: exponential backoff without jitter takes ten times longer
// than the jittered shapes.
func WriteContentionPlots(dir string, rows []ContentionResult) ([]string, error) {
	var names []string
	calls := map[string]*svgplot.Series{}
	times := map[string]*svgplot.Series{}
	for _, r := range rows {
		if calls[r.Strategy] == nil {
			names = append(names, r.Strategy)
			calls[r.Strategy] = &svgplot.Series{Name: r.Strategy}
			times[r.Strategy] = &svgplot.Series{Name: r.Strategy}
		}
		c, t := calls[r.Strategy], times[r.Strategy]
		c.X, c.Y = append(c.X, float64(r.Clients)), append(c.Y, r.CallsMean)
		t.X, t.Y = append(t.X, float64(r.Clients)), append(t.Y, r.TimeMsMean)
	}
	cp := &svgplot.Plot{Title: "Work: conditional writes per run", XLabel: "clients", YLabel: "calls (mean)"}
	tp := &svgplot.Plot{Title: "Completion time of the last client", XLabel: "clients", YLabel: "time, ms (mean)", LogY: true}
	for _, n := range names {
		cp.Series = append(cp.Series, *calls[n])
		tp.Series = append(tp.Series, *times[n])
	}
	return writePlots(dir, map[string]*svgplot.Plot{"contention-calls.svg": cp, "contention-time.svg": tp}, []string{"contention-calls.svg", "contention-time.svg"})
}

func writePlots(dir string, plots map[string]*svgplot.Plot, order []string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, name := range order {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			return paths, err
		}
		err = plots[name].WriteSVG(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return paths, fmt.Errorf("sim: writing %s: %w", path, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// WriteOverloadTable writes the results as an aligned text table.
func WriteOverloadTable(w io.Writer, rows []OverloadResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tclients\thosts\trequests\tamplification\tamp_total\tpeak_load\tgoodput\tfailed_ratio\trecovery_s\tp99_ms\t")
	for _, r := range rows {
		rec := fmt.Sprintf("%.1f", r.RecoveryS)
		if r.RecoveryS < 0 {
			rec = "never"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.0f\t%.3f\t%s\t%.0f\t\n",
			r.Strategy, r.Clients, r.Hosts, r.Requests, r.Amplification, r.AmplificationTotal, r.PeakLoad, r.Goodput, r.FailedRatio, rec, r.P99Ms)
	}
	return tw.Flush()
}

// WriteOverloadPlots writes overload-load.svg (attempts per second reaching
// the server over time, with the capacity and the outage) and
// overload-goodput.svg (successful requests per second over time) into dir,
// for rows of one experiment (cfg is its configuration), and returns the
// paths written. suffix, if not empty, is added to the file names
// (overload-load-SUFFIX.svg).
func WriteOverloadPlots(dir, suffix string, cfg OverloadConfig, rows []OverloadResult) ([]string, error) {
	if len(rows) == 0 {
		return nil, fmt.Errorf("sim: no overload results to plot")
	}
	name := func(base string) string {
		if suffix != "" {
			return base + "-" + suffix + ".svg"
		}
		return base + ".svg"
	}
	band := []svgplot.Band{{From: cfg.OutageStart.Seconds(), To: (cfg.OutageStart + cfg.Outage).Seconds(), Label: "outage"}}
	if cfg.Outage == 0 {
		band = nil
	}
	title := fmt.Sprintf("%d clients, capacity %.0f/s, offered %.0f/s", cfg.Clients, cfg.Capacity, cfg.Load*cfg.Capacity)
	lp := &svgplot.Plot{Title: "Load on the server: " + title, XLabel: "time, s", YLabel: "attempts/s reaching the server", Bands: band}
	gp := &svgplot.Plot{Title: "Goodput: " + title, XLabel: "time, s", YLabel: "successful requests/s", Bands: band}
	for _, r := range rows {
		x := make([]float64, len(r.Load))
		for i := range x {
			x[i] = float64(i) * r.BinS
		}
		lp.Series = append(lp.Series, svgplot.Series{Name: r.Strategy, X: x, Y: r.Load})
		gp.Series = append(gp.Series, svgplot.Series{Name: r.Strategy, X: x, Y: r.Good})
	}
	end := cfg.Duration.Seconds()
	lp.Series = append(lp.Series, svgplot.Series{Name: "capacity", X: []float64{0, end}, Y: []float64{cfg.Capacity, cfg.Capacity}})
	files := []string{name("overload-load"), name("overload-goodput")}
	return writePlots(dir, map[string]*svgplot.Plot{files[0]: lp, files[1]: gp}, files)
}
