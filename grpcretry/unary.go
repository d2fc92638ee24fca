package grpcretry

import (
	"context"

	"github.com/backoffkit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// UnaryClientInterceptor returns a unary client interceptor that retries
// failed calls under p (see the package documentation for what is retried).
// Install it with grpc.WithUnaryInterceptor; use [CallPolicy] to override p
// for one call. An invalid p makes every call fail with its
// [*retry.ValidationError], without calling the server.
//
// Each attempt gets the call's request, reply and call options, plus
// grpc.Trailer and grpc.Peer options of its own to read the server's hints
// and to tell whether the attempt reached the server. Options that grpc-go
// applies once per call keep that meaning: grpc.OnFinish callbacks run once,
// when the call ends, with the error the call returns; grpc.Header,
// grpc.Trailer and grpc.Peer describe the last attempt (they are cleared
// before each retry, and stay empty if the last attempt got no stream).
func UnaryClientInterceptor(p retry.Policy, opts ...Option) grpc.UnaryClientInterceptor {
	c := newConfig(opts)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		pol, co := split(p, callOpts)
		idempotent := c.isIdempotent(method)
		var (
			trailer metadata.MD
			pr      peer.Peer
			n       int
		)
		attemptOpts := append(co.attempt[:len(co.attempt):len(co.attempt)], grpc.Trailer(&trailer), grpc.Peer(&pr))
		err := retry.Run(ctx, pol, func(actx context.Context) error {
			if n > 0 {
				trailer, pr = nil, peer.Peer{}
				co.retrying()
			}
			actx = withPreviousAttempts(actx, n)
			n++
			err := invoker(actx, method, req, reply, cc, attemptOpts...)
			if err == nil {
				return nil
			}
			return c.classify(actx, err, trailer, idempotent, pr.Addr != nil)
		})
		co.finished(err)
		return err
	}
}
