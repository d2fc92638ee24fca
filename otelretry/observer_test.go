package otelretry

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/testkit"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

var errTransient = errors.New("transient: 503 Service Unavailable")

// recorder is an Observer that keeps the events it sees.
type recorder = testkit.Recorder[retry.Event, retry.EventKind]

func newRecorder() *recorder {
	return testkit.NewRecorder(func(e retry.Event) retry.EventKind { return e.Kind })
}

func mustObserver(t *testing.T, tm *telemetry, opts ...Option) retry.Observer {
	t.Helper()
	obs, err := NewObserver(tm.mp, opts...)
	if err != nil {
		t.Fatalf("NewObserver: %v", err)
	}
	return obs
}

// oneSpan returns the only span exported.
func oneSpan(t *testing.T, tm *telemetry) tracetest.SpanStub {
	t.Helper()
	spans := tm.spans.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("got %d spans, want 1", len(spans))
	}
	return spans[0]
}

func TestObserverSuccessAfterRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := newTelemetry()
		rec := newRecorder()
		p := retry.Policy{
			Attempts:     5,
			InitialDelay: 100 * time.Millisecond,
			MaxDelay:     10 * time.Second,
			Jitter:       50 * time.Millisecond,
			Rand:         retry.NewRand(7),
			Observer:     retry.Observers(rec.Observe, mustObserver(t, tm)),
		}
		ctx, span := tm.tp.Tracer("test").Start(context.Background(), "call")
		calls := 0
		start := time.Now()
		err := retry.Run(ctx, p, func(context.Context) error {
			calls++
			switch calls {
			case 1:
				return errors.New("boom")
			case 2:
				return retry.After(errTransient, 3*time.Second)
			}
			return nil
		})
		elapsed := time.Since(start)
		span.End()
		if err != nil || calls != 3 {
			t.Fatalf("Run = %v after %d calls, want nil after 3", err, calls)
		}
		if len(rec.Events()) != 3 || rec.Events()[0].Kind != retry.EventRetry || rec.Events()[1].Kind != retry.EventRetry {
			t.Fatalf("events = %+v", rec.Events())
		}
		w0, w1 := rec.Events()[0].Wait, rec.Events()[1].Wait
		if w1 < 3*time.Second {
			t.Errorf("hinted wait %v < hint 3s", w1)
		}
		if elapsed != w0+w1 { // virtual time: the waits are the only time spent
			t.Errorf("elapsed %v, want the waits %v + %v", elapsed, w0, w1)
		}

		ms := tm.metrics(t)
		if got := sums(t, ms[MetricAttempts], AttrOutcome); len(got) != 1 || got["success"] != 3 {
			t.Errorf("%s = %v, want success:3", MetricAttempts, got)
		}
		if m, ok := ms[MetricGiveUps]; ok {
			if got := sums(t, m, AttrReason); len(got) != 0 {
				t.Errorf("%s = %v, want none", MetricGiveUps, got)
			}
		}
		h, ok := ms[MetricWait].Data.(metricdata.Histogram[float64])
		if !ok {
			t.Fatalf("%s data is %T", MetricWait, ms[MetricWait].Data)
		}
		if u := ms[MetricWait].Unit; u != "s" {
			t.Errorf("%s unit = %q, want s", MetricWait, u)
		}
		var count uint64
		var sum float64
		hinted := map[string]uint64{}
		for _, dp := range h.DataPoints {
			count += dp.Count
			sum += dp.Sum
			v, _ := dp.Attributes.Value(AttrHinted)
			hinted[v.Emit()] += dp.Count
		}
		if count != 2 || math.Abs(sum-(w0+w1).Seconds()) > 1e-9 {
			t.Errorf("%s count %d sum %g, want 2 and %g", MetricWait, count, sum, (w0 + w1).Seconds())
		}
		if hinted["true"] != 1 || hinted["false"] != 1 {
			t.Errorf("%s by hinted = %v, want true:1 false:1", MetricWait, hinted)
		}

		ev := oneSpan(t, tm).Events
		if len(ev) != 2 {
			t.Fatalf("span events = %+v, want 2", ev)
		}
		for i, e := range ev {
			a := attrs(e.Attributes)
			if e.Name != "retry" {
				t.Errorf("event %d name %q", i, e.Name)
			}
			if got := a[AttrAttempt].AsInt64(); got != int64(i+1) {
				t.Errorf("event %d attempt %d", i, got)
			}
			if got := a[AttrMaxAttempts].AsInt64(); got != 5 {
				t.Errorf("event %d max_attempts %d", i, got)
			}
			if got, want := a[AttrWait].AsFloat64(), rec.Events()[i].Wait.Seconds(); got != want {
				t.Errorf("event %d wait %g, want %g", i, got, want)
			}
			if a["error.type"].AsString() == "" {
				t.Errorf("event %d has no error.type", i)
			}
		}
		a0, a1 := attrs(ev[0].Attributes), attrs(ev[1].Attributes)
		if _, ok := a0[AttrHint]; ok {
			t.Errorf("first event has a hint: %v", a0[AttrHint])
		}
		if got := a1[AttrHint].AsFloat64(); got != 3 {
			t.Errorf("second event hint = %g, want 3", got)
		}
		// error.type names the failure, not the core's hint wrapper.
		for i, e := range ev {
			if got := attrs(e.Attributes)["error.type"].AsString(); got != "*errors.errorString" {
				t.Errorf("event %d error.type = %q, want *errors.errorString", i, got)
			}
		}
		if got := a0[AttrError].AsString(); got != "boom" {
			t.Errorf("first event error = %q", got)
		}
		if got := a1[AttrError].AsString(); got != errTransient.Error() {
			t.Errorf("second event error = %q", got)
		}
	})
}

