package httpretry

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// Redacted is the value written in place of a secret.
const Redacted = "REDACTED"

// secretParams are the query parameters whose values Redact and RedactText
// hide (compared without regard to case): API keys, OAuth tokens and the
// signatures of signed URLs.
var secretParams = []string{
	"key", "api_key", "apikey", "access_token", "token", "id_token", "refresh_token",
	"client_secret", "password", "sig", "signature", "x-goog-signature", "x-goog-credential",
	"awsaccesskeyid", "x-amz-signature", "x-amz-credential",
}

// secretParamRE finds "name=value" pairs of secret query parameters in free
// text (error messages quote URLs); userinfoRE finds URLs' user info.
var (
	secretParamRE = regexp.MustCompile(`(?i)([?&;](?:` + strings.Join(secretParams, "|") + `)=)[^&;\s"']*`)
	userinfoRE    = regexp.MustCompile(`(://)[^/@\s"']+@`)
)

// RedactText returns s with the credentials of any URL quoted in it removed:
// the values of the query parameters Redact hides, and user info. Use it on
// error messages (a *url.Error quotes the request's URL).
func RedactText(s string) string {
	if !strings.ContainsAny(s, "=@") {
		return s
	}
	s = secretParamRE.ReplaceAllString(s, "${1}"+Redacted)
	return userinfoRE.ReplaceAllString(s, "${1}"+Redacted+"@")
}

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
// password) is removed and the values of secret query parameters (key,
// api_key, access_token, token, signatures of signed URLs, ...) are replaced
// by REDACTED. The other parameters and their order
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
