// Package gaxretry builds a gax.Retryer from a [retry.Policy], so that any
// Google Cloud Go client (cloud.google.com/go/..., which call gax.Invoke) can
// retry with the policy through a call option:
//
//	resp, err := client.SanitizeUserPrompt(ctx, req, gaxretry.WithRetry(retry.ModelArmor()))
//
// or for every call of a method, in the client's CallOptions:
//
//	client.CallOptions.SanitizeUserPrompt = []gax.CallOption{gaxretry.WithRetry(p)}
//
// # gax semantics
//
// gax.Invoke drives the loop: it calls Retry(err) after each failed attempt
// and sleeps for the pause returned. Each call gets a fresh Retryer (gax asks
// the option's function for one at the call's first failure), which keeps the
// call's state: the attempts made, the previous wait, the time of the first
// failure. The pause comes from [retry.Policy.Backoff], the one wait formula
// of the module, with a server hint as a floor exactly as the core loop
// applies it (hint plus jitter, capped by MaxRetryAfter).
//
// # What is retried
//
//   - gRPC errors whose status code is UNAVAILABLE or RESOURCE_EXHAUSTED
//     (see [WithCodes]);
//   - HTTP errors whose status code is in the policy's StatusCodes (default
//     408, 429, 500, 502, 503, 504). An error with a *googleapi.Error in its
//     chain (what the generated clients of google.golang.org/api return, and
//     what gax.Invoke then wraps in an *apierror.APIError whose gRPC status
//     is gax's mapping of the HTTP code) is classified by that error's Code,
//     never by the mapped gRPC code: under a policy without 429, a 429 is not
//     retried, and a 500 or 504 is retried although gax maps them to
//     INTERNAL and DEADLINE_EXCEEDED. [WithCodes] does not apply to them;
//   - transient network errors outside those: connection refused, reset or
//     aborted, broken pipe, io.ErrUnexpectedEOF, and timeouts: any net.Error
//     whose Timeout() is true, http.Client.Timeout and
//     http.Transport.ResponseHeaderTimeout included.
//
// Not retried: the context's cancellation or deadline (context.Canceled or
// context.DeadlineExceeded itself in the error's chain; net/http reports its
// own timeouts with an error of its own type, which is retried), errors
// marked with [retry.Permanent], and anything else. Policy.Retryable, when
// set, can veto a retry.
//
// # Server hints
//
// A google.rpc.RetryInfo in the error's details (gRPC status details, or the
// JSON error body of an HTTP error) and an HTTP Retry-After header set a floor
// under the next pause (the larger one wins), plus jitter, capped by
// Policy.MaxRetryAfter. Hints attached with [retry.After] count too.
//
// # Limits
//
// A Retryer sees errors, not the call's context: it cannot refuse a pause that
// would end after the context's deadline (gax then returns the context's
// error when the deadline passes during the pause). Set Policy.Deadline for
// that: no pause is returned that would end after it. The Deadline is
// measured from the call's first failure, when gax creates the Retryer, so it
// does not include the first attempt's duration. Policy.AttemptTimeout,
// Policy.Budget, Policy.Throttle and Policy.Pacer are not used: gax neither
// tells a Retryer about attempts that succeed nor lets it bound or delay an
// attempt other than by the pause it returns (use gax.WithTimeout or the
// context for the whole call).
package gaxretry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"syscall"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"github.com/backoffkit/retry/internal/errchain"
	gax "github.com/googleapis/gax-go/v2"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
)

// DefaultCodes are the gRPC status codes retried unless [WithCodes] says
// otherwise: UNAVAILABLE and RESOURCE_EXHAUSTED, the equivalents of HTTP 503
// and 429.
var DefaultCodes = []codes.Code{codes.Unavailable, codes.ResourceExhausted}

// Option configures a Retryer.
type Option func(*config)

// WithCodes sets the gRPC status codes that trigger a retry, replacing
// [DefaultCodes]. HTTP errors are classified by the policy's StatusCodes
// instead.
func WithCodes(c ...codes.Code) Option {
	c = append([]codes.Code{}, c...) // a copy, never nil: no code means none
	return func(cfg *config) { cfg.codes = c }
}

type config struct {
	codes []codes.Code
}

// New returns a gax.Retryer for one call under p. Give each call its own
// Retryer (gax.WithRetry's function is called once per call; [WithRetry]
// does it for you): it keeps the call's state.
//
// New panics with p's [*retry.ValidationError] if p is invalid; check policies
// that come from configuration with [retry.Policy.Validate] first.
func New(p retry.Policy, opts ...Option) gax.Retryer {
	return newRetryer(p, mustConfig(p, opts))
}

// WithRetry returns a gax call option that retries the call under p with a
// fresh Retryer from [New] for each call. It panics if p is invalid, as New.
func WithRetry(p retry.Policy, opts ...Option) gax.CallOption {
	c := mustConfig(p, opts)
	return gax.WithRetry(func() gax.Retryer { return newRetryer(p, c) })
}

func mustConfig(p retry.Policy, opts []Option) *config {
	if err := p.Validate(); err != nil {
		panic(err) // the *retry.ValidationError itself, as documented
	}
	c := &config{codes: DefaultCodes}
	for _, o := range opts {
		o(c)
	}
	return c
}

func newRetryer(p retry.Policy, c *config) *retryer {
	r := &retryer{p: p, c: c, r: p.Resolved()}
	// The step needs neither the classifier (retryable has applied it) nor
	// the limiters (gax never tells a Retryer about successes).
	r.step = r.r
	r.step.Retryable, r.step.Budget, r.step.Throttle = nil, nil, nil
	if r.p.Observer == nil {
		r.p.Observer = retry.SlogObserver(nil, slog.LevelDebug)
	}
	return r
}

