package otelretry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// telemetry is an SDK meter and tracer provider whose data the test reads
// back synchronously.
type telemetry struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
}

func newTelemetry() *telemetry {
	r := sdkmetric.NewManualReader()
	exp := tracetest.NewInMemoryExporter()
	return &telemetry{
		reader: r,
		mp:     sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)),
		spans:  exp,
		tp:     sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)),
	}
}

// metrics collects every metric, by name.
func (tm *telemetry) metrics(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tm.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != ScopeName {
			t.Errorf("scope = %q, want %q", sm.Scope.Name, ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// sums returns an int64 sum's values keyed by the value of attribute key.
func sums(t *testing.T, m metricdata.Metrics, key attribute.Key) map[string]int64 {
	t.Helper()
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s: data is %T, want Sum[int64]", m.Name, m.Data)
	}
	if !s.IsMonotonic {
		t.Errorf("%s: not monotonic", m.Name)
	}
	out := map[string]int64{}
	for _, dp := range s.DataPoints {
		v, _ := dp.Attributes.Value(key)
		out[v.Emit()] += dp.Value
	}
	return out
}

// attrs turns a list of attributes into a map for lookups.
func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}
