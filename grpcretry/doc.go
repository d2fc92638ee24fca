// Package grpcretry retries gRPC client calls with a [retry.Policy]: it
// provides a unary and a stream client interceptor that run every call
// through the core loop of github.com/backoffkit/retry ([retry.Run] and
// [retry.Policy.Backoff]), so waits, caps, deadlines, budgets and observers
// behave exactly as for any other retried call.
//
//	conn, err := grpc.NewClient(target,
//		grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(retry.Policy{})),
//		grpc.WithStreamInterceptor(grpcretry.StreamClientInterceptor(retry.Policy{})),
//		grpc.WithDisableRetry(), // one retry layer, not two
//	)
//
// # What is retried
//
// A failed attempt is retried when its status code is UNAVAILABLE or
// RESOURCE_EXHAUSTED (the gRPC equivalents of HTTP 503 and 429; see
// [WithCodes] to change the set), and when the attempt's own context ended
// while the caller's did not (Policy.AttemptTimeout). Policy.Retryable, when
// set, can still veto a retry; Policy.StatusCodes (HTTP codes) is not used.
//
// # Server hints
//
// Two hints from the server set a floor under the next wait (plus jitter,
// capped by Policy.MaxRetryAfter, and never beyond a deadline, as for every
// hint given with [retry.After]):
//   - a google.rpc.RetryInfo in the status details (its retry_delay);
//   - the grpc-retry-pushback-ms trailer (gRFC A6). A negative or malformed
//     value, or more than one value, means "do not retry", as in grpc-go:
//     the call ends with that attempt's error.
//
// When both are present the larger one is used.
//
// # Idempotency
//
// Every method is taken as idempotent unless [WithIdempotent] or
// [WithNonIdempotent] say otherwise. A non-idempotent method is retried only
// when the failed attempt provably never reached the server: grpc-go created
// no transport stream for it (no connection was ready, the dial failed, or the
// transport refused the new stream before anything was written). The
// interceptor learns this from the attempt's peer (grpc.Peer), which grpc-go
// fills in only once a stream exists. Any attempt that got as far as a stream
// on a connection counts as "may have reached the server", even if the server
// in fact never saw it, so the rule errs on the side of not retrying.
// A refused retry ends the call with an error that matches
// [ErrNotIdempotent] (errors.Is) and keeps the attempt's status.
//
// # Streams
//
// A stream is retried only before its first message is received, never after:
//   - for client-streaming and bidirectional methods, only the creation of the
//     stream (NewStream) is retried; once the stream exists, no message that
//     was sent could be replayed, so later failures are returned as they are;
//   - for server-streaming methods (one request, many responses) the request
//     is buffered, and the stream is opened at the first RecvMsg: a failure
//     to create the stream, or of that first RecvMsg before any message
//     arrived, re-creates the stream and sends the request again. Because of
//     this, errors grpc would report from NewStream are reported by the first
//     RecvMsg. Calling Header before the first RecvMsg opens the stream and
//     ends the retry window once the stream exists.
//
// Policy.AttemptTimeout and Policy.Deadline bound each stream attempt until
// the retry window closes (the first message received, the stream's
// creation, or Header), exactly as they bound a unary attempt: a stream that
// hangs before its first message is cancelled when its attempt times out,
// reported as DEADLINE_EXCEEDED, and retried. The stream handed to the
// caller is then detached from those bounds and lives on the caller's
// context alone, however long it runs. Because of that, the server sees no
// grpc-timeout for an attempt's bound, only the cancellation when it fires.
//
// # Errors
//
// When the interceptor gives up on a retryable error it returns the core's
// [*retry.Error], which keeps the attempts, the reason and the last error;
// status.Code and status.FromError still see the last attempt's status (its
// code and details), and errors.As(err, new(*retry.Error)) gives the rest.
// A non-retryable error is returned as the attempt returned it.
//
// Retries also send the grpc-previous-rpc-attempts request header (gRFC A6),
// so that servers can tell a retry from a first attempt. It is set, not
// appended: a value already in the outgoing metadata (forwarded from an
// incoming call) is replaced, and removed from a first attempt.
//
// # Call options
//
// Each attempt gets the call's options, except those that grpc-go applies
// once per call: grpc.OnFinish callbacks run once, when the call ends (for a
// stream, when the stream handed over ends, or when the retries end without
// one), with the call's final error; grpc.Header, grpc.Trailer and grpc.Peer
// are cleared before each retry, so that they describe the last attempt.
//
// Do not combine this interceptor with grpc-go's own retries (a retryPolicy
// in the service config): each layer would retry the other's attempts. Use
// grpc.WithDisableRetry, which keeps grpc-go's transparent retries of
// streams the server never processed.
package grpcretry