// limiter refuses first attempts and/or retries.
type limiter struct{ first, retries bool }

func (l limiter) Admit(retry bool) bool {
	if retry {
		return l.retries
	}
	return l.first
}
func (limiter) Record(bool) {}

func TestObserverGiveUps(t *testing.T) {
	fail := func(context.Context) error { return errTransient }
	tests := []struct {
		name        string
		policy      retry.Policy
		fn          func(context.Context) error
		cancelAfter time.Duration // cancel the call's context then, if > 0
		attempts    map[string]int64
		giveUps     map[string]int64
		waits       uint64
		events      []string
	}{
		{
			name:     "attempts used up",
			policy:   retry.Policy{Attempts: 3},
			fn:       fail,
			attempts: map[string]int64{"give_up": 3},
			giveUps:  map[string]int64{"attempts": 1},
			waits:    2,
			events:   []string{"retry", "retry", "retry.give_up"},
		},
		{
			name:     "permanent",
			policy:   retry.Policy{Attempts: 3},
			fn:       func(context.Context) error { return retry.Permanent(errors.New("400 Bad Request")) },
			attempts: map[string]int64{"give_up": 1},
			giveUps:  map[string]int64{"permanent": 1},
			events:   []string{"retry.give_up"},
		},
		{
			// The loop reports attempt 1 as retried, then as given up when
			// the context ends during the wait: one attempt, not two.
			name:        "context cancelled during a wait",
			policy:      retry.Policy{Attempts: 3},
			fn:          fail,
			cancelAfter: 500 * time.Millisecond,
			attempts:    map[string]int64{"give_up": 1},
			giveUps:     map[string]int64{"context": 1},
			waits:       1,
			events:      []string{"retry", "retry.give_up"},
		},
		{
			name:     "policy deadline",
			policy:   retry.Policy{Attempts: 5, Deadline: 1500 * time.Millisecond},
			fn:       fail,
			attempts: map[string]int64{"give_up": 2},
			giveUps:  map[string]int64{"deadline": 1},
			waits:    1,
			events:   []string{"retry", "retry.give_up"},
		},
		{
			name:     "budget refuses the retry",
			policy:   retry.Policy{Attempts: 5, Budget: limiter{first: true}},
			fn:       fail,
			attempts: map[string]int64{"give_up": 1},
			giveUps:  map[string]int64{"budget": 1},
			events:   []string{"retry.give_up"},
		},
		{
			name:     "throttle refuses the retry",
			policy:   retry.Policy{Attempts: 5, Throttle: limiter{first: true}},
			fn:       fail,
			attempts: map[string]int64{"give_up": 1},
			giveUps:  map[string]int64{"throttled": 1},
			events:   []string{"retry.give_up"},
		},
		{
			// No attempt is made; the loop sends one give-up event.
			name:     "throttle refuses the first attempt",
			policy:   retry.Policy{Attempts: 5, Throttle: limiter{}},
			fn:       fail,
			attempts: map[string]int64{},
			giveUps:  map[string]int64{"throttled": 1},
			events:   []string{"retry.give_up"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tm := newTelemetry()
				p := tt.policy
				p.InitialDelay = time.Second
				p.Jitter = retry.Zero
				p.Observer = mustObserver(t, tm)
				ctx, span := tm.tp.Tracer("test").Start(context.Background(), "call")
				ctx, cancel := context.WithCancel(ctx)
				defer cancel()
				if tt.cancelAfter > 0 {
					time.AfterFunc(tt.cancelAfter, cancel)
				}
				if err := retry.Run(ctx, p, tt.fn); err == nil {
					t.Fatal("Run succeeded")
				}
				span.End()

				ms := tm.metrics(t)
				if got := sums(t, orEmpty(ms, MetricAttempts), AttrOutcome); !equalMaps(got, tt.attempts) {
					t.Errorf("%s = %v, want %v", MetricAttempts, got, tt.attempts)
				}
				if got := sums(t, orEmpty(ms, MetricGiveUps), AttrReason); !equalMaps(got, tt.giveUps) {
					t.Errorf("%s = %v, want %v", MetricGiveUps, got, tt.giveUps)
				}
				var waits uint64
				if h, ok := ms[MetricWait].Data.(metricdata.Histogram[float64]); ok {
					for _, dp := range h.DataPoints {
						waits += dp.Count
					}
				}
				if waits != tt.waits {
					t.Errorf("%s count = %d, want %d", MetricWait, waits, tt.waits)
				}
				var names []string
				for _, e := range oneSpan(t, tm).Events {
					names = append(names, e.Name)
					if e.Name == "retry.give_up" {
						a := attrs(e.Attributes)
						if _, ok := tt.giveUps[a[AttrReason].AsString()]; !ok {
							t.Errorf("give-up event reason %q, want one of %v", a[AttrReason].AsString(), tt.giveUps)
						}
					}
				}
				if strings.Join(names, ",") != strings.Join(tt.events, ",") {
					t.Errorf("span events %v, want %v", names, tt.events)
				}
			})
		})
	}
}

