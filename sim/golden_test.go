package sim

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/golden from the current code")

// The simulator's output for fixed seeds is pinned byte for byte: the JSON
// lines, the rendered report, and for the overload experiment a SHA-256 of
// everything a run measured (every bin's counters, the time series and the
// histogram of the requests' latencies, 1 ms buckets), per strategy. A change
// that alters any simulated result (the order of two events, one random draw
// more or less) fails here. The files were recorded from the code before the
// event queue was reworked; regenerate them with -update only for a change
// that is meant to alter results, and say so in its commit.
func TestGolden(t *testing.T) {
	cases := []struct {
		name string
		out  func(t *testing.T) []byte
	}{
		{"overload-tiny-all", func(t *testing.T) []byte {
			c := tiny()
			c.Strategies = strategies(t, OverloadNames()...)
			return overloadGolden(t, c)
		}},
		{"overload-tiny-drop-all", func(t *testing.T) []byte {
			c := tiny()
			c.Drop, c.Timeout, c.Seed = true, 2*time.Second, 3
			c.Strategies = strategies(t, OverloadNames()...)
			return overloadGolden(t, c)
		}},
		{"overload-20k", func(t *testing.T) []byte {
			c := DefaultOverload()
			c.Clients, c.Hosts, c.Capacity, c.Queue, c.Seed = 20_000, 20, 2000, 200, 7
			c.Strategies = strategies(t, "none", "genai", "budget+throttle")
			return overloadGolden(t, c)
		}},
		{"overload-no-outage", func(t *testing.T) []byte {
			c := small()
			c.Outage, c.Load, c.Seed = 0, 1.1, 11
			c.Strategies = strategies(t, "none", "genai", "token-bucket")
			return overloadGolden(t, c)
		}},
		{"contention", func(t *testing.T) []byte {
			cfg := ContentionConfig{Clients: []int{10, 50, 120}, Runs: 3, Seed: 5}
			res, err := RunContention(cfg)
			if err != nil {
				t.Fatal(err)
			}
			buf := bytes.NewBuffer(jsonOf(t, res))
			if err := WriteContentionReport(buf, res); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.out(t)
			path := filepath.Join("testdata", "golden", tc.name+".txt")
			if *updateGolden {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGolden -update to record it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s changed; got:\n%s\nwant:\n%s", path, got, want)
			}
		})
	}
}

// overloadGolden renders c's results as JSON lines and as the report, and
// appends one digest per strategy of everything its run measured. It runs
// each strategy as RunOverload does (TestGoldenRunsAsRunOverload checks
// that the rows are RunOverload's), once: the digest needs the run's
// insides.
func overloadGolden(t *testing.T, c OverloadConfig) []byte {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg := c
	if cfg.OnTime == 0 {
		cfg.OnTime = time.Second
	}
	res := make([]OverloadResult, len(cfg.Strategies))
	var digests bytes.Buffer
	for i := range cfg.Strategies {
		o := runOverloadOne(&cfg, &cfg.Strategies[i])
		res[i] = o.res
		fmt.Fprintf(&digests, "digest %s %x\n", cfg.Strategies[i].Name, overloadDigest(o))
	}
	buf := bytes.NewBuffer(jsonOf(t, res))
	if err := WriteOverloadReport(buf, c, res); err != nil {
		t.Fatal(err)
	}
	buf.Write(digests.Bytes())
	return buf.Bytes()
}

// The golden files' rows are what RunOverload returns.
func TestGoldenRunsAsRunOverload(t *testing.T) {
	c := tiny()
	c.Strategies = strategies(t, "genai", "budget+throttle")
	res, err := RunOverload(c)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := WriteJSON(&want, res); err != nil {
		t.Fatal(err)
	}
	if err := WriteOverloadReport(&want, c, res); err != nil {
		t.Fatal(err)
	}
	if got := overloadGolden(t, c); !bytes.HasPrefix(got, want.Bytes()) {
		t.Errorf("overloadGolden:\n%s\nRunOverload:\n%s", got, want.Bytes())
	}
}

// overloadDigest hashes what one overload run measured: the counters, every
// bin (all its fields, also past Duration), the series of the result and the
// latency histogram without its trailing empty buckets.
func overloadDigest(o *overloadSim) []byte {
	h := sha256.New()
	w := func(vs ...int64) {
		for _, v := range vs {
			h.Write(binary.LittleEndian.AppendUint64(nil, uint64(v)))
		}
	}
	f := func(vs ...float64) {
		for _, v := range vs {
			w(int64(math.Float64bits(v)))
		}
	}
	r := &o.res
	w(r.Requests, r.Attempts, r.Succeeded, r.Failed, r.GaveUp, r.Throttled, r.Events, o.outReqs, o.outAtt, o.endedAtt, o.good)
	for _, b := range o.bins {
		w(b.arrived, b.ok, b.refused, b.success, b.started, b.onTime)
		f(b.rejectP)
	}
	for _, s := range [][]float64{r.Load, r.Good, r.OnTime, r.RejectP} {
		w(int64(len(s)))
		f(s...)
	}
	lat := o.latency
	for len(lat) > 0 && lat[len(lat)-1] == 0 {
		lat = lat[:len(lat)-1]
	}
	w(int64(len(lat)))
	for _, n := range lat {
		w(int64(n))
	}
	return h.Sum(nil)
}
