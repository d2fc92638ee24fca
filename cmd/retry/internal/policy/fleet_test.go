package policy

import (
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/backoffkit/retry/redisretry"
)

// TestFleetPrecedence: the config file's fleet settings apply, and a flag
// overrides its key.
func TestFleetPrecedence(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(cfg, []byte(`{"redis": "redis://127.0.0.1:1/0", "fleet": "from-config", "quota": "600/1m", "redis_timeout": 0.05}`), 0o644)
	build := func(args ...string) FleetSpec {
		t.Helper()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		pf := AddFlags(fs, false)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if _, err := pf.Build(); err != nil {
			t.Fatal(err)
		}
		return pf.Fleet
	}
	if s := build(); s != (FleetSpec{}) {
		t.Errorf("no fleet flags: %+v, want none", s)
	}
	want := FleetSpec{url: "redis://127.0.0.1:1/0", Name: "from-config", quota: redisretry.PerMinute(600), timeout: 50 * time.Millisecond}
	if s := build("--config", cfg); s != want {
		t.Errorf("config: %+v, want %+v", s, want)
	}
	want = FleetSpec{url: "redis://127.0.0.1:2/0", Name: "from-flag", quota: redisretry.PerSecond(40), timeout: time.Second}
	if s := build("--config", cfg, "--redis", want.url, "--fleet", "from-flag", "--quota", "40/1s", "--redis-timeout", "1s"); s != want {
		t.Errorf("flags over config: %+v, want %+v", s, want)
	}
}

// TestRedisTimeout: each Redis call's bound is --redis-timeout (redisretry's
// default if not given), at most a tenth of the loop's deadline.
func TestRedisTimeout(t *testing.T) {
	for _, tc := range []struct{ given, deadline, want time.Duration }{
		{0, 0, redisretry.DefaultTimeout},
		{5 * time.Second, 0, 5 * time.Second},
		{5 * time.Second, time.Second, 100 * time.Millisecond},
		{0, time.Second, redisretry.DefaultTimeout},
		{0, 100 * time.Millisecond, 10 * time.Millisecond},
		{time.Second, time.Nanosecond, time.Microsecond},
		{time.Second, time.Duration(math.MaxInt64), time.Second},
	} {
		if got := RedisTimeout(tc.given, tc.deadline); got != tc.want {
			t.Errorf("redisTimeout(%v, %v) = %v, want %v", tc.given, tc.deadline, got, tc.want)
		}
	}
}