func orEmpty(ms map[string]metricdata.Metrics, name string) metricdata.Metrics {
	if m, ok := ms[name]; ok {
		return m
	}
	return metricdata.Metrics{Name: name, Data: metricdata.Sum[int64]{IsMonotonic: true}}
}

func equalMaps(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestObserverOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := newTelemetry()
		op := attribute.String("rpc.method", "GenerateContent")
		obs := mustObserver(t, tm, WithAttributes(op), WithErrorText(nil))
		quiet := mustObserver(t, tm, WithSpanEvents(false))
		p := retry.Policy{Attempts: 2, InitialDelay: time.Millisecond, Jitter: retry.Zero}

		ctx, span := tm.tp.Tracer("test").Start(context.Background(), "with-attrs")
		p.Observer = obs
		_ = retry.Run(ctx, p, func(context.Context) error { return errTransient })
		span.End()

		ctx, span = tm.tp.Tracer("test").Start(context.Background(), "quiet")
		p.Observer = quiet
		_ = retry.Run(ctx, p, func(context.Context) error { return errTransient })
		span.End()

		for _, s := range tm.spans.GetSpans() {
			switch s.Name {
			case "with-attrs":
				if len(s.Events) != 2 {
					t.Fatalf("with-attrs events = %d, want 2", len(s.Events))
				}
				for _, e := range s.Events {
					a := attrs(e.Attributes)
					if a[op.Key].AsString() != "GenerateContent" {
						t.Errorf("event %s lacks %s", e.Name, op.Key)
					}
					if _, ok := a[AttrError]; ok {
						t.Errorf("event %s has %s despite WithErrorText(nil)", e.Name, AttrError)
					}
				}
			case "quiet":
				if len(s.Events) != 0 {
					t.Errorf("quiet span has %d events, want 0", len(s.Events))
				}
			}
		}

		// Both observers recorded metrics; only obs's carry op.
		ms := tm.metrics(t)
		var with, without int64
		for _, dp := range ms[MetricAttempts].Data.(metricdata.Sum[int64]).DataPoints {
			if v, ok := dp.Attributes.Value(op.Key); ok && v.AsString() == "GenerateContent" {
				with += dp.Value
			} else {
				without += dp.Value
			}
		}
		if with != 2 || without != 2 {
			t.Errorf("attempts with op %d, without %d, want 2 and 2", with, without)
		}
	})
}

func TestObserverNonRecordingSpan(t *testing.T) {
	tm := newTelemetry()
	obs := mustObserver(t, tm)
	// No span in the context: metrics only, and no panic.
	obs(context.Background(), retry.Event{Kind: retry.EventRetry, Attempt: 1, MaxAttempts: 2, Wait: time.Second, Err: errTransient})
	h := tm.metrics(t)[MetricWait].Data.(metricdata.Histogram[float64])
	if len(h.DataPoints) != 1 || h.DataPoints[0].Count != 1 || h.DataPoints[0].Sum != 1 {
		t.Errorf("wait histogram = %+v, want one wait of 1s", h.DataPoints)
	}
}

func TestObserverConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := newTelemetry()
		p := retry.Policy{Attempts: 4, InitialDelay: 10 * time.Millisecond, Rand: retry.NewRand(1), Observer: mustObserver(t, tm)}
		const calls = 50
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				n := 0
				_ = retry.Run(context.Background(), p, func(context.Context) error {
					n++
					if n <= i%4 { // call i fails i%4 times (at most 3 of 4 attempts)
						return errTransient
					}
					return nil
				})
			})
		}
		wg.Wait()
		// Calls fail 0, 1, 2 or 3 times then succeed: attempts 1+2+3+4 per
		// group of four calls.
		want := int64(0)
		for i := range calls {
			want += int64(i%4 + 1)
		}
		if got := sums(t, tm.metrics(t)[MetricAttempts], AttrOutcome); got["success"] != want || len(got) != 1 {
			t.Errorf("attempts = %v, want success:%d", got, want)
		}
	})
}

