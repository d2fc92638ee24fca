package fleetsim

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backoffkit/retry/internal/svgplot"
	"github.com/backoffkit/retry/redisretry"
)

// faulty is a run with every limiter and every kind of fault.
func faulty(seed uint64) Config {
	return Config{
		Name: "faulty", Processes: 30, Duration: time.Minute, Warmup: 5 * time.Second, Seed: seed, Skew: 5 * time.Millisecond,
		Quota:    &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "k"}, Limit: redisretry.PerSecond(20)},
		Budget:   &redisretry.BudgetConfig{Settings: redisretry.Settings{Key: "k"}},
		Cooldown: &redisretry.CooldownConfig{Settings: redisretry.Settings{Key: "k"}},
		Demand:   Demand{Rate: 1, Deadline: 10 * time.Second},
		Faults: []Fault{
			{Kind: SlowReplies, At: 3 * time.Second, For: time.Second, Procs: 5, Delay: 30 * time.Millisecond},
			{Kind: Partition, At: 10 * time.Second, For: 3 * time.Second, Procs: 10},
			{Kind: Flush, At: 20 * time.Second},
			{Kind: Restart, At: 30 * time.Second, For: 2 * time.Second},
			{Kind: Kill, At: 35 * time.Second, Procs: 2},
			{Kind: ClockStep, At: 40 * time.Second, Delay: time.Hour},
			{Kind: Overload, At: 45 * time.Second, For: 500 * time.Millisecond, Delay: 5 * time.Second},
			{Kind: Stall, At: 50 * time.Second, For: 1500 * time.Millisecond},
			{Kind: SlowConnect, Procs: 5, Delay: 40 * time.Millisecond},
		},
	}
}

func jsonOf(t *testing.T, c Config) []byte {
	t.Helper()
	r, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestRunIsDeterministic(t *testing.T) {
	t.Parallel()
	a, b := jsonOf(t, faulty(7)), jsonOf(t, faulty(7))
	if !bytes.Equal(a, b) {
		t.Fatalf("two runs of one Config differ:\n%s\n%s", a, b)
	}
	if c := jsonOf(t, faulty(8)); bytes.Equal(a, c) {
		t.Fatal("two seeds gave the same run")
	}
	var r []Result
	if err := json.Unmarshal(a, &r); err != nil || len(r) != 1 {
		t.Fatalf("the JSON does not read back: %v", err)
	}
	// Every fault left a trace: the late replies and the partition made
	// limiters fall back, the restart refused calls, the overload 429s.
	if r[0].Fallbacks == 0 || r[0].Rejected == 0 || r[0].Errors == 0 || r[0].LogLines == 0 {
		t.Fatalf("faults without effect: %+v", r[0])
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	ok := func() Config {
		return Config{Processes: 2, Duration: time.Second,
			Quota: &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "k"}, Limit: redisretry.PerSecond(1)}, Demand: Demand{Rate: 1}}
	}
	if err := ok().Validate(); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Processes = 0 }, "Config.Processes = 0"},
		{func(c *Config) { c.Processes = 100_001 }, "Config.Processes = 100001"},
		{func(c *Config) { c.Duration = 0 }, "Config.Duration = 0s"},
		{func(c *Config) { c.Warmup = time.Second }, "Config.Warmup = 1s"},
		{func(c *Config) { c.Quota = nil }, "Config.Quota = nil"},
		{func(c *Config) { c.Quota.Key = "" }, "QuotaConfig.Key"},
		{func(c *Config) { c.Budget = &redisretry.BudgetConfig{} }, "BudgetConfig.Key"},
		{func(c *Config) {
			c.Cooldown = &redisretry.CooldownConfig{Settings: redisretry.Settings{Key: "k"}, Max: -1}
		}, "CooldownConfig.Max"},
		{func(c *Config) { c.Policy.Deadline = time.Second }, "Config.Policy.Deadline = 1s"},
		{func(c *Config) { c.Policy.Attempts = -1 }, "Attempts"},
		{func(c *Config) { c.Demand.Rate = 0 }, "Config.Demand.Rate = 0"},
		{func(c *Config) { c.Demand.Callers = -1 }, "Config.Demand.Callers = -1"},
		{func(c *Config) { c.Demand.Shape = 9 }, "Config.Demand.Shape"},
		{func(c *Config) { c.Redis = Dist{Min: time.Second} }, "Config.Redis"},
		{func(c *Config) { c.Server.Grace = 11 }, "Config.Server.Grace = 11"},
		{func(c *Config) { c.Faults = []Fault{{Kind: 0}} }, "Config.Faults[0].Kind"},
		{func(c *Config) { c.Faults = []Fault{{Kind: Kill, Procs: 3}} }, "Config.Faults[0].Procs = 3"},
		{func(c *Config) { c.Faults = []Fault{{Kind: SlowReplies}} }, "Config.Faults[0].Delay = 0s"},
		{func(c *Config) { c.Faults = []Fault{{Kind: ClockStep}} }, "Config.Faults[0].Delay = 0s"},
		{func(c *Config) { c.Faults = []Fault{{Kind: SlowConnect}} }, "Config.Faults[0].Delay = 0s: want the first connection's setup"},
		{func(c *Config) { c.Faults = []Fault{{Kind: SlowConnect + 1}} }, "Config.Faults[0].Kind"},
	} {
		c := ok()
		q := *c.Quota
		c.Quota = &q
		tc.change(&c)
		_, err := Run(c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error naming %q, got %v", tc.want, err)
		}
	}
}

func TestKilledProcessNeverOverAdmits(t *testing.T) {
	t.Parallel()
	// A process killed holding its lease (no Close): the fleet loses the
	// slots it held, and never goes above the quota (the review's "what
	// held").
	c := Config{
		Processes: 10, Duration: 20 * time.Second, Seed: 3,
		Quota:  &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "k"}, Limit: redisretry.PerSecond(10)},
		Demand: Demand{Callers: 2},
		Server: Server{Grace: 10},
		Faults: []Fault{{Kind: Kill, At: 10 * time.Second, Procs: 3}},
	}
	r := run(t, c)
	t.Logf("starts per second %v, at most %d in one", r.Starts, r.MaxSecondStarts)
	if r.SecondsOverStarts != 0 || r.MaxSecondStarts > 11 {
		t.Errorf("%d seconds over the quota, %d in one: a killed process's slots were used", r.SecondsOverStarts, r.MaxSecondStarts)
	}
	dip := false
	for _, x := range r.Starts[10:13] {
		dip = dip || x < 9
	}
	if !dip {
		t.Errorf("starts per second %v: the killed processes' leases should leave a dip after 10s", r.Starts)
	}
}

func TestReports(t *testing.T) {
	t.Parallel()
	a, b := run(t, faulty(1)), run(t, faulty(2))
	a.Name, b.Name = "a name longer than its column", ""
	var out bytes.Buffer
	if err := WriteTable(&out, a, b, a, b, a); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	for _, l := range lines {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
	if len(lines) != 2*(len(rows)+1)+1 || !strings.Contains(lines[0], "a name lon…") || !strings.Contains(lines[0], "run 2") {
		t.Errorf("the table:\n%s", out.String())
	}
	dir := t.TempDir()
	paths, err := WritePlots(dir, a, b)
	if err != nil || len(paths) != 3 {
		t.Fatalf("%v %v", paths, err)
	}
	for _, p := range paths {
		svg, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svgplot.CheckReadable(svg); err != nil {
			t.Errorf("%s: %v", filepath.Base(p), err)
		}
	}
}
