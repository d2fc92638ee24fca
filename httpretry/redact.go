package httpretry

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// Redacted is the value written in place of a secret.
const Redacted = "REDACTED"

// secretParams are the names of the parameters whose values Redact and
// RedactText hide (compared after percent-decoding, without regard to
// case): API keys, OAuth tokens, the signatures and credentials of signed
// URLs (Google Cloud Storage, Amazon S3, Azure SAS).
var secretParams = []string{
	"key", "api_key", "apikey", "x-goog-api-key", "access_token", "token", "id_token", "refresh_token",
	"client_secret", "password", "sig", "signature", "x-goog-signature", "x-goog-credential",
	"awsaccesskeyid", "x-amz-signature", "x-amz-credential", "x-amz-security-token",
}

// userinfoRE finds URLs' user info in free text.
var userinfoRE = regexp.MustCompile(`(://)[^/@\s"']+@`)

// Credentials in free text, outside URLs (see RedactText).
var (
	// apiKeyRE: a Google API key (AIza and 35 more characters), or what
	// looks like a shortened one.
	apiKeyRE = regexp.MustCompile(`AIza[0-9A-Za-z_-]{16,}`)
	// bearerRE: a bearer token (RFC 6750's b64token).
	bearerRE = regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z0-9._~+/-]+=*`)
	// authHeaderRE: the value of an Authorization header written as
	// "name: value" (or name=value, or JSON's "name": "value"), with its
	// scheme when it is one of HTTP's (Basic, Bearer, ...).
	authHeaderRE = regexp.MustCompile(`(?i)\b((?:proxy-)?authorization"?\s*[:=]\s*"?)(?:(?:basic|bearer|digest|negotiate|ntlm|token|oauth|mac|hoba|mutual|vapid|scram-sha-\d+|aws4-hmac-sha256)\s+)?[^\s"',;:&#]+`)
	// keyHeaderRE: the value of another credential header of
	// secretHeaders, written the same ways.
	keyHeaderRE = regexp.MustCompile(`(?i)\b((?:x-goog-api-key|x-goog-iam-authorization-token|x-api-key|api-key|ocp-apim-subscription-key|x-amz-security-token)"?\s*[:=]\s*"?)[^\s"',;:&#]+`)
	// cookieRE: a Cookie or Set-Cookie header's value, written as
	// "name: value", to the end of the line (or a quote): every pair of it.
	cookieRE = regexp.MustCompile(`(?i)\b((?:set-)?cookie"?\s*:\s*"?)[^\r\n"]+`)
)

// RedactText returns s with the credentials quoted in it removed. In URLs:
// the values of the parameters Redact hides, in a query or a fragment
// (name=value after '?', '&', ';' or '#', the name percent-decoded), and
// user info. In the rest of the text: Google API keys (AIza...), bearer
// tokens ("Bearer ..."), and the values of the headers RedactHeader hides
// written as "name: value", name=value or "name":"value" (the name in any
// case; an Authorization value with its scheme; a Cookie's, after a colon
// only, to the end of the line). Each is replaced by REDACTED. Use it on
// error messages (a *url.Error quotes the request's URL; a server's error
// text may quote anything). A colon right after a URL's value and before
// white space ("GET URL: cause") is left in place.
func RedactText(s string) string {
	if strings.ContainsAny(s, "=@") {
		s = redactPairs(s, false)
		s = userinfoRE.ReplaceAllString(s, "${1}"+Redacted+"@")
	}
	if strings.Contains(s, "AIza") {
		s = apiKeyRE.ReplaceAllString(s, Redacted)
	}
	if containsFold(s, "authorization") {
		s = authHeaderRE.ReplaceAllString(s, "${1}"+Redacted)
	}
	if containsFold(s, "bearer") {
		s = bearerRE.ReplaceAllString(s, "${1}"+Redacted)
	}
	if containsFold(s, "key") || containsFold(s, "token") {
		s = keyHeaderRE.ReplaceAllString(s, "${1}"+Redacted)
	}
	if containsFold(s, "cookie") {
		s = cookieRE.ReplaceAllString(s, "${1}"+Redacted)
	}
	return s
}

