package policy

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backoffkit/retry"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    retry.Policy
		profile string
		err     string
	}{
		{"sdk fields", `{"attempts": 3, "initial_delay": 0.5, "max_delay": 10, "exp_base": 1.5, "jitter": 0.25, "http_status_codes": [429, 503]}`,
			retry.Policy{Attempts: 3, InitialDelay: 500 * time.Millisecond, MaxDelay: 10 * time.Second, ExpBase: 1.5, Jitter: 250 * time.Millisecond, StatusCodes: []int{429, 503}}, "", ""},
		{"strings", `{"initial_delay": "250ms", "deadline": "300s", "attempt_timeout": "2"}`,
			retry.Policy{InitialDelay: 250 * time.Millisecond, Deadline: 300 * time.Second, AttemptTimeout: 2 * time.Second}, "", ""},
		{"explicit zero", `{"jitter": 0, "initial_delay": 0, "deadline": 0, "attempt_timeout": "0s"}`,
			retry.Policy{Jitter: retry.Zero, InitialDelay: retry.Zero, Deadline: retry.Zero, AttemptTimeout: retry.Zero}, "", ""},
		{"camelCase aliases", `{"initialDelay": 0.5, "maxDelay": 10, "expBase": 1.5, "httpStatusCodes": [503], "attemptTimeout": 2, "maxRetryAfter": 3, "jitterShape": "full"}`,
			retry.Policy{InitialDelay: 500 * time.Millisecond, MaxDelay: 10 * time.Second, ExpBase: 1.5, StatusCodes: []int{503},
				AttemptTimeout: 2 * time.Second, MaxRetryAfter: 3 * time.Second, Shape: retry.ShapeFull}, "", ""},
		{"no codes", `{"http_status_codes": []}`, retry.Policy{StatusCodes: []int{}}, "", ""},
		{"shape and profile", `{"jitter_shape": "full", "profile": "realtime"}`, retry.Policy{Shape: retry.ShapeFull}, "realtime", ""},
		{"empty object", `{}`, retry.Policy{}, "", ""},
		{"byte order mark", "\ufeff{\"attempts\": 2}", retry.Policy{Attempts: 2}, "", ""},
		{"unknown field", `{"attempts": 2, "retries": 1}`, retry.Policy{}, "", `unknown key "retries"`},
		{"keys are case-sensitive", `{"Attempts": 3}`, retry.Policy{}, "", `unknown key "Attempts"`},
		{"upper case", `{"INITIAL_DELAY": 1}`, retry.Policy{}, "", `unknown key "INITIAL_DELAY"`},
		{"camel case of a snake-only key", `{"InitialDelay": 1}`, retry.Policy{}, "", `unknown key "InitialDelay"`},
		{"duplicate key", `{"attempts": 2, "attempts": 3}`, retry.Policy{}, "", `key "attempts" appears twice`},
		{"alias and key", `{"max_delay": 2, "maxDelay": 3}`, retry.Policy{}, "", `keys "max_delay" and "maxDelay" set the same field`},
		{"null attempts", `{"attempts": null}`, retry.Policy{}, "", "attempts: null is not a value"},
		{"null codes", `{"httpStatusCodes": null}`, retry.Policy{}, "", "httpStatusCodes: null is not a value"},
		{"sub-nanosecond deadline", `{"deadline": 1e-10}`, retry.Policy{}, "", "deadline: duration 1e-10s is below 1ns"},
		{"sub-nanosecond string", `{"attempt_timeout": "0.5ns"}`, retry.Policy{}, "", `attempt_timeout: duration "0.5ns" is below 1ns`},
		{"success code", `{"http_status_codes": [200]}`, retry.Policy{}, "", "status code 200 is not a failure"},
		{"redirect code", `{"http_status_codes": [503, 304]}`, retry.Policy{}, "", "status code 304 is not a failure"},
		{"attempts string", `{"attempts": "3"}`, retry.Policy{}, "", `attempts: "3" is not a whole number`},
		{"attempts zero", `{"attempts": 0}`, retry.Policy{}, "", "attempts = 0: must be at least 1"},
		{"attempts float", `{"attempts": 1.5}`, retry.Policy{}, "", "attempts"},
		{"exp base", `{"exp_base": 0.5}`, retry.Policy{}, "", "exp_base = 0.5: must be at least 1"},
		{"negative", `{"max_delay": -1}`, retry.Policy{}, "", "max_delay: duration -1s must not be negative"},
		{"null duration", `{"jitter": null}`, retry.Policy{}, "", "jitter: null is not a value"},
		{"bool duration", `{"jitter": true}`, retry.Policy{}, "", "jitter: true is not a duration"},
		{"code range", `{"http_status_codes": [42]}`, retry.Policy{}, "", "http_status_codes: status code 42 is outside 100-599"},
		{"codes type", `{"http_status_codes": "429"}`, retry.Policy{}, "", "http_status_codes"},
		{"shape", `{"jitter_shape": "wobbly"}`, retry.Policy{}, "", `jitter_shape: unknown shape "wobbly"`},
		{"empty profile", `{"profile": ""}`, retry.Policy{}, "", "profile: empty name"},
		{"trailing", `{} {}`, retry.Policy{}, "", "unexpected data after the JSON object"},
		{"array", `[1]`, retry.Policy{}, "", "must be a JSON object"},
		{"empty", ``, retry.Policy{}, "", "empty config"},
		{"truncated", `{"attempts": 3`, retry.Policy{}, "", "truncated JSON"},
		{"syntax", `{"attempts": 3,,}`, retry.Policy{}, "", "invalid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseConfig = %+v, %v; want error containing %q", c, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			g, w := c.Policy, tc.want
			if g.Attempts != w.Attempts || g.InitialDelay != w.InitialDelay || g.MaxDelay != w.MaxDelay ||
				g.ExpBase != w.ExpBase || g.Jitter != w.Jitter || g.Deadline != w.Deadline ||
				g.AttemptTimeout != w.AttemptTimeout || g.Shape != w.Shape || g.MaxRetryAfter != w.MaxRetryAfter ||
				!slices.Equal(g.StatusCodes, w.StatusCodes) || (g.StatusCodes == nil) != (w.StatusCodes == nil) ||
				c.Profile != tc.profile {
				t.Errorf("parseConfig = %+v (profile %q), want %+v (profile %q)", g, c.Profile, w, tc.profile)
			}
		})
	}
}

