package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/httpretry"
	"github.com/backoffkit/retry/redisretry"
	"github.com/redis/go-redis/v9"
)

// This file holds --redis, --fleet, --quota and --redis-timeout: the fleet's
// limits shared through Redis by every retry process that names the same
// fleet (package redisretry). The CLI only configures them; the limiters,
// their leases and their fallback when Redis fails are redisretry's.

// FleetSpec is what the flags and the config file ask of the fleet, checked
// but not connected: an empty url means no fleet. A config file's "redis",
// "fleet", "quota" and "redis_timeout" fill one too.
type FleetSpec struct {
	url     string           // the Redis URL as given (it may hold a password)
	Name    string           // the fleet's key
	quota   redisretry.Limit // Rate 0: no quota (with auto: the default ceiling)
	auto    bool             // --quota auto[:MAX]: a rate the fleet learns (redisretry.AutoQuota), quota its ceiling
	size    int              // the quota's FleetSize; 0: counted in Redis
	timeout time.Duration    // each Redis call's bound; 0: redisretry's default
	dial    time.Duration    // a connection's setup bound; 0: the URL's dial_timeout, else redisretry's default
	ca      string           // PEM CA bundle for rediss://; "": the system's pool
	cert    string           // PEM client certificate for rediss://
	key     string           // its key
}

// hasQuota reports whether s paces the fleet: a --quota RATE or auto.
func (s FleetSpec) hasQuota() bool { return s.quota.Rate != 0 || s.auto }

// quotaText is the --quota of s as given: "600/1m", "auto", "auto:600/1m".
func (s FleetSpec) quotaText() string {
	rate := fmt.Sprintf("%d/%v", s.quota.Rate, s.quota.Period)
	switch {
	case !s.auto:
		return rate
	case s.quota.Rate == 0:
		return "auto"
	}
	return "auto:" + rate
}

// parseFleetQuota parses --quota: a RATE ("600/1m"), "auto" (a rate the
// fleet learns from its 429s, from redisretry's default ceiling) or
// "auto:MAX" (from the ceiling MAX, a RATE).
func parseFleetQuota(v string) (l redisretry.Limit, auto bool, err error) {
	rest, auto := strings.CutPrefix(v, "auto")
	switch {
	case !auto:
		l, err = ParseQuota(v)
		return l, false, err
	case rest == "":
		return l, true, nil
	case !strings.HasPrefix(rest, ":"):
		return l, false, fmt.Errorf("want RATE (e.g. 600/1m), auto or auto:MAX (e.g. auto:600/1m)")
	}
	l, err = ParseQuota(rest[1:])
	if err != nil {
		return l, false, fmt.Errorf("auto:MAX: %v", err)
	}
	return l, true, nil
}

// clientConfig is the redisretry client configuration of s; of a cluster,
// that of its first node.
func (s FleetSpec) clientConfig() redisretry.ClientConfig {
	u, _ := firstNode(s.url)
	return redisretry.ClientConfig{URL: u, DialTimeout: s.dial, CAFile: s.ca, CertFile: s.cert, KeyFile: s.key}
}

// firstNode returns raw without its addr query values, and whether it had
// any: a Redis Cluster URL in go-redis's form
// (redis://HOST1:PORT1?addr=HOST2:PORT2&addr=HOST3:PORT3), whose first
// node's URL that is.
func firstNode(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || !u.Query().Has("addr") {
		return raw, false
	}
	q := u.Query()
	q.Del("addr")
	u.RawQuery = q.Encode()
	return u.String(), true
}

// newClusterClient returns a Redis Cluster client for the URL of s (go-redis's
// ParseClusterURL form) set up as redisretry.NewClientWith sets up a client:
// calls bounded by their context, one dial and one try per node call
// (MOVED and ASK redirects are still followed), the dial bounded by dial,
// and the TLS settings of c (made by NewClientWith on the first node's URL).
func newClusterClient(s FleetSpec, dial time.Duration, c *redis.Client) (*redis.ClusterClient, error) {
	opt, err := redis.ParseClusterURL(s.url)
	if err != nil {
		return nil, err
	}
	node := c.Options()
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1 // -1, not 0, disables retries
	opt.DialerRetries = 1
	opt.DialTimeout = dial
	opt.TLSConfig = node.TLSConfig
	return redis.NewClusterClient(opt), nil
}

