// Package retry retries failed calls with Google's truncated exponential
// backoff with jitter, as published for the Gen AI SDK and the Model Armor API.
//
// The flow is: a [Policy] says what to do; [Do] or [Run] call a function,
// classify its error, compute a wait from the policy's [Shape] (or a server
// hint given with [After]), check that the wait ends before the context's and
// the policy's deadline, and try again. When the loop gives up it returns an
// [*Error] that keeps the last error, the context's cause, the number of
// attempts, the elapsed time and the [Reason].
//
// The zero Policy is Google's documented default: 5 attempts, 1 s initial
// delay, base 2, 60 s cap, up to 1 s of jitter. See docs/strategy.md for the
// formulas of every shape and when to choose which.
//
// The package uses the standard library only. HTTP, gRPC, gax and
// OpenTelemetry integrations live in sub-packages and sub-modules.
package retry
