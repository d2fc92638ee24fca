// Package policy builds the retry.Policy of a run the way every verb of
// retry does: the policy flags (--attempts, --max-delay, --profile, ...),
// the JSON config file, their precedence and the errors that name where a
// value came from; the fleet's limiters on Redis (--redis, --fleet,
// --quota); and the event log, the retry lines in text or JSON that every
// verb writes on stderr. It imports cli only.
package policy
