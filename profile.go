package retry

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// profileNames lists the profiles in the order of docs/profiles.md.
var profileNames = []string{"standard", "flex", "priority", "provisioned", "realtime", "batch", "model-armor"}

// ProfileNames returns the names accepted by [Profile], in a fixed order:
// standard, flex, priority, provisioned, realtime, batch, model-armor.
func ProfileNames() []string { return slices.Clone(profileNames) }

// Profile returns the named policy from Google's guidance on choosing how
// hard to retry (by payment model and latency tolerance). docs/profiles.md
// has every value and why. The name is matched without regard to case.
//
//   - "standard": pay-as-you-go on shared capacity; Google's defaults
//     (see [Google]): back off exponentially on 408, 429 and 5xx.
//   - "flex": Flex pay-as-you-go is slow and low priority: do not retry
//     hard (3 attempts) but give each attempt long enough, 10 minutes
//     (AttemptTimeout). The guidance allows up to 30 minutes: set
//     p.AttemptTimeout = 30 * time.Minute.
//   - "priority": Priority pay-as-you-go is latency sensitive and must stay
//     within quota: Google's defaults, 429 included, under a [RatioBudget]
//     (retries at most 20 % of requests over 10 s, at least 10 per second).
//   - "provisioned": provisioned throughput: a 429 means the purchased
//     capacity is exceeded and retrying does not fix it, so StatusCodes
//     omits 429 (408 and 5xx are still retried).
//   - "realtime": chat and other interactive use: fail fast, 3 attempts,
//     waits of 0.5 s then 1 s (plus up to 0.5 s of jitter, capped at 2 s)
//     and a 10 s Deadline for the whole call.
//   - "batch": submit the job once (Attempts 1); the batch service retries
//     its items itself.
//   - "model-armor": the Model Armor API's policy, equal to [ModelArmor].
//
// A Policy knows no protocol, so a profile does not carry what selects the
// consumption option on the wire. With Vertex AI, "flex" and "priority"
// are chosen by request headers (X-Vertex-AI-LLM-Request-Type: shared and
// X-Vertex-AI-LLM-Shared-Request-Type: flex; X-Vertex-AI-LLM-Shared-Request-Type:
// priority): without them a request is served as Standard pay-as-you-go,
// whatever the policy. httpretry.WithProfile(name) sends them, and keeps
// both off Vertex AI's regional endpoints, which serve neither;
// httpretry.ProfileHeader(name) returns them for a client that sets its
// own (the Gen AI SDK's HTTPOptions.Headers). The other profiles send
// none ("provisioned" included: see docs/profiles.md).
//
// Every call returns a new Policy. For "priority" that includes a new
// budget: the budget is shared by every copy of the returned value, so call
// Profile once per client and reuse the Policy for all its calls (one Policy
// value = one client's budget). An unknown name gives an error that lists
// the known ones.
//
// "flex" (AttemptTimeout), "realtime" and "model-armor" (Deadline) run each
// attempt under a derived context: 4 allocations per attempt, unless the
// caller's context has an earlier deadline (see [Do]). The others allocate
// nothing on the success path.
func Profile(name string) (Policy, error) {
	switch strings.ToLower(name) {
	case "standard":
		return Google(), nil
	case "flex":
		p := Google()
		p.Attempts = 3
		p.AttemptTimeout = 10 * time.Minute
		return p, nil
	case "priority":
		p := Google()
		p.Budget = NewRatioBudget(RatioBudgetConfig{})
		return p, nil
	case "provisioned":
		p := Google()
		p.StatusCodes = []int{408, 500, 502, 503, 504}
		return p, nil
	case "realtime":
		return Policy{
			Attempts:     3,
			InitialDelay: 500 * time.Millisecond,
			MaxDelay:     2 * time.Second,
			ExpBase:      2,
			Jitter:       500 * time.Millisecond,
			Deadline:     10 * time.Second,
			StatusCodes:  slices.Clone(DefaultStatusCodes),
		}, nil
	case "batch":
		p := Google()
		p.Attempts = 1
		return p, nil
	case "model-armor":
		return ModelArmor(), nil
	}
	return Policy{}, fmt.Errorf("retry: unknown profile %q (want one of %s)", name, strings.Join(profileNames, ", "))
}
