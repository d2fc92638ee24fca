package httpretry

import (
	"net/http"
	"net/url"
	"strings"
)

// Redacted is the value written in place of a secret.
const Redacted = "REDACTED"

// secretParams are the query parameters whose values Redact hides
// (compared without regard to case).
var secretParams = []string{"key", "access_token", "token"}

// secretHeaders are the headers whose values RedactHeader hides.
var secretHeaders = []string{
	"Authorization",
	"Proxy-Authorization",
	"X-Goog-Api-Key",
	"X-Goog-Iam-Authorization-Token",
	"X-Api-Key",
	"Cookie",
	"Set-Cookie",
}

// Redact returns u as a string that is safe to log: user info (user name and
// password) is removed and the values of the key, access_token and token query
// parameters are replaced by REDACTED. The other parameters and their order
// are kept as they are. u is not modified. Redact(nil) is "".
func Redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	if u.User == nil && !hasSecretParam(u.RawQuery) {
		return u.String()
	}
	c := *u
	c.User = nil
	c.RawQuery = redactQuery(u.RawQuery)
	return c.String()
}

func hasSecretParam(q string) bool {
	if q == "" {
		return false
	}
	for part := range strings.SplitSeq(q, "&") {
		if isSecretParam(part) {
			return true
		}
	}
	return false
}

func isSecretParam(part string) bool {
	name, _, _ := strings.Cut(part, "=")
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	for _, s := range secretParams {
		if strings.EqualFold(name, s) {
			return true
		}
	}
	return false
}

func redactQuery(q string) string {
	if q == "" {
		return ""
	}
	parts := strings.Split(q, "&")
	for i, part := range parts {
		if isSecretParam(part) {
			name, _, _ := strings.Cut(part, "=")
			parts[i] = name + "=" + Redacted
		}
	}
	return strings.Join(parts, "&")
}

// RedactHeader returns a copy of h that is safe to log: every value of
// Authorization, Proxy-Authorization, X-Goog-Api-Key,
// X-Goog-Iam-Authorization-Token, X-Api-Key, Cookie and Set-Cookie (matched
// without regard to case) is replaced by REDACTED. h is not modified.
// RedactHeader(nil) is nil.
func RedactHeader(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	c := h.Clone()
	for name, vals := range c {
		for _, s := range secretHeaders {
			if strings.EqualFold(name, s) {
				red := make([]string, len(vals))
				for i := range red {
					red[i] = Redacted
				}
				c[name] = red
				break
			}
		}
	}
	return c
}
