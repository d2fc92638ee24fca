package otelretry

import (
	"net/url"
	"regexp"
	"strings"
)

// secretParams are the query parameters whose values never reach a span.
var secretParams = map[string]bool{
	"key": true, "api_key": true, "apikey": true, "access_token": true, "token": true,
	"id_token": true, "refresh_token": true, "client_secret": true, "password": true,
	"sig": true, "signature": true, "x-goog-signature": true, "awsaccesskeyid": true,
	"x-goog-credential": true, "x-amz-signature": true, "x-amz-credential": true,
}

// secretParamRE finds "name=value" pairs of query parameters in free text
// (error messages quote URLs).
var secretParamRE = regexp.MustCompile(`(?i)([?&;](?:key|api_key|apikey|access_token|token|id_token|refresh_token|client_secret|password|sig|signature|x-goog-signature|awsaccesskeyid|x-goog-credential|x-amz-signature|x-amz-credential)=)[^&;\s"']*`)

// userinfoRE finds the user info of URLs in free text.
var userinfoRE = regexp.MustCompile(`(://)[^/@\s"']+@`)

// redactText removes credentials from URLs quoted in s.
func redactText(s string) string {
	if !strings.ContainsAny(s, "=@") {
		return s
	}
	s = secretParamRE.ReplaceAllString(s, "${1}REDACTED")
	return userinfoRE.ReplaceAllString(s, "${1}REDACTED:REDACTED@")
}

// redactURL returns u as a string with its user info and secret query values
// replaced by REDACTED, as the url.full attribute requires.
func redactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	if c.User != nil {
		c.User = url.UserPassword("REDACTED", "REDACTED")
	}
	if c.RawQuery != "" {
		q := c.Query()
		changed := false
		for k := range q {
			if secretParams[strings.ToLower(k)] {
				q[k] = []string{"REDACTED"}
				changed = true
			}
		}
		if changed {
			c.RawQuery = q.Encode()
		}
	}
	return c.String()
}
