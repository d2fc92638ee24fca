package policy

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/backoffkit/retry"
)

// Fuzz targets for the command's parsers: durations, code lists and the JSON
// config. Seed corpora are under testdata/fuzz; scripts/fuzz.sh runs each
// for a bounded time.

// FuzzParseConfig checks that any input either fails with a message or gives
// a policy fragment whose set fields are sane: no negative duration other
// than retry.Zero, attempts and base in range, status codes valid and
// distinct, a known shape. Merged over Google's defaults, a config that sets
// no delays and no attempts must validate.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{"attempts": 5, "initial_delay": 1, "max_delay": 60, "exp_base": 2, "jitter": 1, "http_status_codes": [408, 429, 500, 502, 503, 504]}`,
		`{"initial_delay": "250ms", "max_delay": "2s", "jitter": 0, "deadline": "5m", "attempt_timeout": 30}`,
		`{"jitter_shape": "full", "profile": "chat"}`,
		`{"attempts": 0}`, `{"exp_base": 0.5}`, `{"max_delay": -1}`, `{"deadline": "1e400s"}`,
		`{"http_status_codes": [42]}`, `{"unknown": 1}`, `{} {}`, `[]`, `null`, ``, `{"initial_delay": null}`,
		`{"max_retry_after": 1e300}`, `{"profile": ""}`, `{"jitter_shape": "wobbly"}`,
		`{"initialDelay": 0.5, "maxDelay": 2, "expBase": 3, "httpStatusCodes": [503]}`, `{"Attempts": 2}`,
		`{"attempts": 2, "attempts": 3}`, `{"max_delay": 1, "maxDelay": 1}`, `{"attempts": null}`, `{"deadline": 1e-10}`,
		`{"http_status_codes": [200]}`,
		`{"redis": "redis://127.0.0.1:6379/0", "fleet": "ci", "quota": "600/1m", "redis_timeout": 0.05}`,
		`{"redis": "redis://:pw@h:1/x"}`, `{"fleet": "a{b}"}`, `{"quota": "0/1s"}`, `{"quota": "5/1ns"}`, `{"redisTimeout": -1}`,
		`{"redis": 1}`, `{"fleet": ""}`, `{"quota": null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("parseConfig(%q): empty error", data)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("parseConfig accepted invalid JSON %q", data)
		}
		// Every key is one of ours, exactly (encoding/json would match
		// "Attempts" too), and no field is set twice or to null.
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(data, &obj); err != nil {
			t.Fatalf("parseConfig accepted %q, not an object: %v", data, err)
		}
		fields := map[string]bool{}
		for k, v := range obj {
			field, ok := CanonicalKey(k)
			if !ok || fields[field] || string(v) == "null" {
				t.Fatalf("parseConfig(%q) accepted key %q (known %v, repeated field %v, value %s)", data, k, ok, fields[field], v)
			}
			fields[field] = true
		}
		p := c.Policy
		for name, d := range map[string]time.Duration{"initial_delay": p.InitialDelay, "max_delay": p.MaxDelay,
			"jitter": p.Jitter, "max_retry_after": p.MaxRetryAfter, "deadline": p.Deadline, "attempt_timeout": p.AttemptTimeout} {
			if d < 0 && d != retry.Zero {
				t.Fatalf("parseConfig(%q): %s = %v", data, name, d)
			}
		}
		if p.Attempts < 0 || (p.ExpBase != 0 && p.ExpBase < 1) {
			t.Fatalf("parseConfig(%q): attempts %d, exp_base %v", data, p.Attempts, p.ExpBase)
		}
		seen := map[int]bool{}
		for _, code := range p.StatusCodes {
			if code < 100 || code > 599 || seen[code] {
				t.Fatalf("parseConfig(%q): status codes %v", data, p.StatusCodes)
			}
			seen[code] = true
		}
		if f := c.Fleet; f.quota.Rate < 0 || (f.quota.Rate > 0 && f.quota.Period < time.Millisecond) || f.timeout < 0 ||
			(f.Name != "" && CheckFleetName(f.Name) != nil) || (f.url != "" && CheckRedisURL(f.url) != nil) {
			t.Fatalf("parseConfig(%q): fleet settings %+v", data, f)
		}
		if _, err := retry.ParseShape(p.Shape.String()); err != nil {
			t.Fatalf("parseConfig(%q): shape %v", data, p.Shape)
		}
		q := p
		q.InitialDelay, q.MaxDelay = 0, 0
		if err := retry.Google().Merge(q).Validate(); err != nil {
			t.Fatalf("parseConfig(%q) gave %+v, invalid over the defaults: %v", data, p, err)
		}
	})
}
