package simcmd

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/cmd/retry/internal/policy"
	"github.com/backoffkit/retry/redisretry"
	"github.com/backoffkit/retry/redisretry/fleetsim"
)

func init() {
	registerSimExperiment(simExperiment{"fleet", "P processes share one quota: the real redisretry limiters (fleetsim) against none", simFleet})
}

// fleetStrategies are the strategies "retry sim fleet" compares, in order:
// what each process paces and limits its calls with.
var fleetStrategies = []struct{ name, what string }{
	{"local", "backoff and the server's RetryInfo only"},
	{"fleet-budget", "the fleet's retry budget (redisretry.Budget)"},
	{"fleet-cooldown", "the fleet's cooldown (redisretry.Cooldown)"},
	{"fleet-quota", "the fleet's quota (redisretry.Quota, Lease 1 as the CLI)"},
	{"fleet", "all three: what --fleet NAME --quota RATE sets up"},
	{"adaptive", "a rate each process learns alone (the AWS SDKs' adaptive mode)"},
	{"auto", "a rate the fleet learns from its 429s (redisretry.AutoQuota)"},
}

// fleetSimKey is the fleet's key in the simulated Redis.
const fleetSimKey = "sim:fleet"

// fleetSimConfig returns the harness's configuration of one strategy: every
// process runs the real limiters the strategy names, built as the CLI builds
// them, against a server that enforces the quota's rate over a sliding
// window (429 with a RetryInfo beyond it).
func fleetSimConfig(strategy string, base fleetsim.Config, quota redisretry.Limit) (fleetsim.Config, error) {
	c := base
	c.Name = strategy
	capacity := []fleetsim.Step{{At: 0, PerSecond: float64(quota.Rate) / quota.Period.Seconds()}}
	q := &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: fleetSimKey}, Limit: quota, Lease: policy.FleetQuotaLease}
	switch strategy {
	case "local":
		c.Server.Capacity = capacity
	case "fleet-budget":
		c.Server.Capacity = capacity
		c.Budget = &redisretry.BudgetConfig{Settings: redisretry.Settings{Key: fleetSimKey}}
	case "fleet-cooldown":
		c.Server.Capacity = capacity
		c.Cooldown = &redisretry.CooldownConfig{Settings: redisretry.Settings{Key: fleetSimKey}}
	case "fleet-quota":
		c.Quota = q
	case "fleet":
		c.Quota = q
		c.Budget = &redisretry.BudgetConfig{Settings: redisretry.Settings{Key: fleetSimKey}}
		c.Cooldown = &redisretry.CooldownConfig{Settings: redisretry.Settings{Key: fleetSimKey}}
	case "adaptive":
		c.Server.Capacity = capacity
		c.Adaptive = true
	case "auto":
		c.Server.Capacity = capacity
		c.Auto = &redisretry.AutoQuotaConfig{Settings: redisretry.Settings{Key: fleetSimKey}}
	default:
		var known []string
		for _, s := range fleetStrategies {
			known = append(known, s.name)
		}
		return c, fmt.Errorf("unknown fleet strategy %q (want %s)", strategy, strings.Join(known, ", "))
	}
	return c, nil
}

