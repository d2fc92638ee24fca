package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/backoffkit/retry"
)

// policyFlags are the flags that build a retry.Policy, shared by the command
// mode and retry http. Values are kept as given; build merges the profile,
// the config file and the flags that were set, in that order.
type policyFlags struct {
	fs *flag.FlagSet

	attempts       int
	initialDelay   time.Duration
	maxDelay       time.Duration
	expBase        float64
	jitter         time.Duration
	deadline       time.Duration
	attemptTimeout time.Duration
	maxRetryAfter  time.Duration
	shape          retry.Shape
	codes          []int
	configPath     string
	profile        string
	seed           uint64
	logFormat      string
	quiet          bool
}

// addPolicyFlags registers the policy and logging flags on fs. http adds the
// HTTP-only ones (--codes, --max-retry-after).
func addPolicyFlags(fs *flag.FlagSet, http bool) *policyFlags {
	pf := &policyFlags{fs: fs, logFormat: "text"}
	fs.Func("attempts", "`N`, the total number of attempts, the first included (default 5)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil {
			return errors.New("not a whole number")
		}
		if n < 1 {
			return errors.New("must be at least 1")
		}
		pf.attempts = n
		return nil
	})
	durFlag(fs, &pf.initialDelay, "initial-delay", "wait before the first retry, before jitter (default 1s)")
	durFlag(fs, &pf.maxDelay, "max-delay", "cap on any single wait (default 60s)")
	fs.Func("exp-base", "base `B` of the exponential growth (default 2)", func(s string) error {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return errors.New("not a number")
		}
		if math.IsNaN(f) || math.IsInf(f, 0) || f < 1 {
			return errors.New("must be a finite number >= 1")
		}
		pf.expBase = f
		return nil
	})
	durFlag(fs, &pf.jitter, "jitter", "upper bound of the random extra added to each wait; 0 for none (default 1s)")
	durFlag(fs, &pf.deadline, "deadline", "total time allowed for all attempts and waits, e.g. 300s (default none)")
	durFlag(fs, &pf.attemptTimeout, "attempt-timeout", "time limit of one attempt; a hung attempt is stopped and retried (default none)")
	fs.Func("jitter-shape", "backoff `SHAPE`: "+shapeList()+" (default google)", func(s string) error {
		sh, err := retry.ParseShape(s)
		if err != nil {
			return fmt.Errorf("unknown shape (want one of %s)", shapeList())
		}
		pf.shape = sh
		return nil
	})
	fs.StringVar(&pf.configPath, "config", "", "JSON config `FILE` with the SDK's names: attempts, initial_delay, max_delay, exp_base, jitter (seconds), http_status_codes")
	fs.Func("profile", "start from the retry profile `NAME`: "+strings.Join(retry.ProfileNames(), ", "), func(s string) error {
		if _, err := retry.Profile(s); err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), "retry: "))
		}
		pf.profile = s
		return nil
	})
	fs.Func("seed", "seed `N` for the jitter (default: random)", func(s string) error {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return errors.New("not a non-negative whole number")
		}
		pf.seed = n
		return nil
	})
	fs.Func("log-format", "retry log `FORMAT` on stderr: text or json (one object per event)", func(s string) error {
		if s != "text" && s != "json" {
			return errors.New("want text or json")
		}
		pf.logFormat = s
		return nil
	})
	fs.BoolVar(&pf.quiet, "quiet", false, "print no retry log")
	if http {
		fs.Func("codes", "HTTP status `CODES` that trigger a retry (default 408,429,500,502,503,504)", func(s string) error {
			c, err := parseStatusCodes(s)
			pf.codes = c
			return err
		})
		durFlag(fs, &pf.maxRetryAfter, "max-retry-after", "cap on a server's Retry-After/RetryInfo hint; 0 ignores hints (default: --max-delay)")
	}
	return pf
}

func durFlag(fs *flag.FlagSet, dst *time.Duration, name, usage string) {
	fs.Func(name, usage+"; `DURATION` like 1.5s, 250ms, or seconds", func(s string) error {
		d, err := parseDuration(s)
		*dst = d
		return err
	})
}

// build returns the policy: defaults (or the profile), then the config file,
// then the flags that were set. It validates the result.
func (pf *policyFlags) build() (retry.Policy, error) {
	set := map[string]bool{}
	pf.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var cfg config
	if pf.configPath != "" {
		data, err := os.ReadFile(pf.configPath)
		if err != nil {
			return retry.Policy{}, usagef("--config %s: cannot read: %v", pf.configPath, unwrapPath(err))
		}
		cfg, err = parseConfig(data)
		if err != nil {
			return retry.Policy{}, usagef("--config %s: %v", pf.configPath, err)
		}
	}

	var p retry.Policy
	name, from := pf.profile, "--profile"
	if name == "" && cfg.Profile != "" {
		name, from = cfg.Profile, "--config "+pf.configPath+": profile"
	}
	if name != "" {
		prof, err := retry.Profile(name)
		if err != nil {
			return retry.Policy{}, usagef("%s: %s", from, strings.TrimPrefix(err.Error(), "retry: "))
		}
		p = prof
	}
	p = p.Merge(cfg.Policy)

	var f retry.Policy
	if set["attempts"] {
		f.Attempts = pf.attempts
	}
	if set["exp-base"] {
		f.ExpBase = pf.expBase
	}
	if set["initial-delay"] {
		f.InitialDelay = explicit(pf.initialDelay)
	}
	if set["max-delay"] {
		f.MaxDelay = explicit(pf.maxDelay)
	}
	if set["jitter"] {
		f.Jitter = explicit(pf.jitter)
	}
	if set["max-retry-after"] {
		f.MaxRetryAfter = explicit(pf.maxRetryAfter)
	}
	if set["deadline"] && pf.deadline > 0 {
		f.Deadline = pf.deadline
	}
	if set["attempt-timeout"] && pf.attemptTimeout > 0 {
		f.AttemptTimeout = pf.attemptTimeout
	}
	if set["codes"] {
		f.StatusCodes = pf.codes
	}
	p = p.Merge(f)
	if set["jitter-shape"] {
		p.Shape = pf.shape // Merge cannot set the zero shape (google) back
	}
	if set["seed"] {
		p.Rand = retry.NewRand(pf.seed)
	}
	if err := p.Validate(); err != nil {
		return retry.Policy{}, policyError(err)
	}
	return p, nil
}

// policyError words a *retry.ValidationError with the flag names.
func policyError(err error) error {
	var ve *retry.ValidationError
	if !errors.As(err, &ve) {
		return &usageError{err.Error()}
	}
	names := map[string]string{
		"Attempts": "attempts", "InitialDelay": "initial-delay", "MaxDelay": "max-delay",
		"ExpBase": "exp-base", "Jitter": "jitter", "Deadline": "deadline",
		"AttemptTimeout": "attempt-timeout", "MaxRetryAfter": "max-retry-after",
		"Shape": "jitter-shape", "StatusCodes": "codes",
	}
	reason := strings.Replace(ve.Reason, "InitialDelay", "the initial delay", 1)
	return usagef("--%s %v: %s", names[ve.Field], ve.Value, reason)
}

// unwrapPath drops the path from an *os.PathError (the caller names it).
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// printFlags prints fs's flags, sorted, with two dashes.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		if arg == "value" {
			arg = ""
		}
		if _, ok := f.Value.(interface{ IsBoolFlag() bool }); ok {
			arg = ""
		}
		line := "  --" + f.Name
		if arg != "" {
			line += " " + arg
		}
		fmt.Fprintf(w, "%s\n      %s\n", line, usage)
	})
}
