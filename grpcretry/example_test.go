package grpcretry_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/grpcretry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// flakyHealthServer starts an in-memory gRPC health server whose first
// `failures` calls fail with UNAVAILABLE, and returns a dial option for it,
// a counter of the calls it received and a stop function.
func flakyHealthServer(failures int32) (grpc.DialOption, *atomic.Int32, func()) {
	lis := bufconn.Listen(1 << 16)
	var calls atomic.Int32
	fail := func(ctx context.Context) error {
		if calls.Add(1) <= failures {
			return status.Error(codes.Unavailable, "warming up")
		}
		return nil
	}
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := fail(ctx); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := fail(ss.Context()); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	dial := grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })
	return dial, &calls, srv.Stop
}

func ExampleUnaryClientInterceptor() {
	dial, calls, stop := flakyHealthServer(2)
	defer stop()

	p := retry.Policy{
		Attempts:     5,
		InitialDelay: time.Millisecond, // tiny waits for the example
		Jitter:       retry.Zero,
		Observer: func(_ context.Context, e retry.Event) {
			if e.Kind == retry.EventRetry {
				fmt.Printf("attempt %d failed (%v), retrying\n", e.Attempt, status.Code(e.Err))
			}
		},
	}
	conn, err := grpc.NewClient("passthrough:///health",
		dial,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(p)),
		grpc.WithDisableRetry(), // one retry layer, not two
	)
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	fmt.Println(resp.GetStatus(), err, "after", calls.Load(), "calls")
	// Output:
	// attempt 1 failed (Unavailable), retrying
	// attempt 2 failed (Unavailable), retrying
	// SERVING <nil> after 3 calls
}

func ExampleStreamClientInterceptor() {
	dial, calls, stop := flakyHealthServer(1)
	defer stop()

	p := retry.Policy{InitialDelay: time.Millisecond, Jitter: retry.Zero}
	conn, err := grpc.NewClient("passthrough:///health",
		dial,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStreamInterceptor(grpcretry.StreamClientInterceptor(p)),
	)
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Watch is server-streaming: the request is buffered and the stream is
	// retried until its first message arrives.
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		panic(err)
	}
	resp, err := w.Recv()
	fmt.Println(resp.GetStatus(), err, "after", calls.Load(), "calls")
	// Output:
	// SERVING <nil> after 2 calls
}

func ExampleWithNonIdempotent() {
	dial, calls, stop := flakyHealthServer(1)
	defer stop()

	p := retry.Policy{InitialDelay: time.Millisecond, Jitter: retry.Zero}
	conn, err := grpc.NewClient("passthrough:///health",
		dial,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(p,
			// Pretend Check creates something: retry it only when the
			// failed attempt never reached the server.
			grpcretry.WithNonIdempotent("/grpc.health.v1.Health/Check"))),
	)
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	_, err = healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	fmt.Println(status.Code(err), errors.Is(err, grpcretry.ErrNotIdempotent), "after", calls.Load(), "call")
	// Output:
	// Unavailable true after 1 call
}

func ExampleCallPolicy() {
	dial, calls, stop := flakyHealthServer(10)
	defer stop()

	p := retry.Policy{InitialDelay: time.Millisecond, Jitter: retry.Zero}
	conn, err := grpc.NewClient("passthrough:///health",
		dial,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(p)),
	)
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	// This call may try twice only.
	_, err = healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{},
		grpcretry.CallPolicy(retry.Policy{Attempts: 2}))
	var re *retry.Error
	fmt.Println(status.Code(err), errors.As(err, &re) && re.Reason == retry.ReasonAttempts, "after", calls.Load(), "calls")
	// Output:
	// Unavailable true after 2 calls
}

func ExampleWithCodes() {
	dial, calls, stop := flakyHealthServer(1) // fails once with UNAVAILABLE
	defer stop()

	p := retry.Policy{InitialDelay: time.Millisecond, Jitter: retry.Zero}
	conn, err := grpc.NewClient("passthrough:///health",
		dial,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// Retry ABORTED only (say, optimistic-concurrency conflicts).
		grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(p, grpcretry.WithCodes(codes.Aborted))),
	)
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	_, err = healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	fmt.Println(status.Code(err), "after", calls.Load(), "call")
	// Output:
	// Unavailable after 1 call
}