// failingMeter fails to create one instrument, the one named name: a
// counter, a histogram or an observable gauge.
type failingMeter struct {
	noop.Meter
	name string
}

var errNoInstrument = errors.New("instrument refused")

// refuse is create(name, opts...), unless name is failing: errNoInstrument.
func refuse[I, O any](failing, name string, create func(string, ...O) (I, error), opts ...O) (I, error) {
	if name == failing {
		var none I
		return none, errNoInstrument
	}
	return create(name, opts...)
}

func (m failingMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return refuse(m.name, name, m.Meter.Int64Counter, opts...)
}

func (m failingMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return refuse(m.name, name, m.Meter.Float64Histogram, opts...)
}

func (m failingMeter) Int64ObservableGauge(name string, opts ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	return refuse(m.name, name, m.Meter.Int64ObservableGauge, opts...)
}

func (m failingMeter) Float64ObservableGauge(name string, opts ...metric.Float64ObservableGaugeOption) (metric.Float64ObservableGauge, error) {
	return refuse(m.name, name, m.Meter.Float64ObservableGauge, opts...)
}

type failingProvider struct {
	noop.MeterProvider
	name string
}

func (p failingProvider) Meter(string, ...metric.MeterOption) metric.Meter {
	return failingMeter{name: p.name}
}

func TestNewObserverInstrumentError(t *testing.T) {
	for _, name := range []string{MetricAttempts, MetricWait, MetricGiveUps} {
		obs, err := NewObserver(failingProvider{name: name})
		if obs != nil || !errors.Is(err, errNoInstrument) || !strings.Contains(err.Error(), name) {
			t.Errorf("failing %s: NewObserver = %v, %v; want an error naming it", name, obs != nil, err)
		}
	}
	if _, err := NewObserver(noop.NewMeterProvider()); err != nil {
		t.Errorf("noop provider: %v", err)
	}
}

func TestDefaultErrorText(t *testing.T) {
	tests := []struct {
		in, want string
		secret   string // must not be in the output
	}{
		{"boom", "boom", ""},
		{`Post "https://generativelanguage.googleapis.com/v1beta/models/m:generateContent?key=AIzaSECRET&alt=sse": EOF`,
			`Post "https://generativelanguage.googleapis.com/v1beta/models/m:generateContent?key=REDACTED&alt=sse": EOF`, "AIzaSECRET"},
		{`Get "http://h/x?a=1&access_token=ya29.SECRET": dial tcp: refused`,
			`Get "http://h/x?a=1&access_token=REDACTED": dial tcp: refused`, "ya29.SECRET"},
		{`Get "http://h/x?TOKEN=SECRET"`, `Get "http://h/x?TOKEN=REDACTED"`, "SECRET"},
		{`Get "https://user:pa55@h/x": timeout`, `Get "https://REDACTED@h/x": timeout`, "pa55"},
		{`Get "http://h/x?monkey=banana"`, `Get "http://h/x?monkey=banana"`, ""},
	}
	for _, tt := range tests {
		got := DefaultErrorText(errors.New(tt.in))
		if got != tt.want {
			t.Errorf("DefaultErrorText(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
		if tt.secret != "" && strings.Contains(got, tt.secret) {
			t.Errorf("secret %q leaked: %q", tt.secret, got)
		}
	}
	if got := DefaultErrorText(nil); got != "" {
		t.Errorf("DefaultErrorText(nil) = %q", got)
	}
}

func BenchmarkObserverRetry(b *testing.B) {
	tm := newTelemetry()
	obs, err := NewObserver(tm.mp)
	if err != nil {
		b.Fatal(err)
	}
	ctx, span := tm.tp.Tracer("bench").Start(context.Background(), "call")
	defer span.End()
	e := retry.Event{Kind: retry.EventRetry, Attempt: 1, MaxAttempts: 5, Wait: time.Second, Err: errTransient}
	b.ReportAllocs()
	for b.Loop() {
		obs(ctx, e)
	}
}

func BenchmarkObserverMetricsOnly(b *testing.B) {
	tm := newTelemetry()
	obs, err := NewObserver(tm.mp)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	events := []retry.Event{
		{Kind: retry.EventRetry, Attempt: 1, MaxAttempts: 5, Wait: time.Second, Err: errTransient},
		{Kind: retry.EventSuccess, Attempt: 2, MaxAttempts: 5},
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, e := range events {
			obs(ctx, e)
		}
	}
}
