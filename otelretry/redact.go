package otelretry

import (
	"net/url"

	"github.com/backoffkit/retry/httpretry"
)

// redactText removes credentials from URLs quoted in s (httpretry's rules).
func redactText(s string) string { return httpretry.RedactText(s) }

// redactURL returns u as a string with its secret query values replaced by
// REDACTED (httpretry's rules) and, as the url.full attribute asks, user info
// shown as REDACTED:REDACTED.
func redactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	s := httpretry.Redact(u)
	if u.User == nil {
		return s
	}
	c, err := url.Parse(s)
	if err != nil {
		return s
	}
	c.User = url.UserPassword("REDACTED", "REDACTED")
	return c.String()
}
