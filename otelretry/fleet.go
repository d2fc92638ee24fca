package otelretry

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metric and attribute names recorded by [FleetMetrics].
const (
	// MetricFleetFallback is a gauge ({limiter}): 1 while a fleet limiter
	// decides without Redis (its fallback is active), 0 while Redis
	// answers, with retry.fleet.limiter and retry.fleet.key.
	MetricFleetFallback = "retry.fleet.fallback"
	// MetricFleetFallbacks counts the changes to the fallback
	// ({fallback}): a limiter that flaps counts one per loss of Redis.
	MetricFleetFallbacks = "retry.fleet.fallbacks"
	// MetricFleetRefills counts the lease refills ({refill}): Redis round
	// trips that granted a quota block or budget permits.
	MetricFleetRefills = "retry.fleet.refills"
	// MetricFleetRefillUnits counts what the refills granted ({unit}):
	// quota units, budget permits.
	MetricFleetRefillUnits = "retry.fleet.refill.units"
	// MetricFleetWait is a histogram of the waits the fleet imposed on
	// attempts, in seconds, with retry.fleet.limiter "quota" (a quota wait)
	// or "cooldown" (a cooldown wait). Its count is the number of waits.
	MetricFleetWait = "retry.fleet.wait"
	// MetricFleetHints counts the server hints published to the fleet as
	// cooldowns ({hint}).
	MetricFleetHints = "retry.fleet.hints"
	// MetricFleetRate is a gauge of the rate a fleet learnt from its 429s
	// (a redisretry.AutoQuota), as this process last paced at it, in
	// requests per second ({request}/s), with retry.fleet.limiter "rate".
	MetricFleetRate = "retry.fleet.rate"

	// AttrFleetLimiter is the limiter: "quota", "budget" or "cooldown".
	AttrFleetLimiter = attribute.Key("retry.fleet.limiter")
	// AttrFleetKey is the limiter's key (the fleet's name, e.g. a project
	// and model).
	AttrFleetKey = attribute.Key("retry.fleet.key")
)

// Kinds of [FleetEvent], the names of redisretry.EventKind.
const (
	FleetFallback     = "fallback"      // Redis failed: the limiter decides without it
	FleetRecovered    = "recovered"     // Redis answers again
	FleetRefill       = "refill"        // a lease refill; Units granted
	FleetQuotaWait    = "quota-wait"    // an attempt waits Wait for the quota
	FleetCooldownWait = "cooldown-wait" // an attempt waits Wait for a cooldown
	FleetHint         = "hint"          // a server hint of Wait published as a cooldown
	FleetRate         = "rate"          // the learnt rate changed to Rate
)

// FleetEvent is an event of a fleet limiter of the redisretry module (a
// Quota, Budget or Cooldown), with the fields of redisretry.Event. This
// package does not import redisretry, so that its users do not download
// go-redis; adapt a limiter's Observer in one line:
//
//	fleet, _ := otelretry.NewFleetMetrics(meterProvider)
//	observe := func(e redisretry.Event) {
//		fleet.Observe(otelretry.FleetEvent{Kind: e.Kind.String(), Limiter: e.Limiter, Key: e.Key, Wait: e.Wait, Units: e.Units, Rate: e.Rate})
//	}
//	quota, _ := redisretry.NewQuota(client, redisretry.QuotaConfig{Settings: redisretry.Settings{Key: key, Observer: observe}, Limit: limit})
type FleetEvent struct {
	Kind    string        // one of FleetFallback, FleetRecovered, ...: redisretry.EventKind.String()
	Limiter string        // "quota", "budget" or "cooldown"
	Key     string        // the limiter's key
	Wait    time.Duration // FleetQuotaWait, FleetCooldownWait, FleetHint
	Units   int64         // FleetRefill
	Rate    float64       // FleetRate: requests per second
}

// FleetMetrics records the events of fleet limiters as metrics: whether
// each decides without Redis, the fallbacks, the lease refills, the waits
// for the quota and for cooldowns, and the hints published. Create one per
// MeterProvider and pass every limiter's events to Observe. It is safe for
// concurrent use.
type FleetMetrics struct {
	attrs                           []attribute.KeyValue
	fallbacks, refills, units, hint metric.Int64Counter
	wait                            metric.Float64Histogram

	mu       sync.Mutex
	limiters map[fleetID]*fleetLimiter
}

type fleetID struct{ limiter, key string }

// fleetLimiter is what FleetMetrics keeps per limiter: its state and its
// attribute set, built once.
type fleetLimiter struct {
	down bool
	rate float64 // the last FleetRate's, if hasRate
	has  bool
	add  []metric.AddOption
	rec  []metric.RecordOption
	obs  []metric.ObserveOption
}

