package grpcretry

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/backoffkit/retry"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// DefaultCodes are the status codes retried unless [WithCodes] says
// otherwise: UNAVAILABLE and RESOURCE_EXHAUSTED, the gRPC equivalents of
// HTTP 503 and 429.
var DefaultCodes = []codes.Code{codes.Unavailable, codes.ResourceExhausted}

// PushbackKey is the trailer by which a server asks for a minimum wait before
// the next attempt, in milliseconds, or for no retry at all with a negative
// or malformed value, or with more than one value (gRFC A6, as grpc-go reads
// it).
const PushbackKey = "grpc-retry-pushback-ms"

// PreviousAttemptsKey is the request header sent with every retry: the number
// of attempts made before this one (gRFC A6). The interceptors set it (a
// value already in the outgoing metadata, for example forwarded from an
// incoming call, is replaced) and remove it from a first attempt.
const PreviousAttemptsKey = "grpc-previous-rpc-attempts"

// ErrNotIdempotent matches (with errors.Is) the error of a call to a
// non-idempotent method that was not retried because the failed attempt may
// have reached the server. The error keeps the attempt's gRPC status.
var ErrNotIdempotent = errors.New("grpcretry: not retried: the method is not idempotent and the call may have reached the server")

// ErrPushback matches (with errors.Is) the error of a call that was not
// retried because the server sent a negative or malformed
// grpc-retry-pushback-ms trailer, or more than one. The error keeps the attempt's gRPC status.
var ErrPushback = errors.New("grpcretry: not retried: the server's grpc-retry-pushback-ms says not to")

// Option configures an interceptor.
type Option func(*config)

// WithCodes sets the status codes that trigger a retry, replacing
// [DefaultCodes]. WithCodes() with no code retries no status code (only
// attempts cut short by Policy.AttemptTimeout are then retried).
func WithCodes(c ...codes.Code) Option {
	c = append([]codes.Code{}, c...) // a copy, never nil: no code means none
	return func(cfg *config) { cfg.codes = c }
}

// WithIdempotent sets the predicate that says whether a method, given by its
// full name ("/package.Service/Method"), is idempotent. A non-idempotent
// method is retried only when the failure proves the call never reached the
// server (see the package documentation). Without this option (and without
// [WithNonIdempotent]) every method is taken as idempotent.
func WithIdempotent(idempotent func(fullMethod string) bool) Option {
	return func(cfg *config) { cfg.idempotent = idempotent }
}

// WithNonIdempotent marks the named methods ("/package.Service/Method") as
// not idempotent; every other method is taken as idempotent. It replaces any
// earlier [WithIdempotent].
func WithNonIdempotent(fullMethods ...string) Option {
	set := make(map[string]struct{}, len(fullMethods))
	for _, m := range fullMethods {
		set[m] = struct{}{}
	}
	return WithIdempotent(func(m string) bool { _, no := set[m]; return !no })
}

// CallPolicy returns a call option that overrides the interceptor's policy
// for one call: the fields set in override replace the interceptor's, field
// by field, as with [retry.Policy.Merge]. CallPolicy(retry.Policy{Attempts: 1})
// turns retries off for the call. Without a retrying interceptor the option
// does nothing.
func CallPolicy(override retry.Policy) grpc.CallOption {
	return callPolicy{p: override}
}

type callPolicy struct {
	grpc.EmptyCallOption
	p retry.Policy
}

type config struct {
	codes      []codes.Code
	idempotent func(string) bool
}

func newConfig(opts []Option) *config {
	c := &config{codes: DefaultCodes}
	for _, o := range opts {
		o(c)
	}
	return c
}

func (c *config) isIdempotent(method string) bool {
	return c.idempotent == nil || c.idempotent(method)
}

// classify turns a failed attempt's error into what the core loop expects:
// the error itself or the error with a hint ([retry.After]) when the attempt
// may be retried, the error marked [retry.Permanent] when it may not.
//
// ctx is the attempt's context, trailer the attempt's trailer (nil if none),
// idempotent says whether the method is, and reached whether the attempt
// may have reached the server (a transport stream was created).
func (c *config) classify(ctx context.Context, err error, trailer metadata.MD, idempotent, reached bool) error {
	st, _ := status.FromError(err)
	// An attempt whose own context ended (AttemptTimeout) is retried; the
	// core stops first if the caller's context or the policy deadline ended.
	timedOut := ctx.Err() != nil
	if !timedOut && !slices.Contains(c.codes, st.Code()) {
		return retry.Permanent(err)
	}
	hint, hinted, stop := pushback(trailer)
	if stop {
		return retry.Permanent(&stopped{err: err, why: ErrPushback})
	}
	if !idempotent && reached {
		return retry.Permanent(&stopped{err: err, why: ErrNotIdempotent})
	}
	if d, ok := retryInfo(st); ok && (!hinted || d > hint) {
		hint, hinted = d, true
	}
	if hinted {
		return retry.After(err, hint)
	}
	return err
}

// pushback reads the grpc-retry-pushback-ms trailer. stop is true for a
// negative or malformed value, or for more than one value, which grpc-go
// takes as "do not retry" too.
func pushback(md metadata.MD) (d time.Duration, ok, stop bool) {
	v := md.Get(PushbackKey)
	switch len(v) {
	case 0:
		return 0, false, false
	case 1:
	default:
		return 0, false, true
	}
	ms, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil || ms < 0 {
		return 0, false, true
	}
	if ms > int64(time.Duration(1<<63-1)/time.Millisecond) {
		return time.Duration(1<<63 - 1), true, false
	}
	return time.Duration(ms) * time.Millisecond, true, false
}

// retryInfo returns the retry delay of the first google.rpc.RetryInfo in the
// status details.
func retryInfo(st *status.Status) (time.Duration, bool) {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return max(ri.GetRetryDelay().AsDuration(), 0), true
		}
	}
	return 0, false
}

// stopped is an attempt's error that was not retried for the reason why. It
// reads exactly like the attempt's error and keeps its status.
type stopped struct {
	err error
	why error
}

func (s *stopped) Error() string              { return s.err.Error() }
func (s *stopped) Unwrap() error              { return s.err }
func (s *stopped) Is(target error) bool       { return target == s.why }
func (s *stopped) GRPCStatus() *status.Status { st, _ := status.FromError(s.err); return st }
