package otelretry

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// counterKey is the context key of a request's attempt counter.
type counterKey struct{}

// ContextWithResendCounter returns a copy of ctx carrying a fresh counter of
// HTTP attempts. Every attempt made with a context derived from it counts
// towards http.request.resend_count.
//
// The transport of [NewTransport] adds a counter to each request that has
// none, so this is needed only to count the hops of redirects too (the
// semantic conventions count them as resends): http.Client follows
// redirects above its transport, with new requests carrying the first
// request's context. Do not share one such context between concurrent
// requests: their attempts would be counted together.
func ContextWithResendCounter(ctx context.Context) context.Context {
	return context.WithValue(ctx, counterKey{}, new(atomic.Int64))
}

// NewTransport returns an [http.RoundTripper] for a client that retries, with
// one OpenTelemetry client span per attempt.
//
// retrying builds the retrying layer around the per-attempt RoundTripper it
// is given; for httpretry that is
//
//	func(attempt http.RoundTripper) http.RoundTripper {
//		return httpretry.NewTransport(attempt, policy)
//	}
//
// The result gives each request a counter of its attempts in its context
// (unless [ContextWithResendCounter] put one there already) and calls the
// retrying layer, which must pass the request's context on to each attempt
// (every retrying RoundTripper does). Each attempt then reaches base through
// a RoundTripper that starts a client span named after the method, with
// http.request.method, server.address, server.port, url.full (credentials
// redacted) and, from the second attempt on, http.request.resend_count =
// the number of attempts before it (1 on the first retry). The span ends
// when the response headers arrive, with http.response.status_code and,
// for a status of 400 or more or a transport error, error.type (the status
// code, or [ErrorType] of the error) and an Error status. The span context is injected into the attempt's request
// headers with the propagators (see [WithPropagators]).
//
// A nil base means http.DefaultTransport; a nil retrying means no retrying
// layer (every request then has a single attempt).
func NewTransport(base http.RoundTripper, retrying func(attempt http.RoundTripper) http.RoundTripper, opts ...Option) http.RoundTripper {
	c := newConfig(opts)
	if base == nil {
		base = http.DefaultTransport
	}
	tp := c.tp
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	prop := c.propagators
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	var next http.RoundTripper = &attemptTransport{
		base:   base,
		tracer: tp.Tracer(ScopeName),
		prop:   prop,
	}
	if retrying != nil {
		next = retrying(next)
	}
	return &countingTransport{next: next}
}

// countingTransport puts an attempt counter in the context of each request
// that has none.
type countingTransport struct{ next http.RoundTripper }

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, ok := req.Context().Value(counterKey{}).(*atomic.Int64); !ok {
		req = req.WithContext(ContextWithResendCounter(req.Context()))
	}
	return t.next.RoundTrip(req)
}

// attemptTransport runs one attempt in a client span.
type attemptTransport struct {
	base   http.RoundTripper
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

func (t *attemptTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	resend := 0
	if n, ok := ctx.Value(counterKey{}).(*atomic.Int64); ok {
		resend = int(n.Add(1)) - 1
	}

	method, known := normalizeMethod(req.Method)
	name := method
	if !known {
		name = "HTTP"
	}
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs, semconv.HTTPRequestMethodKey.String(method))
	if !known {
		attrs = append(attrs, semconv.HTTPRequestMethodOriginal(req.Method))
	}
	if req.URL != nil {
		host, port := hostPort(req)
		attrs = append(attrs, semconv.ServerAddress(host))
		if port > 0 {
			attrs = append(attrs, semconv.ServerPort(port))
		}
		attrs = append(attrs, semconv.URLFull(redactURL(req.URL)))
	}
	if resend > 0 {
		attrs = append(attrs, semconv.HTTPRequestResendCount(resend))
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	defer span.End()

	r := req.WithContext(ctx)
	r.Header = req.Header.Clone()
	if r.Header == nil {
		r.Header = make(http.Header)
	}
	t.prop.Inject(ctx, propagation.HeaderCarrier(r.Header))

	resp, err := t.base.RoundTrip(r)
	if err != nil {
		span.SetAttributes(semconv.ErrorTypeKey.String(ErrorType(err)))
		span.SetStatus(codes.Error, redactText(err.Error()))
		return resp, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
		span.SetStatus(codes.Error, "")
	}
	return resp, nil
}

// normalizeMethod returns the method as the semantic conventions want it:
// a known method as is, anything else as "_OTHER" (known false).
func normalizeMethod(m string) (string, bool) {
	switch m {
	case "":
		return http.MethodGet, true
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m, true
	}
	return "_OTHER", false
}

// hostPort returns the host the request is sent to and its port (the
// scheme's default when the URL names none; 0 if unknown).
func hostPort(req *http.Request) (string, int) {
	h := req.URL.Host
	if h == "" {
		h = req.Host
	}
	host, ps, err := net.SplitHostPort(h)
	if err != nil {
		host, ps = strings.Trim(h, "[]"), ""
	}
	if p, err := strconv.Atoi(ps); err == nil && p > 0 {
		return host, p
	}
	switch req.URL.Scheme {
	case "http":
		return host, 80
	case "https":
		return host, 443
	}
	return host, 0
}
