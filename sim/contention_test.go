package sim

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/chaos"
)

func contentionJSON(t *testing.T, cfg ContentionConfig) []byte {
	t.Helper()
	res, err := RunContention(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return jsonOf(t, res)
}

// jsonOf returns rows as WriteJSON writes them.
func jsonOf[T any](t *testing.T, rows []T) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteJSON(&buf, rows); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestContentionDeterministic(t *testing.T) {
	cfg := ContentionConfig{Clients: []int{10, 30}, Runs: 5, Seed: 42}
	a := contentionJSON(t, cfg)
	cfg.Workers = 1
	b := contentionJSON(t, cfg)
	if !bytes.Equal(a, b) {
		t.Fatalf("same seed, different output (workers 2 vs 1):\n%s\n%s", a, b)
	}
	if n := bytes.Count(a, []byte("\n")); n != 2*len(ContentionNames) {
		t.Errorf("%d JSON lines, want %d", n, 2*len(ContentionNames))
	}
	cfg.Seed = 43
	if c := contentionJSON(t, cfg); bytes.Equal(a, c) {
		t.Error("seeds 42 and 43 gave identical results")
	}
}

// A point's result does not depend on which other points run: one size of
// one strategy equals its row in a sweep.
func TestContentionPointIndependent(t *testing.T) {
	all, err := RunContention(ContentionConfig{Clients: []int{10, 20, 30}, Runs: 4, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	full, _ := ContentionStrategy("full", DefaultBase, DefaultCap, DefaultJitter)
	one, err := RunContention(ContentionConfig{Clients: []int{20}, Runs: 4, Seed: 7, Strategies: []Strategy{full}})
	if err != nil {
		t.Fatal(err)
	}
	var row ContentionResult
	for _, r := range all {
		if r.Strategy == "full" && r.Clients == 20 {
			row = r
		}
	}
	if one[0] != row {
		t.Errorf("alone: %+v\nin sweep: %+v", one[0], row)
	}
}

// Every client ends exactly once, with exactly one successful write.
func TestContentionConservation(t *testing.T) {
	w := newContentionWorker()
	for _, name := range ContentionNames {
		s, err := ContentionStrategy(name, DefaultBase, DefaultCap, DefaultJitter)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 2, 17, 60} {
			for run := range 3 {
				a, b := seedFor(9, uint64(run))
				st := w.run(&s, n, DefaultNetMean, DefaultNetSD, a, b)
				if st.successes != int64(n) || st.done != int64(n) || st.version != int64(n) {
					t.Errorf("%s n=%d: successes %d, finished clients %d, final version %d; want %d each",
						name, n, st.successes, st.done, st.version, n)
				}
				if st.calls < int64(n) {
					t.Errorf("%s n=%d: %d calls, fewer than clients", name, n, st.calls)
				}
				// 4 events per write (read, reply, write, reply).
				if st.events != 4*st.calls {
					t.Errorf("%s n=%d: %d events for %d writes, want 4 per write", name, n, st.events, st.calls)
				}
			}
		}
	}
}

// Without backoff, N clients compete in the first round, N−1 in the next and
// so on, so the work grows quadratically. Several clients can win per round
// once their phases drift apart (a write succeeds when no other write lands
// between its read and itself, half of a 4-message cycle), so the work is
// a·N² + b·N with b > 0 and the ratio work(40)/work(20) lies between 2
// (linear) and 4 (pure N²). Measured: about 3.05 (2.9 to 3.2 over seeds),
// with 1 % sampling error at 200 runs. The band [2.7, 4.1] rejects linear
// growth and anything steeper than quadratic; the ratio work(80)/work(40)
// must be larger, approaching 4 as N grows.
func TestContentionNoBackoffQuadratic(t *testing.T) {
	none, _ := ContentionStrategy("none", DefaultBase, DefaultCap, DefaultJitter)
	res, err := RunContention(ContentionConfig{Clients: []int{20, 40, 80}, Runs: 50, Seed: 1, Strategies: []Strategy{none}})
	if err != nil {
		t.Fatal(err)
	}
	r1 := res[1].CallsMean / res[0].CallsMean
	r2 := res[2].CallsMean / res[1].CallsMean
	t.Logf("calls: N=20 %.1f, N=40 %.1f, N=80 %.1f; ratios %.3f, %.3f", res[0].CallsMean, res[1].CallsMean, res[2].CallsMean, r1, r2)
	if r1 < 2.7 || r1 > 4.1 {
		t.Errorf("work(40)/work(20) = %.3f, want ~N² growth, in [2.7, 4.1]", r1)
	}
	if r2 <= r1 || r2 > 4.1 {
		t.Errorf("work(80)/work(40) = %.3f, want above work(40)/work(20) = %.3f and at most 4.1", r2, r1)
	}
}

// The AWS post's result: full jitter does much less work than exponential
// backoff without jitter, and finishes sooner.
func TestContentionFullJitterBeatsExpo(t *testing.T) {
	full, _ := ContentionStrategy("full", DefaultBase, DefaultCap, DefaultJitter)
	expo, _ := ContentionStrategy("expo", DefaultBase, DefaultCap, DefaultJitter)
	res, err := RunContention(ContentionConfig{Clients: []int{100}, Runs: 20, Seed: 3, Strategies: []Strategy{full, expo}})
	if err != nil {
		t.Fatal(err)
	}
	f, e := res[0], res[1]
	t.Logf("N=100: full %.0f calls %.0f ms; expo %.0f calls %.0f ms", f.CallsMean, f.TimeMsMean, e.CallsMean, e.TimeMsMean)
	if !(f.CallsMean < 0.7*e.CallsMean) {
		t.Errorf("full jitter %.0f calls, expo %.0f: want full at least 30%% less work", f.CallsMean, e.CallsMean)
	}
	if !(f.TimeMsMean < e.TimeMsMean) {
		t.Errorf("full jitter %.0f ms, expo %.0f ms: want full to finish sooner", f.TimeMsMean, e.TimeMsMean)
	}
}

// The waits are the policy's: with two clients the loser fails exactly once
// and waits Backoff(1) = base·2¹ (capped), so the run lasts that wait plus
// eight network delays.
func TestContentionUsesPolicyBackoff(t *testing.T) {
	for _, tc := range []struct {
		base, cap time.Duration
		wantWait  time.Duration
	}{
		{100 * time.Millisecond, 10 * time.Second, 200 * time.Millisecond}, // k=1: base·2
		{time.Second, time.Second, time.Second},                            // capped
	} {
		s := Strategy{Name: "x", Policy: retry.Policy{InitialDelay: tc.base, MaxDelay: tc.cap, Shape: retry.ShapeNone}}
		res, err := RunContention(ContentionConfig{Clients: []int{2}, Runs: 50, Seed: 5, Strategies: []Strategy{s}})
		if err != nil {
			t.Fatal(err)
		}
		r := res[0]
		if r.CallsMean != 3 {
			t.Errorf("base %v: %.2f calls per run, want exactly 3", tc.base, r.CallsMean)
		}
		want := float64(tc.wantWait+8*DefaultNetMean) / float64(time.Millisecond)
		if d := r.TimeMsMean - want; d < -3 || d > 3 {
			t.Errorf("base %v cap %v: mean time %.1f ms, want %.1f ± 3 (wait %v + 8 delays)", tc.base, tc.cap, r.TimeMsMean, want, tc.wantWait)
		}
	}
}

func TestContentionConfigErrors(t *testing.T) {
	bad := Strategy{Name: "bad", Policy: retry.Policy{Attempts: -1}}
	for _, tc := range []struct {
		name string
		cfg  ContentionConfig
		want string
	}{
		{"empty clients", ContentionConfig{Clients: []int{}}, "no client counts"},
		{"zero clients", ContentionConfig{Clients: []int{0}}, "clients = 0"},
		{"negative runs", ContentionConfig{Runs: -1}, "runs = -1"},
		{"no strategies", ContentionConfig{Strategies: []Strategy{}}, "no strategies"},
		{"bad policy", ContentionConfig{Strategies: []Strategy{bad}}, `strategy "bad"`},
		{"duplicate", ContentionConfig{Strategies: []Strategy{{Name: "a"}, {Name: "a"}}}, `"a" is empty or repeated`},
		{"negative delay", ContentionConfig{NetMean: -time.Millisecond}, "network delay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RunContention(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestContentionStrategyNames(t *testing.T) {
	want := map[string]retry.Shape{
		"expo": retry.ShapeNone, "google": retry.ShapeGoogle, "full": retry.ShapeFull, "equal": retry.ShapeEqual,
		"decorrelated": retry.ShapeDecorrelated, "jitter-at-cap": retry.ShapeJitterAtCap, "none": retry.ShapeNone,
	}
	for _, name := range ContentionNames {
		s, err := ContentionStrategy(name, DefaultBase, DefaultCap, DefaultJitter)
		if err != nil {
			t.Fatal(err)
		}
		if s.Name != name || s.Policy.Shape != want[name] {
			t.Errorf("%s: got %q shape %v", name, s.Name, s.Policy.Shape)
		}
		// "none" never waits; every other strategy waits at least base·2 on
		// its first backoff except the jittered ones, which may wait less.
		if name == "none" && s.Policy.Backoff(5, 0, 0.9) != 0 {
			t.Error("none: want no wait")
		}
	}
	if _, err := ContentionStrategy("bogus", DefaultBase, DefaultCap, DefaultJitter); err == nil || !strings.Contains(err.Error(), "jitter-at-cap") {
		t.Errorf("unknown name: err = %v, want the list of names", err)
	}
	if _, err := ContentionStrategy("full", 0, DefaultCap, 0); err == nil {
		t.Error("base 0 accepted")
	}
	var out map[string]any
	b, _ := json.Marshal(ContentionResult{Strategy: "full"})
	_ = json.Unmarshal(b, &out)
	for _, k := range []string{"strategy", "clients", "runs", "calls_mean", "time_ms_mean"} {
		if _, ok := out[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
}

// The worker goroutines are gone when RunContention and RunOverload return.
func TestNoGoroutineLeak(t *testing.T) {
	before := chaos.SnapshotGoroutines()
	if _, err := RunContention(ContentionConfig{Clients: []int{5, 10}, Runs: 2, Workers: 4}); err != nil {
		t.Fatal(err)
	}
	c := tiny()
	c.Workers = 3
	if _, err := RunOverload(c); err != nil {
		t.Fatal(err)
	}
	// A worker may still be on its way out after signalling that it is
	// done: Leaked waits for it (a bounded time) instead of counting once.
	if leaked := before.Leaked(5 * time.Second); len(leaked) > 0 {
		t.Errorf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
	}
}
