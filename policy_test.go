package retry

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestZeroPolicyIsGoogleDefault(t *testing.T) {
	got := Policy{}.Resolved()
	want := Google().Resolved()
	if got.Attempts != 5 || got.InitialDelay != time.Second || got.MaxDelay != 60*time.Second ||
		got.ExpBase != 2 || got.Jitter != time.Second || got.Deadline != 0 || got.MaxRetryAfter != 60*time.Second {
		t.Fatalf("Policy{}.Resolved() = %+v, want the Google defaults", got)
	}
	if !reflect.DeepEqual(got.StatusCodes, []int{408, 429, 500, 502, 503, 504}) {
		t.Fatalf("default codes = %v", got.StatusCodes)
	}
	if got.Attempts != want.Attempts || got.InitialDelay != want.InitialDelay || got.MaxDelay != want.MaxDelay ||
		got.ExpBase != want.ExpBase || got.Jitter != want.Jitter || !reflect.DeepEqual(got.StatusCodes, want.StatusCodes) {
		t.Fatalf("Google() = %+v differs from Policy{} = %+v", want, got)
	}
}

func TestExplicitZeroIsNotUnset(t *testing.T) {
	r := Policy{Jitter: Zero, InitialDelay: Zero, MaxRetryAfter: Zero}.Resolved()
	if r.Jitter != 0 || r.InitialDelay != 0 || r.MaxRetryAfter != 0 {
		t.Fatalf("explicit zeros resolved to %+v", r)
	}
	if r.MaxDelay != DefaultMaxDelay {
		t.Fatalf("unset MaxDelay resolved to %v", r.MaxDelay)
	}
	// With no jitter the Google shape is exactly exponential.
	p := Policy{Jitter: Zero}
	for n, want := range []time.Duration{1, 2, 4, 8, 16, 32, 60, 60} {
		if got := p.Backoff(n, 0, 0.999); got != want*time.Second {
			t.Errorf("Backoff(%d) without jitter = %v, want %v", n, got, want*time.Second)
		}
	}
}

func TestModelArmor(t *testing.T) {
	p := ModelArmor()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.MaxDelay != 32*time.Second || p.Deadline != 300*time.Second {
		t.Fatalf("ModelArmor cap/deadline = %v/%v", p.MaxDelay, p.Deadline)
	}
	for _, c := range []int{500, 502, 503, 504} {
		if !p.RetriesStatus(c) {
			t.Errorf("ModelArmor does not retry %d", c)
		}
	}
	for _, c := range []int{429, 408, 400, 404} {
		if p.RetriesStatus(c) {
			t.Errorf("ModelArmor retries %d by default", c)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		p     Policy
		field string // "" = valid
	}{
		{"zero policy", Policy{}, ""},
		{"google", Google(), ""},
		{"explicit zeros", Policy{InitialDelay: Zero, MaxDelay: Zero, Jitter: Zero}, ""},
		{"one attempt", Policy{Attempts: 1}, ""},
		{"negative attempts", Policy{Attempts: -1}, "Attempts"},
		{"negative initial delay", Policy{InitialDelay: -time.Second}, "InitialDelay"},
		{"negative max delay", Policy{MaxDelay: -1}, "MaxDelay"},
		{"negative jitter", Policy{Jitter: -time.Millisecond}, "Jitter"},
		{"negative deadline", Policy{Deadline: -time.Second}, "Deadline"},
		{"negative attempt timeout", Policy{AttemptTimeout: -1}, "AttemptTimeout"},
		{"negative max retry-after", Policy{MaxRetryAfter: -1}, "MaxRetryAfter"},
		{"exp base below 1", Policy{ExpBase: 0.5}, "ExpBase"},
		{"negative exp base", Policy{ExpBase: -2}, "ExpBase"},
		{"NaN exp base", Policy{ExpBase: math.NaN()}, "ExpBase"},
		{"Inf exp base", Policy{ExpBase: math.Inf(1)}, "ExpBase"},
		{"exp base exactly 1", Policy{ExpBase: 1}, ""},
		{"max below initial", Policy{InitialDelay: 10 * time.Second, MaxDelay: 5 * time.Second}, "MaxDelay"},
		{"max below default initial", Policy{MaxDelay: 500 * time.Millisecond}, "MaxDelay"},
		{"initial above default max", Policy{InitialDelay: 2 * time.Minute}, "MaxDelay"},
		{"unknown shape", Policy{Shape: shapeCount}, "Shape"},
		{"bad status code", Policy{StatusCodes: []int{503, 99}}, "StatusCodes"},
		{"status code 600", Policy{StatusCodes: []int{600}}, "StatusCodes"},
		{"empty codes", Policy{StatusCodes: []int{}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate() = %v, want a *ValidationError", err)
			}
			if ve.Field != tt.field || !strings.Contains(err.Error(), "Policy."+tt.field) {
				t.Fatalf("Validate() = %q (field %q), want field %q named", err, ve.Field, tt.field)
			}
		})
	}
}

