package otelretry

import (
	"context"
	"fmt"

	"github.com/backoffkit/retry"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the meters and tracers this
// package creates.
const ScopeName = "github.com/backoffkit/retry/otelretry"

// Metric and attribute names recorded by the observer of [NewObserver].
const (
	// MetricAttempts counts attempts ({attempt}), added when a call ends,
	// with the attribute retry.outcome.
	MetricAttempts = "retry.attempts"
	// MetricWait is a histogram of the waits before retries, in seconds,
	// with the attribute retry.hinted.
	MetricWait = "retry.wait"
	// MetricGiveUps counts the calls that gave up ({give_up}), with the
	// attribute retry.reason.
	MetricGiveUps = "retry.give_ups"

	// AttrOutcome is "success" or "give_up".
	AttrOutcome = attribute.Key("retry.outcome")
	// AttrReason is the [retry.Reason] of a give-up ("attempts",
	// "deadline", "context", "permanent", "budget", "throttled").
	AttrReason = attribute.Key("retry.reason")
	// AttrHinted tells whether the server sent a hint (Retry-After,
	// RetryInfo) for the wait.
	AttrHinted = attribute.Key("retry.hinted")
	// AttrAttempt is the number of the attempt that just ended (from 1).
	AttrAttempt = attribute.Key("retry.attempt")
	// AttrMaxAttempts is the policy's resolved Attempts.
	AttrMaxAttempts = attribute.Key("retry.max_attempts")
	// AttrWait is the wait before the next attempt, in seconds.
	AttrWait = attribute.Key("retry.wait")
	// AttrHint is the server's hint for the wait, in seconds (only when
	// there is one).
	AttrHint = attribute.Key("retry.hint")
	// AttrError is the attempt's error message, redacted.
	AttrError = attribute.Key("retry.error")
)

// waitBuckets are the histogram boundaries of retry.wait, in seconds: from
// the millisecond waits of tests to the minutes of a server's hint.
var waitBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 300}

// Option configures [NewObserver] and [NewTransport]. Options that do not
// apply to one of them are ignored by it.
type Option func(*config)

type config struct {
	attrs       []attribute.KeyValue
	spanEvents  bool
	errorText   func(error) string
	tp          trace.TracerProvider
	propagators propagation.TextMapPropagator
}

func newConfig(opts []Option) config {
	c := config{spanEvents: true, errorText: DefaultErrorText}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// WithAttributes adds attributes to every measurement and span event the
// observer records (for example the name of the operation or service being
// retried). Keep their cardinality low. NewTransport ignores it.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return func(c *config) { c.attrs = append(c.attrs, attrs...) }
}

// WithSpanEvents turns the observer's span events on (the default) or off.
func WithSpanEvents(on bool) Option {
	return func(c *config) { c.spanEvents = on }
}

// WithErrorText sets how an error becomes the retry.error attribute of a
// span event. Returning "" leaves the attribute out. The default is
// [DefaultErrorText]. Whatever it returns is recorded as is: it must not
// return secrets.
func WithErrorText(f func(error) string) Option {
	return func(c *config) {
		if f == nil {
			f = func(error) string { return "" }
		}
		c.errorText = f
	}
}

// WithTracerProvider sets the TracerProvider of the spans NewTransport
// starts. The default is otel.GetTracerProvider() at the time of the call.
// NewObserver ignores it: it adds events to the span already in the context.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithPropagators sets the propagators NewTransport uses to inject the
// attempt's span context into the request headers. The default is
// otel.GetTextMapPropagator() at the time of the call.
func WithPropagators(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.propagators = p }
}

// DefaultErrorText returns err's message with credentials removed from the
// URLs it quotes (user info, and the values of query parameters such as key,
// access_token and token), or "" for a nil error.
func DefaultErrorText(err error) string {
	if err == nil {
		return ""
	}
	return redactText(err.Error())
}

