package redisretry

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Settings are what every limiter of this package is configured with alike:
// the fleet's Key in Redis, how Redis calls are bounded, what to do while
// Redis is unavailable, and where state changes go. [QuotaConfig],
// [AutoQuotaConfig], [BudgetConfig] and [CooldownConfig] embed it: its
// fields are theirs (cfg.Key, cfg.Timeout), and a composite literal sets
// them as
//
//	redisretry.QuotaConfig{
//		Settings: redisretry.Settings{Key: "myproject:gemini-2.5-pro:us-central1"},
//		Limit:    redisretry.PerMinute(600),
//	}
//
// Key is required; every other field's zero value is the documented
// default. Each config's Validate checks these fields, naming the config
// (QuotaConfig.Timeout).
type Settings struct {
	// Key names the fleet's shared state: every process that uses the
	// same Key (and Redis) shares it, e.g. a project, a model and a
	// region: "myproject:gemini-2.5-pro:us-central1". The limiter's Redis
	// keys are "{Key}:..." (a Cluster hash tag; each config says which),
	// so Key must not contain { or }, nor a control character. Give each
	// kind of limiter its own Key or the same: their Redis keys differ,
	// except an AutoQuota's and a Quota's schedule ("{Key}:quota"), which
	// must not share a Key.
	Key string

	// Timeout bounds each Redis call once a connection is up: the longest
	// a caller waits for Redis before deciding without it. 0 means 20 ms
	// (DefaultTimeout). On a client made by [NewClient] or
	// [NewClientWith], the calls before one is answered are bounded by
	// the client's DialTimeout instead, if longer (the dial and the TLS
	// handshake of a fresh process).
	Timeout time.Duration

	// ProbeInterval is how often a limiter that fell back tries Redis
	// again, with its next call. 0 means 1 s (DefaultProbeInterval).
	ProbeInterval time.Duration

	// OnFailure says what to do while Redis is unavailable (down, slower
	// than Timeout, or answering errors). The zero value is FailLocal:
	// decide with the local equivalent (see [FailureMode]).
	OnFailure FailureMode

	// Logger receives one line per change of state (Redis unavailable,
	// available again; an AutoQuota also logs a learnt rate that moved by
	// more than 20 % since the rate last logged). nil means
	// slog.Default().
	Logger *slog.Logger

	// Observer receives the limiter's events: changes of state, refills,
	// waits, published hints, learnt rates (see [EventKind]). nil means
	// none.
	Observer Observer

	// Now returns the current time. nil means time.Now.
	Now func() time.Time
}

// validate reports the first invalid field of s, naming it as a field of
// config (such as "QuotaConfig") and its value.
func (s Settings) validate(config string) error {
	switch key := s.Key; {
	case key == "":
		return fmt.Errorf("redisretry: invalid %s.Key = \"\": must name the fleet's shared state (e.g. the project and model)", config)
	case strings.ContainsAny(key, "{}"):
		return fmt.Errorf("redisretry: invalid %s.Key = %q: must not contain { or } (every Redis key is {Key}:..., a Cluster hash tag)", config, key)
	case strings.IndexFunc(key, unicode.IsControl) >= 0:
		i := strings.IndexFunc(key, unicode.IsControl)
		r, _ := utf8.DecodeRuneInString(key[i:])
		return fmt.Errorf("redisretry: invalid %s.Key = %q: must not contain control characters (%U at byte %d): the keys would be unreadable in logs and redis-cli", config, key, r, i)
	case s.Timeout < 0:
		return fmt.Errorf("redisretry: invalid %s.Timeout = %v: must not be negative (0 means %v)", config, s.Timeout, DefaultTimeout)
	case s.ProbeInterval < 0:
		return fmt.Errorf("redisretry: invalid %s.ProbeInterval = %v: must not be negative (0 means %v)", config, s.ProbeInterval, DefaultProbeInterval)
	case s.OnFailure > FailClosed:
		return fmt.Errorf("redisretry: invalid %s.OnFailure = %v: must be FailLocal, FailOpen or FailClosed", config, s.OnFailure)
	}
	return nil
}