// TestPolicyPrecedence: defaults < profile < config < flags, field by field.
func TestPolicyPrecedence(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(cfg, []byte(`{"profile": "realtime", "attempts": 4, "jitter": 0}`), 0o644)
	build := func(args ...string) retry.Policy {
		t.Helper()
		p, err := buildPolicy(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		return p.Resolved()
	}
	p := build()
	if p.Attempts != 5 || p.InitialDelay != time.Second || p.Jitter != time.Second || !slices.Equal(p.StatusCodes, retry.DefaultStatusCodes) {
		t.Errorf("defaults: %+v", p)
	}
	// realtime: 3 attempts, 500ms, 2s cap, 10s deadline; config: 4 attempts, no jitter.
	p = build("--config", cfg)
	if p.Attempts != 4 || p.InitialDelay != 500*time.Millisecond || p.Jitter != 0 || p.Deadline != 10*time.Second {
		t.Errorf("profile+config: %+v", p)
	}
	p = build("--config", cfg, "--attempts", "2", "--jitter", "0.1", "--codes", "503", "--jitter-shape", "full")
	if p.Attempts != 2 || p.Jitter != 100*time.Millisecond || !slices.Equal(p.StatusCodes, []int{503}) ||
		p.Shape != retry.ShapeFull || p.MaxDelay != 2*time.Second {
		t.Errorf("flags over config: %+v", p)
	}
	// --profile wins over the config's profile.
	p = build("--config", cfg, "--profile", "batch")
	if p.Attempts != 4 || p.Deadline != 0 {
		t.Errorf("--profile batch over config: %+v", p)
	}
	// --jitter-shape google resets a config's shape.
	os.WriteFile(cfg, []byte(`{"jitter_shape": "full"}`), 0o644)
	if p = build("--config", cfg, "--jitter-shape", "google"); p.Shape != retry.ShapeGoogle {
		t.Errorf("--jitter-shape google over config full: %v", p.Shape)
	}
	// --max-retry-after 0 ignores hints.
	if p = build("--max-retry-after", "0"); p.MaxRetryAfter != 0 {
		t.Errorf("--max-retry-after 0: %v", p.MaxRetryAfter)
	}
}

// buildPolicy parses args as the flags of retry http and builds the policy.
func buildPolicy(t *testing.T, args ...string) (retry.Policy, error) {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	pf := AddFlags(fs, true)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return pf.Build()
}

// TestExplicitZeroOverridesProfile: an explicit 0 for --deadline or
// --attempt-timeout, as a flag or in the config, means none and overrides
// the profile's value (precedence profile < config < flags).
func TestExplicitZeroOverridesProfile(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, fmt.Sprint(len(s))+".json")
		os.WriteFile(p, []byte(s), 0o644)
		return p
	}
	for _, tc := range []struct {
		args                    []string
		deadline, attemptTimeou time.Duration
	}{
		{[]string{"--profile", "realtime"}, 10 * time.Second, 0},
		{[]string{"--profile", "realtime", "--deadline", "0"}, 0, 0},
		{[]string{"--profile", "realtime", "--deadline", "0s"}, 0, 0},
		{[]string{"--profile", "flex", "--attempt-timeout", "0"}, 0, 0},
		{[]string{"--config", write(`{"profile": "realtime", "deadline": 0}`)}, 0, 0},
		{[]string{"--profile", "flex", "--config", write(`{"attempt_timeout": 0}`)}, 0, 0},
		// flags over the config: the config's 0 is overridden by a flag...
		{[]string{"--config", write(`{"deadline": 0, "profile": "flex"}`), "--deadline", "3s"}, 3 * time.Second, 10 * time.Minute},
		// ...and a flag's 0 overrides the config's value.
		{[]string{"--config", write(`{"deadline": 30}`), "--deadline", "0"}, 0, 0},
	} {
		p, err := buildPolicy(t, tc.args...)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		r := p.Resolved()
		if r.Deadline != tc.deadline || r.AttemptTimeout != tc.attemptTimeou {
			t.Errorf("%q: deadline %v, attempt timeout %v; want %v, %v", tc.args, r.Deadline, r.AttemptTimeout, tc.deadline, tc.attemptTimeou)
		}
	}
}

// TestPolicyErrorNamesItsSource: a bad value is reported under the flag as
// typed, or under the config file and its key, or the profile, never under a
// flag the user did not give.
func TestPolicyErrorNamesItsSource(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.json")
	os.WriteFile(cfg, []byte(`{"initialDelay": 2, "max_delay": 1}`), 0o644)
	for _, tc := range []struct {
		args      []string
		want, not string
	}{
		{[]string{"--config", cfg}, "--config " + cfg + ": max_delay 1s: must not be below the initial delay (2s)", "--max-delay"},
		{[]string{"--config", cfg, "--max-delay", "1.5s"}, "--max-delay 1.5s: must not be below", "max_delay"},
		{[]string{"--profile", "realtime", "--initial-delay", "5s"}, "--profile realtime sets --max-delay to 2s: must not be below the initial delay (5s)", ""},
	} {
		_, err := buildPolicy(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.not != "" && strings.Contains(err.Error(), tc.not)) {
			t.Errorf("%q: error %v; want it to contain %q (and not %q)", tc.args, err, tc.want, tc.not)
		}
	}
}
