package redisretry_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backoffkit/retry/httpretry"
	"github.com/backoffkit/retry/redisretry"
)

// TestNewClientErrors: a bad URL is an error that names the problem and
// never shows the password; its text survives a redactor unchanged (the
// form it suggests is not taken for a URL's user info).
func TestNewClientErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"redis://:s3cret@[::1", "it does not parse (want redis://host:port/db, with user:password@ before the host"},
		{"redis://u:s3cret@127.0.0.1:6379/notadb", "invalid database number"},
		{"http://u:s3cret@127.0.0.1:6379/0", "invalid URL scheme"},
		// A short password: the message keeps the rest of the URL intact.
		{"redis://:1@127.0.0.1:6379/x1", "invalid Redis URL redis://:xxxxx@127.0.0.1:6379/x1: redis: invalid database number"},
		// go-redis refuses a password in the query; the message quotes the URL.
		{"redis://127.0.0.1:6379/0?password=s3cret", "invalid Redis URL redis://127.0.0.1:6379/0?password=REDACTED: redis: unexpected option: password"},
		{"redis://127.0.0.1:6379/0?password=ab's3cret", "?password=REDACTED: redis: unexpected option"},
		{`redis://127.0.0.1:6379/0?dial_timeout=x&password=ab"s3cret`, "&password=REDACTED: redis: invalid dial_timeout"},
		{"redis://127.0.0.1:6379/0?password=ab<s3cret>", "?password=REDACTED: redis"},
		{"redis://127.0.0.1:6379/0?password=s3cret:", "?password=REDACTED: redis: unexpected option"},
	} {
		c, err := redisretry.NewClient(tc.url)
		if err == nil {
			c.Close()
			t.Errorf("NewClient(%q): no error", tc.url)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.want) || strings.Contains(msg, "s3cret") {
			t.Errorf("NewClient(%q) = %q, want it to say %q without the password", tc.url, msg, tc.want)
		}
		if strings.Contains(tc.url, "[") && httpretry.RedactText(msg) != msg {
			t.Errorf("RedactText changes the error of %q: %q", tc.url, httpretry.RedactText(msg))
		}
	}
}

// TestClientConfig: the dial's bound and the certificates; each bad field
// named, never the password.
func TestClientConfig(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	os.WriteFile(notPEM, []byte("not a certificate"), 0o600)
	const tls = "rediss://:s3cret@127.0.0.1:6380/0"
	for _, tc := range []struct {
		c    redisretry.ClientConfig
		want string
	}{
		{redisretry.ClientConfig{URL: tls, DialTimeout: -time.Second}, "invalid ClientConfig.DialTimeout = -1s"},
		{redisretry.ClientConfig{URL: tls, CAFile: filepath.Join(dir, "missing.pem")}, `invalid ClientConfig.CAFile = "` + filepath.Join(dir, "missing.pem") + `": open`},
		{redisretry.ClientConfig{URL: tls, CAFile: notPEM}, "it holds no PEM certificate"},
		{redisretry.ClientConfig{URL: "redis://:s3cret@127.0.0.1:6379/0", CAFile: notPEM}, "does not use TLS (rediss://)"},
		{redisretry.ClientConfig{URL: tls, CertFile: notPEM}, "give both (a client certificate and its key) or neither"},
		{redisretry.ClientConfig{URL: tls, CertFile: notPEM, KeyFile: notPEM}, "invalid ClientConfig.CertFile"},
	} {
		err := tc.c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%+v: %v, want an error saying %q without the password", tc.c, err, tc.want)
		}
		if c, err := redisretry.NewClientWith(tc.c); err == nil {
			c.Close()
			t.Errorf("NewClientWith(%+v): no error", tc.c)
		}
	}
	// The dial's bound: the field, else the URL's dial_timeout, else 1 s;
	// one dial and one try per command unless the URL says otherwise
	// (go-redis keeps "no retries" as MaxRetries 0 once the client is
	// made).
	for _, tc := range []struct {
		c                    redisretry.ClientConfig
		dial                 time.Duration
		retries, dialRetries int
	}{
		{redisretry.ClientConfig{URL: "redis://127.0.0.1:6379/0"}, redisretry.DefaultDialTimeout, 0, 1},
		{redisretry.ClientConfig{URL: "redis://127.0.0.1:6379/0?dial_timeout=3s"}, 3 * time.Second, 0, 1},
		{redisretry.ClientConfig{URL: "redis://127.0.0.1:6379/0?dial_timeout=3s", DialTimeout: 200 * time.Millisecond}, 200 * time.Millisecond, 0, 1},
		{redisretry.ClientConfig{URL: "redis://127.0.0.1:6379/0?max_retries=2"}, redisretry.DefaultDialTimeout, 2, 1},
	} {
		c, err := redisretry.NewClientWith(tc.c)
		if err != nil {
			t.Fatal(err)
		}
		o := c.Options()
		if o.DialTimeout != tc.dial || o.MaxRetries != tc.retries || o.DialerRetries != tc.dialRetries || !o.ContextTimeoutEnabled {
			t.Errorf("%+v: DialTimeout %v, MaxRetries %d, DialerRetries %d, ContextTimeoutEnabled %v; want %v, %d, %d, true",
				tc.c, o.DialTimeout, o.MaxRetries, o.DialerRetries, o.ContextTimeoutEnabled, tc.dial, tc.retries, tc.dialRetries)
		}
		c.Close()
	}
}

// TestDialBoundOfOurClientsOnly: a limiter waits for its first calls as long
// as the dial may take on a client NewClient or NewClientWith made (they
// chose it: 1 s, or the field); of another client it knows nothing (go-redis's
// DialTimeout is 5 s, not chosen for this) and every call has the Timeout.
func TestDialBoundOfOurClientsOnly(t *testing.T) {
	ours, _ := redisretry.NewClient("redis://127.0.0.1:1/0")
	defer ours.Close()
	set, _ := redisretry.NewClientWith(redisretry.ClientConfig{URL: "redis://127.0.0.1:1/0", DialTimeout: 3 * time.Second})
	defer set.Close()
	other := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer other.Close()
	for _, tc := range []struct {
		name   string
		client *redis.Client
		want   time.Duration
	}{
		{"NewClient", ours, redisretry.DefaultDialTimeout},
		{"NewClientWith", set, 3 * time.Second},
		{"redis.NewClient", other, 0},
	} {
		if got := redisretry.DialBoundOf(tc.client); got != tc.want {
			t.Errorf("%s: a limiter's first calls bounded by %v, want %v", tc.name, got, tc.want)
		}
	}
}
