package sim

import "testing"

// BenchmarkFleet simulates every default strategy of the default fleet
// experiment (and, for the busiest case, without RetryInfo) and reports
// the simulated events per second of wall time.
func BenchmarkFleet(b *testing.B) {
	for _, tc := range []struct {
		name string
		ri   int64
	}{{"retry-info=reset", 0}, {"retry-info=none", -1}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			c := DefaultFleet()
			c.Seed, c.Workers, c.RetryInfo = 1, 1, 0
			if tc.ri < 0 {
				c.RetryInfo = -1
			}
			var events int64
			for b.Loop() {
				res, err := RunFleet(c)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range res {
					events += r.Events
				}
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
