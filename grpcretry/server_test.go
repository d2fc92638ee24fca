package grpcretry_test

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/grpcretry"
	"github.com/backoffkit/retry/internal/testkit"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Full method names used by the tests.
const (
	checkMethod = "/grpc.health.v1.Health/Check"
	watchMethod = "/grpc.health.v1.Health/Watch"
	listMethod  = "/grpcretry.test.Items/List"
	chatMethod  = "/grpcretry.test.Items/Chat"
)

// testServer is a real grpc-go server on bufconn serving the standard health
// service and a tiny hand-written service (Items), with failures injected by
// server interceptors. It counts the attempts of each method server-side.
type testServer struct {
	lis *bufconn.Listener
	srv *grpc.Server

	mu       sync.Mutex
	attempts map[string]int
	previous map[string][]string // grpc-previous-rpc-attempts values seen, per method
	requests []string            // List and Watch: the request's Service field, per attempt

	// fail, when set, is called before the handler with the method and the
	// attempt number (from 1); a non-nil error fails the attempt.
	fail func(ctx context.Context, method string, attempt int) error
	// list says what List does once past fail: it sends items messages,
	// pause apart, then returns end.
	items int
	pause time.Duration
	end   error
}

func newTestServer(t testing.TB) *testServer {
	t.Helper()
	s := &testServer{
		lis:      bufconn.Listen(1 << 16),
		attempts: map[string]int{},
		previous: map[string][]string{},
	}
	s.srv = grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := s.enter(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := s.enter(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	)
	healthpb.RegisterHealthServer(s.srv, health.NewServer())
	s.srv.RegisterService(&itemsDesc, s)
	go s.srv.Serve(s.lis)
	t.Cleanup(s.srv.Stop)
	return s
}

func (s *testServer) enter(ctx context.Context, method string) error {
	s.mu.Lock()
	s.attempts[method]++
	n := s.attempts[method]
	md, _ := metadata.FromIncomingContext(ctx)
	s.previous[method] = append(s.previous[method], md.Get(grpcretry.PreviousAttemptsKey)...)
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		return fail(ctx, method, n)
	}
	return nil
}

func (s *testServer) count(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts[method]
}

// wantAttempts marks t failed unless the server saw want attempts of method.
func (s *testServer) wantAttempts(t testing.TB, method string, want int) {
	t.Helper()
	if got := s.count(method); got != want {
		t.Errorf("server saw %d attempts, want %d", got, want)
	}
}

func (s *testServer) prev(method string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.previous[method])
}

