package otelretry

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// fleetPoints returns an int64 metric's values (sum or gauge) keyed by
// "limiter key".
func fleetPoints(t *testing.T, m metricdata.Metrics) map[string]int64 {
	t.Helper()
	var dps []metricdata.DataPoint[int64]
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		if !d.IsMonotonic {
			t.Errorf("%s: not monotonic", m.Name)
		}
		dps = d.DataPoints
	case metricdata.Gauge[int64]:
		dps = d.DataPoints
	default:
		t.Fatalf("%s: data is %T", m.Name, m.Data)
	}
	out := map[string]int64{}
	for _, dp := range dps {
		l, _ := dp.Attributes.Value(AttrFleetLimiter)
		k, _ := dp.Attributes.Value(AttrFleetKey)
		out[l.Emit()+" "+k.Emit()] += dp.Value
	}
	return out
}

func TestFleetMetrics(t *testing.T) {
	tm := newTelemetry()
	f, err := NewFleetMetrics(tm.mp, WithAttributes(attribute.String("service", "batch")))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []FleetEvent{
		{Kind: FleetRefill, Limiter: "quota", Key: "gemini", Units: 4},
		{Kind: FleetRefill, Limiter: "quota", Key: "gemini", Units: 8},
		{Kind: FleetRefill, Limiter: "budget", Key: "gemini", Units: 2},
		{Kind: FleetQuotaWait, Limiter: "quota", Key: "gemini", Wait: 250 * time.Millisecond},
		{Kind: FleetQuotaWait, Limiter: "quota", Key: "gemini", Wait: 750 * time.Millisecond},
		{Kind: FleetHint, Limiter: "cooldown", Key: "gemini", Wait: 25 * time.Second},
		{Kind: FleetCooldownWait, Limiter: "cooldown", Key: "gemini", Wait: 24 * time.Second},
		{Kind: FleetFallback, Limiter: "quota", Key: "gemini"},
		{Kind: FleetFallback, Limiter: "budget", Key: "gemini"},
		{Kind: FleetRecovered, Limiter: "budget", Key: "gemini"},
		{Kind: FleetFallback, Limiter: "budget", Key: "other"},
		{Kind: "something-new", Limiter: "cooldown", Key: "other"},
	} {
		f.Observe(e)
	}
	ms := tm.metrics(t)
	for name, want := range map[string]map[string]int64{
		MetricFleetFallback:    {"quota gemini": 1, "budget gemini": 0, "cooldown gemini": 0, "budget other": 1, "cooldown other": 0},
		MetricFleetFallbacks:   {"quota gemini": 1, "budget gemini": 1, "budget other": 1},
		MetricFleetRefills:     {"quota gemini": 2, "budget gemini": 1},
		MetricFleetRefillUnits: {"quota gemini": 12, "budget gemini": 2},
		MetricFleetHints:       {"cooldown gemini": 1},
	} {
		got := fleetPoints(t, ms[name])
		if len(got) != len(want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s[%s] = %d, want %d (all: %v)", name, k, got[k], v, got)
			}
		}
	}
	h, ok := ms[MetricFleetWait].Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s: %T", MetricFleetWait, ms[MetricFleetWait].Data)
	}
	waits := map[string][2]float64{}
	for _, dp := range h.DataPoints {
		l, _ := dp.Attributes.Value(AttrFleetLimiter)
		if s, _ := dp.Attributes.Value("service"); s.AsString() != "batch" {
			t.Errorf("a wait without the WithAttributes attribute: %v", dp.Attributes)
		}
		waits[l.Emit()] = [2]float64{float64(dp.Count), dp.Sum}
	}
	if waits["quota"] != [2]float64{2, 1} || waits["cooldown"] != [2]float64{1, 24} || len(waits) != 2 {
		t.Errorf("waits (count, sum s) by limiter: %v", waits)
	}
	if u := ms[MetricFleetWait].Unit; u != "s" {
		t.Errorf("wait unit %q", u)
	}

	// The learnt rate: the last one reported, per limiter; none before.
	if _, ok := ms[MetricFleetRate]; ok {
		t.Errorf("%s recorded before any rate event", MetricFleetRate)
	}
	f.Observe(FleetEvent{Kind: FleetRate, Limiter: "rate", Key: "gemini", Rate: 100})
	f.Observe(FleetEvent{Kind: FleetRate, Limiter: "rate", Key: "gemini", Rate: 80})
	g, ok := tm.metrics(t)[MetricFleetRate].Data.(metricdata.Gauge[float64])
	if !ok || len(g.DataPoints) != 1 || g.DataPoints[0].Value != 80 {
		t.Errorf("%s = %+v, want one point of 80", MetricFleetRate, g)
	} else if l, _ := g.DataPoints[0].Attributes.Value(AttrFleetLimiter); l.AsString() != "rate" {
		t.Errorf("%s: limiter %q, want rate", MetricFleetRate, l.AsString())
	}

	// Back to Redis: the gauge follows.
	f.Observe(FleetEvent{Kind: FleetRecovered, Limiter: "quota", Key: "gemini"})
	if got := fleetPoints(t, tm.metrics(t)[MetricFleetFallback]); got["quota gemini"] != 0 || got["budget other"] != 1 {
		t.Errorf("after recovery: %v", got)
	}
}

