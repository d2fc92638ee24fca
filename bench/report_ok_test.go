package bench

import (
	"math"
	"slices"
	"testing"
)

// TestReportHelpers checks the arithmetic and formatting TestReport's
// table rests on: medians, ratios of pairs, the alternating order, and
// number formatting.
func TestReportHelpers(t *testing.T) {
	for _, tt := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{-1, 10, 10, 0}, 5},
	} {
		if got := median(tt.xs); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
	if got := median(nil); !math.IsNaN(got) {
		t.Errorf("median(nil) = %v, want NaN", got)
	}
	xs := []float64{3, 1, 2}
	median(xs)
	if !slices.Equal(xs, []float64{3, 1, 2}) {
		t.Errorf("median reordered its argument: %v", xs)
	}

	pairs := []pair{{2, 1}, {9, 3}, {1, 4}}
	if got := medianOf(pairs, pair.ratio); got != 2 {
		t.Errorf("median ratio of %v = %v, want 2", pairs, got)
	}
	r := pairRow("f", pairs, "%.1f ns")
	if r.ours != "2.0 ns" || r.anchor != "3.0 ns" || r.ratio != "2.00 [0.25–3.00]" {
		t.Errorf("pairRow = %+v, want ours 2.0 ns, anchor 3.0 ns, ratio 2.00 [0.25–3.00]", r)
	}
	if r := pairRow("f", []pair{{1, 100}, {2, 100}}, "%.0f"); r.ratio != "0.015 [0.010–0.020]" {
		t.Errorf("small ratios shown as %q, want 0.015 [0.010–0.020]", r.ratio)
	}

	for round, want := range [][]int{{0, 1, 2}, {2, 1, 0}, {0, 1, 2}} {
		var got []int
		alternate(round, []func(){
			func() { got = append(got, 0) },
			func() { got = append(got, 1) },
			func() { got = append(got, 2) },
		})
		if !slices.Equal(got, want) {
			t.Errorf("round %d ran %v, want %v", round, got, want)
		}
	}

	for _, tt := range []struct {
		format string
		x      float64
		want   string
	}{
		{"%.1f ns", 83.84, "83.8 ns"},
		{"%.1f", 9999.94, "9999.9"},
		{"%.2f µs", 12345.678, "12,345.68 µs"},
		{"%.0f", 1234567, "1,234,567"},
		{"%.1f", -123456.7, "-123,456.7"},
		{"%.1f", -35.6, "-35.6"},
	} {
		if got := fmtf(tt.format, tt.x); got != tt.want {
			t.Errorf("fmtf(%q, %v) = %q, want %q", tt.format, tt.x, got, tt.want)
		}
	}
}
