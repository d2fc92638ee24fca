package enum_test

import (
	"fmt"
	"testing"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/chaos"
)

// The names of the root module's enumerations, and what a value without a
// name prints and how an unknown name is refused: the messages stay as
// they were before the tables shared this package.
func TestRootModuleNames(t *testing.T) {
	tests := []struct {
		v    fmt.Stringer
		want string
	}{
		{retry.Shape(0), "google"}, {retry.ShapeGoogle, "google"}, {retry.ShapeJitterAtCap, "jitter-at-cap"}, {retry.ShapeJitterAtCap + 1, "Shape(8)"},
		{retry.ReasonNone, "none"}, {retry.ReasonThrottled, "throttled"}, {retry.ReasonThrottled + 1, "Reason(7)"},
		{chaos.None, "none"}, {chaos.StreamSlowFirst, "stream-slow-first"}, {chaos.StreamSlowFirst + 1, "Fault(23)"},
	}
	for _, tt := range tests {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("%T %d: String() = %q, want %q", tt.v, tt.v, got, tt.want)
		}
	}
	for _, name := range []string{"google", "none", "jitter-at-cap"} {
		if s, err := retry.ParseShape(name); err != nil || s.String() != name {
			t.Errorf("ParseShape(%q) = %v, %v", name, s, err)
		}
	}
	if s, _ := retry.ParseShape("google"); s != retry.ShapeGoogle {
		t.Errorf("ParseShape(google) = %d, want ShapeGoogle (%d), not the zero Shape", s, retry.ShapeGoogle)
	}
	for _, f := range []chaos.Fault{chaos.None, chaos.Status5xx, chaos.StreamSlowFirst} {
		if g, err := chaos.ParseFault(f.String()); err != nil || g != f {
			t.Errorf("ParseFault(%q) = %v, %v", f, g, err)
		}
	}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{second(retry.ParseShape("wobbly")), `retry: unknown shape "wobbly" (want one of google, none, full, equal, decorrelated, grpc, jitter-at-cap)`},
		{second(retry.ParseShape("")), `retry: unknown shape "" (want one of google, none, full, equal, decorrelated, grpc, jitter-at-cap)`},
		{second(chaos.ParseFault("wobbly")), `chaos: unknown fault "wobbly" (want one of none, reset-before-read, reset-before-response, reset-after-headers, reset-mid-body, stall-headers, stall-body, slow-read, 5xx, retry-after-seconds, retry-after-date, retry-after-malformed, retry-after-negative, retry-after-huge, retryinfo, retryinfo-malformed, retryinfo-huge, goaway, stall-status, stream-error-first, stream-reset-before-first, stream-reset-after-first, stream-slow-first)`},
	} {
		if tt.err == nil || tt.err.Error() != tt.want {
			t.Errorf("error %v, want %s", tt.err, tt.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }
