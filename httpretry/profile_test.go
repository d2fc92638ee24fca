package httpretry

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoffkit/retry"
)

const (
	reqType    = "X-Vertex-AI-LLM-Request-Type"
	sharedType = "X-Vertex-AI-LLM-Shared-Request-Type"
)

// TestProfileHeader pins the header table: flex sends two headers,
// priority one, every other profile none; names match without regard to
// case; an unknown name lists the known ones; the header is the caller's.
func TestProfileHeader(t *testing.T) {
	flex := http.Header{http.CanonicalHeaderKey(reqType): {"shared"}, http.CanonicalHeaderKey(sharedType): {"flex"}}
	priority := http.Header{http.CanonicalHeaderKey(sharedType): {"priority"}}
	for _, tt := range []struct {
		name string
		want http.Header
	}{
		{"standard", http.Header{}},
		{"flex", flex},
		{"FLEX", flex},
		{"priority", priority},
		{"Priority", priority},
		{"provisioned", http.Header{}},
		{"realtime", http.Header{}},
		{"batch", http.Header{}},
		{"model-armor", http.Header{}},
	} {
		got, err := ProfileHeader(tt.name)
		if err != nil || got == nil || !maps.EqualFunc(got, tt.want, slices.Equal) {
			t.Errorf("ProfileHeader(%q) = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
	// Every profile the core knows has a row (none is forgotten).
	for _, n := range retry.ProfileNames() {
		if _, err := ProfileHeader(n); err != nil {
			t.Errorf("ProfileHeader(%q): %v", n, err)
		}
	}
	for _, bad := range []string{"", "flexible", "priority ", "dedicated"} {
		h, err := ProfileHeader(bad)
		if err == nil || h != nil || !strings.Contains(err.Error(), "want one of standard, flex, priority") || !strings.HasPrefix(err.Error(), "httpretry: ProfileHeader: ") {
			t.Errorf("ProfileHeader(%q) = %v, %v; want an error listing the profiles", bad, h, err)
		}
	}
	// The caller may modify its header: the next call is not affected.
	h, _ := ProfileHeader("flex")
	h.Set(reqType, "dedicated")
	h[http.CanonicalHeaderKey(sharedType)][0] = "x"
	if again, _ := ProfileHeader("flex"); !maps.EqualFunc(again, flex, slices.Equal) {
		t.Errorf("after a caller changed its copy, ProfileHeader(flex) = %v", again)
	}
}

// sentHeaders runs one request through a transport with opts over an
// in-memory base and returns the header of each attempt (the base
// answers 503 first when flaky).
func sentHeaders(t *testing.T, req *http.Request, flaky bool, opts ...Option) []http.Header {
	t.Helper()
	var got []http.Header
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		got = append(got, r.Header.Clone())
		if flaky && len(got) == 1 {
			return response(r, http.StatusServiceUnavailable, "busy"), nil
		}
		return response(r, http.StatusOK, "ok"), nil
	})
	tr := NewTransport(base, fast, opts...)
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return got
}

// TestWithProfileHeaders is the header rule as a table: profile × the
// caller's header (absent, set, set under another case, set with no
// value) × method. The profile's headers the request lacks are added to
// every attempt; a header of the same name the caller set wins, whatever
// its case; the caller's request is never modified.
func TestWithProfileHeaders(t *testing.T) {
	type callerHeader struct {
		name string
		set  func(http.Header) // nil: the caller sets nothing
	}
	callers := []callerHeader{
		{"absent", nil},
		{"set", func(h http.Header) { h.Set(sharedType, "caller") }},
		{"set lower-case key", func(h http.Header) { h["x-vertex-ai-llm-shared-request-type"] = []string{"caller"} }},
		{"set with no value", func(h http.Header) { h[http.CanonicalHeaderKey(sharedType)] = nil }},
	}
	profiles := map[string]map[string]string{ // what is sent when the caller sets nothing
		"":            {},
		"standard":    {},
		"provisioned": {},
		"flex":        {reqType: "shared", sharedType: "flex"},
		"priority":    {sharedType: "priority"},
	}
	for _, profile := range []string{"", "standard", "provisioned", "flex", "priority"} {
		for _, ch := range callers {
			for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodHead, http.MethodDelete} {
				name := profile + "/" + ch.name + "/" + method
				if profile == "" {
					name = "none/" + ch.name + "/" + method
				}
				t.Run(name, func(t *testing.T) {
					var body io.Reader
					if method == http.MethodPost {
						body = strings.NewReader(`{"contents":[]}`)
					}
					req, _ := http.NewRequest(method, "https://aiplatform.googleapis.com/v1/projects/p/locations/global/publishers/google/models/m:generateContent", body)
					req.Header.Set("Authorization", "Bearer t")
					if ch.set != nil {
						ch.set(req.Header)
					}
					before := req.Header.Clone()
					var opts []Option
					if profile != "" {
						opts = append(opts, WithProfile(profile))
					}
					attempts := sentHeaders(t, req, true, opts...)
					if len(attempts) != 2 {
						t.Fatalf("%d attempts, want 2 (a 503, then a 200)", len(attempts))
					}
					if !maps.EqualFunc(req.Header, before, slices.Equal) {
						t.Errorf("the caller's header changed: %v, was %v", req.Header, before)
					}
					for i, sent := range attempts {
						want := profiles[profile]
						for _, n := range []string{reqType, sharedType} {
							if ch.set != nil && n == sharedType {
								continue // the caller's wins: checked below
							}
							if got, w := sent.Get(n), want[n]; got != w {
								t.Errorf("attempt %d: %s = %q, want %q", i+1, n, got, w)
							}
						}
						// The caller's own header arrives as the caller set
						// it, once, under its own key, with nothing added.
						if ch.set != nil {
							var keys []string
							for k := range sent {
								if strings.EqualFold(k, sharedType) {
									keys = append(keys, k)
								}
							}
							if len(keys) != 1 || !slices.Equal(sent[keys[0]], before[keys[0]]) {
								t.Errorf("attempt %d: the caller's %s arrived as %v, want %v", i+1, sharedType, keys, before)
							}
						}
						if sent.Get("Authorization") != "Bearer t" {
							t.Errorf("attempt %d: the caller's other headers were lost: %v", i+1, sent)
						}
					}
				})
			}
		}
	}
}

