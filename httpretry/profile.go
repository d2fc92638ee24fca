package httpretry

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strings"

	"github.com/backoffkit/retry"
)

// The request headers that select a Vertex AI consumption option, in
// their canonical form (http.CanonicalHeaderKey).
const (
	headerRequestType       = "X-Vertex-Ai-Llm-Request-Type"        // X-Vertex-AI-LLM-Request-Type
	headerSharedRequestType = "X-Vertex-Ai-Llm-Shared-Request-Type" // X-Vertex-AI-LLM-Shared-Request-Type
)

// headerField is one request header a profile sends.
type headerField struct {
	name  string // canonical
	value string
}

// profileHeaders is the one table of the headers each profile sends (see
// ProfileHeader); a profile that is not listed sends none.
var profileHeaders = map[string][]headerField{
	"flex": {
		{headerRequestType, "shared"},
		{headerSharedRequestType, "flex"},
	},
	"priority": {
		{headerSharedRequestType, "priority"},
	},
}

// profileFields returns the headers of the profile name (matched without
// regard to case), or an error naming the known profiles.
func profileFields(name string) ([]headerField, error) {
	names := retry.ProfileNames()
	for _, n := range names {
		if strings.EqualFold(n, name) {
			return profileHeaders[n], nil
		}
	}
	return nil, fmt.Errorf("unknown profile %q (want one of %s)", name, strings.Join(names, ", "))
}

// ProfileHeader returns the request headers that select the Vertex AI
// consumption option of the named [retry.Profile], a new header the
// caller may modify. The name is matched without regard to case.
//
//   - "flex": X-Vertex-AI-LLM-Request-Type: shared and
//     X-Vertex-AI-LLM-Shared-Request-Type: flex: Flex pay-as-you-go only.
//     (Without the first, a project's Provisioned Throughput would be used
//     first; low-priority work should leave it to the traffic it was
//     bought for.)
//   - "priority": X-Vertex-AI-LLM-Shared-Request-Type: priority: Priority
//     pay-as-you-go, after the project's Provisioned Throughput if it has
//     any (add X-Vertex-AI-LLM-Request-Type: shared to skip that).
//   - every other profile: none (an empty header). "standard" is Standard
//     pay-as-you-go, which needs none. "provisioned" sends none either: a
//     project's Provisioned Throughput is used first by default and the
//     traffic above it spills over to Standard pay-as-you-go; to use
//     Provisioned Throughput only (a 429 then means the purchase is used
//     up, which is what that profile's policy assumes) set
//     X-Vertex-AI-LLM-Request-Type: dedicated yourself.
//
// Flex and Priority are served by Vertex AI's global endpoint only (see
// [WithProfile]). This is the table WithProfile applies. A Gen AI SDK user
// who builds the client's http.Client without WithProfile passes the
// header as genai.HTTPOptions.Headers. An unknown name is an error that
// lists the known ones.
func ProfileHeader(name string) (http.Header, error) {
	fields, err := profileFields(name)
	if err != nil {
		return nil, errors.New("httpretry: ProfileHeader: " + err.Error())
	}
	h := make(http.Header, len(fields))
	for _, f := range fields {
		h[f.name] = []string{f.value}
	}
	return h, nil
}

