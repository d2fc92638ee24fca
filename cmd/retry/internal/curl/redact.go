package curl

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/httpretry"
)

// SecretHeader reports whether a header may carry a credential: those
// httpretry.RedactHeader hides, and any whose name says it holds an
// authorization, a key, a token, a secret, a password, a session, a
// signature, a credential or a cookie (api-key, X-Auth-Token,
// Ocp-Apim-Subscription-Key, ...). Idempotency-Key is no secret.
func SecretHeader(name string) bool {
	if v := httpretry.RedactHeader(http.Header{name: {"x"}})[name]; len(v) == 1 && v[0] == httpretry.Redacted {
		return true
	}
	n := strings.ToLower(name)
	if n == "idempotency-key" {
		return false
	}
	for _, w := range []string{"auth", "key", "token", "secret", "password", "passwd", "session", "signature", "credential", "cookie"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// redactHeaders returns a copy of h safe to print: the values of
// SecretHeader names are REDACTED, and the others lose the credentials of
// any URL in them (a Location's or a Link's key= or user info).
func redactHeaders(h http.Header) http.Header {
	c := make(http.Header, len(h))
	for name, vals := range h {
		red := make([]string, len(vals))
		for i, v := range vals {
			switch {
			case SecretHeader(name):
				red[i] = httpretry.Redacted
			case name == "Location" || name == "Content-Location":
				red[i] = cli.RedactRawURL(v)
			default:
				red[i] = httpretry.RedactText(v)
			}
		}
		c[name] = red
	}
	return c
}

// RedactURLError drops the URL that *url.Error puts in its message (ours is
// printed redacted instead), and the "httpretry: METHOD URL: " of an
// attempt's error; what is left loses the credentials of any URL it quotes
// (a Location that did not parse, a proxy's).
func RedactURLError(err error) error {
	var ae *httpretry.AttemptError
	if errors.As(err, &ae) {
		return errors.New(attemptText(ae))
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return errors.New(httpretry.RedactText(err.Error()))
}
