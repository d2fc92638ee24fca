package policy

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/cmd/retry/internal/cli"
)

// Flags are the flags that build a retry.Policy, shared by the command
// mode and retry http. Values are kept as given; build merges the profile,
// the config file and the flags that were set, in that order.
type Flags struct {
	fs *flag.FlagSet

	attempts       int
	initialDelay   time.Duration
	maxDelay       time.Duration
	expBase        float64
	jitter         time.Duration
	deadline       time.Duration
	AttemptTimeout time.Duration
	maxRetryAfter  time.Duration
	shape          retry.Shape
	codes          []int
	configPath     string
	profile        string
	Used           ProfileUse // the profile the policy started from, set by build
	http           bool       // retry http's flags (not the command mode's)
	seed           uint64
	logFormat      string
	Quiet          bool
	fleetFlags     FleetSpec // the fleet flags as given
	Fleet          FleetSpec // with the config file's, set by build

	// given maps the canonical name of each policy flag that was set to the
	// name it was given as, with its dashes ("--max-time" for
	// --attempt-timeout), so that errors show what the user typed.
	given map[string]string
	// From says where each Policy field's value came from (see origin),
	// set by build.
	From Origin
}

// set records that the flag canonical was given as typed.
func (pf *Flags) set(canonical, typed string) {
	if pf.given == nil {
		pf.given = map[string]string{}
	}
	pf.given[canonical] = cli.DashName(typed)
}

// LimitName names the time limit of the Policy field (Deadline,
// AttemptTimeout), whose value is v, for a message: by its flag as typed,
// "--max-time (2s)", else by where it came from, "deadline (10s, from
// --profile realtime)".
func (pf *Flags) LimitName(field string, v time.Duration) string {
	for _, f := range policyFields {
		if f.Field != field {
			continue
		}
		if typed, ok := pf.given[f.flag]; ok {
			return fmt.Sprintf("%s (%v)", typed, cli.RoundDur(v))
		}
		words := strings.ReplaceAll(f.key, "_", " ")
		if src := pf.From[field]; src != "" {
			return fmt.Sprintf("%s (%v, from %s)", words, cli.RoundDur(v), src)
		}
		return fmt.Sprintf("%s (%v)", words, cli.RoundDur(v))
	}
	return cli.RoundDur(v).String()
}

