// Package redisretry coordinates retries across the processes of a fleet
// through Redis: one quota, one retry budget and one cooldown for every
// process of a project.
//
//   - [Quota] paces attempts under a shared rate (requests or tokens per
//     minute): a [retry.Pacer] for [retry.Policy.Pacer], or [Quota.Wait].
//   - [Budget] keeps the fleet's retries under a ratio of the fleet's
//     requests, with a floor for the whole fleet (by default max(20 % of
//     the requests, 100) per 10 s: for a fleet of quiet processes the
//     floor decides): a [retry.Limiter] for [retry.Policy.Budget].
//   - [Cooldown] shares a server's "retry after" hint with every process
//     (no wait longer than its Max plus its Jitter, on the monotonic
//     clock): a [retry.Pacer], put before the Quota with [retry.Pacers].
//
// Each decision is one Lua script run with EVALSHA, atomic on the server,
// whose clock it uses. None of them costs a round trip per attempt: the quota
// and the budget lease blocks of slots and permits and hand them out locally,
// the cooldown is cached for a moment.
//
// Redis is a helper, never a single point of failure: every call is bounded
// by a timeout (20 ms by default) whatever the client's own settings, and a
// limiter whose Redis fails, stalls or answers errors decides locally (see
// [FailureMode]), logs one line, and goes back to Redis when it answers again
// (tried once per ProbeInterval, with the next call). A key of another type
// at a budget's or a cooldown's key is deleted by its script rather than
// failing every call.
//
// Every Redis key of a limiter is "{Key}:...", with the Key as a hash tag, so
// the scripts run on Redis Cluster too. Take the client as a *redis.Client,
// *redis.ClusterClient or any [redis.Scripter]; [NewClient] makes one from a
// URL. See docs/fleet.md for when to use which, and the figures.
package redisretry
