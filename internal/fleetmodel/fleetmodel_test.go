package fleetmodel

import (
	"testing"
	"time"
)

// The models' agreement with the Lua scripts is tested in redisretry
// (TestScriptsMatchSimulatorModels); these are the behaviours the simulator
// relies on, without a server.

func TestGCRAPaces(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	inc := Interval(10, time.Second, 1) // 10/s: 100 ms a request
	var tat time.Time
	for i := range 5 {
		r := GCRA(tat, now, inc, 0, -1)
		if !r.OK || r.Wait != time.Duration(i)*inc {
			t.Fatalf("request %d: %+v, want a wait of %v", i, r, time.Duration(i)*inc)
		}
		tat = r.To
	}
	if r := GCRA(tat, now, inc, 0, 500*time.Millisecond); r.OK || r.Wait != 500*time.Millisecond || !r.To.Equal(tat) {
		t.Fatalf("a wait of 500 ms is not below a max wait of 500 ms: %+v", r)
	}
	if r := GCRA(tat, now, inc, 200*time.Millisecond, -1); r.Wait != 300*time.Millisecond {
		t.Fatalf("a tolerance of 200 ms starts the request 200 ms early: %+v", r)
	}
	if r := GCRA(tat, now.Add(time.Hour), inc, 0, 0); r.OK || r.Wait != 0 {
		t.Fatalf("a max wait of 0 reserves nothing: %+v", r)
	}
}

func TestInterval(t *testing.T) {
	for _, tc := range []struct {
		rate   int64
		period time.Duration
		units  int64
		want   time.Duration
	}{
		{600, time.Minute, 1, 100 * time.Millisecond},
		{3, time.Second, 1, 333334 * time.Microsecond}, // rounded up: never above the rate
		{3, time.Second, 3, time.Second},
		{1, time.Second, 0, 0},
		{0, time.Second, 1, 0},
		{1, time.Hour, 1 << 62, maxSchedule},
	} {
		if got := Interval(tc.rate, tc.period, tc.units); got != tc.want {
			t.Errorf("Interval(%d, %v, %d) = %v, want %v", tc.rate, tc.period, tc.units, got, tc.want)
		}
	}
}

func TestBudgetWindow(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	w := &BudgetWindow{Slot: 500 * time.Millisecond, Slots: 20, Ratio: 0.2, Floor: 5}
	if r := w.Apply(now, BudgetCall{Want: 10}); r.Granted != 5 {
		t.Fatalf("the floor: %+v", r)
	}
	r := w.Apply(now, BudgetCall{Add: 100, Want: 30})
	if r.Granted != 15 || r.Requests != 100 || r.Retries != 20 {
		t.Fatalf("20 %% of 100 requests: %+v", r)
	}
	r = w.Apply(now, BudgetCall{GiveBack: 4, GiveBackEpoch: r.Epoch, Want: 10})
	if r.Granted != 4 {
		t.Fatalf("4 given back, 4 granted again: %+v", r)
	}
	if r := w.Apply(now.Add(10*time.Second), BudgetCall{Want: 10}); r.Requests != 0 || r.Granted != 5 {
		t.Fatalf("10 s later the window is empty again: %+v", r)
	}
}

func TestCooldownUntil(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	u := CooldownUntil(time.Time{}, now, 25*time.Second)
	if !u.Equal(now.Add(25 * time.Second)) {
		t.Fatalf("%v", u)
	}
	if v := CooldownUntil(u, now, 5*time.Second); !v.Equal(u) {
		t.Fatalf("a shorter hint moved the end: %v", v)
	}
	if v := CooldownUntil(time.Time{}, now, 0); !v.IsZero() {
		t.Fatalf("no hint, no cooldown: %v", v)
	}
}