// checkClient checks s's client configuration (it reads the certificate
// files) without connecting: the error names the flag or config key that
// set the field (from, by config key), never the password.
func (s FleetSpec) checkClient(from map[string]string) error {
	err := s.clientConfig().Validate()
	if err == nil {
		return nil
	}
	names := strings.NewReplacer(
		"ClientConfig.DialTimeout", from["redis_dial_timeout"],
		"ClientConfig.CAFile", from["redis_ca"],
		"ClientConfig.CertFile", from["redis_cert"],
		", KeyFile", ", "+from["redis_key"],
		"ClientConfig.KeyFile", from["redis_key"],
	)
	return errors.New(names.Replace(redactPassword(strings.TrimPrefix(err.Error(), "redisretry: "), s.url)))
}

// FleetQuotaLease is the most requests' worth of the fleet's schedule one
// retry process takes per Redis round trip: 1, because a retry process makes
// few attempts and lives briefly. A round trip per attempt costs nothing
// next to starting a command or a connection, and a larger lease would hold
// slots the other processes wait behind, then give back only what no later
// reservation overtook.
const FleetQuotaLease = 1

// fleetWaitLogged is the shortest wait for the fleet's quota or cooldown
// that gets a log line: the retry lines show the backoff, not these waits,
// and a "retrying in 10ms" that took 500ms would not tell the truth.
const fleetWaitLogged = 100 * time.Millisecond

// addFleetFlags registers the fleet flags on fs.
func (pf *Flags) addFleetFlags() {
	fs, ff := pf.fs, &pf.fleetFlags
	fs.Func("redis", "share the --fleet limits through the Redis server at `URL`, e.g. redis://127.0.0.1:6379/0", func(s string) error {
		ff.url = s // checked by build: the flag package would quote a password in its error
		pf.set("redis", "redis")
		return nil
	})
	fs.Func("fleet", "`NAME` of the fleet: every process with the same --fleet and --redis shares one retry budget and one cooldown (and --quota)", func(s string) error {
		if err := CheckFleetName(s); err != nil {
			return err
		}
		ff.Name = s
		pf.set("fleet", "fleet")
		return nil
	})
	fs.Func("quota", "the fleet's quota `RATE`, e.g. 40/1s or 600/1m: every attempt of every process waits for its turn; auto or auto:MAX: a rate the fleet learns from its 429s (retry http)", func(s string) error {
		l, auto, err := parseFleetQuota(s)
		if err != nil {
			return err
		}
		ff.quota, ff.auto = l, auto
		pf.set("quota", "quota")
		return nil
	})
	fs.Func("fleet-size", "`N` processes share the --quota: while Redis is unavailable this process paces at RATE/N (default: the processes counted in Redis, 10 before any was)", func(v string) error {
		n, err := parseFleetSize(v)
		ff.size = n
		pf.set("fleet-size", "fleet-size")
		return err
	})
	pf.DurFlag(&ff.timeout, "redis-timeout", "redis-timeout", "time limit of each Redis call; past it this process decides alone (default 20ms)")
	pf.DurFlag(&ff.dial, "redis-dial-timeout", "redis-dial-timeout", "time limit of a connection's setup to Redis (the dial, the TLS handshake; default 1s)")
	for _, f := range []struct {
		Name string
		dst  *string
		use  string
	}{
		{"redis-ca", &ff.ca, "trust the CA certificates in `FILE` (PEM) for a rediss:// Redis"},
		{"redis-cert", &ff.cert, "client certificate `FILE` (PEM) for a rediss:// Redis that asks for one"},
		{"redis-key", &ff.key, "the key `FILE` (PEM) of --redis-cert"},
	} {
		f := f
		fs.Func(f.Name, f.use, func(v string) error {
			if v == "" {
				return errors.New("empty file name")
			}
			*f.dst = v
			pf.set(f.Name, f.Name)
			return nil
		})
	}
}

// parseFleetSize parses --fleet-size: a whole number from 1 to 1,000,000.
func parseFleetSize(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	switch {
	case err != nil:
		return 0, errors.New("want a whole number of processes, e.g. 12")
	case n < 1 || n > 1_000_000:
		return 0, fmt.Errorf("%d processes: want 1 to 1000000", n)
	}
	return n, nil
}

