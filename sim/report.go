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
// the figures of the AWS post, and returns the paths written. The y axes
// are logarithmic: no backoff does an order of magnitude more work.
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
	cp := &svgplot.Plot{Title: "Work: conditional writes per run", XLabel: "clients", YLabel: "calls (mean)", LogY: true}
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