func simFleet(env simEnv, args []string, stdout, stderr io.Writer) int {
	var sf simFlags
	fs := newSimFlagSet("fleet", &sf, "10")
	fs.Lookup("clients").Usage = "callers `N` per process, each calling again after its last call and a think time, or a range FROM:TO:STEP (default 10)"
	processes := fs.Int("processes", 10, "client processes `P` sharing the quota")
	quota := "600/1m"
	fs.Func("quota", "the quota `RATE`, e.g. 600/1m: the fleet's quota paces at it, and the server answers 429 beyond it (sliding --window) (default 600/1m)", func(s string) error {
		quota = s
		return nil
	})
	duration := fs.Duration("duration", 5*time.Minute, "how long the run lasts, in virtual time")
	think := fs.Duration("think", time.Second, "each caller's think time between calls (jittered: 0.5 to 1.5 times it)")
	deadline := fs.Duration("deadline", 30*time.Second, "each call's deadline from its start; 0 for none")
	window := fs.Duration("window", time.Second, "the window the server counts requests in (sliding)")
	service := fs.Duration("service", 0, "how long the server works on a request it serves")
	var def []string
	for _, s := range fleetStrategies {
		def = append(def, s.name)
	}
	strategies := fs.String("strategies", strings.Join(def, ","), "comma-separated `LIST` of strategies: "+strings.Join(def, ", "))
	scenario := fs.String("scenario", "", "`NAME` of a fixed scenario instead of the flags above: step (issue 24's comparison: a shared capacity that steps 100, 40, 100 a second, 200 processes, paced by auto, backoff, adaptive and quota)")
	if done, code := simParse(fs, args, stdout, stderr); done {
		return code
	}
	prog := fs.Name()
	switch *scenario {
	case "":
	case "step":
		return simFleetStep(env, sf, stdout, stderr, prog)
	default:
		return simUsageError(stderr, prog, fmt.Sprintf("--scenario %q: want step", *scenario))
	}
	l, err := policy.ParseQuota(quota)
	if err != nil {
		return simUsageError(stderr, prog, fmt.Sprintf("invalid value %q for flag --quota: %v", quota, err))
	}
	base := fleetsim.Config{
		Processes: *processes, Duration: *duration, Seed: sf.seed,
		Demand: fleetsim.Demand{Shape: fleetsim.Jittered, Think: *think, Deadline: *deadline},
		Server: fleetsim.Server{Window: *window, Service: *service},
	}
	var configs [][]fleetsim.Config // by --clients value, then strategy
	for _, n := range sf.clients {
		var row []fleetsim.Config
		for _, s := range cli.Names(*strategies) {
			c, err := fleetSimConfig(s, base, l)
			if err != nil {
				return simUsageError(stderr, prog, err.Error())
			}
			c.Demand.Callers = n
			if err := c.Validate(); err != nil {
				return simUsageError(stderr, prog, fleetSimFlagError(err))
			}
			row = append(row, c)
		}
		if len(row) == 0 {
			return simUsageError(stderr, prog, "--strategies is empty")
		}
		configs = append(configs, row)
	}
	if err := checkPlotDir(sf.plot); err != nil {
		return simUsageError(stderr, prog, err.Error())
	}
	total := len(configs) * len(configs[0])
	pr := newSimProgress(env, stderr, prog, "strategies", total)
	results := make([][]*fleetsim.Result, len(configs))
	done := 0
	for i, row := range configs {
		for _, c := range row {
			r, err := fleetsim.Run(c)
			if err != nil {
				pr.stop()
				return simFail(stderr, prog, err)
			}
			results[i] = append(results[i], r)
			done++
			pr.update(done, total)
		}
	}
	pr.stop()
	if sf.plot != "" {
		for i, rs := range results {
			dir := sf.plot
			if len(results) > 1 {
				dir = filepath.Join(sf.plot, "clients-"+strconv.Itoa(sf.clients[i]))
			}
			if err := wrote(stderr, prog)(fleetsim.WritePlots(dir, rs...)); err != nil {
				return simFail(stderr, prog, err)
			}
		}
	}
	if sf.json {
		for i, rs := range results {
			for _, r := range rs {
				b, err := json.Marshal(struct {
					Clients int `json:"clients"`
					*fleetsim.Result
				}{sf.clients[i], r})
				if err != nil {
					return simFail(stderr, prog, err)
				}
				fmt.Fprintf(stdout, "%s\n", b)
			}
		}
		return cli.ExitOK
	}
	for i, rs := range results {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintln(stdout, cli.Wrap(fmt.Sprintf("%d processes × %d callers (think %v, deadline %v), quota %s, a server that answers 429 beyond it in a sliding %v window, %v, seed %d: the real redisretry limiters in virtual time (redisretry/fleetsim)",
			*processes, sf.clients[i], *think, *deadline, quota, *window, *duration, sf.seed), reportWidth, ""))
		if err := fleetsim.WriteTable(stdout, rs...); err != nil {
			return simFail(stderr, prog, err)
		}
	}
	return cli.ExitOK
}

// simFleetStep runs fleetsim.StepScenario for the four ways to pace, with
// the seed of sf, and reports it as fleetsim.WriteSteps does (or as JSON
// lines, or plots).
func simFleetStep(env simEnv, sf simFlags, stdout, stderr io.Writer, prog string) int {
	if err := checkPlotDir(sf.plot); err != nil {
		return simUsageError(stderr, prog, err.Error())
	}
	pacings := []fleetsim.Pacing{fleetsim.PaceAuto, fleetsim.PaceBackoff, fleetsim.PaceAdaptive, fleetsim.PaceQuota}
	pr := newSimProgress(env, stderr, prog, "pacings", len(pacings))
	var rs []*fleetsim.Result
	for i, p := range pacings {
		r, err := fleetsim.Run(fleetsim.StepScenario(p, sf.seed))
		if err != nil {
			pr.stop()
			return simFail(stderr, prog, err)
		}
		rs = append(rs, r)
		pr.update(i+1, len(pacings))
	}
	pr.stop()
	if sf.plot != "" {
		if err := wrote(stderr, prog)(fleetsim.WritePlots(sf.plot, rs...)); err != nil {
			return simFail(stderr, prog, err)
		}
	}
	if sf.json {
		for _, r := range rs {
			b, err := json.Marshal(r)
			if err != nil {
				return simFail(stderr, prog, err)
			}
			fmt.Fprintf(stdout, "%s\n", b)
		}
		return cli.ExitOK
	}
	fmt.Fprintln(stdout, cli.Wrap(fmt.Sprintf("200 processes offering 150 calls a second to a shared capacity of 100, then 40, then 100 a second (a minute each), 429 beyond it; seed %d: the real redisretry limiters in virtual time (redisretry/fleetsim)", sf.seed), reportWidth, ""))
	if err := fleetsim.WriteSteps(stdout, rs...); err != nil {
		return simFail(stderr, prog, err)
	}
	return cli.ExitOK
}

// fleetSimFlagError turns a fleetsim.Config error into one that names the
// flag: "fleetsim: invalid Config.Processes = 0: want 1 to 100,000" is
// "--processes 0: want 1 to 100,000".
func fleetSimFlagError(err error) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "fleetsim: invalid Config.Demand.Callers = "); ok {
		n, _, _ := strings.Cut(rest, ":")
		return "--clients " + n + ": want at most 1,000,000 callers in all (--processes × --clients)"
	}
	for field, flag := range map[string]string{
		"Config.Processes": "--processes", "Config.Duration": "--duration",
		"Config.Demand.Think": "--think", "Config.Demand.Deadline": "--deadline", "Config.Server.Window": "--window",
		"Config.Server.Service": "--service", "Config.Server.Capacity[0].PerSecond": "--quota",
	} {
		if rest, ok := strings.CutPrefix(msg, "fleetsim: invalid "+field+" = "); ok {
			return flag + " " + rest
		}
	}
	return strings.TrimPrefix(msg, "fleetsim: ")
}