// retryer is the state of one call.
type retryer struct {
	p    retry.Policy // as given (its Observer, Retryable and codes)
	r    retry.Policy // resolved: the limits as numbers
	step retry.Policy // r for Policy.Next: no classifier, no limiters
	c    *config

	attempts int           // failed attempts so far
	prev     time.Duration // the previous wait
	start    time.Time     // the first failure
}

// Retry implements gax.Retryer.
func (r *retryer) Retry(err error) (time.Duration, bool) {
	now := time.Now()
	if r.attempts == 0 {
		r.start = now
	}
	r.attempts++
	e := retry.Event{Attempt: r.attempts, MaxAttempts: r.r.Attempts, Err: err, Elapsed: now.Sub(r.start)}
	giveUp := func(reason retry.Reason) (time.Duration, bool) {
		e.Kind, e.Reason = retry.EventGiveUp, reason
		r.p.Observer(context.Background(), e)
		return 0, false
	}

	// Classify and read hints the gax way, then take the core's step between
	// attempts (attempts cap, Backoff, hint floor, deadline) on the result.
	ae, _ := asAPIError(err)
	ge := googleAPIError(err)
	classified := err
	if !r.retryable(err, ae, ge) {
		classified = retry.Permanent(err)
	} else if hint, ok := serverHint(err, ae, ge, now); ok {
		classified = retry.After(err, hint)
	}
	var deadline time.Time
	if r.r.Deadline > 0 {
		deadline = r.start.Add(r.r.Deadline)
	}
	step := r.step.Next(r.attempts, r.prev, classified, now, deadline)
	r.prev = step.Shaped
	if step.Reason != retry.ReasonNone {
		return giveUp(step.Reason)
	}
	e.Kind, e.Wait, e.Hint = retry.EventRetry, step.Wait, step.Hint
	r.p.Observer(context.Background(), e)
	return step.Wait, true
}

// asAPIError returns the *apierror.APIError in err's chain, or one built
// from err (as gax.Invoke does) when err is a gRPC status or a
// *googleapi.Error, so that a Retryer classifies the same inside and outside
// gax.Invoke.
func asAPIError(err error) (*apierror.APIError, bool) {
	var ae *apierror.APIError
	if errors.As(err, &ae) {
		return ae, true
	}
	return apierror.FromError(err)
}

// googleAPIError returns the first *googleapi.Error in err's chain, or nil,
// as errors.As would; errors.AsType allocates no target.
func googleAPIError(err error) *googleapi.Error {
	ge, _ := errors.AsType[*googleapi.Error](err)
	return ge
}

// retryable classifies err; ae is the APIError in or built from err, ge the
// *googleapi.Error in its chain, each nil if none.
func (r *retryer) retryable(err error, ae *apierror.APIError, ge *googleapi.Error) bool {
	if retry.IsPermanent(err) || errors.Is(err, context.Canceled) || contextDeadline(err) {
		return false
	}
	var ok bool
	switch {
	case ge != nil:
		// Before the APIError: the one gax.Invoke builds around a generated
		// client's error finds the gRPC status of the APIError nested in the
		// *googleapi.Error (gax's mapping of the HTTP code), so its
		// HTTPCode() is -1 and its GRPCStatus() is not the server's.
		ok = r.p.RetriesStatus(ge.Code)
	case ae != nil && ae.HTTPCode() > 0:
		ok = r.p.RetriesStatus(ae.HTTPCode())
	case ae != nil && ae.GRPCStatus() != nil:
		ok = slices.Contains(r.c.codes, ae.GRPCStatus().Code())
	default:
		ok = transient(err)
	}
	return ok && (r.p.Retryable == nil || r.p.Retryable(err))
}

// contextDeadline reports whether err's chain holds context.DeadlineExceeded
// itself: the call's context (or a context under it) ran out. errors.Is is
// not enough: net/http's own timeouts (http.Client.Timeout,
// Transport.ResponseHeaderTimeout) are errors of another type that match
// context.DeadlineExceeded with an Is method, and they are network timeouts
// to retry.
func contextDeadline(err error) bool {
	// No panic: == panics only for two values of one uncomparable type, and
	// the sentinel's type is comparable.
	return errchain.Find(err, func(e error) bool { return e == context.DeadlineExceeded })
}

// transient reports whether err is a network failure worth retrying, by
// type, never by message text.
func transient(err error) bool {
	for _, errno := range []syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE} {
		if errors.Is(err, errno) {
			return true
		}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// serverHint returns the largest of the hints err carries: retry.After,
// RetryInfo (from the status details or the HTTP JSON body) and an HTTP
// Retry-After header. ae and ge are as for retryable.
func serverHint(err error, ae *apierror.APIError, ge *googleapi.Error, now time.Time) (d time.Duration, ok bool) {
	take := func(h time.Duration, hok bool) {
		if hok && (!ok || h > d) {
			d, ok = max(h, 0), true
		}
	}
	take(retry.RetryAfter(err))
	if ae != nil {
		if ri := ae.Details().RetryInfo; ri.GetRetryDelay() != nil {
			take(ri.GetRetryDelay().AsDuration(), true)
		}
	}
	if ge != nil {
		take(httpretry.ParseRetryAfter(ge.Header.Get("Retry-After"), now))
		if ae == nil || ae.Details().RetryInfo == nil {
			// apierror drops every detail of a body with a detail type it
			// does not know; read RetryInfo from the JSON directly then.
			take(httpretry.ParseRetryInfo([]byte(ge.Body)))
		}
	}
	return d, ok
}