func TestMergeFieldByField(t *testing.T) {
	base := Policy{Attempts: 7, InitialDelay: 2 * time.Second, MaxDelay: 30 * time.Second, Jitter: 500 * time.Millisecond, StatusCodes: []int{503}}
	got := base.Merge(Policy{Attempts: 2, Jitter: Zero})
	if got.Attempts != 2 || got.Jitter != Zero || got.InitialDelay != 2*time.Second || got.MaxDelay != 30*time.Second ||
		!reflect.DeepEqual(got.StatusCodes, []int{503}) {
		t.Fatalf("Merge = %+v", got)
	}
	if r := got.Resolved(); r.Jitter != 0 {
		t.Fatalf("merged explicit zero jitter resolved to %v", r.Jitter)
	}
	got = base.Merge(Policy{StatusCodes: []int{}, Shape: ShapeFull, Deadline: time.Minute})
	if len(got.StatusCodes) != 0 || got.StatusCodes == nil || got.Shape != ShapeFull || got.Deadline != time.Minute || got.Attempts != 7 {
		t.Fatalf("Merge = %+v", got)
	}
}

func TestShapeNames(t *testing.T) {
	for _, s := range Shapes() {
		got, err := ParseShape(s.String())
		if err != nil || got != s {
			t.Errorf("ParseShape(%q) = %v, %v", s.String(), got, err)
		}
	}
	if _, err := ParseShape("bogus"); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("ParseShape(bogus) = %v", err)
	}
}

