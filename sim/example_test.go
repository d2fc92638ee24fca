package sim_test

import (
	"fmt"
	"os"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/sim"
)

// Full jitter against exponential backoff without jitter, 50 clients racing
// for one record: full jitter does far less work.
func ExampleRunContention() {
	var strategies []sim.Strategy
	for _, name := range []string{"expo", "full"} {
		s, err := sim.ContentionStrategy(name, sim.DefaultBase, sim.DefaultCap, sim.DefaultJitter)
		if err != nil {
			panic(err)
		}
		strategies = append(strategies, s)
	}
	res, err := sim.RunContention(sim.ContentionConfig{Clients: []int{50}, Runs: 20, Seed: 1, Strategies: strategies})
	if err != nil {
		panic(err)
	}
	expo, full := res[0], res[1]
	fmt.Printf("full jitter does %.0f%% of the work of expo\n", 10*float64(int(10*full.CallsMean/expo.CallsMean+0.5)))
	// Output:
	// full jitter does 50% of the work of expo
}

// A strategy can be any retry.Policy: here full jitter with a 20 ms base.
func ExampleContentionConfig() {
	s := sim.Strategy{Name: "full-20ms", Policy: retry.Policy{InitialDelay: 20 * time.Millisecond, MaxDelay: 2 * time.Second, Shape: retry.ShapeFull}}
	res, err := sim.RunContention(sim.ContentionConfig{Clients: []int{10}, Runs: 5, Seed: 1, Strategies: []sim.Strategy{s}})
	if err != nil {
		panic(err)
	}
	fmt.Println(res[0].Strategy, res[0].Clients, res[0].Runs, res[0].CallsMean >= 10)
	// Output:
	// full-20ms 10 5 true
}

// The Gen AI SDK's default policy against no retries and a retry budget,
// during a 20 s outage of a server that serves 1,000 requests/s.
func ExampleRunOverload() {
	cfg := sim.DefaultOverload()
	cfg.Clients, cfg.Hosts, cfg.Capacity, cfg.Queue = 5000, 10, 1000, 100
	cfg.Outage = 20 * time.Second
	cfg.Seed = 1
	for _, name := range []string{"none", "genai", "token-bucket"} {
		s, err := sim.OverloadStrategyByName(name)
		if err != nil {
			panic(err)
		}
		cfg.Strategies = append(cfg.Strategies, s)
	}
	res, err := sim.RunOverload(cfg)
	if err != nil {
		panic(err)
	}
	for _, r := range res {
		fmt.Printf("%-12s amplification %.0f×\n", r.Strategy, r.Amplification)
	}
	// Output:
	// none         amplification 1×
	// genai        amplification 5×
	// token-bucket amplification 1×
}

func ExampleWriteJSON() {
	res, err := sim.RunContention(sim.ContentionConfig{Clients: []int{1}, Runs: 1, Seed: 1, Strategies: []sim.Strategy{{Name: "one"}}})
	if err != nil {
		panic(err)
	}
	// One client always wins at the first write.
	res[0].TimeMsMean, res[0].Events = 0, 0
	sim.WriteJSON(os.Stdout, res)
	// Output:
	// {"experiment":"contention","strategy":"one","clients":1,"runs":1,"calls_mean":1,"calls_sd":0,"time_ms_mean":0,"time_ms_sd":0,"events":0}
}

func ExampleOverloadStrategyByName() {
	s, err := sim.OverloadStrategyByName("profile:realtime")
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Name, s.Policy.Attempts, s.Policy.Deadline)
	// Output:
	// profile:realtime 3 10s
}

func ExampleSizes() {
	fmt.Println(sim.Sizes(10, 50, 10))
	// Output:
	// [10 20 30 40 50]
}

// Every contention strategy is a retry.Policy; its waits come from
// Policy.Backoff. After the first failed write (k = 1) expo waits base·2.
func ExampleContentionStrategy() {
	s, err := sim.ContentionStrategy("expo", 5*time.Millisecond, 2*time.Second, 0)
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Policy.Shape, s.Policy.Backoff(1, 0, 0.5), s.Policy.Backoff(20, 0, 0.5))
	// Output:
	// none 10ms 2s
}