// WithProfile makes the transport send the request headers of the named
// [retry.Profile] (see [ProfileHeader]: flex and priority send some, the
// others none) on every request, to every host (a proxy in front of
// Vertex AI needs them too). It sets no policy: pass
// retry.Profile(name) as the transport's policy for the profile's
// attempts, waits and budget. A header the request already has, under
// any case of its name and even with no value, is the caller's and is
// left as it is: req.Header["X-Vertex-AI-LLM-Request-Type"] = nil sends
// none. The caller's request is never modified (the attempts send a
// copy of its header). The name is matched without regard to case; an
// unknown name is an error reported by [Transport.Err]. Given twice, the
// last wins.
//
// Priority and Flex pay-as-you-go exist only on Vertex AI's global
// endpoint, aiplatform.googleapis.com (or aiplatform.mtls.googleapis.com).
// So, under "priority" and "flex", a regional or multi-regional Vertex AI
// host is refused, with an error that matches [ErrRegionalEndpoint]: such
// a request would be served as Standard pay-as-you-go, or not at all. A
// host is regional when it is LOCATION-aiplatform.googleapis.com
// (us-central1, europe-west4, ...) or aiplatform.LOCATION.rep.googleapis.com
// (the us and eu multi-regions, and the regions' representative
// endpoints), in any case, with or without a port or a final dot, or
// their mtls forms. Any other host is allowed: a proxy, a gateway or a
// test server (this transport cannot know where it forwards), or another
// Google API. The rule applies:
//
//   - when the transport is built: a [WithEndpoints] list that names a
//     regional host is an error reported by [Transport.Err] (and
//     [NewClient]), so that the endpoint fallback never moves a request
//     to a region;
//   - to each request without WithEndpoints, before anything is sent:
//     one whose URL (or Host field) names a regional host, and whose
//     X-Vertex-AI-LLM-Shared-Request-Type says priority or flex (the
//     profile's, or the caller's own), gets the error from RoundTrip, its
//     body closed. A request whose caller set another value goes ahead.
//
// A caller who knows better (a region that has since gained the option)
// sets the headers itself, from ProfileHeader, without WithProfile: the
// transport checks no host then.
func WithProfile(name string) Option {
	fields, err := profileFields(name)
	return func(c *config) {
		if err != nil {
			c.errorf("WithProfile: %v", err)
			return
		}
		c.profileHeader = fields
		c.globalOnly = ""
		if globalOnly(strings.ToLower(name)) {
			c.globalOnly = strings.ToLower(name)
		}
	}
}

// globalOnly reports whether v, a value of X-Vertex-AI-LLM-Shared-Request-Type
// (or a profile's name), selects an option that Vertex AI serves on its
// global endpoint only.
func globalOnly(v string) bool {
	return strings.EqualFold(v, "priority") || strings.EqualFold(v, "flex")
}

// ErrRegionalEndpoint says that a transport built with
// [WithProfile]("priority") or WithProfile("flex") refused a regional or
// multi-regional Vertex AI endpoint: in a [WithEndpoints] list
// ([Transport.Err]), or as the host of a request (RoundTrip). Priority and
// Flex pay-as-you-go are served by the global endpoint,
// aiplatform.googleapis.com, only. Match it with errors.Is.
var ErrRegionalEndpoint = errors.New("httpretry: Priority and Flex PayGo are served by Vertex AI's global endpoint (aiplatform.googleapis.com) only")

// regionalError is the error of a regional host refused under a
// global-only profile: where says where the host came from, option is
// the consumption option asked for (priority or flex).
type regionalError struct {
	profile, option, where, host, kind string
}

func (e *regionalError) Error() string {
	option := "Priority"
	if e.option == "flex" {
		option = "Flex"
	}
	return fmt.Sprintf("httpretry: WithProfile(%q): %s: %s is a %s Vertex AI endpoint; %s PayGo is served by the global endpoint (aiplatform.googleapis.com) only",
		e.profile, e.where, e.host, e.kind, option)
}

func (e *regionalError) Is(target error) bool { return target == ErrRegionalEndpoint }

// vertexLocation tells a Vertex AI host by its name: "global" for the
// global endpoint, the location (us-central1, us, eu, ...) for a regional
// or multi-regional one, "" for any other host. hostport may carry a port
// and be in any case; a final dot is ignored.
func vertexLocation(hostport string) string {
	h := strings.ToLower((&url.URL{Host: hostport}).Hostname())
	h = strings.TrimSuffix(h, ".")
	rest, ok := strings.CutSuffix(h, ".googleapis.com")
	if !ok {
		return ""
	}
	rest = strings.TrimSuffix(rest, ".mtls")
	if rest == "aiplatform" {
		return "global"
	}
	if loc, ok := strings.CutSuffix(rest, "-aiplatform"); ok && validLocation(loc) {
		return loc // LOCATION-aiplatform.googleapis.com
	}
	if mid, ok := strings.CutPrefix(rest, "aiplatform."); ok {
		if loc, ok := strings.CutSuffix(mid, ".rep"); ok && validLocation(loc) {
			return loc // aiplatform.LOCATION.rep.googleapis.com
		}
	}
	return ""
}