func TestResolvedIsIdempotent(t *testing.T) {
	raw := Policy{Jitter: Zero, InitialDelay: Zero, MaxDelay: 5 * time.Second, MaxRetryAfter: Zero}
	r := raw.Resolved()
	if r.Jitter != 0 || r.InitialDelay != 0 || r.MaxRetryAfter != 0 {
		t.Fatalf("Resolved = %+v", r)
	}
	rr := r.Resolved()
	if rr.Jitter != 0 || rr.InitialDelay != 0 || rr.MaxDelay != 5*time.Second || rr.MaxRetryAfter != 0 {
		t.Fatalf("Resolved twice = %+v", rr)
	}
	for n := range 5 {
		if a, b := raw.Backoff(n, 0, 0.7), r.Backoff(n, 0, 0.7); a != b {
			t.Fatalf("Backoff(%d): raw %v, resolved %v", n, a, b)
		}
	}
	m := r.Merge(Policy{Attempts: 2})
	if got := m.Resolved(); got.Jitter != 0 || got.InitialDelay != 0 || got.Attempts != 2 || got.MaxDelay != 5*time.Second {
		t.Fatalf("Merge on a resolved base = %+v", got)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestHinted(t *testing.T) {
	p := Policy{} // jitter 1 s, MaxRetryAfter = MaxDelay = 60 s
	tests := []struct {
		wait, hint time.Duration
		u          float64
		want       time.Duration
	}{
		{2 * time.Second, 25 * time.Second, 0.5, 25500 * time.Millisecond},
		{30 * time.Second, 25 * time.Second, 0.5, 30 * time.Second},
		{time.Second, time.Hour, 0.5, 60 * time.Second},
		{time.Second, -time.Hour, 0.5, time.Second},
	}
	for _, tt := range tests {
		if got := p.Hinted(tt.wait, tt.hint, tt.u); got != tt.want {
			t.Errorf("Hinted(%v, %v, %v) = %v, want %v", tt.wait, tt.hint, tt.u, got, tt.want)
		}
	}
	if got := (Policy{MaxRetryAfter: Zero}).Hinted(time.Second, time.Hour, 0.5); got != time.Second {
		t.Errorf("hints ignored: got %v", got)
	}
}

func TestMergeRules(t *testing.T) {
	five := 5 * time.Second
	// MaxRetryAfter follows MaxDelay whether the base is resolved or not.
	for _, base := range []Policy{{}, Policy{}.Resolved(), Google(), Google().Resolved()} {
		m := base.Merge(Policy{MaxDelay: five}).Resolved()
		if m.MaxRetryAfter != five || m.MaxDelay != five {
			t.Errorf("%+v.Merge(MaxDelay 5s): MaxRetryAfter %v, MaxDelay %v; want both 5s", base, m.MaxRetryAfter, m.MaxDelay)
		}
	}
	// A MaxRetryAfter set by either side stays.
	if m := (Policy{MaxRetryAfter: time.Minute}).Resolved().Merge(Policy{MaxDelay: five}).Resolved(); m.MaxRetryAfter != time.Minute {
		t.Errorf("explicit base MaxRetryAfter: got %v, want 1m", m.MaxRetryAfter)
	}
	if m := (Policy{}).Resolved().Merge(Policy{MaxDelay: five, MaxRetryAfter: Zero}).Resolved(); m.MaxRetryAfter != 0 {
		t.Errorf("override MaxRetryAfter Zero: got %v, want 0", m.MaxRetryAfter)
	}
	// An override can switch Shape back to google, resolved base or not.
	for _, base := range []Policy{{Shape: ShapeFull}, Policy{Shape: ShapeFull}.Resolved()} {
		if m := base.Merge(Policy{Shape: ShapeGoogle}); m.Resolved().Shape != ShapeGoogle {
			t.Errorf("%v.Merge(ShapeGoogle).Shape = %v", base.Shape, m.Resolved().Shape)
		}
		if m := base.Merge(Policy{}); m.Resolved().Shape != ShapeFull {
			t.Errorf("Merge(zero Shape) changed %v to %v", base.Shape, m.Resolved().Shape)
		}
	}
	// The zero Shape resolves to google and behaves as it.
	if r := (Policy{}).Resolved(); r.Shape != ShapeGoogle || r.Shape.String() != "google" || Shape(0).String() != "google" {
		t.Errorf("zero shape resolves to %v", r.Shape)
	}
	if a, b := (Policy{}).Backoff(2, 0, 0.3), (Policy{Shape: ShapeGoogle}).Backoff(2, 0, 0.3); a != b {
		t.Errorf("zero Shape %v vs ShapeGoogle %v", a, b)
	}
	// Pacer merges like the other interfaces.
	pc := &fakePacer{}
	if m := (Policy{}).Merge(Policy{Pacer: pc}); m.Pacer != pc {
		t.Error("Merge dropped the Pacer")
	}
}

func TestZeroAfterResolved(t *testing.T) {
	r := Google().Resolved()
	r.Jitter = Zero
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if w := r.Backoff(3, 0, 0.5); w != 8*time.Second {
		t.Fatalf("Backoff(3) = %v, want 8s (no jitter)", w)
	}
	r = Google().Resolved()
	r.MaxDelay, r.InitialDelay = Zero, Zero
	if err := r.Validate(); err != nil {
		t.Fatalf("Zero delays on a resolved policy: %v", err)
	}
	if w := r.Backoff(3, 0, 0.5); w != 0 {
		t.Fatalf("Backoff(3) = %v, want 0", w)
	}
	synctest.Test(t, func(t *testing.T) {
		r := Google().Resolved()
		r.Jitter, r.Attempts = Zero, 3
		begin := time.Now()
		Run(t.Context(), r, func(context.Context) error { return errFlaky })
		if got := time.Since(begin); got != 3*time.Second {
			t.Fatalf("waited %v, want 1s + 2s", got)
		}
	})
}

func TestMergeKeepsExplicitMaxRetryAfter(t *testing.T) {
	r := Policy{}.Resolved()
	r.MaxRetryAfter = 10 * time.Second
	if m := r.Merge(Policy{Attempts: 3}).Resolved(); m.MaxRetryAfter != 10*time.Second {
		t.Fatalf("MaxRetryAfter set after Resolved: %v after Merge, want 10s", m.MaxRetryAfter)
	}
	r = Policy{}.Resolved()
	r.MaxRetryAfter = Zero
	if got := r.Merge(Policy{}).Hinted(0, 30*time.Second, 0); got != 0 {
		t.Fatalf("hints off after Resolved: Merge turned them on (%v)", got)
	}
	r = Policy{}.Resolved()
	r.MaxDelay = 5 * time.Second // MaxRetryAfter stays the 60 s it resolved to
	if m := r.Merge(Policy{}).Resolved(); m.MaxRetryAfter != 60*time.Second {
		t.Fatalf("MaxDelay changed after Resolved: MaxRetryAfter %v after Merge, want 60s as before", m.MaxRetryAfter)
	}
}

// TestValidateWideNegatives: negative durations whose low 32 bits are zero
// (they passed the fast path on 32-bit platforms: run with GOARCH=386).
func TestValidateWideNegatives(t *testing.T) {
	for _, p := range []Policy{
		{Jitter: -(1 << 32)}, {Deadline: -(1 << 32)}, {AttemptTimeout: -(5 << 32)}, {MaxRetryAfter: -(1 << 33)},
	} {
		if p.Validate() == nil {
			t.Errorf("Validate(%+v) = nil", p)
		}
	}
}