// containsFold reports whether s contains the lower-case ASCII word sub,
// without regard to case (allocating nothing: a cheap test before a
// case-insensitive regular expression, which has no fast literal search).
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i]|0x20 == sub[0] && strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// isSecretParam reports whether name, percent-encoded as in a URL, is one
// of secretParams. The one rule of Redact and RedactText.
func isSecretParam(name string) bool {
	if strings.IndexByte(name, '%') >= 0 || strings.IndexByte(name, '+') >= 0 {
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
	}
	for _, s := range secretParams {
		if strings.EqualFold(name, s) {
			return true
		}
	}
	return false
}

// redactPairs returns s with the value of every secret name=value pair
// replaced by Redacted, s itself (no copy) when there is none. In a query
// or a fragment (query true) pairs are separated by '&' or ';', the first
// starts at the beginning, and a secret name without a value gets one. In
// free text a pair starts after '?', '&', ';' or '#', its name and value
// also end at white space, quotes and '#', and its name at '?'.
func redactPairs(s string, query bool) string {
	var (
		out  []byte // nil until a secret is found
		last int    // s[:last] is in out
	)
	end := func(b byte, name bool) bool {
		switch b {
		case '&', ';':
			return true
		case '=':
			return name
		case '?': // legal in a query's value: it hides the rest of it
			return !query && name
		case '#', ' ', '\t', '\n', '\r', '"', '\'', '<', '>':
			return !query
		}
		return false
	}
	for i := 0; i < len(s); i++ {
		if query {
			if i > 0 && s[i-1] != '&' && s[i-1] != ';' {
				continue
			}
		} else if i == 0 || !strings.ContainsRune("?&;#", rune(s[i-1])) {
			continue
		}
		j := i // the end of the name
		for j < len(s) && !end(s[j], true) {
			j++
		}
		hasValue := j < len(s) && s[j] == '='
		if j == i || (!hasValue && !query) || !isSecretParam(s[i:j]) {
			continue
		}
		k := j // the end of the value
		if hasValue {
			for k = j + 1; k < len(s) && !end(s[k], false) && !(!query && separator(s, k)); k++ {
			}
		}
		if hasValue && s[j+1:k] == Redacted {
			continue
		}
		out = append(out, s[last:j]...)
		out = append(out, "="+Redacted...)
		last = k
		i = k - 1
	}
	if out == nil {
		return s
	}
	return string(append(out, s[last:]...))
}

// separator reports whether s[i] is a colon that ends a quoted URL in free
// text, as in an error's "GET URL: cause" (a colon followed by white space
// or the end of s): kept, not taken for the end of a secret value.
func separator(s string, i int) bool {
	return s[i] == ':' && (i+1 == len(s) || s[i+1] == ' ' || s[i+1] == '\t' || s[i+1] == '\n')
}

// secretHeaders are the headers whose values RedactHeader hides.
var secretHeaders = []string{
	"Authorization",
	"Proxy-Authorization",
	"X-Goog-Api-Key",
	"X-Goog-Iam-Authorization-Token",
	"X-Api-Key",
	"Api-Key",                   // Azure OpenAI
	"Ocp-Apim-Subscription-Key", // Azure API Management
	"X-Amz-Security-Token",      // S3 temporary credentials
	"Cookie",
	"Set-Cookie",
}

// Redact returns u as a string that is safe to log: user info (user name and
// password) is removed and the values of secret parameters (key, api_key,
// access_token, token, the signatures and credentials of signed URLs, ...)
// in its query and its fragment (an OAuth implicit grant returns
// #access_token=...) are replaced by REDACTED; query parameters are
// separated by '&' or ';'. The other parameters and their order are kept as
// they are. u is not modified. Redact(nil) is "".
func Redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	q := redactPairs(u.RawQuery, true)
	frag := u.EscapedFragment()
	rf := redactPairs(frag, true)
	if u.User == nil && q == u.RawQuery && rf == frag {
		return u.String()
	}
	c := *u
	c.User = nil
	c.RawQuery = q
	if rf == frag {
		return c.String()
	}
	c.Fragment, c.RawFragment = "", ""
	return c.String() + "#" + rf
}

// RedactHeader returns a copy of h that is safe to log: every value of
// Authorization, Proxy-Authorization, X-Goog-Api-Key,
// X-Goog-Iam-Authorization-Token, X-Api-Key, Api-Key,
// Ocp-Apim-Subscription-Key, X-Amz-Security-Token, Cookie and Set-Cookie
// (matched without regard to case) is replaced by REDACTED. h is not modified.
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
