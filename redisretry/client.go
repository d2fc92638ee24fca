package redisretry

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/backoffkit/retry/httpretry"
)

// NewClient returns a client for a Redis URL such as
// "redis://127.0.0.1:6379/0", "redis://user:password@host:6379/2",
// "rediss://host:6380" (TLS) or "unix:///run/redis.sock", set up for the
// limiters: it honours context deadlines, so a call stops at the limiter's
// Timeout instead of the client's 3 s read timeout. (The limiters bound every
// call anyway; this client also frees the connection.) It makes no network
// call. A URL that does not parse is an error that never shows the password
// (nor anything a redactor such as httpretry.RedactText would take for one).
// Close the client when done.
func NewClient(rawURL string) (*redis.Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("redisretry: invalid Redis URL: it does not parse (want redis://host:port/db, with user:password@ before the host if the server needs a password)")
	}
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redisretry: invalid Redis URL %s: %s", safeURL(u), redact(err.Error(), u))
	}
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt), nil
}

// redact removes the URL from a message where it quotes it (go-redis's
// errors name the part at fault, not the password). The password's text is
// not replaced elsewhere: a short one would show itself by where it matched.
func redact(msg string, u *url.URL) string {
	if safe := safeURL(u); safe != u.String() {
		return strings.ReplaceAll(msg, u.String(), safe)
	}
	return msg
}

// safeURL is u for a message: its password hidden (as url.URL.Redacted
// does), and the values of secret query parameters too (password=, which
// go-redis refuses, key=, token=: those of httpretry.Redact).
func safeURL(u *url.URL) string {
	c := *u
	if c.RawQuery != "" {
		// The query's rules, not free text's: a value ends at '&' or ';'
		// only, whatever it holds (quotes, '<').
		c.RawQuery = strings.TrimPrefix(httpretry.Redact(&url.URL{RawQuery: c.RawQuery}), "?")
	}
	return c.Redacted()
}
