package redisretry_test

import (
	"strings"
	"testing"

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