func TestFleetMetricsConcurrent(t *testing.T) {
	tm := newTelemetry()
	f, err := NewFleetMetrics(tm.mp)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 500 {
				f.Observe(FleetEvent{Kind: FleetRefill, Limiter: "quota", Key: "k", Units: 2})
				f.Observe(FleetEvent{Kind: FleetFallback, Limiter: "budget", Key: string(rune('a' + i%2))})
				f.Observe(FleetEvent{Kind: FleetRecovered, Limiter: "budget", Key: string(rune('a' + i%2))})
			}
		})
		wg.Go(func() { tm.metrics(t) })
	}
	wg.Wait()
	ms := tm.metrics(t)
	if got := fleetPoints(t, ms[MetricFleetRefillUnits]); got["quota k"] != 8*500*2 {
		t.Errorf("units = %v", got)
	}
	if got := fleetPoints(t, ms[MetricFleetFallback]); got["budget a"] != 0 || got["budget b"] != 0 {
		t.Errorf("every fallback was followed by a recovery: %v", got)
	}
}

func TestNewFleetMetricsInstrumentError(t *testing.T) {
	for _, name := range []string{MetricFleetFallback, MetricFleetFallbacks, MetricFleetRefills, MetricFleetRefillUnits, MetricFleetWait, MetricFleetHints, MetricFleetRate} {
		f, err := NewFleetMetrics(failingProvider{name: name})
		if f != nil || !errors.Is(err, errNoInstrument) || !strings.Contains(err.Error(), name) {
			t.Errorf("failing %s: NewFleetMetrics = %v, %v; want an error naming it", name, f != nil, err)
		}
	}
	f, err := NewFleetMetrics(noop.NewMeterProvider())
	if err != nil {
		t.Fatal(err)
	}
	f.Observe(FleetEvent{Kind: FleetQuotaWait, Limiter: "quota", Key: "k", Wait: -time.Second}) // no panic on a noop meter or a negative wait
}

func BenchmarkFleetMetricsObserve(b *testing.B) {
	tm := newTelemetry()
	f, err := NewFleetMetrics(tm.mp)
	if err != nil {
		b.Fatal(err)
	}
	events := []FleetEvent{
		{Kind: FleetRefill, Limiter: "quota", Key: "gemini", Units: 20},
		{Kind: FleetQuotaWait, Limiter: "quota", Key: "gemini", Wait: 100 * time.Millisecond},
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, e := range events {
			f.Observe(e)
		}
	}
}