// CheckFleetName checks a fleet's name, which becomes the key (and the
// Cluster hash tag) of its Redis keys.
func CheckFleetName(s string) error {
	switch {
	case s == "":
		return errors.New("empty name (want the key the processes share, e.g. myproject:gemini-2.5-flash)")
	case strings.ContainsAny(s, "{}"):
		return errors.New("must not contain { or } (the name is the Redis Cluster hash tag of the fleet's keys)")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return errors.New("must not contain control characters")
	}
	return nil
}

// ParseQuota parses a quota rate ("40/1s", "600/1m", "600 per 1m") with
// redisretry's parser, keeping its reason without its prefix.
func ParseQuota(s string) (redisretry.Limit, error) {
	l, err := redisretry.ParseLimit(s)
	if err != nil {
		return l, errors.New(strings.TrimPrefix(err.Error(), fmt.Sprintf("redisretry: invalid rate %q: ", s)))
	}
	return l, nil
}

// CheckRedisURL checks a Redis URL without connecting: the error never
// shows the password.
func CheckRedisURL(raw string) error {
	if strings.TrimSpace(raw) == "" {
		return errors.New("empty URL (want e.g. redis://127.0.0.1:6379/0)")
	}
	if !redisScheme(raw) {
		return fmt.Errorf("invalid Redis URL %s: %s", quoteRedisURL(raw), redisURLForm)
	}
	if _, cluster := firstNode(raw); cluster {
		if _, err := redis.ParseClusterURL(raw); err != nil {
			return fmt.Errorf("invalid Redis Cluster URL %s: %s", redactedURL(raw), redactPassword(strings.TrimPrefix(err.Error(), "redis: "), raw))
		}
		raw, _ = firstNode(raw)
	}
	c, err := redisretry.NewClient(raw)
	if err != nil {
		return errors.New(redactPassword(strings.TrimPrefix(err.Error(), "redisretry: "), raw))
	}
	c.Close()
	if u, err := url.Parse(raw); err == nil && u.Port() != "" { // go-redis checks no range
		if n, err := strconv.Atoi(u.Port()); err != nil || n > 65535 {
			return fmt.Errorf("invalid Redis URL %s: port %s is outside 0-65535", redactedURL(raw), u.Port())
		}
	}
	return nil
}

// redisURLForm says what a Redis URL looks like (worded so that no
// redactor takes it for a URL with a password).
const redisURLForm = "want redis://HOST:PORT/DB (with USER:PASSWORD@ before HOST if the server needs a password), rediss://HOST:PORT/DB for TLS, or unix:///PATH"

// redisScheme reports whether raw begins with a scheme of Redis URLs
// (redis, rediss, unix, in any case, as go-redis takes them).
func redisScheme(raw string) bool {
	scheme, _, ok := strings.Cut(raw, ":")
	switch strings.ToLower(scheme) {
	case "redis", "rediss", "unix":
		return ok
	}
	return false
}

// quoteRedisURL returns raw, a --redis value that is not a Redis URL, safe
// to print: what comes before its last '@' may be a password, even without
// a scheme ("user:s3cret@host:6379"), and is hidden.
func quoteRedisURL(raw string) string {
	if strings.Contains(raw, "@") {
		return cli.HideUserInfo(raw)
	}
	return httpretry.RedactText(raw)
}

// redactPassword hides the credentials of the Redis URL raw in msg, a
// message about it, as every message of retry hides a URL's: REDACTED in
// place of the user info and of secret query values.
func redactPassword(msg, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// Hide raw where msg quotes it (redisretry does not quote a URL
		// that does not parse), but nothing else: redisretry's hint
		// "want redis://[user:password@]host:port/db" looks like user info.
		if raw == "" {
			return msg
		}
		return strings.ReplaceAll(msg, raw, httpretry.RedactText(raw))
	}
	// Hide the URL where msg quotes it, never the password's text elsewhere:
	// a short password ("1", "redis") replaced everywhere shows itself by
	// where it matched.
	if u.User != nil {
		for _, q := range []string{raw, u.String(), u.Redacted()} {
			msg = strings.ReplaceAll(msg, q, httpretry.RedactText(q))
		}
	}
	return httpretry.RedactText(msg)
}

// redactedURL is raw with its credentials hidden, for messages.
func redactedURL(raw string) string {
	if _, err := url.Parse(raw); err != nil {
		return "(a URL that does not parse)"
	}
	return redactPassword(raw, raw)
}