// TestWithProfileHeaderOptions: the profile's headers combine with an
// Idempotency-Key the transport adds, with a request that has no header
// map at all, and the last of two WithProfile options wins; a changed
// resp.Request.Header does not leak into the next request.
func TestWithProfileHeaderOptions(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "https://example.com/v1/files", strings.NewReader("x"))
	sent := sentHeaders(t, req, false, WithProfile("flex"), AddIdempotencyKey())
	if h := sent[0]; h.Get(reqType) != "shared" || h.Get(sharedType) != "flex" || h.Get("Idempotency-Key") == "" {
		t.Errorf("sent %v: want the flex headers and an Idempotency-Key", h)
	}
	if len(req.Header) != 0 {
		t.Errorf("the caller's header changed: %v", req.Header)
	}

	req, _ = http.NewRequest(http.MethodGet, "https://example.com/", nil)
	req.Header = nil
	if h := sentHeaders(t, req, false, WithProfile("priority"))[0]; h.Get(sharedType) != "priority" {
		t.Errorf("a request with a nil header: sent %v", h)
	}
	if req.Header != nil {
		t.Errorf("the caller's nil header became %v", req.Header)
	}

	req, _ = http.NewRequest(http.MethodGet, "https://example.com/", nil)
	if h := sentHeaders(t, req, false, WithProfile("priority"), WithProfile("flex"))[0]; h.Get(sharedType) != "flex" || h.Get(reqType) != "shared" {
		t.Errorf("WithProfile(priority), WithProfile(flex): sent %v, want flex's", h)
	}
	req, _ = http.NewRequest(http.MethodGet, "https://example.com/", nil)
	if h := sentHeaders(t, req, false, WithProfile("flex"), WithProfile("standard"))[0]; len(h) != 0 {
		t.Errorf("WithProfile(flex), WithProfile(standard): sent %v, want nothing", h)
	}

	// The values of one request are its own.
	tr := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) { return response(r, 200, "ok"), nil }), fast, WithProfile("flex"))
	for i := range 2 {
		req, _ = http.NewRequest(http.MethodGet, "https://example.com/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Request.Header.Get(sharedType); got != "flex" {
			t.Fatalf("request %d: sent %s %q, want flex", i+1, sharedType, got)
		}
		resp.Request.Header[http.CanonicalHeaderKey(sharedType)][0] = "changed"
		resp.Request.Header[http.CanonicalHeaderKey(reqType)][0] = "changed"
	}
}

