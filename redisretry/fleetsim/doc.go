// Package fleetsim runs a fleet of processes, each with the real redisretry
// limiters built as users build them, against one in-memory Redis, in
// virtual time: 10 to 10,000 processes, sparse to saturated, with partial
// failures, deterministic for a seed.
//
// Each simulated process is the client its limiters are built on
// (redisretry.NewQuota(process, config)): the process gives them its clock
// and its network to Redis, and they hand it their decisions' asynchronous
// cores, so that one goroutine drives every process from one event queue.
// The network carries each script call to the in-memory Redis after a
// latency, where the script's Go model runs on the shared state at that
// moment (the same models a test in redisretry holds to the Lua scripts on a
// real server), and brings the reply back after another. Nothing in the
// limiters is copied or modelled: what a run shows is what the library does.
//
// Each call runs the core's retry loop step by step (retry.Policy.Next: the
// backoff, the server's RetryInfo, the deadline), the fleet's cooldown and
// quota asked before each attempt as retry.Pacers asks them, the budget
// after Next. An API server enforces the quota over a sliding window and
// answers 429 with a RetryInfo beyond it, as a Google server does.
//
// Faults (late replies, partitions, a flush or a restart of Redis without
// data, killed processes, clock steps, a 429 storm) hit some processes or
// all, for a while. [Run] returns a [Result]: requests per window against the
// quota, 429s, utilisation, waits, refusals at the deadline, fairness, Redis
// round trips, the schedule reserved and how far it runs ahead; [WriteTable],
// [WriteJSON] and [WritePlots] report it.
package fleetsim
