package retry

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

const ms = time.Millisecond

func TestBackoffFormulas(t *testing.T) {
	base := Policy{InitialDelay: 100 * ms, MaxDelay: 10 * time.Second, ExpBase: 2, Jitter: 200 * ms}
	with := func(s Shape) Policy { p := base; p.Shape = s; return p }
	tests := []struct {
		name string
		p    Policy
		n    int
		prev time.Duration
		u    float64
		want time.Duration
	}{
		{"google n=0 u=0", with(ShapeGoogle), 0, 0, 0, 100 * ms},
		{"google n=3 u=.5", with(ShapeGoogle), 3, 0, 0.5, 800*ms + 100*ms},
		{"google at cap loses jitter", with(ShapeGoogle), 10, 0, 0.9, 10 * time.Second},
		{"none n=2", with(ShapeNone), 2, 0, 0.7, 400 * ms},
		{"full n=2 u=.25", with(ShapeFull), 2, 0, 0.25, 100 * ms},
		{"full at cap", with(ShapeFull), 20, 0, 0.5, 5 * time.Second},
		{"equal n=2 u=.5", with(ShapeEqual), 2, 0, 0.5, 300 * ms},
		{"equal u=0 is half", with(ShapeEqual), 1, 0, 0, 100 * ms},
		{"decorrelated first", with(ShapeDecorrelated), 0, 0, 0.5, 200 * ms},              // U(100, 300)
		{"decorrelated prev=1s", with(ShapeDecorrelated), 5, time.Second, 0.5, 1550 * ms}, // U(100, 3000)
		{"decorrelated capped", with(ShapeDecorrelated), 5, 8 * time.Second, 0.9, 10 * time.Second},
		{"grpc u=0 is -20%", with(ShapeGRPC), 1, 0, 0, 160 * ms},
		{"grpc u=.5 is exact", with(ShapeGRPC), 1, 0, 0.5, 200 * ms},
		{"grpc capped", with(ShapeGRPC), 20, 0, 0.99, 10 * time.Second},
		{"jitter-at-cap below cap = google", with(ShapeJitterAtCap), 3, 0, 0.5, 900 * ms},
		{"jitter-at-cap at cap keeps jitter", with(ShapeJitterAtCap), 20, 0, 0.5, 10*time.Second - 100*ms},
		{"jitter-at-cap at cap u=0", with(ShapeJitterAtCap), 20, 0, 0, 10*time.Second - 200*ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.p.Backoff(tt.n, tt.prev, tt.u)
			if d := got - tt.want; d < -time.Microsecond || d > time.Microsecond {
				t.Fatalf("Backoff(%d, %v, %v) = %v, want %v", tt.n, tt.prev, tt.u, got, tt.want)
			}
		})
	}
}

func TestBackoffDefaultPolicyRanges(t *testing.T) {
	// The n-th wait of the default policy lies in [2^n, 2^n+1) s, capped at 60 s.
	p := Policy{}
	rnd := NewRand(1)
	for n := 0; n < 12; n++ {
		lo := time.Duration(math.Min(math.Pow(2, float64(n)), 60)) * time.Second
		hi := min(lo+time.Second, 60*time.Second)
		for range 200 {
			w := p.Backoff(n, 0, rnd())
			if w < lo || w > hi {
				t.Fatalf("wait %d = %v, want in [%v, %v]", n, w, lo, hi)
			}
		}
	}
}

func TestJitterSpread(t *testing.T) {
	// Over many seeded draws the jitter of the default policy is spread over
	// [0, 1 s): check range and mean.
	p := Policy{}
	rnd := NewRand(42)
	const draws = 20000
	var sum, lo, hi float64 = 0, 1, 0
	for range draws {
		j := (p.Backoff(2, 0, rnd()) - 4*time.Second).Seconds()
		if j < 0 || j >= 1 {
			t.Fatalf("jitter %v outside [0, 1)", j)
		}
		sum += j
		lo, hi = math.Min(lo, j), math.Max(hi, j)
	}
	mean := sum / draws
	if math.Abs(mean-0.5) > 0.02 {
		t.Errorf("mean jitter = %.4f, want 0.5 ± 0.02", mean)
	}
	if lo > 0.01 || hi < 0.99 {
		t.Errorf("jitter range [%.4f, %.4f], want close to [0, 1)", lo, hi)
	}
}