// dial connects to the server through bufconn. refuse, when set, is asked
// before each dial (numbered from 1) whether to refuse it as a closed port
// would.
func (s *testServer) dial(t testing.TB, refuse func(n int) bool, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	var (
		mu    sync.Mutex
		dials int
	)
	dialer := func(ctx context.Context, _ string) (net.Conn, error) {
		mu.Lock()
		dials++
		n := dials
		mu.Unlock()
		if refuse != nil && refuse(n) {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		}
		return s.lis.DialContext(ctx)
	}
	opts = append([]grpc.DialOption{
		grpc.WithContextDialer(dialer),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		// Reconnect after a refused dial 100 ms later, without grpc's own
		// jitter, so that the tests are deterministic.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1, MaxDelay: 100 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}),
	}, opts...)
	cc, err := grpc.NewClient("passthrough:///bufnet", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// failN fails the first n attempts of method with code; other methods and
// later attempts go through.
func failN(method string, n int, code codes.Code) func(context.Context, string, int) error {
	return func(_ context.Context, m string, attempt int) error {
		if m == method && attempt <= n {
			return status.Errorf(code, "injected failure %d", attempt)
		}
		return nil
	}
}

// onFirst returns a fail function under which the first attempt of every
// method ends with fail's error (fail may wait on the attempt's context);
// later attempts go through.
func onFirst(fail func(ctx context.Context) error) func(context.Context, string, int) error {
	return func(ctx context.Context, _ string, attempt int) error {
		if attempt == 1 {
			return fail(ctx)
		}
		return nil
	}
}

// hang waits until the client gives up on the attempt.
func hang(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// headersThen sends the response headers (x-attempt: 1) first if
// headersFirst, then ends the attempt as fail does.
func headersThen(headersFirst bool, fail func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if headersFirst {
			if err := grpc.SendHeader(ctx, metadata.Pairs("x-attempt", "1")); err != nil {
				return err
			}
		}
		return fail(ctx)
	}
}

// withRetryInfo returns a status error with a google.rpc.RetryInfo detail.
func withRetryInfo(code codes.Code, d time.Duration) error {
	st, err := status.New(code, "slow down").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

// recorder is an Observer that keeps the events.
type recorder = testkit.Recorder[retry.Event, retry.EventKind]

func newRecorder() *recorder {
	return testkit.NewRecorder(func(e retry.Event) retry.EventKind { return e.Kind })
}

// waits returns the waits of rec's retries.
func waits(rec *recorder) []time.Duration {
	var w []time.Duration
	for _, e := range rec.Of(retry.EventRetry) {
		w = append(w, e.Wait)
	}
	return w
}

// wantTimeoutRetry marks t failed unless the call was retried once, for
// DEADLINE_EXCEEDED, and ended 1.1 s of virtual time after start: an
// attempt timeout of 1 s, then testPolicy's wait.
func wantTimeoutRetry(t testing.TB, rec *recorder, start time.Time) {
	t.Helper()
	if r := rec.Of(retry.EventRetry); len(r) != 1 || status.Code(r[0].Err) != codes.DeadlineExceeded {
		t.Errorf("retry events = %+v, want one for DEADLINE_EXCEEDED", r)
	}
	if got := time.Since(start); got != time.Second+100*time.Millisecond {
		t.Errorf("virtual time %v, want 1.1s (timeout + wait)", got)
	}
}

// testPolicy waits 100 ms, 200 ms, 400 ms, ... without jitter (the tests run
// in synctest bubbles: virtual time).
func testPolicy(rec *recorder) retry.Policy {
	return retry.Policy{
		Attempts:     4,
		InitialDelay: 100 * time.Millisecond,
		MaxDelay:     10 * time.Second,
		Jitter:       retry.Zero,
		Observer:     rec.Observe,
		Rand:         retry.NewRand(1),
	}
}

// The Items service: hand-written (no generated code), with the health
// messages as its request and response types.

type itemsServer interface{}

var itemsDesc = grpc.ServiceDesc{
	ServiceName: "grpcretry.test.Items",
	HandlerType: (*itemsServer)(nil),
	Streams: []grpc.StreamDesc{
		{StreamName: "List", ServerStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			return srv.(*testServer).list(ss)
		}},
		{StreamName: "Chat", ServerStreams: true, ClientStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			return chat(ss)
		}},
	},
}

var (
	listDesc = &itemsDesc.Streams[0]
	chatDesc = &itemsDesc.Streams[1]
)

// list reads the request, sends s.items messages and returns s.end.
func (s *testServer) list(ss grpc.ServerStream) error {
	var req healthpb.HealthCheckRequest
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	s.mu.Lock()
	s.requests = append(s.requests, req.GetService())
	items, pause, end := s.items, s.pause, s.end
	s.mu.Unlock()
	for i := range items {
		if i > 0 && pause > 0 {
			time.Sleep(pause) // virtual time: the tests run in synctest bubbles
		}
		if err := ss.SendMsg(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_ServingStatus(i % 4)}); err != nil {
			return err
		}
	}
	return end
}

// chat echoes each request's Service back as a response... of the same type.
func chat(ss grpc.ServerStream) error {
	for {
		var req healthpb.HealthCheckRequest
		if err := ss.RecvMsg(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(&req); err != nil {
			return err
		}
	}
}
