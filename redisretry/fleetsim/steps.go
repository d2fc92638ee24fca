package fleetsim

import "time"

// Settle is how long after a step of the Server.Capacity its goodput is
// left out of StepResult.Goodput; Converge is the window of the
// re-convergence (StepResult.Converged).
const (
	Settle   = 10 * time.Second
	Converge = 5 * time.Second
)

// StepResult is what the fleet got in one step of the Server.Capacity,
// from the bins of the run's series (each bin counted in the step it
// starts in).
type StepResult struct {
	At        float64 `json:"at_s"`       // the step's start, seconds
	End       float64 `json:"end_s"`      // its end (the next step's start, or the run's end)
	PerSecond float64 `json:"per_second"` // its capacity
	// Attempts reached the server in the step, Rejected of them were
	// answered 429; RejectedShare is Rejected ÷ Attempts.
	Attempts      int64   `json:"attempts"`
	Rejected      int64   `json:"rejected_429"`
	RejectedShare float64 `json:"rejected_share"`
	// SettledShare is the share of the attempts answered 429 from Settle
	// after the step's start to its end.
	SettledShare float64 `json:"rejected_share_settled"`
	// Goodput is the requests answered 200 per second from Settle after
	// the step's start to its end; GoodputShare is Goodput ÷ PerSecond.
	Goodput      float64 `json:"goodput_per_s"`
	GoodputShare float64 `json:"goodput_share"`
	// Converged is how long after the step's start the fleet re-converged
	// (seconds; -1: never in the step): the first time from which, over
	// the next Converge, at most 3 % of the attempts were answered 429 and
	// the goodput was at least 90 % of the capacity.
	Converged float64 `json:"converged_s"`
}

// steps returns the results per step of the Server.Capacity (nil without
// one).
func (s *sim) steps() []StepResult {
	caps := s.cfg.Server.Capacity
	if len(caps) == 0 {
		return nil
	}
	bin := int64(s.cfg.Bin)
	nbins := int((s.end + bin - 1) / bin)
	binOf := func(t int64) int { return min(int((t+bin-1)/bin), nbins) }
	var out []StepResult
	for i, st := range caps {
		end := s.end
		if i+1 < len(caps) {
			end = min(int64(caps[i+1].At), s.end)
		}
		if int64(st.At) >= end {
			break
		}
		from, to := binOf(int64(st.At)), binOf(end)
		r := StepResult{At: st.At.Seconds(), End: float64(end) / 1e9, PerSecond: st.PerSecond, Converged: -1}
		for b := from; b < to; b++ {
			r.Attempts += s.binLoad[b]
			r.Rejected += s.binRejects[b]
		}
		if r.Attempts > 0 {
			r.RejectedShare = float64(r.Rejected) / float64(r.Attempts)
		}
		var served, load, rej int64
		settled := binOf(int64(st.At + Settle))
		for b := settled; b < to; b++ {
			served, load, rej = served+s.binServed[b], load+s.binLoad[b], rej+s.binRejects[b]
		}
		if load > 0 {
			r.SettledShare = float64(rej) / float64(load)
		}
		if settled < to {
			r.Goodput = float64(served) / (float64(int64(to-settled)*bin) / 1e9)
			r.GoodputShare = r.Goodput / st.PerSecond
		}
		w := int(int64(Converge) / bin)
		for b := from; b+w <= to; b++ {
			var load, rej, ok int64
			for k := b; k < b+w; k++ {
				load, rej, ok = load+s.binLoad[k], rej+s.binRejects[k], ok+s.binServed[k]
			}
			if float64(rej) <= 0.03*float64(load) && float64(ok) >= 0.9*st.PerSecond*Converge.Seconds() {
				r.Converged = float64(int64(b)*bin-int64(st.At)) / 1e9
				break
			}
		}
		out = append(out, r)
	}
	return out
}