// buildFleet merges the config file's fleet settings and the flags (flags
// win) into pf.fleet and checks that they fit together.
func (pf *Flags) buildFleet(cfg Config) error {
	ff := pf.fleetFlags
	s := cfg.Fleet
	in := func(key string) string { return "--config " + pf.configPath + ": " + cfg.Keys[key] }
	from := map[string]string{"redis": in("redis"), "fleet": in("fleet"), "quota": in("quota"), "redis_timeout": in("redis_timeout"), "fleet_size": in("fleet_size")}
	for key, flag := range map[string]string{"redis_dial_timeout": "--redis-dial-timeout", "redis_ca": "--redis-ca", "redis_cert": "--redis-cert", "redis_key": "--redis-key"} {
		from[key] = flag // named by its flag unless the config file set it
		if _, ok := cfg.Keys[key]; ok {
			from[key] = in(key)
		}
	}
	given := pf.given
	if _, ok := given["redis"]; ok {
		s.url, from["redis"] = ff.url, "--redis"
		if err := CheckRedisURL(ff.url); err != nil {
			return cli.Usagef("--redis: %v", err)
		}
	}
	// A flag given wins over the file's key of the same name.
	flag := func(name string, take func()) {
		if _, ok := given[name]; ok {
			take()
			from[strings.ReplaceAll(name, "-", "_")] = "--" + name
		}
	}
	flag("fleet", func() { s.Name = ff.Name })
	flag("quota", func() { s.quota, s.auto = ff.quota, ff.auto })
	flag("redis-timeout", func() { s.timeout = ff.timeout })
	flag("fleet-size", func() { s.size = ff.size })
	flag("redis-dial-timeout", func() { s.dial = ff.dial })
	flag("redis-ca", func() { s.ca = ff.ca })
	flag("redis-cert", func() { s.cert = ff.cert })
	flag("redis-key", func() { s.key = ff.key })
	switch {
	case s.url == "" && s.Name != "":
		return cli.Usagef("%s needs --redis URL (the Redis the processes share)", from["fleet"])
	case s.url == "" && s.hasQuota():
		return cli.Usagef("%s needs --redis URL and --fleet NAME (the Redis and the key the processes share)", from["quota"])
	case s.url == "" && s.timeout != 0:
		return cli.Usagef("%s needs --redis URL", from["redis_timeout"])
	case s.url == "" && s.dial != 0:
		return cli.Usagef("%s needs --redis URL", from["redis_dial_timeout"])
	case s.url == "" && s.ca != "":
		return cli.Usagef("%s needs --redis URL", from["redis_ca"])
	case s.url == "" && s.cert != "":
		return cli.Usagef("%s needs --redis URL", from["redis_cert"])
	case s.url == "" && s.key != "":
		return cli.Usagef("%s needs --redis URL", from["redis_key"])
	case s.size != 0 && !s.hasQuota():
		return cli.Usagef("%s needs --quota RATE (the quota the processes share)", from["fleet_size"])
	case s.url != "" && s.Name == "":
		return cli.Usagef("%s needs --fleet NAME (the key the processes share)", from["redis"])
	}
	if s.url != "" {
		if err := s.checkClient(from); err != nil {
			return cli.Usagef("%v", err)
		}
	}
	if s.auto {
		if !pf.http {
			return cli.Usagef("%s %s: needs retry http (the fleet learns its rate from 429 answers; a command's exit code says nothing of them)", from["quota"], s.quotaText())
		}
		if err := s.autoConfig(0, nil, nil).Validate(); err != nil {
			msg := strings.TrimPrefix(err.Error(), "redisretry: invalid AutoQuotaConfig.")
			return cli.Usagef("%s %s: %s", from["quota"], s.quotaText(), msg)
		}
	}
	pf.Fleet = s
	return nil
}

// Fleet holds the limiters of one run on one Redis client: a budget and a
// cooldown keyed by the fleet's name, and a quota when one is given. They
// are made by apply, which knows the run's deadline.
type Fleet struct {
	spec     FleetSpec
	client   redis.UniversalClient // a *redis.Client, or a *redis.ClusterClient
	obs      *fleetLog
	Quiet    *slog.Logger
	run      runContext
	budget   *redisretry.Budget
	cooldown *redisretry.Cooldown
	quota    *redisretry.Quota
	auto     *redisretry.AutoQuota // --quota auto[:MAX], instead of quota
	timeout  time.Duration         // each Redis call's bound, as apply set it
}

