package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/backoffkit/retry/sim"
)

func init() {
	registerSimExperiment(simExperiment{"fleet", "P processes share one quota: each on its own against redisretry's fleet limiters", simFleet})
}

// retryInfoFlag is --retry-info: "reset" (until the window ends), "none",
// or a fixed DURATION.
type retryInfoFlag struct{ d time.Duration }

func (r *retryInfoFlag) String() string {
	switch {
	case r == nil || r.d == 0:
		return "reset"
	case r.d < 0:
		return "none"
	}
	return r.d.String()
}

func (r *retryInfoFlag) Set(s string) error {
	switch s {
	case "reset":
		r.d = 0
		return nil
	case "none":
		r.d = -1
		return nil
	}
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	if d == 0 {
		return errors.New("want reset, none or a duration above 0")
	}
	r.d = d
	return nil
}

func simFleet(env simEnv, args []string, stdout, stderr io.Writer) int {
	def := sim.DefaultFleet()
	var sf simFlags
	fs := newSimFlagSet("fleet", &sf, strconv.Itoa(def.Clients))
	fs.Lookup("clients").Usage = "clients `N` per process, or a range FROM:TO:STEP (default " + strconv.Itoa(def.Clients) + ")"
	processes := fs.Int("processes", def.Processes, "client processes `P` sharing the quota")
	jobs := fs.Int("jobs", def.Jobs, "backlog of each client: `N` calls to get done, one at a time")
	quota := fmt.Sprintf("%d/%v", def.Quota, def.Window)
	fs.Func("quota", "the server's quota `RATE`, e.g. 600/1m: requests served per window (fixed windows), 429 beyond; the fleet quota paces at it (default 600/1m)", func(s string) error {
		quota = s
		return nil
	})
	ri := &retryInfoFlag{d: def.RetryInfo}
	fs.Var(ri, "retry-info", "what a 429's RetryInfo asks for: reset (the rest of the window), none, or a `DURATION` (default reset)")
	service := fs.Duration("service", def.Service, "how long the server works on a request it serves")
	horizon := fs.Duration("horizon", def.Horizon, "the longest simulated time: a backlog not drained by then is reported as never")
	strategies := fs.String("strategies", strings.Join(sim.DefaultFleetNames, ","), "comma-separated `LIST` of strategies: "+strings.Join(sim.DefaultFleetNames, ", "))
	if done, code := simParse(fs, args, stdout, stderr); done {
		return code
	}
	prog := fs.Name()
	l, err := parseQuota(quota)
	if err != nil {
		return simUsageError(stderr, prog, fmt.Sprintf("invalid value %q for flag --quota: %v", quota, err))
	}
	if l.Rate > 1<<31-1 {
		return simUsageError(stderr, prog, fmt.Sprintf("--quota %s: at most %d requests per window", quota, 1<<31-1))
	}
	cfg := def
	cfg.Processes, cfg.Jobs, cfg.Quota, cfg.Window = *processes, *jobs, int(l.Rate), l.Period
	cfg.RetryInfo, cfg.Service, cfg.Horizon, cfg.Seed = ri.d, *service, *horizon, sf.seed
	for _, n := range names(*strategies) {
		s, err := sim.FleetStrategyByName(n)
		if err != nil {
			return simUsageError(stderr, prog, simFlagError(err))
		}
		cfg.Strategies = append(cfg.Strategies, s)
	}
	if len(cfg.Strategies) == 0 {
		return simUsageError(stderr, prog, "--strategies is empty")
	}
	for _, n := range sf.clients {
		c := cfg
		c.Clients = n
		if err := c.Validate(); err != nil {
			return simUsageError(stderr, prog, simFlagError(err))
		}
	}
	if err := checkPlotDir(sf.plot); err != nil {
		return simUsageError(stderr, prog, err.Error())
	}
	var all []sim.FleetResult
	pr := newSimProgress(env, stderr, prog, "strategies", len(cfg.Strategies)*len(sf.clients))
	k := len(cfg.Strategies)
	for i, n := range sf.clients {
		c := cfg
		c.Clients = n
		c.Progress = func(done, total int) { pr.update(i*total+done, len(sf.clients)*total) }
		res, err := sim.RunFleet(c)
		if err != nil {
			pr.stop()
			return simUsageError(stderr, prog, simFlagError(err))
		}
		all = append(all, res...)
	}
	pr.stop()
	if sf.plot != "" {
		for i, n := range sf.clients {
			c := cfg
			c.Clients = n
			suffix := ""
			if len(sf.clients) > 1 {
				suffix = strconv.Itoa(n)
			}
			paths, err := sim.WriteFleetPlots(sf.plot, suffix, c, all[i*k:(i+1)*k])
			for _, p := range paths {
				fmt.Fprintf(stderr, "%s: wrote %s\n", prog, p)
			}
			if err != nil {
				return simFail(stderr, prog, err)
			}
		}
	}
	if sf.json {
		if err := sim.WriteJSON(stdout, all); err != nil {
			return simFail(stderr, prog, err)
		}
		return exitOK
	}
	for i, n := range sf.clients {
		c := cfg
		c.Clients = n
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintln(stdout, wrap(sim.FleetSummary(c), reportWidth, ""))
		rows := all[i*k : (i+1)*k]
		if err := foldReport(stdout, func(w io.Writer) error { return sim.WriteFleetReport(w, c, rows) }); err != nil {
			return simFail(stderr, prog, err)
		}
	}
	return exitOK
}