// TestWithProfileUnknown: an unknown name is an error that names the
// option and lists the profiles, from Err, NewClient and RoundTrip.
func TestWithProfileUnknown(t *testing.T) {
	tr := NewTransport(nil, retry.Policy{}, WithProfile("premium"))
	err := tr.Err()
	if err == nil || !strings.Contains(err.Error(), `httpretry: WithProfile: unknown profile "premium" (want one of standard, flex, priority`) {
		t.Fatalf("Err() = %v", err)
	}
	if c, err := NewClient(retry.Policy{}, WithProfile("")); c != nil || err == nil {
		t.Errorf("NewClient with WithProfile(\"\") = %v, %v", c, err)
	}
	body := &closeCounter{Reader: strings.NewReader("x")}
	req, _ := http.NewRequest(http.MethodPost, "https://example.com/", body)
	if _, rerr := tr.RoundTrip(req); rerr == nil || rerr.Error() != err.Error() {
		t.Errorf("RoundTrip = %v, want %v", rerr, err)
	}
	if n := body.closed.Load(); n != 1 {
		t.Errorf("the body was closed %d times, want 1", n)
	}
}

// TestVertexLocation is the rule that tells Vertex AI's global endpoint
// from its regional and multi-regional ones, by the host's name.
func TestVertexLocation(t *testing.T) {
	for _, tt := range []struct{ host, want string }{
		// The global endpoint.
		{"aiplatform.googleapis.com", "global"},
		{"AIPlatform.GoogleAPIs.com", "global"},
		{"aiplatform.googleapis.com:443", "global"},
		{"aiplatform.googleapis.com.", "global"},
		{"aiplatform.googleapis.com.:8443", "global"},
		{"aiplatform.mtls.googleapis.com", "global"},
		// Regions: LOCATION-aiplatform.googleapis.com.
		{"us-central1-aiplatform.googleapis.com", "us-central1"},
		{"europe-west4-aiplatform.googleapis.com:443", "europe-west4"},
		{"US-Central1-AIPLATFORM.googleapis.com", "us-central1"},
		{"asia-northeast1-aiplatform.googleapis.com.", "asia-northeast1"},
		{"us-central1-aiplatform.mtls.googleapis.com", "us-central1"},
		// Multi-regions: the representative endpoints, and the LOCATION- form.
		{"aiplatform.us.rep.googleapis.com", "us"},
		{"aiplatform.eu.rep.googleapis.com:443", "eu"},
		{"AIPLATFORM.EU.REP.GOOGLEAPIS.COM", "eu"},
		{"aiplatform.us-central1.rep.googleapis.com", "us-central1"},
		{"us-aiplatform.googleapis.com", "us"},
		{"eu-aiplatform.googleapis.com", "eu"},
		// Anything else is not a Vertex AI host this rule knows.
		{"generativelanguage.googleapis.com", ""},
		{"oauth2.googleapis.com", ""},
		{"aiplatform.googleapis.com.evil.example", ""},
		{"us-central1-aiplatform.googleapis.com.example.com", ""},
		{"evil-aiplatform.googleapis.com.example.com", ""},
		{"notaiplatform.googleapis.com", ""},
		{"-aiplatform.googleapis.com", ""},
		{"us_central1-aiplatform.googleapis.com", ""},
		{"x.us-central1-aiplatform.googleapis.com", ""},
		{"aiplatform.us.eu.rep.googleapis.com", ""},
		{"aiplatform..rep.googleapis.com", ""},
		{"aiplatform-us.p.googleapis.com", ""},
		{"proxy.internal:8080", ""},
		{"127.0.0.1:9000", ""},
		{"[::1]:443", ""},
		{"localhost", ""},
		{"", ""},
	} {
		if got := vertexLocation(tt.host); got != tt.want {
			t.Errorf("vertexLocation(%q) = %q, want %q", tt.host, got, tt.want)
		}
	}
}