func TestBackoffHugeN(t *testing.T) {
	for _, s := range Shapes() {
		p := Policy{Shape: s}
		for _, n := range []int{64, 1000, 10000, math.MaxInt32, math.MaxInt} {
			w := p.Backoff(n, time.Duration(math.MaxInt64/4), 0.5)
			if w < 0 || w > DefaultMaxDelay {
				t.Errorf("%v: Backoff(%d) = %v, want in [0, 60s]", s, n, w)
			}
		}
	}
}

func TestNewRandIsSeeded(t *testing.T) {
	a, b, c := NewRand(7), NewRand(7), NewRand(8)
	same := true
	for range 10 {
		x, y, z := a(), b(), c()
		if x != y {
			t.Fatalf("same seed differs: %v vs %v", x, y)
		}
		if x < 0 || x >= 1 {
			t.Fatalf("rand %v outside [0,1)", x)
		}
		same = same && x == z
	}
	if same {
		t.Fatal("different seeds gave the same sequence")
	}
}

func FuzzBackoff(f *testing.F) {
	f.Add(uint8(0), 0, int64(0), 0.5, int64(time.Second), int64(time.Minute), 2.0, int64(time.Second))
	f.Add(uint8(4), 10000, int64(time.Hour), 0.99, int64(1), int64(1), 1.0, int64(0))
	f.Add(uint8(6), -5, int64(-1), math.NaN(), int64(0), int64(0), 1e300, int64(math.MaxInt64))
	f.Add(uint8(1), 40, int64(0), 0.5, int64(0), int64(math.MaxInt64), 0.0, int64(0))             // the cap wrapped negative
	f.Add(uint8(2), 1, int64(0), 0.5, int64(0), int64(math.MaxInt64), 1e300, int64(0))            // so did a huge base
	f.Add(uint8(1), 1024, int64(0), 0.5, int64(-1), int64(0), 0.0, int64(-1))                     // 0·Inf gave the cap
	f.Add(uint8(5), 3, int64(math.MaxInt64), 0.99, int64(1), int64(math.MaxInt64), 2.0, int64(1)) // decorrelated, huge prev
	f.Fuzz(func(t *testing.T, shape uint8, n int, prev int64, u float64, initial, maxd int64, base float64, jitter int64) {
		d := func(v int64) time.Duration { // -1 stands for Zero
			if v == -1 {
				return Zero
			}
			return time.Duration(v)
		}
		p := Policy{Shape: Shape(shape % uint8(shapeCount)), InitialDelay: d(initial),
			MaxDelay: d(maxd), ExpBase: base, Jitter: d(jitter)}
		if p.Validate() != nil {
			return
		}
		r := p.Resolved()
		w := p.Backoff(n, time.Duration(prev), u)
		if w < 0 || w > r.MaxDelay {
			t.Fatalf("Backoff(%d, %d, %v) with %+v = %v, outside [0, %v]", n, prev, u, p, w, r.MaxDelay)
		}
	})
}

// TestBackoffBoundsExtremePolicies: every shape stays in [0, MaxDelay] for
// every n, with a cap at MaxInt64 and a base that overflows at once.
func TestBackoffBoundsExtremePolicies(t *testing.T) {
	policies := []Policy{
		{MaxDelay: math.MaxInt64},
		{MaxDelay: math.MaxInt64, ExpBase: 1e300},
		{MaxDelay: math.MaxInt64, InitialDelay: math.MaxInt64, Jitter: math.MaxInt64},
		{MaxDelay: math.MaxInt64 - 1, InitialDelay: 1 << 62, ExpBase: math.MaxFloat64},
		{ExpBase: 1e300},
		{MaxDelay: 1<<53 + 1, InitialDelay: 1<<53 + 1},
	}
	for _, base := range policies {
		for _, s := range Shapes() {
			p := base
			p.Shape = s
			r := p.Resolved()
			for _, n := range []int{0, 1, 2, 39, 40, 41, 63, 64, 1023, 1024, 1025, 1 << 20, math.MaxInt} {
				for _, prev := range []time.Duration{0, -1, math.MaxInt64, math.MaxInt64 / 3} {
					for _, u := range []float64{0, 0.5, 0.999999} {
						if w := p.Backoff(n, prev, u); w < 0 || w > r.MaxDelay {
							t.Fatalf("%v, MaxDelay %d, base %g: Backoff(%d, %d, %v) = %d, outside [0, %d]",
								s, p.MaxDelay, p.ExpBase, n, prev, u, w, r.MaxDelay)
						}
					}
				}
			}
		}
	}
}

func TestBackoffZeroInitialDelayStaysZero(t *testing.T) {
	for _, s := range Shapes() {
		p := Policy{Shape: s, InitialDelay: Zero, Jitter: Zero}
		for _, n := range []int{0, 1, 1023, 1024, 1025, 1 << 30} {
			if w := p.Backoff(n, 0, 0.5); w != 0 {
				t.Errorf("%v: Backoff(%d) with InitialDelay Zero and no jitter = %v, want 0", s, n, w)
			}
		}
	}
	// With jitter, the google shape waits the jitter only.
	p := Policy{InitialDelay: Zero, Jitter: 100 * time.Millisecond}
	if w := p.Backoff(5000, 0, 0.5); w != 50*time.Millisecond {
		t.Errorf("google, InitialDelay Zero: Backoff(5000, u=.5) = %v, want 50ms", w)
	}
}

func TestJitterAtCapEqualsGoogleOnlyBelowCapMinusJitter(t *testing.T) {
	g := Policy{InitialDelay: time.Second, MaxDelay: 10 * time.Second, Jitter: 2 * time.Second}
	j := g
	j.Shape = ShapeJitterAtCap
	for n := range 3 { // 1, 2, 4 s: at most cap − J = 8 s
		if a, b := g.Backoff(n, 0, 0.7), j.Backoff(n, 0, 0.7); a != b {
			t.Errorf("n=%d: google %v, jitter-at-cap %v: want equal below cap − J", n, a, b)
		}
	}
	// exp = 9 s, between cap − J and the cap: google waits the cap, jitter-at-cap
	// spreads over [8 s, 10 s).
	g.ExpBase, j.ExpBase = 9, 9
	if a, b := g.Backoff(1, 0, 0.7), j.Backoff(1, 0, 0.7); a == b || b != 8*time.Second+1400*time.Millisecond || a != 10*time.Second {
		t.Errorf("exp 9 s: google %v (want the cap), jitter-at-cap %v (want 9.4s)", a, b)
	}
}

func TestBackoffInvalidNegativeCap(t *testing.T) {
	p := Policy{MaxDelay: -5}
	if w := p.Backoff(0, 0, 0.5); w != 0 {
		t.Fatalf("Backoff with MaxDelay -5 = %v, want 0", w)
	}
}

func TestShapeText(t *testing.T) {
	b, err := json.Marshal(struct{ S, Z Shape }{ShapeFull, 0})
	if err != nil || string(b) != `{"S":"full","Z":"google"}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var v struct{ S Shape }
	if err := json.Unmarshal([]byte(`{"S":"decorrelated"}`), &v); err != nil || v.S != ShapeDecorrelated {
		t.Fatalf("Unmarshal = %v, %v", v.S, err)
	}
	if err := json.Unmarshal([]byte(`{"S":"nope"}`), &v); err == nil {
		t.Fatal("Unmarshal of an unknown shape: no error")
	}
	if _, err := Shape(200).MarshalText(); err == nil {
		t.Fatal("MarshalText of an unknown shape: no error")
	}
}
