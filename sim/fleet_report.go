package sim

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/backoffkit/retry/internal/svgplot"
)

// FleetSummary describes the experiment in one line: the fleet, the
// backlog, the quota and its 429s.
func FleetSummary(c FleetConfig) string {
	rate := float64(c.Quota) / c.Window.Seconds()
	ri := "RetryInfo until the window ends"
	switch {
	case c.RetryInfo > 0:
		ri = fmt.Sprintf("RetryInfo %v", c.RetryInfo)
	case c.RetryInfo < 0:
		ri = "no RetryInfo"
	}
	return fmt.Sprintf("%d processes × %d clients, backlog %s calls of %v, quota %d/%v (%.3g/s) in fixed windows, 429 with %s, seed %d",
		c.Processes, c.Clients, thousands(float64(int64(c.Processes)*int64(c.Clients)*int64(c.Jobs))), c.Service,
		c.Quota, c.Window, rate, ri, c.Seed)
}

// WriteFleetTable writes the results as an aligned text table, 80 columns
// wide: the processes, clients and jobs, which every strategy shares, are
// in [FleetSummary]; the columns have short names (amp is the JSON's
// amplification, max_win its max_window; goodput is in the JSON only).
func WriteFleetTable(w io.Writer, rows []FleetResult) error {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tattempts\tshare_429\tamp\tgave_up\tfairness\tdrain_s\tmax_win\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.2f\t%d\t%.3f\t%s\t%d\t\n",
			r.Strategy, r.Attempts, r.Share429, r.Amplification, r.GaveUp, r.Fairness, drainText(r.DrainS), r.MaxWindow)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, trimPad(b.String()))
	return err
}

func drainText(s float64) string {
	if s < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1f", s)
}

// WriteFleetReport writes the table, a legend of its columns and a one-line
// conclusion computed from rows, which come from one experiment whose
// configuration is cfg.
func WriteFleetReport(w io.Writer, cfg FleetConfig, rows []FleetResult) error {
	if err := WriteFleetTable(w, rows); err != nil {
		return err
	}
	ideal := 0.0
	if len(rows) > 0 {
		ideal = rows[0].IdealS
	}
	legend := []string{
		"attempts   requests that reached the server (every attempt of every call)",
		"share_429  share of them answered 429 (beyond the quota of their window)",
		"amp        attempts per successful call (1.00: no attempt wasted; amplification in --json)",
		"gave_up    calls whose retries gave up; their jobs went back to the backlog",
		fmt.Sprintf("fairness   Jain's index of the processes' successes per %v window, averaged (1: even shares)", cfg.Window),
		fmt.Sprintf("drain_s    when the last job succeeded, s (the quota's rate needs %.0f s; never: not within %v); --json has the calls per second until then as goodput", ideal, cfg.Horizon),
		fmt.Sprintf("max_win    most requests the server saw in one %v window (the quota is %d; max_window in --json)", cfg.Window, cfg.Quota),
	}
	if _, err := fmt.Fprintf(w, "\n%s\n", strings.Join(legend, "\n")); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "Conclusion: %s\n", fleetConclusion(cfg, rows))
	return err
}

// fleetConclusion says in one line which strategies kept the server within
// its quota, at what cost in time, and which wasted the most attempts.
func fleetConclusion(cfg FleetConfig, rows []FleetResult) string {
	if len(rows) == 0 {
		return "no results."
	}
	best, worst, fastest, wasteful := rows[0], rows[0], rows[0], rows[0]
	for _, r := range rows[1:] {
		if r.Share429 < best.Share429 || (r.Share429 == best.Share429 && earlier(r.DrainS, best.DrainS)) {
			best = r
		}
		if r.Share429 > worst.Share429 {
			worst = r
		}
		if earlier(r.DrainS, fastest.DrainS) {
			fastest = r
		}
		if r.Amplification > wasteful.Amplification {
			wasteful = r
		}
	}
	var parts []string
	waste := ""
	if worst.Amplification >= 1.5 {
		waste = fmt.Sprintf(" (%.1f attempts per success", worst.Amplification)
		if worst.GaveUp > 0 {
			waste += fmt.Sprintf("; %s calls gave up and their jobs came straight back", thousands(float64(worst.GaveUp)))
		}
		waste += ")"
	}
	parts = append(parts, fmt.Sprintf("%s had %.1f %% of its requests answered 429%s and up to %s requests in one window (quota %s)",
		worst.Strategy, 100*worst.Share429, waste, thousands(float64(worst.MaxWindow)), thousands(float64(cfg.Quota))))
	parts = append(parts, fmt.Sprintf("%s %s with %.1f %% and drained the backlog %s (the quota's rate needs %.0f s)",
		best.Strategy, withinText(best, cfg), 100*best.Share429, drainPhrase(best.DrainS), best.IdealS))
	if fastest.Strategy != best.Strategy && earlier(fastest.DrainS, best.DrainS) {
		parts = append(parts, fmt.Sprintf("%s drained %s by spending each window's quota at its start",
			fastest.Strategy, drainPhrase(fastest.DrainS)))
	}
	if wasteful.Amplification >= 1.5 && wasteful.Strategy != worst.Strategy {
		parts = append(parts, fmt.Sprintf("%s made %.1f attempts per success: its refused retries became new calls (%s gave up)",
			wasteful.Strategy, wasteful.Amplification, thousands(float64(wasteful.GaveUp))))
	}
	return strings.Join(parts, "; ") + "."
}

