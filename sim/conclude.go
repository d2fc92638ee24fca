package sim

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/backoffkit/retry/internal/textwrap"
)

// WriteContentionReport writes the contention table, a legend of its
// columns and a one-line conclusion computed from rows.
func WriteContentionReport(w io.Writer, rows []ContentionResult) error {
	if err := WriteContentionTable(w, rows); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s\n%s\n", contentionLegend, "Conclusion: "+contentionConclusion(rows))
	return err
}

const contentionLegend = `calls_mean    conditional writes per run (the work), mean over the runs; calls_sd: their standard deviation
time_ms_mean  when the last client finished, ms, mean over the runs; time_ms_sd: its standard deviation`

// WriteOverloadReport writes the overload table, a legend of its columns,
// a note on each adaptive throttle (why it recovers late) and a one-line
// conclusion computed from rows, which come from one experiment whose
// configuration is cfg.
func WriteOverloadReport(w io.Writer, cfg OverloadConfig, rows []OverloadResult) error {
	if err := WriteOverloadTable(w, rows); err != nil {
		return err
	}
	bin := cfg.Bin.String()
	legend := []string{
		"amp         attempts per request, for the requests that started during the outage (1.00: no retry); --json has it as amplification, and amplification_total over the whole run",
		"peak        attempts reaching the server in its busiest " + bin + ", per second, ÷ capacity (peak_load)",
		fmt.Sprintf("goodput     requests per second that succeeded within the %v of the run", cfg.Duration),
		"failed      share of the requests that did not succeed (failed_ratio)",
		"recovery_s  from the end of the outage until every later " + bin + " is healthy (>= 99 % of attempts served);",
		"            never: not within the run",
		"p99_ms      99th percentile of a request's latency, first attempt to outcome",
	}
	_, err := fmt.Fprintf(w, "\n%s\n", strings.Join(legend, "\n"))
	if err != nil {
		return err
	}
	for _, n := range throttleNotes(cfg, rows) {
		if _, err := fmt.Fprintln(w, n); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(w, "Conclusion: %s\n", overloadConclusion(cfg, rows))
	return err
}

// atMax returns the rows of the largest client count, by strategy.
func atMax(rows []ContentionResult) (int, map[string]ContentionResult, []string) {
	n := 0
	for _, r := range rows {
		n = max(n, r.Clients)
	}
	m := map[string]ContentionResult{}
	var order []string
	for _, r := range rows {
		if r.Clients == n {
			m[r.Strategy] = r
			order = append(order, r.Strategy)
		}
	}
	return n, m, order
}

// contentionConclusion says in one line which strategy did the least work
// and finished first at the largest client count, and which strategies did
// about as much work as backoff without jitter.
func contentionConclusion(rows []ContentionResult) string {
	if len(rows) == 0 {
		return "no results."
	}
	n, m, order := atMax(rows)
	least, first := m[order[0]], m[order[0]]
	for _, s := range order[1:] {
		if r := m[s]; r.CallsMean < least.CallsMean {
			least = r
		}
		if r := m[s]; r.TimeMsMean < first.TimeMsMean {
			first = r
		}
	}
	// "none finished first" reads as "no strategy did": say what none is.
	name := func(s string) string {
		if s == "none" {
			return "none (no backoff)"
		}
		return s
	}
	var b strings.Builder
	fmt.Fprintf(&b, "at %d clients %s did the least work (%s calls, done in %s)", n, name(least.Strategy), thousands(least.CallsMean), msText(least.TimeMsMean))
	if first.Strategy != least.Strategy {
		fmt.Fprintf(&b, " and %s finished first (%s, %s calls)", name(first.Strategy), msText(first.TimeMsMean), thousands(first.CallsMean))
	}
	if e, ok := m["expo"]; ok && least.Strategy != "expo" {
		var like []string
		for _, s := range order {
			r := m[s]
			if s != "expo" && s != least.Strategy && math.Abs(r.CallsMean-e.CallsMean) <= 0.1*e.CallsMean {
				like = append(like, fmt.Sprintf("%s %s", s, thousands(r.CallsMean)))
			}
		}
		ratio := e.CallsMean / least.CallsMean
		fmt.Fprintf(&b, "; backoff without jitter (expo) needed %s calls, %.1f× as many", thousands(e.CallsMean), ratio)
		switch {
		case ratio < 1.2:
			// Too few clients to contend: whatever the jitter, about
			// the same work; nothing to conclude about jitter.
			fmt.Fprintf(&b, ": at %d clients there is little contention for jitter to spread", n)
		case len(like) > 0:
			fmt.Fprintf(&b, ", and %s did about as much: a jitter that does not grow with the wait stops mattering", strings.Join(like, ", "))
		}
	}
	b.WriteString(".")
	return b.String()
}

// seeWhy points the overload conclusion to the explanation of the slow
// throttles: the "why:" note under the table.
const seeWhy = "see why"

// overloadConclusion says in one line what the outage did to the load and
// the recovery of each kind of strategy, against no retries.
func overloadConclusion(cfg OverloadConfig, rows []OverloadResult) string {
	if len(rows) == 0 {
		return "no results."
	}
	if cfg.Outage == 0 {
		worst := rows[0]
		for _, r := range rows[1:] {
			if r.AmplificationTotal > worst.AmplificationTotal {
				worst = r
			}
		}
		return fmt.Sprintf("without an outage the highest amplification was %s's %.2f× and the lowest goodput %s/s.",
			worst.Strategy, worst.AmplificationTotal, thousands(minGoodput(rows)))
	}
	var parts []string
	base, hasBase := findRow(rows, "none")
	worst := rows[0]
	for _, r := range rows[1:] {
		if r.Amplification > worst.Amplification {
			worst = r
		}
	}
	if worst.Amplification > 1.05 {
		parts = append(parts, fmt.Sprintf("%s multiplied the load %.2f× during the outage (peak %.1f× capacity) and %s",
			worst.Strategy, worst.Amplification, worst.PeakLoad, recoveryText(worst.RecoveryS)))
	}
	// The retrying strategy that recovered first with the most goodput.
	var best *OverloadResult
	for i := range rows {
		r := &rows[i]
		if r.Strategy == worst.Strategy || r.Strategy == "none" || r.AmplificationTotal <= 1.0001 {
			continue
		}
		if best == nil || betterRecovery(r, best) {
			best = r
		}
	}
	if best != nil {
		parts = append(parts, fmt.Sprintf("%s held it to %.2f× and %s", best.Strategy, best.Amplification, recoveryText(best.RecoveryS)))
	}
	if hasBase {
		parts = append(parts, fmt.Sprintf("no retries (none) %s and failed %.1f %% of requests", recoveryText(base.RecoveryS), 100*base.FailedRatio))
	}
	var slow []string
	for _, r := range rows {
		if r.RejectP != nil && (r.RecoveryS < 0 || (hasBase && r.RecoveryS > base.RecoveryS+5)) {
			slow = append(slow, r.Strategy)
		}
	}
	if len(slow) > 0 {
		parts = append(parts, strings.Join(slow, ", ")+" kept rejecting requests after the outage ("+seeWhy+")")
	}
	if len(parts) == 0 {
		return "no strategy amplified the load."
	}
	return strings.Join(parts, "; ") + "."
}

func betterRecovery(a, b *OverloadResult) bool {
	ra, rb := a.RecoveryS, b.RecoveryS
	if ra < 0 {
		ra = math.Inf(1)
	}
	if rb < 0 {
		rb = math.Inf(1)
	}
	if ra != rb {
		return ra < rb
	}
	return a.Goodput > b.Goodput
}

func recoveryText(s float64) string {
	switch {
	case s < 0:
		return "did not recover within the run"
	case s == 0:
		return "recovered at once"
	}
	return fmt.Sprintf("recovered in %.1f s", s)
}

// throttleNotes explains, for every strategy with an adaptive throttle, how
// its reject probability went after the outage (measured), and, when one of
// them recovered late, why.
func throttleNotes(cfg OverloadConfig, rows []OverloadResult) []string {
	throttles, late := throttleRecoveries(cfg, rows)
	var notes []string
	for _, r := range throttles {
		notes = append(notes, fmt.Sprintf("note: %s rejected requests locally with p = %.2f when the outage ended and %.2f at the end; it %s.",
			r.Strategy, r.pOut, r.RejectP[len(r.RejectP)-1], recoveryText(r.RecoveryS)))
	}
	if late {
		notes = append(notes, textwrap.Lines("why: the SRE throttle counts the requests it rejects as requests, so after a total outage"+
			" p = (requests - K·accepts)/(requests + 1) stays near or above 1 - 1/K (0.5 for K = 2) until its window"+
			" (2 min by default) has rolled past the outage; a shorter window alone does not help (the rejections keep p up)."+
			" ThrottleConfig{SentOnly: true, Window: 10 * time.Second} (adaptive-throttle-sent-10s) counts only the requests sent"+
			" and forgets the outage within the window.", 100, "     ")...)
	}
	return notes
}

// throttleCaption is the caption of the throttle plot: for each throttle,
// p when the outage ended and the recovery, and, when one recovered late,
// why, in two sentences (throttleNotes says the same at length, under the
// table).
func throttleCaption(cfg OverloadConfig, rows []OverloadResult) string {
	throttles, late := throttleRecoveries(cfg, rows)
	var each []string
	for _, r := range throttles {
		rec := "never"
		if r.RecoveryS >= 0 {
			rec = fmt.Sprintf("%.1f s", r.RecoveryS)
		}
		each = append(each, fmt.Sprintf("%s %.2f, %s", r.Strategy, r.pOut, rec))
	}
	if len(each) == 0 {
		return ""
	}
	s := "p when the outage ended, and the time to recover: " + strings.Join(each, "; ") + "."
	if late {
		s += " The SRE throttle counts the requests it rejects as requests, so p stays near 1 − 1/K until its window has" +
			" rolled past the outage; counting only the requests sent (SentOnly) with a short window forgets the outage within that window."
	}
	return s
}

// throttleRecovery is a strategy with an adaptive throttle and its reject
// probability when the outage ended.
type throttleRecovery struct {
	OverloadResult
	pOut float64
}

// throttleRecoveries returns the rows with an adaptive throttle (none without
// an outage), and whether one of them recovered late: never, or more than
// 5 s after the strategy without retries.
func throttleRecoveries(cfg OverloadConfig, rows []OverloadResult) (throttles []throttleRecovery, late bool) {
	if cfg.Outage == 0 {
		return nil, false
	}
	base, hasBase := findRow(rows, "none")
	for _, r := range rows {
		if r.RejectP == nil {
			continue
		}
		endBin := min(int((cfg.OutageStart+cfg.Outage)/cfg.Bin), len(r.RejectP)-1)
		throttles = append(throttles, throttleRecovery{r, r.RejectP[endBin]})
		if r.RecoveryS < 0 || (hasBase && r.RecoveryS > base.RecoveryS+5) {
			late = true
		}
	}
	return throttles, late
}

func findRow(rows []OverloadResult, name string) (OverloadResult, bool) {
	for _, r := range rows {
		if r.Strategy == name {
			return r, true
		}
	}
	return OverloadResult{}, false
}

func minGoodput(rows []OverloadResult) float64 {
	g := math.Inf(1)
	for _, r := range rows {
		g = min(g, r.Goodput)
	}
	return g
}

// thousands formats v rounded to a whole number with thousands separators.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// msText formats milliseconds as 850 ms or 7.5 s.
func msText(ms float64) string {
	if ms < 1000 {
		return fmt.Sprintf("%.0f ms", ms)
	}
	return fmt.Sprintf("%.1f s", ms/1000)
}