// fleetRedisShare is the most of the run's deadline one Redis call may
// take: a tenth. Redis is a helper: with --deadline 1s and --redis-timeout
// 5s, a stalled Redis costs each limiter 100ms once (then it decides alone
// until a probe gets an answer), and the command runs all the same.
const fleetRedisShare = 10

// fleetCloseGrace is the longest retry's exit waits, after the command is
// done, for the Redis calls that count its requests in the fleet's budget
// and give back the quota it did not use (less if --redis-timeout is
// less). They help the other processes a little; they are not worth holding
// the exit for a Redis timeout. None is waited for while Redis is known to
// be unavailable.
const fleetCloseGrace = 100 * time.Millisecond

// OpenFleet checks the limiters' configuration for s and makes the client
// for a run whose loop has the deadline d (0 for none) (no network call yet:
// the limiters connect on first use, and apply makes them); it reports their
// state changes and long waits on log. A nil fleet and no error mean no
// fleet.
func OpenFleet(s FleetSpec, d time.Duration, log *EventLog) (*Fleet, error) {
	if s.url == "" {
		return nil, nil
	}
	// A client of redisretry's own: one dial and one try per call (so a
	// refused connection or a certificate the CA did not sign is reported
	// as such, not as a timeout), and a connection's setup bounded by its
	// DialTimeout apart from each call's --redis-timeout: the limiters wait
	// for the first connection (a TLS handshake takes longer than 20ms)
	// within that bound, itself at most a tenth of the deadline.
	cc := s.clientConfig()
	cc.DialTimeout = dialTimeout(s, d)
	node, err := redisretry.NewClientWith(cc)
	if err != nil { // checked by build
		return nil, cli.Usagef("--redis: %s", redactPassword(strings.TrimPrefix(err.Error(), "redisretry: "), s.url))
	}
	var client redis.UniversalClient = node
	if _, cluster := firstNode(s.url); cluster {
		cl, err := newClusterClient(s, cc.DialTimeout, node)
		node.Close()
		if err != nil { // checked by build
			return nil, cli.Usagef("--redis: %s", redactPassword(err.Error(), s.url))
		}
		client = cl
	}
	silenceRedis.Do(func() { redis.SetLogger(discardRedisLog{}) })
	fl := &Fleet{spec: s, client: client, obs: &fleetLog{log: log, Name: s.Name, quota: s.quotaText(), url: s.url},
		// redisretry's own lines would go to slog's default logger, in
		// another format: fleetLog says the same in the CLI's.
		Quiet: slog.New(slog.DiscardHandler)}
	budget, cooldown, quota := fl.configs(s.timeout)
	err = budget.Validate()
	if err == nil {
		err = cooldown.Validate()
	}
	if err == nil && s.quota.Rate > 0 && !s.auto {
		err = quota.Validate()
	}
	if err != nil {
		client.Close()
		return nil, cli.Usagef("--fleet: %s", strings.TrimPrefix(err.Error(), "redisretry: "))
	}
	return fl, nil
}

// configs returns the limiters' configurations with timeout as each Redis
// call's bound.
func (f *Fleet) configs(timeout time.Duration) (redisretry.BudgetConfig, redisretry.CooldownConfig, redisretry.QuotaConfig) {
	s, obs := f.spec, f.obs.Event
	return redisretry.BudgetConfig{Settings: redisretry.Settings{Key: s.Name, Timeout: timeout, Logger: f.Quiet, Observer: obs}},
		redisretry.CooldownConfig{Settings: redisretry.Settings{Key: s.Name, Timeout: timeout, Logger: f.Quiet, Observer: obs}},
		redisretry.QuotaConfig{Settings: redisretry.Settings{Key: s.Name, Timeout: timeout, Logger: f.Quiet, Observer: obs}, Limit: s.quota, Lease: FleetQuotaLease, FleetSize: s.size}
}

// autoConfig is the AutoQuota of --quota auto[:MAX] with timeout as each
// Redis call's bound.
func (s FleetSpec) autoConfig(timeout time.Duration, logger *slog.Logger, obs redisretry.Observer) redisretry.AutoQuotaConfig {
	return redisretry.AutoQuotaConfig{Settings: redisretry.Settings{Key: s.Name, Timeout: timeout, Logger: logger, Observer: obs}, Ceiling: s.quota, Lease: FleetQuotaLease, FleetSize: s.size}
}