// AddFlags registers the policy and logging flags on fs. http adds the
// HTTP-only ones (--codes, --max-retry-after).
func AddFlags(fs *flag.FlagSet, http bool) *Flags {
	pf := &Flags{fs: fs, logFormat: "text", http: http}
	fs.Func("attempts", "`N`, the total number of attempts, the first included (default 5)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil {
			return errors.New("not a whole number")
		}
		if n < 1 {
			return errors.New("must be at least 1")
		}
		pf.attempts = n
		pf.set("attempts", "attempts")
		return nil
	})
	pf.DurFlag(&pf.initialDelay, "initial-delay", "initial-delay", "wait before the first retry, before jitter (default 1s)")
	pf.DurFlag(&pf.maxDelay, "max-delay", "max-delay", "cap on any single wait (default 60s)")
	fs.Func("exp-base", "base `B` of the exponential growth (default 2)", func(s string) error {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return errors.New("not a number")
		}
		if math.IsNaN(f) || math.IsInf(f, 0) || f < 1 {
			return errors.New("must be a finite number >= 1")
		}
		pf.expBase = f
		pf.set("exp-base", "exp-base")
		return nil
	})
	pf.DurFlag(&pf.jitter, "jitter", "jitter", "upper bound of the random extra added to each wait; 0 for none (default 1s)")
	pf.DurFlag(&pf.deadline, "deadline", "deadline", "total time allowed for all attempts and waits, e.g. 300s; 0 for none (default none)")
	pf.DurFlag(&pf.AttemptTimeout, "attempt-timeout", "attempt-timeout", "time limit of one attempt; a hung attempt is stopped and retried; 0 for none (default none)")
	fs.Func("jitter-shape", "backoff `SHAPE`: "+cli.ShapeList()+" (default google)", func(s string) error {
		sh, err := retry.ParseShape(s)
		if err != nil {
			return fmt.Errorf("unknown shape (want one of %s)", cli.ShapeList())
		}
		pf.shape = sh
		pf.set("jitter-shape", "jitter-shape")
		return nil
	})
	fs.StringVar(&pf.configPath, "config", "", "JSON config `FILE` (keys: "+strings.Join(ConfigKeyNames(), ", ")+"; durations in seconds)")
	fs.Func("profile", "start from the retry profile `NAME`: "+strings.Join(retry.ProfileNames(), ", "), func(s string) error {
		if _, err := retry.Profile(s); err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), "retry: "))
		}
		pf.profile = s
		return nil
	})
	fs.Func("seed", "seed `N` for the jitter (default: random)", func(s string) error {
		n, err := cli.ParseSeed(s)
		if err != nil {
			return err
		}
		pf.seed = n
		pf.set("seed", "seed")
		return nil
	})
	fs.Func("log-format", "retry log `FORMAT` on stderr: text or json (one object per line)", func(s string) error {
		if s != "text" && s != "json" {
			return errors.New("want text or json")
		}
		pf.logFormat = s
		return nil
	})
	fs.BoolVar(&pf.Quiet, "quiet", false, "print no retry log")
	pf.addFleetFlags()
	if http {
		fs.Func("codes", "HTTP status `CODES` that trigger a retry, 4xx and 5xx only (default 408,429,500,502,503,504)", func(s string) error {
			c, err := cli.ParseStatusCodes(s)
			pf.codes = c
			pf.set("codes", "codes")
			return err
		})
		pf.DurFlag(&pf.maxRetryAfter, "max-retry-after", "max-retry-after", "cap on a server's Retry-After/RetryInfo hint; 0 ignores hints (default: --max-delay)")
	}
	return pf
}

// DurFlag registers a duration flag name that sets dst and marks canonical
// as given.
func (pf *Flags) DurFlag(dst *time.Duration, name, canonical, usage string) {
	pf.fs.Func(name, usage+"; `DURATION` like 1.5s, 250ms, or seconds", func(s string) error {
		d, err := cli.ParseDuration(s)
		*dst = d
		pf.set(canonical, name)
		return err
	})
}

// ProfileUse is the profile a policy started from and where it was named
// ("--profile", "--config FILE: profile"); a zero one for none.
type ProfileUse struct{ Name, From string }

// Origin says where each Policy field's value came from, to name it in an
// error: "--max-delay", "--config FILE: max_delay", "--profile realtime".
type Origin map[string]string

