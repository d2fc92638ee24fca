package redisretry

import (
	"strings"
	"testing"
	"time"
)

// TestSettingsValidatedByEveryConfig: the fields every limiter has are
// checked once, in Settings, and each config's Validate names itself and the
// field: the same bad Settings give the same error in the four configs.
func TestSettingsValidatedByEveryConfig(t *testing.T) {
	configs := []struct {
		name     string
		validate func(Settings) error
	}{
		{"QuotaConfig", func(s Settings) error { return QuotaConfig{Settings: s, Limit: PerSecond(10)}.Validate() }},
		{"AutoQuotaConfig", func(s Settings) error { return AutoQuotaConfig{Settings: s}.Validate() }},
		{"BudgetConfig", func(s Settings) error { return BudgetConfig{Settings: s}.Validate() }},
		{"CooldownConfig", func(s Settings) error { return CooldownConfig{Settings: s}.Validate() }},
	}
	for _, tc := range []struct {
		s    Settings
		want string // after "invalid <config>."
	}{
		{Settings{}, `Key = "": must name`},
		{Settings{Key: "a}b"}, `Key = "a}b": must not contain { or }`},
		{Settings{Key: "a\nb"}, `Key = "a\nb": must not contain control characters (U+000A at byte 1)`},
		{Settings{Key: "k", Timeout: -time.Nanosecond}, "Timeout = -1ns: must not be negative (0 means 20ms)"},
		{Settings{Key: "k", ProbeInterval: -time.Second}, "ProbeInterval = -1s: must not be negative (0 means 1s)"},
		{Settings{Key: "k", OnFailure: FailClosed + 1}, "OnFailure = FailureMode(3): must be FailLocal, FailOpen or FailClosed"},
	} {
		for _, c := range configs {
			err := c.validate(tc.s)
			if want := "redisretry: invalid " + c.name + "." + tc.want; err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("%s with %+v: %v, want %q", c.name, tc.s, err, want)
			}
		}
	}
	good := Settings{Key: "k", Timeout: time.Second, ProbeInterval: time.Minute, OnFailure: FailClosed}
	for _, c := range configs {
		if err := c.validate(good); err != nil {
			t.Errorf("%s with %+v: %v", c.name, good, err)
		}
	}
	// Embedding keeps the fields a config's own.
	var q QuotaConfig
	q.Key, q.Timeout = "k", time.Second
	if q.Settings.Key != "k" || q.Settings.Timeout != time.Second {
		t.Errorf("q.Key and q.Timeout did not set q.Settings: %+v", q.Settings)
	}
}