// NewObserver returns a [retry.Observer] that records the loop's events as
// metrics on a meter of mp, and as span events on the span in the call's
// context. A nil mp means otel.GetMeterProvider().
//
// Metrics:
//
//   - retry.attempts (counter, {attempt}): the attempts made, added once per
//     call when it ends: Event.Attempt of its EventSuccess or EventGiveUp,
//     with retry.outcome "success" or "give_up". Counting at the end is exact:
//     counting one per EventRetry plus one per final event would count twice
//     the attempt before a wait that the context cancelled, since the loop
//     then reports that attempt both as retried and as given up.
//   - retry.wait (histogram, s): each wait before a retry (Event.Wait, server
//     hint included), with retry.hinted. Its count is the number of retries.
//   - retry.give_ups (counter, {give_up}): calls that gave up, with
//     retry.reason.
//
// The loop sends EventSuccess only to an observer set on the Policy, as this
// one is (alone or within [retry.Observers]). A call whose first attempt a
// throttle refuses makes no attempt: it adds nothing to retry.attempts, one
// give-up (retry.reason "throttled") to retry.give_ups, and a
// "retry.give_up" span event.
//
// Span events, on trace.SpanFromContext(ctx), which is the span of the whole
// call, not an attempt's: "retry" per retry (retry.attempt,
// retry.max_attempts, retry.wait and retry.hint in seconds, error.type as
// [ErrorType] names it, retry.error) and "retry.give_up" when the call gives
// up (the same with retry.reason instead of the waits). Nothing is added to a span that is
// not recording.
//
// The observer is safe for concurrent use by many calls.
func NewObserver(mp metric.MeterProvider, opts ...Option) (retry.Observer, error) {
	c := newConfig(opts)
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	attempts, err := m.Int64Counter(MetricAttempts,
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts made by retried calls, counted when each call ends."))
	if err != nil {
		return nil, fmt.Errorf("otelretry: creating %s counter: %w", MetricAttempts, err)
	}
	wait, err := m.Float64Histogram(MetricWait,
		metric.WithUnit("s"),
		metric.WithDescription("Wait before each retry, server hints included."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	if err != nil {
		return nil, fmt.Errorf("otelretry: creating %s histogram: %w", MetricWait, err)
	}
	giveUps, err := m.Int64Counter(MetricGiveUps,
		metric.WithUnit("{give_up}"),
		metric.WithDescription("Retried calls that gave up, by reason."))
	if err != nil {
		return nil, fmt.Errorf("otelretry: creating %s counter: %w", MetricGiveUps, err)
	}

	o := &observer{cfg: c, attempts: attempts, wait: wait, giveUps: giveUps}
	set := func(extra ...attribute.KeyValue) metric.MeasurementOption {
		kv := append(append([]attribute.KeyValue(nil), c.attrs...), extra...)
		return metric.WithAttributeSet(attribute.NewSet(kv...))
	}
	add := func(kv attribute.KeyValue) []metric.AddOption { return []metric.AddOption{set(kv)} }
	rec := func(kv attribute.KeyValue) []metric.RecordOption { return []metric.RecordOption{set(kv)} }
	o.success = add(AttrOutcome.String("success"))
	o.failure = add(AttrOutcome.String("give_up"))
	o.hinted = rec(AttrHinted.Bool(true))
	o.unhinted = rec(AttrHinted.Bool(false))
	for r := range o.reasons {
		o.reasons[r] = add(AttrReason.String(retry.Reason(r).String()))
	}
	return o.observe, nil
}

// numReasons bounds the precomputed give-up attribute sets; a Reason beyond
// it (added to the core later) gets its set built on the fly.
const numReasons = 8

type observer struct {
	cfg               config
	attempts, giveUps metric.Int64Counter
	wait              metric.Float64Histogram
	// Option slices built once, so that recording allocates no variadic
	// slice.
	success, failure []metric.AddOption
	hinted, unhinted []metric.RecordOption
	reasons          [numReasons][]metric.AddOption
}

func (o *observer) reason(r retry.Reason) []metric.AddOption {
	if int(r) < len(o.reasons) {
		return o.reasons[r]
	}
	kv := append(append([]attribute.KeyValue(nil), o.cfg.attrs...), AttrReason.String(r.String()))
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
}

func (o *observer) observe(ctx context.Context, e retry.Event) {
	switch e.Kind {
	case retry.EventSuccess:
		o.attempts.Add(ctx, int64(e.Attempt), o.success...)
	case retry.EventRetry:
		opt := o.unhinted
		if e.Hint > 0 {
			opt = o.hinted
		}
		o.wait.Record(ctx, e.Wait.Seconds(), opt...)
		o.spanEvent(ctx, e)
	case retry.EventGiveUp:
		if e.Attempt > 0 {
			o.attempts.Add(ctx, int64(e.Attempt), o.failure...)
		}
		o.giveUps.Add(ctx, 1, o.reason(e.Reason)...)
		o.spanEvent(ctx, e)
	}
}

func (o *observer) spanEvent(ctx context.Context, e retry.Event) {
	if !o.cfg.spanEvents {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, len(o.cfg.attrs)+6)
	attrs = append(attrs, o.cfg.attrs...)
	attrs = append(attrs, AttrAttempt.Int(e.Attempt), AttrMaxAttempts.Int(e.MaxAttempts))
	name := "retry"
	if e.Kind == retry.EventRetry {
		attrs = append(attrs, AttrWait.Float64(e.Wait.Seconds()))
		if e.Hint > 0 {
			attrs = append(attrs, AttrHint.Float64(e.Hint.Seconds()))
		}
	} else {
		name = "retry.give_up"
		attrs = append(attrs, AttrReason.String(e.Reason.String()))
	}
	if e.Err != nil {
		attrs = append(attrs, semconv.ErrorTypeKey.String(ErrorType(e.Err)))
		if msg := o.cfg.errorText(e.Err); msg != "" {
			attrs = append(attrs, AttrError.String(msg))
		}
	}
	span.AddEvent(name, trace.WithAttributes(attrs...))
}
