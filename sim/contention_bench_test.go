package sim

import (
	"testing"
)

// BenchmarkContention simulates every strategy at 100 clients, 10 runs each,
// and reports the simulated events per second of wall time.
func BenchmarkContention(b *testing.B) {
	b.ReportAllocs()
	var events int64
	for b.Loop() {
		res, err := RunContention(ContentionConfig{Clients: []int{100}, Runs: 10, Seed: 1, Workers: 1})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			events += r.Events
		}
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}