// RedisTimeout is each Redis call's bound for a run whose loop has the
// deadline d (0 for none): --redis-timeout (redisretry's default if not
// given), at most a tenth of d.
func RedisTimeout(given, d time.Duration) time.Duration {
	t := given
	if t == 0 {
		t = redisretry.DefaultTimeout
	}
	if d > 0 {
		t = min(t, max(d/fleetRedisShare, time.Microsecond))
	}
	return t
}

// dialTimeout is the bound of a connection's setup for s in a run whose
// loop has the deadline d (0 for none): --redis-dial-timeout, else the URL's
// dial_timeout, else redisretry's default, at most a tenth of d (as each
// call's, see RedisTimeout): the first decisions wait for the connection,
// and a Redis that accepts and never answers must not hold the command.
func dialTimeout(s FleetSpec, d time.Duration) time.Duration {
	t := s.dial
	if t == 0 {
		if opt, err := redis.ParseURL(s.url); err == nil && opt.DialTimeout > 0 {
			t = opt.DialTimeout
		} else {
			t = redisretry.DefaultDialTimeout
		}
	}
	if d > 0 {
		t = min(t, max(d/fleetRedisShare, time.Microsecond))
	}
	return t
}

// silenceRedis keeps go-redis's own log lines (each failed dial, in its
// format) off stderr, once per process: what matters is in fleetLog's line.
var silenceRedis sync.Once

type discardRedisLog struct{}

func (discardRedisLog) Printf(context.Context, string, ...any) {}

// Apply makes the fleet's limiters for p's deadline and puts them on p: the
// fleet's budget replaces any per-process one (a profile's), and every
// attempt waits for the cooldown, then for the quota (the cooldown takes
// nothing, so it goes first). log's give-up line then says why the fleet
// refused an attempt. It is called once.
func (f *Fleet) Apply(p *retry.Policy, log *EventLog) {
	if f == nil {
		return
	}
	f.timeout = RedisTimeout(f.spec.timeout, p.Deadline)
	bc, cc, qc := f.configs(f.timeout)
	// Validated by OpenFleet, and a lower timeout is as valid: no error.
	f.budget, _ = redisretry.NewBudget(f.client, bc)
	f.cooldown, _ = redisretry.NewCooldown(f.client, cc)
	switch {
	case f.spec.auto:
		f.auto, _ = redisretry.NewAutoQuota(f.client, f.spec.autoConfig(f.timeout, f.Quiet, f.obs.Event))
	case f.spec.quota.Rate > 0:
		f.quota, _ = redisretry.NewQuota(f.client, qc)
	}
	p.Budget = runBudget{Budget: f.budget, run: &f.run}
	pacers := []retry.Pacer{p.Pacer, f.cooldown}
	if f.quota != nil {
		pacers = append(pacers, f.quota)
	}
	if f.auto != nil {
		pacers = append(pacers, f.auto)
	}
	np := &notingPacer{Pacer: retry.Pacers(pacers...), run: &f.run}
	p.Pacer = np
	log.refusal = np.refusal
}

// runContext is the context and the deadline of the loop that runs the
// attempts, as the loop last gave them to the pacer: [retry.Limiter]'s
// Admit gets neither, and a retry's wait for Redis must end with them (at
// the deadline, at Ctrl-C). The loop calls Reserve before every attempt,
// so Admit, after an attempt, sees those of its own run.
type runContext struct{ p atomic.Pointer[runDeadline] }

type runDeadline struct {
	ctx      context.Context
	deadline time.Time
}

func (r *runContext) set(ctx context.Context, deadline time.Time) {
	r.p.Store(&runDeadline{ctx, deadline})
}

func (r *runContext) get() (context.Context, time.Time) {
	if d := r.p.Load(); d != nil {
		return d.ctx, d.deadline
	}
	return context.Background(), time.Time{}
}

// runBudget is the fleet's budget as the loop's Limiter: a retry waits for
// Redis under the run's context and deadline. Embedding keeps the Budget's
// other methods (Record, and Cancel, which the loop looks for).
type runBudget struct {
	*redisretry.Budget
	run *runContext
}

// Admit implements retry.Limiter.
func (b runBudget) Admit(retry bool) bool {
	ctx, deadline := b.run.get()
	return b.AdmitContext(ctx, retry, deadline)
}

// notingPacer keeps why its pacer last refused an attempt (a wait past the
// deadline, or Redis unavailable): the loop's give-up event does not say.
type notingPacer struct {
	retry.Pacer
	last atomic.Pointer[string]
	run  *runContext // told the loop's context and deadline
}

func (n *notingPacer) Reserve(ctx context.Context, earliest, deadline time.Time) (time.Time, error) {
	n.run.set(ctx, deadline)
	t, err := n.Pacer.Reserve(ctx, earliest, deadline)
	if err != nil && ctx.Err() == nil {
		msg := strings.TrimPrefix(err.Error(), "redisretry: ")
		msg = strings.TrimSuffix(msg, ": "+retry.ErrPastDeadline.Error())
		n.last.Store(&msg)
	}
	return t, err
}

func (n *notingPacer) refusal() string {
	if s := n.last.Load(); s != nil {
		return *s
	}
	return ""
}

// Close counts this process's requests in the fleet's budget and gives back
// the quota it did not use (each one Redis call), waiting for them at most
// fleetCloseGrace (or the Redis timeout, if less), and not at all while
// Redis is known to be unavailable; then it closes the client, which ends
// the calls still in flight. The fleet's log lines end here: what Redis does
// after the command is done is not the run's news.
func (f *Fleet) Close() {
	if f == nil {
		return
	}
	down := f.obs.stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		if f.budget != nil {
			wg.Go(func() { f.budget.Close() })
		}
		if f.quota != nil {
			wg.Go(func() { f.quota.Close() })
		}
		if f.auto != nil {
			wg.Go(func() { f.auto.Close() })
		}
		if f.cooldown != nil {
			wg.Go(func() { f.cooldown.Close() })
		}
		wg.Wait()
	}()
	if grace := min(f.timeout, fleetCloseGrace); !down && grace > 0 {
		t := time.NewTimer(grace)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
	f.client.Close()
}

// fleetLog turns the limiters' events into the CLI's log lines: one line
// when the first of them loses Redis and one when the last gets it back
// (not one per limiter), and the waits the retry lines do not show.
type fleetLog struct {
	log   *EventLog
	Name  string
	quota string // as given: "600/1m", "auto"
	url   string

	mu      sync.Mutex
	down    map[string]bool // limiters deciding without Redis
	stopped bool            // the run is over: no more lines
}

// stop ends the log's lines and reports whether Redis was unavailable.
func (l *fleetLog) stop() (down bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	return len(l.down) > 0
}

// Event writes a line when the whole fleet's Redis becomes unavailable or
// available again, and a note for a long wait for the quota or a cooldown.
func (l *fleetLog) Event(e redisretry.Event) {
	l.mu.Lock()
	stopped := l.stopped
	l.mu.Unlock()
	if stopped {
		return
	}
	switch e.Kind {
	case redisretry.EventFallback, redisretry.EventRecovered:
		l.mu.Lock()
		defer l.mu.Unlock() // one line per change of the whole fleet's state, in order
		if l.stopped {
			return
		}
		if l.down == nil {
			l.down = map[string]bool{}
		}
		was := len(l.down) > 0
		if e.Kind == redisretry.EventFallback {
			l.down[e.Limiter] = true
		} else {
			delete(l.down, e.Limiter)
		}
		switch now := len(l.down) > 0; {
		case now && !was:
			reason := "no answer"
			if e.Err != nil {
				reason = redactPassword(strings.TrimPrefix(e.Err.Error(), "redisretry: "), l.url)
			}
			l.log.fleetState(fmt.Sprintf("Redis at %s unavailable (%s): fleet %s's limits are decided by this process alone until it answers",
				redactedURL(l.url), cli.OneLine(reason), l.Name))
		case was && !now:
			l.log.fleetState(fmt.Sprintf("Redis at %s available again: fleet %s's limits are shared again", redactedURL(l.url), l.Name))
		}
	case redisretry.EventQuotaWait:
		if e.Wait >= fleetWaitLogged {
			l.log.Note("fleet", fmt.Sprintf("waiting %v for fleet %s's quota (%s)", cli.RoundDur(e.Wait), l.Name, l.quota))
		}
	case redisretry.EventCooldownWait:
		if e.Wait >= fleetWaitLogged {
			l.log.Note("fleet", fmt.Sprintf("waiting %v: a server asked fleet %s to pause", cli.RoundDur(e.Wait), l.Name))
		}
	}
}
