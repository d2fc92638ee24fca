package fleetsim

import (
	"strings"
	"testing"

	"github.com/backoffkit/retry/redisretry/internal/backend"
)

// The names of fleetsim's enumerations and of the backend's scripts, every
// value from 0 to one past the last, and what a value without a name
// prints.
func TestEnumNames(t *testing.T) {
	tests := []struct{ got, want string }{
		{names(Ramp + 1), "poisson constant jittered bursts ramp Shape(5)"},
		{names(SlowConnect + 1), "FaultKind(0) slow-replies partition flush restart kill clock-step overload stall slow-connect FaultKind(10)"},
		{names(PaceQuota + 1), "auto backoff adaptive quota Pacing(?)"},
		{names(backend.Rate + 1), "Script(0) gcra.lua gcra_return.lua budget.lua cooldown.lua rate.lua Script(6)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("names %q, want %q", tt.got, tt.want)
		}
	}
}

// names returns the names of the values 0 to last, separated by spaces.
func names[T interface {
	~uint8
	String() string
}](last T) string {
	var s []string
	for v := T(0); v <= last; v++ {
		s = append(s, v.String())
	}
	return strings.Join(s, " ")
}
