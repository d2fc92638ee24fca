package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
)

// TestFleetQuotaAutoBadInput (issue 24 item 3): --quota auto and auto:MAX
// (and "quota" in --config) are checked before anything runs, each error
// naming --quota or the key; the command mode refuses auto, which learns
// from 429 answers only.
func TestFleetQuotaAutoBadInput(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "retry.json")
	if err := os.WriteFile(cfg, []byte(`{"redis": "redis://127.0.0.1:1/0", "fleet": "f", "quota": "auto:nope"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	const r = "redis://127.0.0.1:1/0"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"http", "--redis", r, "--fleet", "f", "--quota", "auto:0/1s", "http://127.0.0.1:1/"}, `invalid value "auto:0/1s" for flag --quota: auto:MAX: the count must be a whole number > 0`},
		{[]string{"http", "--redis", r, "--fleet", "f", "--quota", "auto:garbage", "http://127.0.0.1:1/"}, `invalid value "auto:garbage" for flag --quota: auto:MAX: want COUNT/PERIOD`},
		{[]string{"http", "--redis", r, "--fleet", "f", "--quota", "auto:", "http://127.0.0.1:1/"}, `for flag --quota: auto:MAX:`},
		{[]string{"http", "--redis", r, "--fleet", "f", "--quota", "automatic", "http://127.0.0.1:1/"}, "want RATE (e.g. 600/1m), auto or auto:MAX"},
		{[]string{"http", "--redis", r, "--fleet", "f", "--quota", "auto:1/1m", "http://127.0.0.1:1/"}, "--quota auto:1/1m0s: Ceiling = 1/1m0s: must not be below the Floor (1/1s)"},
		{[]string{"http", "--quota", "auto", "http://127.0.0.1:1/"}, "--quota needs --redis URL and --fleet NAME"},
		{[]string{"--redis", r, "--fleet", "f", "--quota", "auto", "--", "true"}, "--quota auto: needs retry http"},
		{[]string{"http", "--config", cfg, "http://127.0.0.1:1/"}, `quota: "auto:nope": auto:MAX: want COUNT/PERIOD`},
	} {
		res := runRetry(t, "", nil, tc.args...)
		if res.code != cli.ExitUsage || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("%q: exit %d, want 2 and %q:\n%s", tc.args, res.code, tc.want, res.stderr)
		}
	}
}

// TestFleetQuotaAuto: retry http --quota auto:100/1s paces with the
// AutoQuota on a real Redis: a 429 is retried, the fleet's keys are in
// Redis, Redis is never said unavailable; "quota": "auto" in --config the
// same.
func TestFleetQuotaAuto(t *testing.T) {
	srv := startRedis(t)
	cfg := filepath.Join(t.TempDir(), "retry.json")
	name := fleetName(t)
	if err := os.WriteFile(cfg, []byte(`{"redis": "`+srv.url()+`", "fleet": "`+name+`-config", "quota": "auto"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{name, []string{"--redis", srv.url(), "--fleet", name, "--quota", "auto:100/1s"}},
		{name + "-config", []string{"--config", cfg}},
	} {
		s := &scripted{statuses: []int{429, 200}, headers: map[int]http.Header{0: {"Retry-After": {"0"}}}}
		url := serve(t, s)
		r := runRetry(t, "", nil, args([]string{"http", "--redis-timeout", "2s"}, tc.flags, fast, []string{url})...)
		if r.code != 0 || s.count() != 2 || strings.Contains(r.stderr, "unavailable") {
			t.Errorf("%q: exit %d after %d requests, want 0 after 2; stderr:\n%s", tc.flags, r.code, s.count(), r.stderr)
		}
		keys, err := srv.client(t, "").Keys(context.Background(), "{"+tc.name+"}*").Result()
		if err != nil || len(keys) == 0 {
			t.Errorf("%q: no key of the fleet in Redis (%v)", tc.flags, err)
		}
	}
}
