package enum

import "testing"

type color uint8

func TestName(t *testing.T) {
	names := []string{"", "red", "green"}
	tests := []struct {
		v     color
		names []string
		want  string
	}{
		{1, names, "red"},
		{2, names, "green"},
		{0, names, "color(0)"}, // an empty name is no name
		{3, names, "color(3)"},
		{255, names, "color(255)"},
		{0, nil, "color(0)"},
		{0, []string{"zero"}, "zero"},
	}
	for _, tt := range tests {
		if got := Name(tt.v, "color", tt.names...); got != tt.want {
			t.Errorf("Name(%d, %q) = %q, want %q", tt.v, tt.names, got, tt.want)
		}
	}
}

// A named value costs nothing: String methods run in logs and events.
func TestNameDoesNotAllocate(t *testing.T) {
	names := [...]string{"a", "b"}
	if n := testing.AllocsPerRun(100, func() { Name(color(1), "color", names[:]...) }); n != 0 {
		t.Errorf("%v allocations per named value, want 0", n)
	}
}
