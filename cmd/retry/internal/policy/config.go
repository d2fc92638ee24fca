package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/cmd/retry/internal/cli"
)

// This file holds the pure parsers of the command: durations, code lists and
// the JSON config. They take bytes or strings and return values or an error
// naming the problem; they never print, exit or panic.

// Explicit turns a parsed duration into a Policy field value: 0 becomes
// [retry.Zero] (an explicit zero), anything else is kept.
func Explicit(d time.Duration) time.Duration {
	if d == 0 {
		return retry.Zero
	}
	return d
}

// configKey is one key accepted in a JSON config file.
type configKey struct {
	Name  string // the key as written in the file
	Field string // the canonical (snake_case) key it sets
}

// ConfigKeys are the keys of a config file, exactly as they must be written
// (keys are case-sensitive). The Gen AI SDK's HttpRetryOptions names come in
// two spellings: snake_case (Python) and camelCase (the JS SDK); both set the
// same field, and a file may use only one of them for a field.
var ConfigKeys = []configKey{
	{"attempts", "attempts"},
	{"initial_delay", "initial_delay"}, {"initialDelay", "initial_delay"},
	{"max_delay", "max_delay"}, {"maxDelay", "max_delay"},
	{"exp_base", "exp_base"}, {"expBase", "exp_base"},
	{"jitter", "jitter"},
	{"http_status_codes", "http_status_codes"}, {"httpStatusCodes", "http_status_codes"},
	{"deadline", "deadline"},
	{"attempt_timeout", "attempt_timeout"}, {"attemptTimeout", "attempt_timeout"},
	{"max_retry_after", "max_retry_after"}, {"maxRetryAfter", "max_retry_after"},
	{"jitter_shape", "jitter_shape"}, {"jitterShape", "jitter_shape"},
	{"profile", "profile"},
	{"redis", "redis"}, {"fleet", "fleet"}, {"quota", "quota"},
	{"fleet_size", "fleet_size"}, {"fleetSize", "fleet_size"},
	{"redis_timeout", "redis_timeout"}, {"redisTimeout", "redis_timeout"},
	{"redis_dial_timeout", "redis_dial_timeout"}, {"redisDialTimeout", "redis_dial_timeout"},
	{"redis_ca", "redis_ca"}, {"redisCa", "redis_ca"},
	{"redis_cert", "redis_cert"}, {"redisCert", "redis_cert"},
	{"redis_key", "redis_key"}, {"redisKey", "redis_key"},
}

// ConfigKeyNames returns every accepted key, in the order of ConfigKeys.
func ConfigKeyNames() []string {
	names := make([]string, len(ConfigKeys))
	for i, k := range ConfigKeys {
		names[i] = k.Name
	}
	return names
}

// CanonicalKey returns the field a key sets, matching exactly.
func CanonicalKey(name string) (string, bool) {
	for _, k := range ConfigKeys {
		if k.Name == name {
			return k.Field, true
		}
	}
	return "", false
}

// parseJSONDuration parses a duration in a JSON config: a number of seconds
// (as in the SDK) or a string in Go syntax or of seconds ("1.5s", "250ms", "2").
func parseJSONDuration(b json.RawMessage) (time.Duration, error) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return 0, err
		}
		return cli.ParseDuration(s)
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return 0, fmt.Errorf("duration %s is out of range", b)
		}
		return 0, fmt.Errorf("%s is not a duration (want a number of seconds or a string like \"1.5s\")", b)
	}
	return cli.SecondsToDuration(f)
}

// Config is what a config file says: a policy holding only the fields the
// file sets (explicit zero durations as [retry.Zero], ready for
// [retry.Policy.Merge]), an optional profile name, the fleet settings, and
// the key each field was set with (canonical key to the key as written), to
// name it in errors.
type Config struct {
	Policy  retry.Policy
	Profile string
	Fleet   FleetSpec
	Keys    map[string]string
}

// ParseConfig parses a JSON config. Keys match exactly (snake_case or the
// camelCase alias); unknown or repeated keys, null values, trailing data,
// values of the wrong type and invalid values are errors naming the key.
func ParseConfig(data []byte) (Config, error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // a UTF-8 byte order mark (Windows editors write one)
	raw, keys, err := readConfigObject(data)
	if err != nil {
		return Config{}, err
	}
	c := Config{Keys: keys}
	p := &c.Policy
	for field, name := range keys {
		if bytes.Equal(bytes.TrimSpace(raw[field]), []byte("null")) {
			return Config{}, fmt.Errorf("%s: null is not a value (leave the key out to keep the default)", name)
		}
	}
	if b, ok := raw["attempts"]; ok {
		n, err := jsonInt(b)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %v", keys["attempts"], err)
		}
		if n < 1 {
			return Config{}, fmt.Errorf("%s = %d: must be at least 1", keys["attempts"], n)
		}
		p.Attempts = n
	}
	if b, ok := raw["exp_base"]; ok {
		var f float64
		if err := json.Unmarshal(b, &f); err != nil {
			return Config{}, fmt.Errorf("%s: %s is not a number", keys["exp_base"], bytes.TrimSpace(b))
		}
		if f < 1 {
			return Config{}, fmt.Errorf("%s = %v: must be at least 1", keys["exp_base"], f)
		}
		p.ExpBase = f
	}
	durs := []struct {
		Field string
		dst   *time.Duration
	}{
		{"initial_delay", &p.InitialDelay},
		{"max_delay", &p.MaxDelay},
		{"jitter", &p.Jitter},
		{"max_retry_after", &p.MaxRetryAfter},
		// 0 means "none" for these two, set explicitly so that it overrides
		// a profile's value.
		{"deadline", &p.Deadline},
		{"attempt_timeout", &p.AttemptTimeout},
	}
	for _, d := range durs {
		b, ok := raw[d.Field]
		if !ok {
			continue
		}
		v, err := parseJSONDuration(b)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %v", keys[d.Field], err)
		}
		*d.dst = Explicit(v)
	}
	if b, ok := raw["http_status_codes"]; ok {
		name := keys["http_status_codes"]
		var list []json.RawMessage
		if err := json.Unmarshal(b, &list); err != nil {
			return Config{}, fmt.Errorf("%s: want a list of status codes, like [429, 503]", name)
		}
		codes := []int{}
		for _, item := range list {
			code, err := jsonInt(item)
			if err != nil {
				return Config{}, fmt.Errorf("%s: %v", name, err)
			}
			if err := cli.CheckStatusCode(code); err != nil {
				return Config{}, fmt.Errorf("%s: %v", name, err)
			}
			if !cli.ContainsInt(codes, code) {
				codes = append(codes, code)
			}
		}
		p.StatusCodes = codes
	}
	if b, ok := raw["jitter_shape"]; ok {
		var name string
		if err := json.Unmarshal(b, &name); err != nil {
			return Config{}, fmt.Errorf("%s: want a string, one of %s", keys["jitter_shape"], cli.ShapeList())
		}
		s, err := retry.ParseShape(name)
		if err != nil {
			return Config{}, fmt.Errorf("%s: unknown shape %q (want one of %s)", keys["jitter_shape"], name, cli.ShapeList())
		}
		p.Shape = s
	}
	if b, ok := raw["profile"]; ok {
		var name string
		if err := json.Unmarshal(b, &name); err != nil {
			return Config{}, fmt.Errorf("profile: want a string, one of %s", strings.Join(retry.ProfileNames(), ", "))
		}
		if name == "" {
			return Config{}, errors.New("profile: empty name")
		}
		c.Profile = name
	}
	if err := parseFleetConfig(raw, keys, &c.Fleet); err != nil {
		return Config{}, err
	}
	return c, nil
}

