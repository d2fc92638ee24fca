// Package sim is a deterministic discrete-event simulator of retry
// strategies: thundering herds under contention and retry storms during an
// outage.
//
// Everything runs on a virtual clock (an event queue, no sleeping) from a
// seed, so the same configuration and seed always give the same numbers,
// whatever the number of cores. The waits come from the library's own
// [retry.Policy.Backoff] and the retry budgets and throttles are the
// library's own [retry.Limiter] implementations: the simulator has no second
// copy of any formula.
//
// Three experiments are provided:
//
//   - [RunContention] is the experiment of the AWS Architecture Blog post
//     "Exponential Backoff and Jitter": N clients race to update one record
//     with optimistic concurrency control.
//   - [RunOverload] is a retry storm: M clients with open-loop arrivals call
//     a server of fixed capacity that has an outage, and the simulator
//     measures how much the retries amplify the load and how long the
//     service takes to recover.
//
// The command "retry sim" (cmd/retry) prints their results as a table, as
// JSON lines or as SVG plots. Its fleet experiment runs the redisretry
// module's own limiters (redisretry/fleetsim), which this module, having no
// requirements, cannot import.
package sim
