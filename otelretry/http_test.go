package otelretry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"github.com/backoffkit/retry/internal/testkit"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// fastPolicy retries at once-ish: loopback tests must not wait long.
func fastPolicy() retry.Policy {
	return retry.Policy{Attempts: 4, InitialDelay: time.Millisecond, MaxDelay: time.Millisecond, Jitter: retry.Zero}
}

// clientSpans returns the exported client spans, in end order.
func clientSpans(tm *telemetry) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range tm.spans.GetSpans() {
		if s.SpanKind == trace.SpanKindClient {
			out = append(out, s)
		}
	}
	return out
}

func TestTransportResendCountWithHTTPRetry(t *testing.T) {
	srv := testkit.NewScript(t, testkit.Status(http.StatusServiceUnavailable, ""), testkit.Status(http.StatusServiceUnavailable, ""), testkit.Status(http.StatusOK, "ok"))

	tm := newTelemetry()
	p := fastPolicy()
	p.Observer = mustObserver(t, tm)
	client := &http.Client{Transport: NewTransport(http.DefaultTransport,
		func(attempt http.RoundTripper) http.RoundTripper { return httpretry.NewTransport(attempt, p) },
		WithTracerProvider(tm.tp), WithPropagators(propagation.TraceContext{}))}

	ctx, parent := tm.tp.Tracer("test").Start(context.Background(), "call")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/items?key=SECRET&page=2", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	parent.End()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if req.Header.Get("Traceparent") != "" {
		t.Error("the caller's request was modified")
	}

	spans := clientSpans(tm)
	if len(spans) != 3 {
		t.Fatalf("got %d client spans, want 3", len(spans))
	}
	wantStatus := []int64{503, 503, 200}
	u, _ := url.Parse(srv.URL)
	for i, s := range spans {
		a := attrs(s.Attributes)
		rc, has := a[semconv.HTTPRequestResendCountKey]
		switch {
		case i == 0 && has:
			t.Errorf("first attempt has http.request.resend_count %v; the conventions set it only on resends", rc.Emit())
		case i > 0 && (!has || rc.AsInt64() != int64(i)):
			t.Errorf("attempt %d: http.request.resend_count = %v (set %v), want %d", i+1, rc.Emit(), has, i)
		}
		if got := a[semconv.HTTPResponseStatusCodeKey].AsInt64(); got != wantStatus[i] {
			t.Errorf("attempt %d: status %d, want %d", i+1, got, wantStatus[i])
		}
		if s.Name != "GET" || a[semconv.HTTPRequestMethodKey].AsString() != "GET" {
			t.Errorf("attempt %d: name %q method %q", i+1, s.Name, a[semconv.HTTPRequestMethodKey].AsString())
		}
		if got := a[semconv.ServerAddressKey].AsString(); got != u.Hostname() {
			t.Errorf("attempt %d: server.address %q", i+1, got)
		}
		if got := a[semconv.ServerPortKey].AsInt64(); got == 0 || !strings.HasSuffix(srv.URL, ":"+a[semconv.ServerPortKey].Emit()) {
			t.Errorf("attempt %d: server.port %d", i+1, got)
		}
		full := a[semconv.URLFullKey].AsString()
		if strings.Contains(full, "SECRET") || !strings.Contains(full, "key=REDACTED") || !strings.Contains(full, "page=2") {
			t.Errorf("attempt %d: url.full %q, want the key redacted", i+1, full)
		}
		if wantStatus[i] >= 400 {
			if s.Status.Code != codes.Error || a[semconv.ErrorTypeKey].AsString() != "503" {
				t.Errorf("attempt %d: status %v error.type %q, want Error and 503", i+1, s.Status, a[semconv.ErrorTypeKey].AsString())
			}
		} else if s.Status.Code == codes.Error {
			t.Errorf("attempt %d: Error status on success", i+1)
		}
		if s.Parent.SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("attempt %d: parent %v, want the call's span", i+1, s.Parent.SpanID())
		}
		// The attempt's own span context went out in its request.
		if parent := srv.Requests()[i].Header.Get("Traceparent"); !strings.Contains(parent, s.SpanContext.SpanID().String()) {
			t.Errorf("attempt %d: traceparent %q does not name span %v", i+1, parent, s.SpanContext.SpanID())
		}
	}

	// The observer put the retries on the call's span.
	for _, s := range tm.spans.GetSpans() {
		if s.Name != "call" {
			continue
		}
		var n int
		for _, e := range s.Events {
			if e.Name == "retry" {
				n++
				if got := attrs(e.Attributes)[semconv.ErrorTypeKey].AsString(); got != "503" {
					t.Errorf("retry event error.type = %q, want the status code 503", got)
				}
			}
		}
		if n != 2 {
			t.Errorf("call span has %d retry events, want 2", n)
		}
	}
	if got := sums(t, tm.metrics(t)[MetricAttempts], AttrOutcome); got["success"] != 3 {
		t.Errorf("attempts = %v, want success:3", got)
	}
}

func TestTransportCountsRequestsSeparately(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	tm := newTelemetry()
	client := &http.Client{Transport: NewTransport(nil, nil, WithTracerProvider(tm.tp))}
	for range 3 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for i, s := range clientSpans(tm) {
		if _, has := attrs(s.Attributes)[semconv.HTTPRequestResendCountKey]; has {
			t.Errorf("request %d: resend count set on a first attempt", i+1)
		}
	}
}