// parseFleetConfig reads the fleet keys of a config file: "redis" (a URL),
// "fleet" (a name), "quota" (a rate such as "600/1m"), "redis_timeout",
// "redis_dial_timeout", and "redis_ca", "redis_cert", "redis_key" (files).
// Whether they fit together is checked with the flags (see buildFleet).
func parseFleetConfig(raw map[string]json.RawMessage, keys map[string]string, s *FleetSpec) error {
	str := func(field, want string) (string, bool, error) {
		b, ok := raw[field]
		if !ok {
			return "", false, nil
		}
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return "", false, fmt.Errorf("%s: want a string, %s", keys[field], want)
		}
		return v, true, nil
	}
	if v, ok, err := str("redis", "a URL like \"redis://127.0.0.1:6379/0\""); err != nil {
		return err
	} else if ok {
		if err := CheckRedisURL(v); err != nil {
			return fmt.Errorf("redis: %v", err)
		}
		s.url = v
	}
	if v, ok, err := str("fleet", "the name the processes share"); err != nil {
		return err
	} else if ok {
		if err := CheckFleetName(v); err != nil {
			return fmt.Errorf("fleet: %q: %v", v, err)
		}
		s.Name = v
	}
	if v, ok, err := str("quota", "a rate like \"600/1m\""); err != nil {
		return err
	} else if ok {
		l, auto, err := parseFleetQuota(v)
		if err != nil {
			return fmt.Errorf("quota: %q: %v", v, err)
		}
		s.quota, s.auto = l, auto
	}
	if b, ok := raw["fleet_size"]; ok {
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("%s: want a whole number of processes, e.g. 12", keys["fleet_size"])
		}
		size, err := parseFleetSize(n.String())
		if err != nil {
			return fmt.Errorf("%s: %v", keys["fleet_size"], err)
		}
		s.size = size
	}
	for _, f := range []struct {
		key string
		dst *time.Duration
	}{{"redis_timeout", &s.timeout}, {"redis_dial_timeout", &s.dial}} {
		if b, ok := raw[f.key]; ok {
			d, err := parseJSONDuration(b)
			if err != nil {
				return fmt.Errorf("%s: %v", keys[f.key], err)
			}
			*f.dst = d
		}
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"redis_ca", &s.ca}, {"redis_cert", &s.cert}, {"redis_key", &s.key}} {
		if v, ok, err := str(f.key, "a file name"); err != nil {
			return err
		} else if ok {
			if v == "" {
				return fmt.Errorf("%s: empty file name", keys[f.key])
			}
			*f.dst = v
		}
	}
	return nil
}

// readConfigObject reads the top-level JSON object of a config file into raw
// values by canonical key, checking that every key is known (exactly) and
// given once, and that nothing follows the object. keys maps each canonical
// key to the key as written.
func readConfigObject(data []byte) (raw map[string]json.RawMessage, keys map[string]string, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, jsonError(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		what := fmt.Sprintf("%v", tok)
		switch t := tok.(type) {
		case json.Delim:
			what = map[json.Delim]string{'[': "an array"}[t]
		case string:
			what = "a string"
		case nil:
			what = "null"
		case float64:
			what = "a number"
		case bool:
			what = "a boolean"
		}
		return nil, nil, fmt.Errorf("config must be a JSON object, not %s", what)
	}
	raw, keys = map[string]json.RawMessage{}, map[string]string{}
	inside := func(err error) error { // an EOF inside the object is a truncation
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return jsonError(err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, inside(err)
		}
		name := tok.(string) // an object key is always a string
		field, ok := CanonicalKey(name)
		if !ok {
			return nil, nil, fmt.Errorf("unknown key %q (known: %s; keys are case-sensitive)", name, strings.Join(ConfigKeyNames(), ", "))
		}
		if prev, dup := keys[field]; dup {
			if prev == name {
				return nil, nil, fmt.Errorf("key %q appears twice", name)
			}
			return nil, nil, fmt.Errorf("keys %q and %q set the same field: keep one", prev, name)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, fmt.Errorf("%s: %v", name, inside(err))
		}
		raw[field], keys[field] = v, name
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, nil, inside(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("unexpected data after the JSON object")
	}
	return raw, keys, nil
}

// jsonInt decodes a JSON number that must be a whole number fitting an int.
func jsonInt(b json.RawMessage) (int, error) {
	b = bytes.TrimSpace(b)
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return 0, fmt.Errorf("%s is not a whole number", b)
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("%s is not a whole number", b)
	}
	return int(f), nil
}

// jsonError rewords encoding/json's errors for a config file.
func jsonError(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at byte %d: %v", se.Offset, se)
	case errors.Is(err, io.EOF):
		return errors.New("empty config (want a JSON object)")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("truncated JSON")
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}
