package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

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
// the figures of the AWS post, and returns the paths written. cfg is the
// experiment's configuration (for the subtitle); the caption is the
// conclusion computed from rows. The time axis is logarithmic: exponential
// backoff without jitter takes ten times longer than the jittered shapes.
func WriteContentionPlots(dir string, cfg ContentionConfig, rows []ContentionResult) ([]string, error) {
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
	c, _ := cfg.withDefaults()
	sub := fmt.Sprintf("network Normal(%v, %v) per message, %d runs per point, seed %d", c.NetMean, c.NetSD, c.Runs, c.Seed)
	for _, s := range c.Strategies {
		if s.Name == "google" {
			p := s.Policy.Resolved()
			sub = fmt.Sprintf("base %v, cap %v, google's jitter %v; ", p.InitialDelay, p.MaxDelay, p.Jitter) + sub
		}
	}
	caption := upperFirst(contentionConclusion(rows))
	cp := &svgplot.Plot{Title: "Work: conditional writes per run", Subtitle: sub, Caption: caption, XLabel: "clients", YLabel: "calls (mean)"}
	tp := &svgplot.Plot{Title: "Completion time of the last client", Subtitle: sub, Caption: caption, XLabel: "clients", YLabel: "time, ms (mean, log scale)", LogY: true}
	for _, n := range names {
		cp.Series = append(cp.Series, *calls[n])
		tp.Series = append(tp.Series, *times[n])
	}
	return writePlots(dir, []svgplot.File{{Name: "contention-calls.svg", Plot: cp}, {Name: "contention-time.svg", Plot: tp}})
}

// upperFirst capitalises the first letter of s, for a caption.
func upperFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// writePlots writes files into dir (see svgplot.WriteFiles).
func writePlots(dir string, files []svgplot.File) ([]string, error) {
	paths, err := svgplot.WriteFiles(dir, files)
	if err != nil {
		return paths, fmt.Errorf("sim: %w", err)
	}
	return paths, nil
}

// WriteOverloadTable writes the results as an aligned text table, 80
// columns wide with the default strategies: what the strategies of an
// experiment share (its clients, processes and requests) heads its rows,
// and the columns have short names (amp is the JSON's amplification, peak
// its peak_load, failed its failed_ratio; amplification_total is in the
// JSON only).
func WriteOverloadTable(w io.Writer, rows []OverloadResult) error {
	var b strings.Builder
	for i := 0; i < len(rows); {
		j := i
		for j < len(rows) && rows[j].Clients == rows[i].Clients {
			j++
		}
		fmt.Fprintf(&b, "%s clients in %d processes, %s requests\n", thousands(float64(rows[i].Clients)), rows[i].Hosts, thousands(float64(rows[i].Requests)))
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "strategy\tamp\tpeak\tgoodput\tfailed\trecovery_s\tp99_ms\t")
		for _, r := range rows[i:j] {
			rec := fmt.Sprintf("%.1f", r.RecoveryS)
			if r.RecoveryS < 0 {
				rec = "never"
			}
			fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.0f\t%.3f\t%s\t%.0f\t\n",
				r.Strategy, r.Amplification, r.PeakLoad, r.Goodput, r.FailedRatio, rec, r.P99Ms)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		i = j
	}
	_, err := io.WriteString(w, trimPad(b.String()))
	return err
}

// trimPad drops the two spaces that a right-aligned tabwriter puts before
// the first column of every line: the table starts at the margin.
func trimPad(table string) string {
	ls := strings.Split(table, "\n")
	for i, l := range ls {
		ls[i] = strings.TrimPrefix(l, "  ")
	}
	return strings.Join(ls, "\n")
}

// WriteOverloadPlots writes overload-load.svg (attempts per second reaching
// the server over time, with the capacity and the outage) and
// overload-ontime.svg (the share of the requests started at each moment
// that succeeded within cfg.OnTime: who recovered, as its users see it; a
// plot of successes per second showed the SDK's default highest after the
// outage, working off its backlog of late retries) into dir,
// for rows of one experiment (cfg is its configuration), and, when a
// strategy has an adaptive throttle, overload-throttle.svg (its reject
// probability over time); it returns the paths written. Each plot has the
// parameters as its subtitle and the conclusion as its caption. suffix, if not empty, is added to the file names
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
	lp, gp, tp := overloadPlots(cfg, rows)
	files := []svgplot.File{{Name: name("overload-load"), Plot: lp}, {Name: name("overload-ontime"), Plot: gp}}
	if len(tp.Series) > 0 {
		files = append(files, svgplot.File{Name: name("overload-throttle"), Plot: tp})
	}
	return writePlots(dir, files)
}

// overloadPlots returns the plots of WriteOverloadPlots: the load, the
// share of the requests on time, the throttle's reject probability.
func overloadPlots(cfg OverloadConfig, rows []OverloadResult) (lp, gp, tp *svgplot.Plot) {
	band := []svgplot.Band{{From: cfg.OutageStart.Seconds(), To: (cfg.OutageStart + cfg.Outage).Seconds(), Label: "outage"}}
	if cfg.Outage == 0 {
		band = nil
	}
	kind := "fast 503"
	if cfg.Drop {
		kind = "dropped"
	}
	sub := fmt.Sprintf("%d clients in %d processes, capacity %.0f/s, offered %.0f/s, queue %d, outage %v from %v (%s), seed %d",
		cfg.Clients, cfg.Hosts, cfg.Capacity, cfg.Load*cfg.Capacity, cfg.Queue, cfg.Outage, cfg.OutageStart, kind, cfg.Seed)
	// A plot has no "why:" note: the throttle plot's caption explains.
	caption := strings.Replace(overloadConclusion(cfg, rows), "("+seeWhy+")", "(see the throttle plot)", 1)
	lp = &svgplot.Plot{Title: "Load on the server during and after the outage", Subtitle: sub, Caption: caption,
		XLabel: "time, s", YLabel: "attempts/s reaching the server", Bands: band}
	onTime := cfg.OnTime
	if onTime == 0 {
		onTime = time.Second
	}
	gp = &svgplot.Plot{Title: fmt.Sprintf("Requests that succeeded within %v, by when they started", onTime), Subtitle: sub, Caption: caption,
		XLabel: "time the request started, s", YLabel: fmt.Sprintf("share succeeded within %v (1 = all)", onTime), Bands: band}
	tp = &svgplot.Plot{Title: "Adaptive throttle: probability of rejecting a request locally", Subtitle: sub,
		Caption: throttleCaption(cfg, rows), XLabel: "time, s", YLabel: "reject probability p (mean over processes)", Bands: band}
	for _, r := range rows {
		x := make([]float64, len(r.Load))
		for i := range x {
			x[i] = float64(i) * r.BinS
		}
		lp.Series = append(lp.Series, svgplot.Series{Name: r.Strategy, X: x, Y: r.Load})
		gp.Series = append(gp.Series, svgplot.Series{Name: r.Strategy, X: x, Y: r.OnTime})
		if r.RejectP != nil {
			tp.Series = append(tp.Series, svgplot.Series{Name: r.Strategy, X: x, Y: r.RejectP})
		}
	}
	end := cfg.Duration.Seconds()
	lp.Series = append(lp.Series, svgplot.Series{Name: "capacity", X: []float64{0, end}, Y: []float64{cfg.Capacity, cfg.Capacity}, Reference: true})
	return lp, gp, tp
}