// validLocation reports whether s is a location name: one DNS label of
// lower-case letters, digits and hyphens.
func validLocation(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// regionalKind returns "regional" or "multi-regional" for a location other
// than global: a region's name has a digit (us-central1), a multi-region's
// (us, eu) has none.
func regionalKind(loc string) string {
	if strings.ContainsAny(loc, "0123456789") {
		return "regional"
	}
	return "multi-regional"
}

// checkEndpoints returns an error for the first endpoint of list that is
// a regional Vertex AI host, nil if none is: the transport's profile
// (priority or flex) is served on the global endpoint only.
func (c *config) checkEndpoints() error {
	for i, e := range c.endpoints {
		u, _ := url.Parse(e) // checked by WithEndpoints
		if loc := vertexLocation(u.Host); loc != "" && loc != "global" {
			return &regionalError{profile: c.globalOnly, option: c.globalOnly, where: fmt.Sprintf("WithEndpoints: endpoint %d %q", i, e), host: u.Host, kind: regionalKind(loc)}
		}
	}
	return nil
}

// headerKey returns the key under which h holds the header name (given in
// canonical form): name itself, or a key of another case set directly in
// the map; ok is false when h has no such key.
func headerKey(h http.Header, name string) (key string, ok bool) {
	if _, ok := h[name]; ok {
		return name, true
	}
	for k := range h {
		if strings.EqualFold(k, name) {
			return k, true
		}
	}
	return "", false
}

// addProfileHeader adds to the attempts' header the profile's headers the
// caller's request lacks (under any case of the name), copying the
// caller's header map first, once. The values are the call's own (one
// allocation for all), so that a caller who changes resp.Request.Header
// changes nothing for other calls.
func (c *call) addProfileHeader() {
	fields := c.t.cfg.profileHeader
	var vals []string
	for _, f := range fields {
		if _, ok := headerKey(c.req.Header, f.name); ok {
			continue
		}
		if c.header == nil {
			// A shallow copy: the caller's values are shared, and
			// never modified.
			c.header = make(http.Header, len(c.req.Header)+len(fields))
			maps.Copy(c.header, c.req.Header)
		}
		if vals == nil {
			vals = make([]string, len(fields))
		}
		vals[0] = f.value
		c.header[f.name] = vals[0:1:1]
		vals = vals[1:]
	}
}

// checkHost returns the error for a request under a global-only profile,
// without WithEndpoints, that asks for Priority or Flex (its
// X-Vertex-AI-LLM-Shared-Request-Type says so) and goes to a regional
// Vertex AI host (its URL's or its Host field's), nil otherwise.
func (c *call) checkHost() error {
	profile := c.t.cfg.globalOnly
	h := c.header
	if h == nil {
		h = c.req.Header
	}
	k, ok := headerKey(h, headerSharedRequestType)
	if !ok || len(h[k]) == 0 || !globalOnly(strings.TrimSpace(h[k][0])) {
		return nil
	}
	if c.req.URL == nil {
		return nil // the base transport refuses it
	}
	for _, host := range [...]string{c.req.URL.Host, c.req.Host} {
		if loc := vertexLocation(host); loc != "" && loc != "global" {
			method := c.req.Method
			if method == "" {
				method = http.MethodGet
			}
			return &regionalError{profile: profile, option: strings.ToLower(strings.TrimSpace(h[k][0])), where: method + " " + Redact(c.req.URL), host: host, kind: regionalKind(loc)}
		}
	}
	return nil
}
