package chaos

import (
	"fmt"
	"slices"
	"strings"

	"github.com/backoffkit/retry/internal/enum"
)

// Fault is one misbehaviour the server can apply to a request.
//
// Faults marked "before the effect" reject the request without running its
// side effect; faults marked "after the effect" run it first and then fail
// to deliver the response, which is what turns a careless retry into a
// duplicate.
type Fault uint8

const (
	// None serves the request normally.
	None Fault = iota

	// ResetBeforeRead resets the connection before reading the request
	// body (before the effect).
	ResetBeforeRead
	// ResetBeforeResponse reads the body, runs the effect, then resets
	// the connection without sending any response (after the effect).
	ResetBeforeResponse
	// ResetAfterHeaders sends the response headers, then resets the
	// connection (after the effect).
	ResetAfterHeaders
	// ResetMidBody sends the headers and half of the response body, then
	// resets the connection (after the effect).
	ResetMidBody
	// StallHeaders sends nothing until the client gives up or
	// Config.StallMax passes, then resets (before the effect).
	StallHeaders
	// StallBody sends the headers and half the body, then stalls until the
	// client gives up or Config.StallMax passes, then resets (after the
	// effect).
	StallBody
	// SlowRead reads the request body a few bytes at a time (slow loris,
	// server side) until the client gives up or Config.StallMax passes,
	// then resets (before the effect). Like a real slow server it only
	// notices a client that left once it reaches the end of the bytes
	// already sent, so it may hold the connection until StallMax.
	SlowRead

	// Status5xx answers 500, 502, 503 or 504 (before the effect).
	Status5xx
	// RetryAfterSeconds answers 429 with Retry-After in whole seconds
	// (Config.RetryAfter rounded up).
	RetryAfterSeconds
	// RetryAfterDate answers 429 with Retry-After as an HTTP-date
	// Config.RetryAfter from now.
	RetryAfterDate
	// RetryAfterMalformed answers 429 with an unparsable Retry-After.
	RetryAfterMalformed
	// RetryAfterNegative answers 429 with Retry-After: -5.
	RetryAfterNegative
	// RetryAfterHuge answers 429 with Retry-After: 1000000000 (about 31
	// years).
	RetryAfterHuge
	// RetryInfo answers 429 with a google.rpc.RetryInfo error body whose
	// retryDelay is Config.RetryAfter.
	RetryInfo
	// RetryInfoMalformed answers 429 with a truncated, invalid RetryInfo
	// body.
	RetryInfoMalformed
	// RetryInfoHuge answers 429 with a RetryInfo body asking for
	// 1000000000 s, padded to Config.HugeBody bytes.
	RetryInfoHuge

	// GoAway serves the request (after the effect) and then closes the
	// connection gracefully: "Connection: close" over HTTP/1.1, a GOAWAY
	// frame over HTTP/2.
	GoAway

	// StallStatus answers 503 with a RetryInfo error body (Content-Type
	// application/json, a Content-Length for the whole body), sends the
	// headers and the first half of the body, then stalls until the client
	// gives up or Config.StallMax passes, then resets (before the effect):
	// a retryable answer whose body never ends.
	StallStatus

	// The stream faults apply to stream requests only (see HeaderStream);
	// a plain request that draws one is served normally.

	// StreamErrorFirst answers 200 with a stream whose first and only event
	// is a Google error object: 429 RESOURCE_EXHAUSTED with a RetryInfo of
	// Config.RetryAfter (before the effect), as Gemini does when a quota
	// runs out after the stream began.
	StreamErrorFirst
	// StreamResetBeforeFirst sends the stream's headers, then resets before
	// any event (before the effect).
	StreamResetBeforeFirst
	// StreamResetAfterFirst sends the headers and the first event, then
	// resets (after the effect: the caller has an event, a retry would
	// repeat it).
	StreamResetAfterFirst
	// StreamSlowFirst sends the headers, waits Config.StallMax (or until the
	// client leaves), then sends the whole stream (after the effect).
	StreamSlowFirst

	numFaults
)

var faultNames = [...]string{
	None:                "none",
	ResetBeforeRead:     "reset-before-read",
	ResetBeforeResponse: "reset-before-response",
	ResetAfterHeaders:   "reset-after-headers",
	ResetMidBody:        "reset-mid-body",
	StallHeaders:        "stall-headers",
	StallBody:           "stall-body",
	SlowRead:            "slow-read",
	Status5xx:           "5xx",
	RetryAfterSeconds:   "retry-after-seconds",
	RetryAfterDate:      "retry-after-date",
	RetryAfterMalformed: "retry-after-malformed",
	RetryAfterNegative:  "retry-after-negative",
	RetryAfterHuge:      "retry-after-huge",
	RetryInfo:           "retryinfo",
	RetryInfoMalformed:  "retryinfo-malformed",
	RetryInfoHuge:       "retryinfo-huge",
	GoAway:              "goaway",
	StallStatus:         "stall-status",

	StreamErrorFirst:       "stream-error-first",
	StreamResetBeforeFirst: "stream-reset-before-first",
	StreamResetAfterFirst:  "stream-reset-after-first",
	StreamSlowFirst:        "stream-slow-first",
}

// String returns the fault's name, e.g. "reset-mid-body".
func (f Fault) String() string { return enum.Name(f, "Fault", faultNames[:]...) }

// ParseFault returns the Fault with the given name (see Fault.String).
func ParseFault(name string) (Fault, error) {
	if i := slices.Index(faultNames[:], name); i >= 0 {
		return Fault(i), nil
	}
	return 0, fmt.Errorf("chaos: unknown fault %q (want one of %s)", name, strings.Join(faultNames[:], ", "))
}

// Faults returns every fault except None and the stream faults, in
// declaration order: those a plain request can get.
func Faults() []Fault {
	out := make([]Fault, 0, numFaults-1)
	for f := None + 1; f < numFaults; f++ {
		if !f.Stream() {
			out = append(out, f)
		}
	}
	return out
}

// StreamFaults returns the faults that apply to stream requests only, in
// declaration order. A stream request draws from Faults and StreamFaults.
func StreamFaults() []Fault {
	return []Fault{StreamErrorFirst, StreamResetBeforeFirst, StreamResetAfterFirst, StreamSlowFirst}
}

// Stream reports whether f applies to stream requests only.
func (f Fault) Stream() bool { return f >= StreamErrorFirst && f < numFaults }

// AfterEffect reports whether the fault runs the request's side effect
// before failing (so a retry without deduplication would repeat it).
func (f Fault) AfterEffect() bool {
	switch f {
	case ResetBeforeResponse, ResetAfterHeaders, ResetMidBody, StallBody, GoAway,
		StreamResetAfterFirst, StreamSlowFirst:
		return true
	}
	return false
}
