package grpcretry_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/grpcretry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/test/bufconn"
)

// BenchmarkUnaryInterceptorOverhead measures the interceptor alone on the
// success path (an invoker that succeeds at once).
func BenchmarkUnaryInterceptorOverhead(b *testing.B) {
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	icp := grpcretry.UnaryClientInterceptor(retry.Policy{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := icp(ctx, checkMethod, nil, nil, nil, invoker); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnaryBufconn compares a successful Health.Check on an in-memory
// connection without and with the retry interceptor.
func BenchmarkUnaryBufconn(b *testing.B) {
	lis := bufconn.Listen(1 << 16)
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()
	dial := grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })

	for _, bc := range []struct {
		name string
		opts []grpc.DialOption
	}{
		{"bare", nil},
		{"retry", []grpc.DialOption{grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(retry.Policy{}))}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cc, err := grpc.NewClient("passthrough:///bufnet", append([]grpc.DialOption{dial, grpc.WithTransportCredentials(insecure.NewCredentials())}, bc.opts...)...)
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			c := healthpb.NewHealthClient(cc)
			req := &healthpb.HealthCheckRequest{}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Check(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkServerStreamBufconn compares a server-streaming call (one
// request, one message, then the end) on an in-memory connection without and
// with the retry interceptor, with and without an attempt timeout (a
// stream attempt then runs on a context of its own until its first message).
func BenchmarkServerStreamBufconn(b *testing.B) {
	s := newTestServer(b)
	s.items = 1
	for _, bc := range []struct {
		name string
		opts []grpc.DialOption
	}{
		{"bare", nil},
		{"retry", []grpc.DialOption{grpc.WithStreamInterceptor(grpcretry.StreamClientInterceptor(retry.Policy{}))}},
		{"retry-attempt-timeout", []grpc.DialOption{grpc.WithStreamInterceptor(grpcretry.StreamClientInterceptor(retry.Policy{AttemptTimeout: time.Minute}))}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cc := s.dial(b, nil, bc.opts...)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if got, err := list(ctx, cc, "x"); err != nil || len(got) != 1 {
					b.Fatal(got, err)
				}
			}
		})
	}
}