// TestGlobalOnlyEndpoints is the construction rule: under the priority
// and flex profiles, a WithEndpoints list that names a regional or
// multi-regional Vertex AI host is an error naming it, whatever the order
// of the options; the global endpoint and any host that is not Vertex
// AI's are allowed. Other profiles allow every host.
func TestGlobalOnlyEndpoints(t *testing.T) {
	for _, tt := range []struct {
		name string
		list []string
		bad  string // the endpoint the error names, "" if none
		kind string
	}{
		{"global", []string{"https://aiplatform.googleapis.com"}, "", ""},
		{"global, mixed case, port", []string{"https://AIPlatform.googleapis.COM:443"}, "", ""},
		{"a proxy", []string{"https://llm-proxy.internal:8443", "http://127.0.0.1:9000"}, "", ""},
		{"another Google API", []string{"https://generativelanguage.googleapis.com"}, "", ""},
		{"regional", []string{"https://us-central1-aiplatform.googleapis.com"}, "https://us-central1-aiplatform.googleapis.com", "regional"},
		{"regional after global", []string{"https://aiplatform.googleapis.com", "https://Europe-West4-AIPlatform.googleapis.com:443"}, "https://Europe-West4-AIPlatform.googleapis.com:443", "regional"},
		{"multi-regional us", []string{"https://aiplatform.us.rep.googleapis.com", "https://aiplatform.googleapis.com"}, "https://aiplatform.us.rep.googleapis.com", "multi-regional"},
		{"multi-regional eu", []string{"https://proxy.example.com", "https://AIPLATFORM.EU.REP.googleapis.com."}, "https://AIPLATFORM.EU.REP.googleapis.com.", "multi-regional"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, profile := range []string{"priority", "Flex"} {
				for _, order := range []string{"profile first", "endpoints first"} {
					opts := []Option{WithProfile(profile), WithEndpoints(tt.list, time.Minute)}
					if order == "endpoints first" {
						opts[0], opts[1] = opts[1], opts[0]
					}
					err := NewTransport(nil, retry.Policy{}, opts...).Err()
					if tt.bad == "" {
						if err != nil {
							t.Errorf("%s, %s: Err() = %v, want nil", profile, order, err)
						}
						continue
					}
					i := slices.Index(tt.list, tt.bad)
					if !errors.Is(err, ErrRegionalEndpoint) {
						t.Fatalf("%s, %s: Err() = %v, want ErrRegionalEndpoint", profile, order, err)
					}
					option := map[string]string{"priority": "Priority PayGo", "Flex": "Flex PayGo"}[profile]
					for _, want := range []string{`WithProfile("` + strings.ToLower(profile) + `")`, fmt.Sprintf("WithEndpoints: endpoint %d %q", i, tt.bad),
						"a " + tt.kind + " Vertex AI endpoint", option + " is served by the global endpoint (aiplatform.googleapis.com)"} {
						if !strings.Contains(err.Error(), want) {
							t.Errorf("%s, %s: Err() = %q, want it to say %q", profile, order, err, want)
						}
					}
					if c, cerr := NewClient(retry.Policy{}, opts...); c != nil || !errors.Is(cerr, ErrRegionalEndpoint) {
						t.Errorf("%s, %s: NewClient = %v, %v", profile, order, c, cerr)
					}
				}
			}
			// The others may fall back anywhere; so may a transport whose
			// last WithProfile is one of them.
			for _, opts := range [][]Option{
				{WithProfile("standard")}, {WithProfile("provisioned")}, {WithProfile("realtime")},
				{WithProfile("priority"), WithProfile("standard")}, {},
			} {
				if err := NewTransport(nil, retry.Policy{}, append(opts, WithEndpoints(tt.list, time.Minute))...).Err(); err != nil {
					t.Errorf("%d options: Err() = %v", len(opts), err)
				}
			}
		})
	}
}