func withinText(r FleetResult, cfg FleetConfig) string {
	if r.MaxWindow <= int64(cfg.Quota) {
		return "kept every window within the quota"
	}
	return fmt.Sprintf("saw at most %d requests in a window", r.MaxWindow)
}

func drainPhrase(s float64) string {
	if s < 0 {
		return "not at all within the run"
	}
	return fmt.Sprintf("in %.0f s", s)
}

// earlier reports whether drain time a is before b (-1 is never).
func earlier(a, b float64) bool {
	switch {
	case a < 0:
		return false
	case b < 0:
		return true
	}
	return a < b
}

// WriteFleetPlots writes fleet-load.svg (requests per second reaching the
// server, with the quota's rate), fleet-429.svg (429s per second) and
// fleet-wasted.svg (the attempts wasted on 429s so far, what the fleet's
// limiters save; a plot of the backlog showed the strategies that burst
// through each window's quota finishing first, the opposite of the
// conclusion a reader should take) into dir, for rows of one experiment (cfg is its configuration), and returns
// the paths written. suffix, if not empty, is added to the file names
// (fleet-load-SUFFIX.svg).
func WriteFleetPlots(dir, suffix string, cfg FleetConfig, rows []FleetResult) ([]string, error) {
	if len(rows) == 0 {
		return nil, fmt.Errorf("sim: no fleet results to plot")
	}
	name := func(base string) string {
		if suffix != "" {
			return base + "-" + suffix + ".svg"
		}
		return base + ".svg"
	}
	lp, rp, wp := fleetPlots(cfg, rows)
	files := []string{name("fleet-load"), name("fleet-429"), name("fleet-wasted")}
	return writePlots(dir, map[string]*svgplot.Plot{files[0]: lp, files[1]: rp, files[2]: wp}, files)
}

// fleetPlots returns the plots of WriteFleetPlots: the load, the 429s per
// second, the attempts wasted so far.
func fleetPlots(cfg FleetConfig, rows []FleetResult) (lp, rp, wp *svgplot.Plot) {
	ri := "429s ask for the rest of the window"
	switch {
	case cfg.RetryInfo > 0:
		ri = fmt.Sprintf("429s ask for %v", cfg.RetryInfo)
	case cfg.RetryInfo < 0:
		ri = "429s without RetryInfo"
	}
	sub := fmt.Sprintf("%d processes × %d clients, %s calls of %v, quota %d/%v, %s, seed %d",
		cfg.Processes, cfg.Clients, thousands(float64(rows[0].Jobs)), cfg.Service, cfg.Quota, cfg.Window, ri, cfg.Seed)
	caption := upperFirst(fleetConclusion(cfg, rows))
	lp = &svgplot.Plot{Title: "Load on the server: requests per second", Subtitle: sub, Caption: caption,
		XLabel: "time, s", YLabel: "requests/s reaching the server"}
	rp = &svgplot.Plot{Title: "Requests answered 429 (over the quota)", Subtitle: sub, Caption: caption,
		XLabel: "time, s", YLabel: "429s per second"}
	wp = &svgplot.Plot{Title: "Attempts wasted: answered 429, so far", Subtitle: sub, Caption: caption,
		XLabel: "time, s", YLabel: "attempts answered 429, in all"}
	end := 0.0
	for _, r := range rows {
		x := make([]float64, len(r.Load))
		for i := range x {
			x[i] = float64(i+1) * r.BinS // each value covers the bin that ends there
		}
		end = max(end, float64(len(x))*r.BinS)
		lp.Series = append(lp.Series, svgplot.Series{Name: r.Strategy, X: x, Y: r.Load})
		rp.Series = append(rp.Series, svgplot.Series{Name: r.Strategy, X: x, Y: r.Rejects})
		wasted := make([]float64, len(r.Rejects))
		sum := 0.0
		for i, v := range r.Rejects {
			sum += v * r.BinS // Rejects is per second
			wasted[i] = math.Round(sum)
		}
		wp.Series = append(wp.Series, svgplot.Series{Name: r.Strategy, X: x, Y: wasted})
	}
	rate := float64(cfg.Quota) / cfg.Window.Seconds()
	lp.Series = append(lp.Series, svgplot.Series{Name: "quota", X: []float64{0, end}, Y: []float64{rate, rate}, Reference: true})
	return lp, rp, wp
}