func TestTransportRedirectsWithResendCounter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/a" {
			http.Redirect(w, r, "/b", http.StatusFound)
		}
	}))
	defer srv.Close()

	for _, counted := range []bool{false, true} {
		tm := newTelemetry()
		client := &http.Client{Transport: NewTransport(nil, nil, WithTracerProvider(tm.tp))}
		ctx := context.Background()
		if counted {
			ctx = ContextWithResendCounter(ctx)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/a", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		spans := clientSpans(tm)
		if len(spans) != 2 {
			t.Fatalf("got %d spans, want 2", len(spans))
		}
		rc, has := attrs(spans[1].Attributes)[semconv.HTTPRequestResendCountKey]
		if counted && (!has || rc.AsInt64() != 1) {
			t.Errorf("with a counter: redirect hop resend_count = %v (set %v), want 1", rc.Emit(), has)
		}
		if !counted && has {
			t.Errorf("without a counter: redirect hop has resend_count %v", rc.Emit())
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestTransportErrorSpan(t *testing.T) {
	tm := newTelemetry()
	errDial := errors.New("dial tcp: connection refused")
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return nil, &url.Error{Op: "Post", URL: r.URL.String(), Err: errDial}
	})
	client := &http.Client{Transport: NewTransport(base, nil, WithTracerProvider(tm.tp))}
	_, err := client.Post("http://user:pw@example.test/x?access_token=SECRET", "text/plain", strings.NewReader("hi"))
	if !errors.Is(err, errDial) {
		t.Fatalf("err = %v", err)
	}
	spans := clientSpans(tm)
	if len(spans) != 1 {
		t.Fatalf("got %d spans", len(spans))
	}
	s := spans[0]
	a := attrs(s.Attributes)
	if s.Status.Code != codes.Error || strings.Contains(s.Status.Description, "SECRET") || strings.Contains(s.Status.Description, "pw") {
		t.Errorf("status %+v: want Error, redacted", s.Status)
	}
	if got := a[semconv.ErrorTypeKey].AsString(); got != "*errors.errorString" {
		t.Errorf("error.type = %q, want *errors.errorString (the failure, not *url.Error)", got)
	}
	if got := a[semconv.URLFullKey].AsString(); strings.Contains(got, "SECRET") || strings.Contains(got, "pw") {
		t.Errorf("url.full %q leaks", got)
	}
	if got := a[semconv.ServerPortKey].AsInt64(); got != 80 {
		t.Errorf("server.port = %d, want the default 80", got)
	}
}

func TestNormalizeMethod(t *testing.T) {
	tests := []struct {
		in, want string
		known    bool
	}{
		{"GET", "GET", true}, {"", "GET", true}, {"POST", "POST", true}, {"PATCH", "PATCH", true},
		{"get", "_OTHER", false}, {"PROPFIND", "_OTHER", false},
	}
	for _, tt := range tests {
		got, known := normalizeMethod(tt.in)
		if got != tt.want || known != tt.known {
			t.Errorf("normalizeMethod(%q) = %q, %v; want %q, %v", tt.in, got, known, tt.want, tt.known)
		}
	}
}

func TestHostPort(t *testing.T) {
	tests := []struct {
		url, host string
		port      int
	}{
		{"http://example.com/x", "example.com", 80},
		{"https://example.com/x", "example.com", 443},
		{"https://example.com:8443/x", "example.com", 8443},
		{"http://127.0.0.1:9/x", "127.0.0.1", 9},
		{"http://[::1]:9/x", "::1", 9},
		{"https://[::1]/x", "::1", 443},
		{"ftp://example.com/x", "example.com", 0},
	}
	for _, tt := range tests {
		req, err := http.NewRequest("GET", tt.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		host, port := hostPort(req)
		if host != tt.host || port != tt.port {
			t.Errorf("hostPort(%s) = %q, %d; want %q, %d", tt.url, host, port, tt.host, tt.port)
		}
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://h/p?key=S&alt=sse", "https://h/p?key=REDACTED&alt=sse"},
		{"https://u:p@h/p", "https://REDACTED:REDACTED@h/p"},
		{"https://h/p?Token=S", "https://h/p?Token=REDACTED"},
		{"https://h/p?q=1", "https://h/p?q=1"},
	}
	for _, tt := range tests {
		u, _ := url.Parse(tt.in)
		if got := redactURL(u); got != tt.want {
			t.Errorf("redactURL(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
	if redactURL(nil) != "" {
		t.Error("redactURL(nil) not empty")
	}
}

func BenchmarkTransportAttempt(b *testing.B) {
	tm := newTelemetry()
	resp := &http.Response{StatusCode: 200, Body: http.NoBody}
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
	rt := NewTransport(base, nil, WithTracerProvider(tm.tp), WithPropagators(propagation.TraceContext{}))
	req, _ := http.NewRequest(http.MethodGet, "https://example.com/v1/items?key=SECRET", nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rt.RoundTrip(req); err != nil {
			b.Fatal(err)
		}
		tm.spans.Reset()
	}
}