// Build returns the policy: defaults (or the profile), then the config file,
// then the flags that were set. An explicit 0 (flag or config) overrides the
// profile: for --deadline and --attempt-timeout it means none. It validates
// the result and names the flag, config key or profile a bad value came from.
// It also sets pf.fleet from the fleet flags and config keys (checked, not
// connected: see OpenFleet).
func (pf *Flags) Build() (retry.Policy, error) {
	var cfg Config
	if pf.configPath != "" {
		data, err := os.ReadFile(pf.configPath)
		if err != nil {
			return retry.Policy{}, cli.Usagef("--config %s: cannot read: %v", pf.configPath, cli.UnwrapPath(err))
		}
		cfg, err = ParseConfig(data)
		if err != nil {
			return retry.Policy{}, cli.Usagef("--config %s: %v", pf.configPath, err)
		}
	}

	from := Origin{}
	var p retry.Policy
	name, src := pf.profile, "--profile "+pf.profile
	if name == "" && cfg.Profile != "" {
		name, src = cfg.Profile, "--config "+pf.configPath+": profile "+cfg.Profile
	}
	pf.Used = ProfileUse{name, strings.TrimSuffix(src, " "+name)}
	if name != "" {
		prof, err := retry.Profile(name)
		if err != nil {
			return retry.Policy{}, cli.Usagef("%s: %s", strings.TrimSuffix(src, " "+name), strings.TrimPrefix(err.Error(), "retry: "))
		}
		p = prof
		for _, f := range policyFields {
			from[f.Field] = src
		}
	}
	p = p.Merge(cfg.Policy)
	if cfg.Policy.Shape != retry.ShapeGoogle {
		p.Shape = cfg.Policy.Shape
	}
	for _, f := range policyFields {
		if k, ok := cfg.Keys[f.key]; ok {
			from[f.Field] = "--config " + pf.configPath + ": " + k
		}
	}

	var f retry.Policy
	given := pf.given
	if _, ok := given["attempts"]; ok {
		f.Attempts = pf.attempts
	}
	if _, ok := given["exp-base"]; ok {
		f.ExpBase = pf.expBase
	}
	durs := []struct {
		Name string
		val  time.Duration
		dst  *time.Duration
	}{
		{"initial-delay", pf.initialDelay, &f.InitialDelay},
		{"max-delay", pf.maxDelay, &f.MaxDelay},
		{"jitter", pf.jitter, &f.Jitter},
		{"max-retry-after", pf.maxRetryAfter, &f.MaxRetryAfter},
		{"deadline", pf.deadline, &f.Deadline},
		{"attempt-timeout", pf.AttemptTimeout, &f.AttemptTimeout},
	}
	for _, d := range durs {
		if _, ok := given[d.Name]; ok {
			*d.dst = Explicit(d.val)
		}
	}
	if _, ok := given["codes"]; ok {
		f.StatusCodes = pf.codes
	}
	p = p.Merge(f)
	if _, ok := given["jitter-shape"]; ok {
		p.Shape = pf.shape // Merge cannot set the zero shape (google) back
	}
	for _, fl := range policyFields {
		if typed, ok := given[fl.flag]; ok {
			from[fl.Field] = typed
		}
	}
	if _, ok := given["seed"]; ok {
		p.Rand = retry.NewRand(pf.seed)
	}
	if err := p.Validate(); err != nil {
		return retry.Policy{}, policyError(err, from)
	}
	pf.From = from
	if err := pf.buildFleet(cfg); err != nil {
		return retry.Policy{}, err
	}
	return p, nil
}

// policyFields names each Policy field's flag and config key.
var policyFields = []struct{ Field, flag, key string }{
	{"Attempts", "attempts", "attempts"},
	{"InitialDelay", "initial-delay", "initial_delay"},
	{"MaxDelay", "max-delay", "max_delay"},
	{"ExpBase", "exp-base", "exp_base"},
	{"Jitter", "jitter", "jitter"},
	{"Deadline", "deadline", "deadline"},
	{"AttemptTimeout", "attempt-timeout", "attempt_timeout"},
	{"MaxRetryAfter", "max-retry-after", "max_retry_after"},
	{"Shape", "jitter-shape", "jitter_shape"},
	{"StatusCodes", "codes", "http_status_codes"},
}

// policyError words a *retry.ValidationError with where the bad value came
// from: the flag as typed, the config file and key, or the profile.
func policyError(err error, from Origin) error {
	var ve *retry.ValidationError
	if !errors.As(err, &ve) {
		return &cli.UsageError{Msg: err.Error()}
	}
	where := from[ve.Field]
	if where == "" {
		for _, f := range policyFields {
			if f.Field == ve.Field {
				where = "--" + f.flag
			}
		}
	}
	value := ve.Value
	if d, ok := value.(time.Duration); ok && d == retry.Zero {
		value = time.Duration(0)
	}
	reason := strings.Replace(ve.Reason, "InitialDelay", "the initial delay", 1)
	if strings.HasPrefix(where, "--profile") || strings.Contains(where, ": profile ") {
		flagName := ve.Field
		for _, f := range policyFields {
			if f.Field == ve.Field {
				flagName = "--" + f.flag
			}
		}
		return cli.Usagef("%s sets %s to %v: %s", where, flagName, value, reason)
	}
	return cli.Usagef("%s %v: %s", where, value, reason)
}
