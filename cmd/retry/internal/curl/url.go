package curl

import (
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/httpretry"
)

// parseProblem says why s does not parse as a URL (err, url.Parse's error),
// never quoting its user info: url.Parse's error quotes the part at fault,
// with user info the password ("invalid port \":s3cret\" after host").
func parseProblem(s string, err error) string {
	// With user info or a secret value, what url.Parse says may quote them
	// ("%zz" of a token): say what it says of the URL with them hidden.
	if hidden := cli.HideUserInfo(s); hidden != s {
		_, herr := url.Parse(hidden)
		if herr == nil {
			return "it does not parse (in a password or a secret value, percent-encode '%', '/', '?', '#' and '@')"
		}
		err = herr
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return httpretry.RedactText(err.Error())
}

// IsInvalidName reports whether host is "invalid" or under ".invalid", a
// name that must never resolve (RFC 6761, section 6.4).
func IsInvalidName(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "invalid" || strings.HasSuffix(host, ".invalid")
}

// ParseHTTPURL reads s as curl reads a URL: a scheme is a word followed
// by ":/" ("http:/h" is http://h, extra slashes are dropped), or one of the
// URI schemes written without slashes (mailto:, data:, ...); without one it
// is an http:// URL ("host:8080/x", "user:pw@host"). Only http and https
// are supported (exit 1, as curl). A space or a control character anywhere,
// a URL that does not parse, no host or a port above 65535 is rejected
// (exit 3, as curl): nothing malformed goes onto the wire.
func ParseHTTPURL(s string) (*url.URL, error) {
	if err := CheckURLBytes(s, "the URL"); err != nil {
		return nil, err
	}
	if scheme, rest, ok := splitScheme(s); ok {
		scheme = strings.ToLower(scheme)
		if scheme != "http" && scheme != "https" {
			return nil, cli.ExitErrorf(ExitUnsupported, "protocol %q not supported (want an http:// or https:// URL)", scheme)
		}
		s = scheme + "://" + strings.TrimLeft(rest, "/")
	} else {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		if hidden := cli.HideUserInfo(s); hidden != s {
			return nil, cli.ExitErrorf(ExitURLMalformat, "URL rejected: %s: %s", hidden, parseProblem(s, err))
		}
		return nil, cli.ExitErrorf(ExitURLMalformat, "URL rejected: %s", parseProblem(s, err))
	}
	if u.Hostname() == "" {
		return nil, cli.ExitErrorf(ExitURLMalformat, "URL rejected: no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n > 65535 {
			return nil, cli.ExitErrorf(ExitURLMalformat, "URL rejected: port %s is outside 0-65535", p)
		}
	}
	return u, nil
}

// slashlessSchemes are URI schemes written without "//" (mailto:x@y): a
// URL starting with one is refused as an unsupported protocol, not read as
// user info of a scheme-less URL (curl would send mailto:x@y to host y).
var slashlessSchemes = []string{"mailto", "tel", "sms", "data", "javascript", "urn", "news", "about", "magnet", "geo", "sip", "sips", "xmpp"}

// splitScheme returns the scheme of s and what follows its colon, if s
// starts with one (see ParseHTTPURL).
func splitScheme(s string) (scheme, rest string, ok bool) {
	scheme, rest, ok = strings.Cut(s, ":")
	if !ok || scheme == "" || !isASCIILetter(scheme[0]) {
		return "", "", false
	}
	for i := 0; i < len(scheme); i++ {
		c := scheme[i]
		if !isASCIILetter(c) && !('0' <= c && c <= '9') && c != '+' && c != '-' && c != '.' {
			return "", "", false
		}
	}
	if strings.HasPrefix(rest, "/") {
		return scheme, rest, true
	}
	for _, n := range slashlessSchemes {
		if strings.EqualFold(scheme, n) {
			return scheme, rest, true
		}
	}
	return "", "", false
}

func isASCIILetter(c byte) bool { return 'A' <= c&^0x20 && c&^0x20 <= 'Z' }

// CheckURLBytes refuses a URL holding a space or a control character (an
// HTTP request line ends at a space: curl rejects them too). what names
// where it came from ("the URL", "the -G data").
func CheckURLBytes(s, what string) error {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ':
			return cli.ExitErrorf(ExitURLMalformat, "URL rejected: malformed input: a space in %s at byte %d (percent-encode it as %%20)", what, i)
		case c < ' ' || c == 0x7f:
			return cli.ExitErrorf(ExitURLMalformat, "URL rejected: malformed input: control character %#02x in %s at byte %d", c, what, i)
		}
	}
	return nil
}

// SameOrigin reports whether a and b have the same origin: scheme, host
// (without regard to case) and port (80 and 443 when not given).
func SameOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		switch strings.ToLower(u.Scheme) {
		case "https":
			return "443"
		case "http":
			return "80"
		}
		return ""
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}
