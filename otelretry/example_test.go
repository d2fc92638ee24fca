package otelretry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"github.com/backoffkit/retry/otelretry"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/semconv/v1.43.0"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func ExampleNewObserver() {
	reader := sdkmetric.NewManualReader() // in production: a periodic OTLP or Prometheus reader
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	obs, err := otelretry.NewObserver(mp)
	if err != nil {
		panic(err)
	}
	p := retry.Policy{
		Attempts:     3,
		InitialDelay: time.Millisecond,
		Jitter:       retry.Zero,
		Observer:     retry.Observers(obs, retry.SlogObserver(nil, slog.LevelDebug)), // metrics and logs
	}
	calls := 0
	_ = retry.Run(context.Background(), p, func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("503 Service Unavailable")
		}
		return nil
	})

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			fmt.Println(m.Name, d.DataPoints[0].Value)
		case metricdata.Histogram[float64]:
			fmt.Println(m.Name, "count", d.DataPoints[0].Count)
		}
	}
	// Unordered output:
	// retry.attempts 3
	// retry.wait count 2
}

func ExampleNewTransport() {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits++; hits == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	spans := tracetest.NewInMemoryExporter() // in production: an OTLP exporter
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	policy := retry.Policy{InitialDelay: time.Millisecond, Jitter: retry.Zero}
	client := &http.Client{Transport: otelretry.NewTransport(http.DefaultTransport,
		func(attempt http.RoundTripper) http.RoundTripper { return httpretry.NewTransport(attempt, policy) },
		otelretry.WithTracerProvider(tp))}

	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	for _, s := range spans.GetSpans() {
		resend := "-"
		for _, a := range s.Attributes {
			if a.Key == semconv.HTTPRequestResendCountKey {
				resend = a.Value.Emit()
			}
		}
		fmt.Println(s.Name, "resend_count:", resend)
	}
	// Output:
	// GET resend_count: -
	// GET resend_count: 1
}

func ExampleErrorType() {
	attempt := &httpretry.AttemptError{Method: "POST", URL: "https://example.test/v1", Status: 429, Class: httpretry.ClassStatus}
	fmt.Println(otelretry.ErrorType(retry.After(attempt, 3*time.Second))) // the status, not the hint's wrapper
	fmt.Println(otelretry.ErrorType(status.Error(codes.ResourceExhausted, "quota")))
	fmt.Println(otelretry.ErrorType(&httpretry.AttemptError{Method: "GET", Class: httpretry.ClassReset}))
	fmt.Println(otelretry.ErrorType(fmt.Errorf("fetching: %w", context.DeadlineExceeded)))
	fmt.Println(otelretry.ErrorType(retry.Permanent(io.ErrUnexpectedEOF)))
	// Output:
	// 429
	// RESOURCE_EXHAUSTED
	// reset
	// timeout
	// *errors.errorString
}

// The fleet limiters of the redisretry module report their events to an
// Observer; FleetMetrics records them. (This package does not import
// redisretry: the adapter is one line, shown in the comment.)
func ExampleNewFleetMetrics() {
	reader := sdkmetric.NewManualReader()
	fleet, err := otelretry.NewFleetMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		panic(err)
	}
	// observe := func(e redisretry.Event) {
	// 	fleet.Observe(otelretry.FleetEvent{Kind: e.Kind.String(), Limiter: e.Limiter, Key: e.Key, Wait: e.Wait, Units: e.Units})
	// }
	// quota, _ := redisretry.NewQuota(client, redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "gemini", Observer: observe}, Limit: limit})
	fleet.Observe(otelretry.FleetEvent{Kind: otelretry.FleetRefill, Limiter: "quota", Key: "gemini", Units: 20})
	fleet.Observe(otelretry.FleetEvent{Kind: otelretry.FleetQuotaWait, Limiter: "quota", Key: "gemini", Wait: 100 * time.Millisecond})
	fleet.Observe(otelretry.FleetEvent{Kind: otelretry.FleetFallback, Limiter: "quota", Key: "gemini"})

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			fmt.Println(m.Name, d.DataPoints[0].Value)
		case metricdata.Gauge[int64]:
			fmt.Println(m.Name, d.DataPoints[0].Value)
		case metricdata.Histogram[float64]:
			fmt.Println(m.Name, "count", d.DataPoints[0].Count)
		}
	}
	// Unordered output:
	// retry.fleet.refills 1
	// retry.fleet.refill.units 20
	// retry.fleet.wait count 1
	// retry.fleet.fallbacks 1
	// retry.fleet.fallback 1
}