// TestGlobalOnlyRequest is the per-request rule: without endpoints, a
// priority or flex request to a regional Vertex AI host is refused before
// anything is sent, its body closed once; the global endpoint, a proxy, a
// request whose caller removed the header, and other profiles go ahead.
func TestGlobalOnlyRequest(t *testing.T) {
	for _, tt := range []struct {
		name    string
		profile string
		url     string
		host    string              // the request's Host field
		header  map[string][]string // the caller's
		refused string              // the host the error names, "" when sent
		option  string              // the option the error names
	}{
		{"global", "priority", "https://aiplatform.googleapis.com/v1/x:generateContent", "", nil, "", ""},
		{"global, flex", "flex", "https://aiplatform.googleapis.com/v1/x:generateContent", "", nil, "", ""},
		{"a proxy", "priority", "http://127.0.0.1:9/v1/x:generateContent", "", nil, "", ""},
		{"regional", "priority", "https://us-central1-aiplatform.googleapis.com/v1/x:generateContent", "", nil, "us-central1-aiplatform.googleapis.com", "Priority"},
		{"regional, flex", "flex", "https://us-central1-aiplatform.googleapis.com/v1/x:generateContent", "", nil, "us-central1-aiplatform.googleapis.com", "Flex"},
		{"regional, port, case", "priority", "https://US-EAST4-aiplatform.googleapis.com:443/v1/x", "", nil, "US-EAST4-aiplatform.googleapis.com:443", "Priority"},
		{"multi-regional", "priority", "https://aiplatform.eu.rep.googleapis.com/v1/x", "", nil, "aiplatform.eu.rep.googleapis.com", "Priority"},
		{"multi-regional, flex", "flex", "https://aiplatform.us.rep.googleapis.com/v1/x", "", nil, "aiplatform.us.rep.googleapis.com", "Flex"},
		{"regional Host field", "priority", "http://127.0.0.1:9/v1/x", "europe-west4-aiplatform.googleapis.com", nil, "europe-west4-aiplatform.googleapis.com", "Priority"},
		{"the caller removed the header", "priority", "https://us-central1-aiplatform.googleapis.com/v1/x", "", map[string][]string{sharedType: nil}, "", ""},
		{"the caller asks for another value", "flex", "https://us-central1-aiplatform.googleapis.com/v1/x", "", map[string][]string{sharedType: {"standard"}}, "", ""},
		{"the caller asks for flex under priority", "priority", "https://us-central1-aiplatform.googleapis.com/v1/x", "", map[string][]string{sharedType: {"flex"}}, "us-central1-aiplatform.googleapis.com", "Flex"},
		{"the caller's own priority", "priority", "https://us-central1-aiplatform.googleapis.com/v1/x", "", map[string][]string{"x-vertex-ai-llm-shared-request-type": {" Priority "}}, "us-central1-aiplatform.googleapis.com", "Priority"},
		{"standard profile, the caller's priority", "standard", "https://us-central1-aiplatform.googleapis.com/v1/x", "", map[string][]string{sharedType: {"priority"}}, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var sent atomic.Int32
			base := rtFunc(func(r *http.Request) (*http.Response, error) {
				sent.Add(1)
				io.Copy(io.Discard, r.Body)
				r.Body.Close()
				return response(r, http.StatusOK, "ok"), nil
			})
			tr := NewTransport(base, fast, WithProfile(tt.profile))
			body := &closeCounter{Reader: strings.NewReader(`{"contents":[]}`)}
			req, _ := http.NewRequest(http.MethodPost, tt.url+"?key=SECRET", body)
			req.Host = tt.host
			for k, v := range tt.header {
				if k == sharedType {
					k = http.CanonicalHeaderKey(k)
				}
				req.Header[k] = v
			}
			resp, err := tr.RoundTrip(req)
			if tt.refused == "" {
				if err != nil || sent.Load() != 1 {
					t.Fatalf("RoundTrip = %v after %d sends, want it sent", err, sent.Load())
				}
				resp.Body.Close()
				return
			}
			if resp != nil || !errors.Is(err, ErrRegionalEndpoint) {
				t.Fatalf("RoundTrip = %v, %v; want ErrRegionalEndpoint", resp, err)
			}
			if n := sent.Load(); n != 0 {
				t.Errorf("%d requests sent, want none", n)
			}
			if n := body.closed.Load(); n != 1 {
				t.Errorf("the body was closed %d times, want 1", n)
			}
			msg := err.Error()
			for _, want := range []string{`WithProfile("` + tt.profile + `"): POST `, tt.refused + " is a ", "Vertex AI endpoint; " + tt.option + " PayGo", "key=REDACTED"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
			if strings.Contains(msg, "SECRET") {
				t.Errorf("the error leaks the key: %q", msg)
			}
		})
	}
}

// TestWithProfileConcurrent: one transport, many goroutines, each request
// with or without the caller's own header: every request gets its own
// headers and nothing is shared between them (run with -race).
func TestWithProfileConcurrent(t *testing.T) {
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		want := "flex"
		if r.URL.Query().Get("own") != "" {
			want = "caller-" + r.URL.Query().Get("own")
		}
		if got := r.Header.Values(sharedType); len(got) != 1 || got[0] != want || r.Header.Get(reqType) != "shared" {
			return response(r, http.StatusBadRequest, fmt.Sprintf("%s %q, want %q", sharedType, got, want)), nil
		}
		return response(r, http.StatusOK, "ok"), nil
	})
	tr := NewTransport(base, fast, WithProfile("flex"))
	const workers, each = 8, 50
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := range each {
				u := "https://aiplatform.googleapis.com/v1/x"
				req, _ := http.NewRequest(http.MethodGet, u, nil)
				if i%2 == 1 {
					own := fmt.Sprint(w, "-", i)
					req, _ = http.NewRequest(http.MethodGet, u+"?own="+own, nil)
					req.Header.Set(sharedType, "caller-"+own)
				}
				resp, err := tr.RoundTrip(req)
				if err != nil {
					errs <- err
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- errors.New(string(b))
					return
				}
				resp.Request.Header.Set(sharedType, "changed by the caller") // changes nothing for others
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