// NewFleetMetrics returns a FleetMetrics recording on a meter of mp (nil
// means otel.GetMeterProvider()). Of the options, only [WithAttributes]
// applies: its attributes are added to every measurement.
//
// Metrics: retry.fleet.fallback (gauge, 1 while a limiter decides without
// Redis; a limiter appears once it has reported an event),
// retry.fleet.fallbacks, retry.fleet.refills, retry.fleet.refill.units and
// retry.fleet.hints (counters), retry.fleet.wait (histogram, s, the quota's
// and the cooldowns' waits), each with retry.fleet.limiter and
// retry.fleet.key; and retry.fleet.rate (gauge, the rate an AutoQuota
// learnt, requests per second; a limiter appears once it reported one).
func NewFleetMetrics(mp metric.MeterProvider, opts ...Option) (*FleetMetrics, error) {
	c := newConfig(opts)
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	f := &FleetMetrics{attrs: c.attrs, limiters: map[fleetID]*fleetLimiter{}}
	counters := []struct {
		dst               *metric.Int64Counter
		name, unit, descr string
	}{
		{&f.fallbacks, MetricFleetFallbacks, "{fallback}", "Times a fleet limiter lost Redis and began to decide without it."},
		{&f.refills, MetricFleetRefills, "{refill}", "Redis round trips that refilled a fleet limiter's lease."},
		{&f.units, MetricFleetRefillUnits, "{unit}", "Quota units and budget permits granted by lease refills."},
		{&f.hint, MetricFleetHints, "{hint}", "Server hints published to the fleet as cooldowns."},
	}
	for _, ct := range counters {
		var err error
		if *ct.dst, err = m.Int64Counter(ct.name, metric.WithUnit(ct.unit), metric.WithDescription(ct.descr)); err != nil {
			return nil, fmt.Errorf("otelretry: creating %s counter: %w", ct.name, err)
		}
	}
	var err error
	f.wait, err = m.Float64Histogram(MetricFleetWait, metric.WithUnit("s"),
		metric.WithDescription("Waits the fleet's quota and cooldowns imposed on attempts."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	if err != nil {
		return nil, fmt.Errorf("otelretry: creating %s histogram: %w", MetricFleetWait, err)
	}
	_, err = m.Int64ObservableGauge(MetricFleetFallback, metric.WithUnit("{limiter}"),
		metric.WithDescription("1 while a fleet limiter decides without Redis, 0 while Redis answers."),
		metric.WithInt64Callback(f.observeFallback))
	if err != nil {
		return nil, fmt.Errorf("otelretry: creating %s gauge: %w", MetricFleetFallback, err)
	}
	_, err = m.Float64ObservableGauge(MetricFleetRate, metric.WithUnit("{request}/s"),
		metric.WithDescription("The rate the fleet learnt from its 429s, as this process paces at it."),
		metric.WithFloat64Callback(f.observeRate))
	if err != nil {
		return nil, fmt.Errorf("otelretry: creating %s gauge: %w", MetricFleetRate, err)
	}
	return f, nil
}

// Observe records one event. Events of kinds it does not know only make
// their limiter known to the retry.fleet.fallback gauge.
func (f *FleetMetrics) Observe(e FleetEvent) {
	l := f.limiter(e)
	ctx := context.Background()
	switch e.Kind {
	case FleetFallback:
		f.fallbacks.Add(ctx, 1, l.add...)
	case FleetRefill:
		f.refills.Add(ctx, 1, l.add...)
		if e.Units > 0 {
			f.units.Add(ctx, e.Units, l.add...)
		}
	case FleetQuotaWait, FleetCooldownWait:
		f.wait.Record(ctx, max(e.Wait, 0).Seconds(), l.rec...)
	case FleetHint:
		f.hint.Add(ctx, 1, l.add...)
	}
}

// limiter returns the limiter's entry, made on its first event, and keeps
// its state.
func (f *FleetMetrics) limiter(e FleetEvent) *fleetLimiter {
	id := fleetID{e.Limiter, e.Key}
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.limiters[id]
	if l == nil {
		kv := append(append([]attribute.KeyValue(nil), f.attrs...), AttrFleetLimiter.String(e.Limiter), AttrFleetKey.String(e.Key))
		set := attribute.NewSet(kv...)
		l = &fleetLimiter{
			add: []metric.AddOption{metric.WithAttributeSet(set)},
			rec: []metric.RecordOption{metric.WithAttributeSet(set)},
			obs: []metric.ObserveOption{metric.WithAttributeSet(set)},
		}
		f.limiters[id] = l
	}
	switch e.Kind {
	case FleetFallback:
		l.down = true
	case FleetRecovered:
		l.down = false
	case FleetRate:
		l.rate, l.has = e.Rate, true
	}
	return l
}

func (f *FleetMetrics) observeRate(_ context.Context, o metric.Float64Observer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.limiters {
		if l.has {
			o.Observe(l.rate, l.obs...)
		}
	}
	return nil
}

func (f *FleetMetrics) observeFallback(_ context.Context, o metric.Int64Observer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.limiters {
		var v int64
		if l.down {
			v = 1
		}
		o.Observe(v, l.obs...)
	}
	return nil
}
