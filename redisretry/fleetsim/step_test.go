package fleetsim

import (
	"flag"
	"strings"
	"testing"
)

var plots = flag.String("plots", "", "write the plots of TestStepScenario into this directory")

// Issue 24: a fleet that learns one rate from its 429s (AutoQuota) against
// a hidden capacity that steps 100 → 40 → 100 requests a second, side by
// side with backoff only, the AWS SDKs' adaptive mode per process, and a
// Quota fixed at the first step's capacity, on the same demand.
func TestStepScenario(t *testing.T) {
	var rs []*Result
	for _, p := range []Pacing{PaceAuto, PaceBackoff, PaceAdaptive, PaceQuota} {
		rs = append(rs, run(t, StepScenario(p, 1)))
	}
	var b strings.Builder
	WriteSteps(&b, rs...)
	t.Log("\n" + b.String())
	if *plots != "" {
		paths, err := WritePlots(*plots, rs...)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(paths)
	}
	auto := rs[0]
	if share := float64(auto.Rejected) / float64(auto.Attempts); share > 0.03 {
		t.Errorf("auto: %.1f %% of the attempts answered 429, want at most 3 %%", 100*share)
	}
	for _, st := range auto.Steps {
		if st.GoodputShare < 0.9 {
			t.Errorf("auto, step at %vs: goodput %.1f/s, %.0f %% of the capacity after %v, want at least 90 %%", st.At, st.Goodput, 100*st.GoodputShare, Settle)
		}
		if st.Converged < 0 || st.Converged > 10 {
			t.Errorf("auto, step at %vs: re-converged after %vs, want within 10 s", st.At, st.Converged)
		}
	}
	// The others, on the same demand: backoff alone and the per-process
	// buckets send far more 429s; the fixed Quota sends 100 a second into
	// the step at 40.
	for _, r := range rs[1:3] {
		if share := float64(r.Rejected) / float64(r.Attempts); share < 0.3 {
			t.Errorf("%s: %.1f %% answered 429, the harness measured more than 30 %% before", r.Name, 100*share)
		}
	}
	if q := rs[3].Steps[1]; q.RejectedShare < 0.5 {
		t.Errorf("quota: %.1f %% answered 429 in the step at 40/s, the harness measured more than 50 %% before", 100*q.RejectedShare)
	}
	// The learnt rate stays within its bounds and follows the capacity.
	for i, l := range auto.Learnt {
		if l < 1 || l > 10_000 {
			t.Fatalf("bin %d: learnt rate %v, out of [1, 10000]", i, l)
		}
	}
}

func TestStepScenarioConfigValid(t *testing.T) {
	for _, p := range []Pacing{PaceAuto, PaceBackoff, PaceAdaptive, PaceQuota} {
		if err := StepScenario(p, 1).Validate(); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	c := StepScenario(PaceAuto, 1)
	c.Adaptive = true
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Config.Auto") {
		t.Errorf("Auto and Adaptive: %v, want an error naming Config.Auto", err)
	}
	c = StepScenario(PaceBackoff, 1)
	c.Server.Capacity = nil
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Config.Quota") {
		t.Errorf("no quota, no capacity: %v, want an error naming Config.Quota", err)
	}
	c = StepScenario(PaceBackoff, 1)
	c.Server.Capacity[1].At = 0
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Server.Capacity[1].At") {
		t.Errorf("steps out of order: %v", err)
	}
}
