package grpcretry_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/grpcretry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func streamClient(t *testing.T, s *testServer, p retry.Policy, opts ...grpcretry.Option) *grpc.ClientConn {
	return s.dial(t, nil, grpc.WithStreamInterceptor(grpcretry.StreamClientInterceptor(p, opts...)))
}

// list opens a List stream the way generated code does (NewStream, SendMsg,
// CloseSend) and reads it to the end: it returns the statuses received and
// the error that ended the stream (nil for io.EOF).
func list(ctx context.Context, cc *grpc.ClientConn, service string, opts ...grpc.CallOption) ([]healthpb.HealthCheckResponse_ServingStatus, error) {
	cs, err := cc.NewStream(ctx, listDesc, listMethod, opts...)
	if err != nil {
		return nil, err
	}
	if err := cs.SendMsg(&healthpb.HealthCheckRequest{Service: service}); err != nil {
		return nil, err
	}
	if err := cs.CloseSend(); err != nil {
		return nil, err
	}
	var got []healthpb.HealthCheckResponse_ServingStatus
	for {
		var resp healthpb.HealthCheckResponse
		if err := cs.RecvMsg(&resp); err != nil {
			if err == io.EOF {
				return got, nil
			}
			return got, err
		}
		got = append(got, resp.GetStatus())
	}
}

func TestStreamRetriedBeforeFirstMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		s.fail = failN(listMethod, 2, codes.Unavailable)
		s.items = 3
		rec := &recorder{}
		cc := streamClient(t, s, testPolicy(rec))

		start := time.Now()
		got, err := list(t.Context(), cc, "replayed")
		if err != nil {
			t.Fatalf("List: %v, want success on the third attempt", err)
		}
		if want := []healthpb.HealthCheckResponse_ServingStatus{0, 1, 2}; !slices.Equal(got, want) {
			t.Errorf("received %v, want %v", got, want)
		}
		if n := s.count(listMethod); n != 3 {
			t.Errorf("server saw %d attempts, want 3", n)
		}
		// The interceptor fails the first two attempts before the handler
		// reads the request; the third gets the buffered request.
		if want := []string{"replayed"}; !slices.Equal(s.requests, want) {
			t.Errorf("handler got requests %q, want %q", s.requests, want)
		}
		if got, want := s.prev(listMethod), []string{"1", "2"}; !slices.Equal(got, want) {
			t.Errorf("grpc-previous-rpc-attempts seen = %q, want %q", got, want)
		}
		if got := time.Since(start); got != 300*time.Millisecond {
			t.Errorf("virtual time %v, want 300ms", got)
		}
	})
}

// A failure of the first RecvMsg after the handler read the request: the
// request must be sent again on the new stream.
func TestStreamRequestReplayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		s.items = 0
		s.end = status.Error(codes.Unavailable, "no items yet")
		rec := &recorder{}
		p := testPolicy(rec)
		p.Attempts = 3
		cc := streamClient(t, s, p)

		_, err := list(t.Context(), cc, "again")
		var re *retry.Error
		if !errors.As(err, &re) || re.Attempts != 3 || status.Code(err) != codes.Unavailable {
			t.Fatalf("err = %v, want a give-up after 3 attempts with UNAVAILABLE", err)
		}
		if want := []string{"again", "again", "again"}; !slices.Equal(s.requests, want) {
			t.Errorf("handler got requests %q, want %q", s.requests, want)
		}
	})
}

func TestStreamNotRetriedAfterFirstMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		s.items = 1
		s.end = status.Error(codes.Unavailable, "lost the backend")
		rec := &recorder{}
		cc := streamClient(t, s, testPolicy(rec))

		got, err := list(t.Context(), cc, "x")
		if len(got) != 1 {
			t.Errorf("received %d messages, want 1", len(got))
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("err = %v, want the UNAVAILABLE that followed the first message", err)
		}
		var re *retry.Error
		if errors.As(err, &re) {
			t.Errorf("error after the first message came through the retry loop: %v", err)
		}
		if n := s.count(listMethod); n != 1 {
			t.Errorf("server saw %d attempts, want 1", n)
		}
		if n := len(rec.of(retry.EventRetry)); n != 0 {
			t.Errorf("%d retry events, want 0", n)
		}
	})
}

func TestStreamFirstRecvOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		fail     codes.Code // injected on the first attempt; OK for none
		opts     []grpcretry.Option
		items    int
		attempts int
		wantCode codes.Code
		wantIs   error
	}{
		{name: "empty stream", items: 0, attempts: 1},
		{name: "not retryable", fail: codes.InvalidArgument, items: 2, attempts: 1, wantCode: codes.InvalidArgument},
		{name: "resource exhausted", fail: codes.ResourceExhausted, items: 2, attempts: 2},
		{name: "non-idempotent", fail: codes.Unavailable, items: 2, attempts: 1, wantCode: codes.Unavailable,
			opts: []grpcretry.Option{grpcretry.WithNonIdempotent(listMethod)}, wantIs: grpcretry.ErrNotIdempotent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newTestServer(t)
				if tt.fail != codes.OK {
					s.fail = failN(listMethod, 1, tt.fail)
				}
				s.items = tt.items
				cc := streamClient(t, s, testPolicy(&recorder{}), tt.opts...)
				got, err := list(t.Context(), cc, "x")
				if status.Code(err) != tt.wantCode {
					t.Fatalf("err = %v, want code %v", err, tt.wantCode)
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Errorf("err = %v, want one matching %v", err, tt.wantIs)
				}
				if err == nil && len(got) != tt.items {
					t.Errorf("received %d messages, want %d", len(got), tt.items)
				}
				if n := s.count(listMethod); n != tt.attempts {
					t.Errorf("server saw %d attempts, want %d", n, tt.attempts)
				}
			})
		})
	}
}

// The standard health service's server-streaming Watch, retried before its
// first message.
func TestStreamHealthWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		s.fail = failN(watchMethod, 1, codes.Unavailable)
		cc := streamClient(t, s, testPolicy(&recorder{}))

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w, err := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := w.Recv()
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Recv = %v, %v; want SERVING", resp, err)
		}
		if n := s.count(watchMethod); n != 2 {
			t.Errorf("server saw %d attempts, want 2", n)
		}
		cancel()
		if _, err := w.Recv(); status.Code(err) != codes.Canceled {
			t.Errorf("Recv after cancel = %v, want CANCELED", err)
		}
	})
}

func TestStreamHeaderEndsWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		s.fail = func(ctx context.Context, m string, n int) error {
			grpc.SetHeader(ctx, metadata.Pairs("x-attempt", "yes"))
			return failN(listMethod, 1, codes.Unavailable)(ctx, m, n)
		}
		s.items = 1
		cc := streamClient(t, s, testPolicy(&recorder{}))
		cs, err := cc.NewStream(t.Context(), listDesc, listMethod)
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(&healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
		if err := cs.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.Header(); err != nil {
			t.Logf("Header: %v", err) // trailers-only response: no header
		}
		err = cs.RecvMsg(new(healthpb.HealthCheckResponse))
		if status.Code(err) != codes.Unavailable {
			t.Errorf("RecvMsg = %v, want UNAVAILABLE (no retry once Header was called)", err)
		}
		if n := s.count(listMethod); n != 1 {
			t.Errorf("server saw %d attempts, want 1", n)
		}
		if cs.Trailer() == nil {
			t.Error("Trailer() = nil after the stream ended")
		}
	})
}

func TestStreamSendMsgTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		cc := streamClient(t, s, testPolicy(&recorder{}))
		cs, err := cc.NewStream(t.Context(), listDesc, listMethod)
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(&healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(&healthpb.HealthCheckRequest{}); status.Code(err) != codes.Internal {
			t.Errorf("second SendMsg = %v, want INTERNAL as grpc-go returns", err)
		}
		if n := s.count(listMethod); n != 0 {
			t.Errorf("server saw %d attempts before the first RecvMsg, want 0", n)
		}
	})
}

// Bidirectional streams: a failure once the stream exists is not retried.
func TestStreamBidiNotRetriedOnceOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		s.fail = failN(chatMethod, 1, codes.Unavailable)
		rec := &recorder{}
		cc := streamClient(t, s, testPolicy(rec))
		cs, err := cc.NewStream(t.Context(), chatDesc, chatMethod)
		if err != nil {
			t.Fatal(err)
		}
		_ = cs.SendMsg(&healthpb.HealthCheckRequest{Service: "hi"})
		err = cs.RecvMsg(new(healthpb.HealthCheckRequest))
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("RecvMsg = %v, want UNAVAILABLE", err)
		}
		if n := s.count(chatMethod); n != 1 {
			t.Errorf("server saw %d attempts, want 1", n)
		}
	})
}

