package fleetsim

import (
	"fmt"
	"testing"

	"github.com/backoffkit/retry/redisretry/internal/backend"
)

// The names of fleetsim's enumerations and of the backend's scripts, and
// what a value without a name prints.
func TestEnumNames(t *testing.T) {
	tests := []struct {
		v    fmt.Stringer
		want string
	}{
		{Poisson, "poisson"}, {Ramp, "ramp"}, {Ramp + 1, "Shape(5)"},
		{FaultKind(0), "FaultKind(0)"}, {SlowReplies, "slow-replies"}, {SlowConnect, "slow-connect"}, {SlowConnect + 1, "FaultKind(10)"},
		{PaceAuto, "auto"}, {PaceQuota, "quota"}, {PaceQuota + 1, "Pacing(?)"},
		{backend.Script(0), "Script(0)"}, {backend.GCRA, "gcra.lua"}, {backend.Rate, "rate.lua"}, {backend.Rate + 1, "Script(6)"},
	}
	for _, tt := range tests {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("%T %d: String() = %q, want %q", tt.v, tt.v, got, tt.want)
		}
	}
}