// Bidirectional streams: the creation is retried while no connection can be
// made, for non-idempotent methods too (nothing was sent).
func TestStreamBidiCreationRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		rec := &recorder{}
		cc := s.dial(t, func(n int) bool { return n <= 2 },
			grpc.WithStreamInterceptor(grpcretry.StreamClientInterceptor(testPolicy(rec), grpcretry.WithNonIdempotent(chatMethod))))

		cs, err := cc.NewStream(t.Context(), chatDesc, chatMethod)
		if err != nil {
			t.Fatalf("NewStream: %v, want success once the server is reachable", err)
		}
		if len(rec.of(retry.EventRetry)) == 0 {
			t.Error("no retry event: the refused dials should have been retried")
		}
		for _, word := range []string{"a", "b"} {
			if err := cs.SendMsg(&healthpb.HealthCheckRequest{Service: word}); err != nil {
				t.Fatal(err)
			}
			var echo healthpb.HealthCheckRequest
			if err := cs.RecvMsg(&echo); err != nil || echo.GetService() != word {
				t.Fatalf("echo = %q, %v; want %q", echo.GetService(), err, word)
			}
		}
		if err := cs.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if err := cs.RecvMsg(new(healthpb.HealthCheckRequest)); err != io.EOF {
			t.Errorf("RecvMsg at the end = %v, want io.EOF", err)
		}
		if n := s.count(chatMethod); n != 1 {
			t.Errorf("server saw %d attempts, want 1", n)
		}
	})
}

// Server-streaming: the server unreachable, the attempts cap is exact.
func TestStreamServerUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		rec := &recorder{}
		p := testPolicy(rec)
		p.Attempts = 3
		cc := s.dial(t, func(int) bool { return true }, grpc.WithStreamInterceptor(grpcretry.StreamClientInterceptor(p)))
		_, err := list(t.Context(), cc, "x")
		var re *retry.Error
		if !errors.As(err, &re) || re.Attempts != 3 || re.Reason != retry.ReasonAttempts || status.Code(err) != codes.Unavailable {
			t.Fatalf("err = %v, want a give-up after 3 attempts with UNAVAILABLE", err)
		}
		if n := len(rec.of(retry.EventRetry)); n != 2 {
			t.Errorf("%d retry events, want 2", n)
		}
	})
}

func TestStreamCallPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		s.fail = failN(listMethod, 10, codes.Unavailable)
		cc := streamClient(t, s, testPolicy(&recorder{}))
		_, err := list(t.Context(), cc, "x", grpcretry.CallPolicy(retry.Policy{Attempts: 2}))
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("err = %v, want UNAVAILABLE", err)
		}
		if n := s.count(listMethod); n != 2 {
			t.Errorf("server saw %d attempts, want 2", n)
		}
	})
}

// fakeStream is a ClientStream that does nothing.
type fakeStream struct{ grpc.ClientStream }

// The creation of client-streaming and bidirectional streams, with a fake
// streamer: retried on the default codes, returned as is otherwise.
func TestStreamCreationClassified(t *testing.T) {
	tests := []struct {
		code     codes.Code
		attempts int
		ok       bool
	}{
		{codes.Unavailable, 3, true},
		{codes.ResourceExhausted, 3, true},
		{codes.Internal, 1, false},
		{codes.PermissionDenied, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.code.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				want := &fakeStream{}
				calls := 0
				streamer := func(ctx context.Context, _ *grpc.StreamDesc, _ *grpc.ClientConn, _ string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
					calls++
					if calls <= 2 {
						return nil, status.Error(tt.code, "no")
					}
					return want, nil
				}
				icp := grpcretry.StreamClientInterceptor(testPolicy(&recorder{}))
				got, err := icp(t.Context(), chatDesc, nil, chatMethod, streamer)
				if calls != tt.attempts {
					t.Errorf("streamer called %d times, want %d", calls, tt.attempts)
				}
				if tt.ok && (err != nil || got != want) {
					t.Errorf("got %v, %v; want the streamer's stream", got, err)
				}
				if !tt.ok && (status.Code(err) != tt.code || got != nil) {
					t.Errorf("got %v, %v; want no stream and code %v", got, err, tt.code)
				}
			})
		})
	}
}
