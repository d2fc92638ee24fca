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
		rec := newRecorder()
		cc := streamClient(t, s, testPolicy(rec))

		start := time.Now()
		got, err := list(t.Context(), cc, "replayed")
		if err != nil {
			t.Fatalf("List: %v, want success on the third attempt", err)
		}
		if want := []healthpb.HealthCheckResponse_ServingStatus{0, 1, 2}; !slices.Equal(got, want) {
			t.Errorf("received %v, want %v", got, want)
		}
		s.wantAttempts(t, listMethod, 3)
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
		rec := newRecorder()
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
		rec, _, err := listEndedAfterFirstMessage(t, status.Error(codes.Unavailable, "lost the backend"))
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("err = %v, want the UNAVAILABLE that followed the first message", err)
		}
		if n := len(rec.Of(retry.EventRetry)); n != 0 {
			t.Errorf("%d retry events, want 0", n)
		}
	})
}

// listEndedAfterFirstMessage runs, in a synctest bubble, a List whose server
// sends one message and then ends the stream with end. It checks that the
// caller got the message, that the error did not come through the retry
// loop and that the server saw one attempt; it returns the policy's events,
// how long the List took and the error that ended the stream.
func listEndedAfterFirstMessage(t *testing.T, end error) (*recorder, time.Duration, error) {
	t.Helper()
	s := newTestServer(t)
	s.items = 1
	s.end = end
	rec := newRecorder()
	cc := streamClient(t, s, testPolicy(rec))

	start := time.Now()
	got, err := list(t.Context(), cc, "x")
	took := time.Since(start)
	if len(got) != 1 {
		t.Errorf("received %d messages, want 1", len(got))
	}
	var re *retry.Error
	if errors.As(err, &re) {
		t.Errorf("the error after the first message came through the retry loop: %v", err)
	}
	s.wantAttempts(t, listMethod, 1)
	return rec, took, err
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
				cc := streamClient(t, s, testPolicy(newRecorder()), tt.opts...)
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
				s.wantAttempts(t, listMethod, tt.attempts)
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
		cc := streamClient(t, s, testPolicy(newRecorder()))

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
		cc := streamClient(t, s, testPolicy(newRecorder()))
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
		s.wantAttempts(t, listMethod, 1)
		if cs.Trailer() == nil {
			t.Error("Trailer() = nil after the stream ended")
		}
	})
}

func TestStreamSendMsgTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		cc := streamClient(t, s, testPolicy(newRecorder()))
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
		rec := newRecorder()
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
		s.wantAttempts(t, chatMethod, 1)
	})
}

// Bidirectional streams: the creation is retried while no connection can be
// made, for non-idempotent methods too (nothing was sent).
func TestStreamBidiCreationRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		rec := newRecorder()
		cc := s.dial(t, func(n int) bool { return n <= 2 },
			grpc.WithStreamInterceptor(grpcretry.StreamClientInterceptor(testPolicy(rec), grpcretry.WithNonIdempotent(chatMethod))))

		cs, err := cc.NewStream(t.Context(), chatDesc, chatMethod)
		if err != nil {
			t.Fatalf("NewStream: %v, want success once the server is reachable", err)
		}
		if len(rec.Of(retry.EventRetry)) == 0 {
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
		s.wantAttempts(t, chatMethod, 1)
	})
}

// Server-streaming: the server unreachable, the attempts cap is exact.
func TestStreamServerUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		rec := newRecorder()
		p := testPolicy(rec)
		p.Attempts = 3
		cc := s.dial(t, func(int) bool { return true }, grpc.WithStreamInterceptor(grpcretry.StreamClientInterceptor(p)))
		_, err := list(t.Context(), cc, "x")
		var re *retry.Error
		if !errors.As(err, &re) || re.Attempts != 3 || re.Reason != retry.ReasonAttempts || status.Code(err) != codes.Unavailable {
			t.Fatalf("err = %v, want a give-up after 3 attempts with UNAVAILABLE", err)
		}
		if n := len(rec.Of(retry.EventRetry)); n != 2 {
			t.Errorf("%d retry events, want 2", n)
		}
	})
}

func TestStreamCallPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		s.fail = failN(listMethod, 10, codes.Unavailable)
		cc := streamClient(t, s, testPolicy(newRecorder()))
		_, err := list(t.Context(), cc, "x", grpcretry.CallPolicy(retry.Policy{Attempts: 2}))
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("err = %v, want UNAVAILABLE", err)
		}
		s.wantAttempts(t, listMethod, 2)
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
				icp := grpcretry.StreamClientInterceptor(testPolicy(newRecorder()))
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

// A server stream that hangs before its first message is cut by
// Policy.AttemptTimeout and retried, as a unary call would be, instead of
// blocking until the caller's own deadline.
func TestStreamAttemptTimeoutBeforeFirstMessage(t *testing.T) {
	for _, headersFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "before headers", true: "after headers"}[headersFirst], func(t *testing.T) {
			testStreamAttemptTimeout(t, headersFirst)
		})
	}
}

func testStreamAttemptTimeout(t *testing.T, headersFirst bool) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		s.fail = onFirst(headersThen(headersFirst, hang)) // the first attempt hangs until the client gives up on it
		s.items = 2
		rec := newRecorder()
		p := testPolicy(rec)
		p.AttemptTimeout = time.Second
		cc := streamClient(t, s, p)

		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		start := time.Now()
		got, err := list(ctx, cc, "x")
		if err != nil || len(got) != 2 {
			t.Fatalf("List = %v, %v; want 2 messages from the second attempt", got, err)
		}
		s.wantAttempts(t, listMethod, 2)
		wantTimeoutRetry(t, rec, start)
	})
}

// Policy.Deadline bounds the stream attempts too: the call gives up when it
// passes, not at the caller's deadline.
func TestStreamPolicyDeadlineBeforeFirstMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		s.fail = func(ctx context.Context, _ string, _ int) error { return hang(ctx) }
		rec := newRecorder()
		p := testPolicy(rec)
		p.Deadline = 2500 * time.Millisecond
		cc := streamClient(t, s, p)

		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		start := time.Now()
		_, err := list(ctx, cc, "x")
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonDeadline || status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("err = %v, want a give-up for the policy deadline with DEADLINE_EXCEEDED", err)
		}
		if got := time.Since(start); got != 2500*time.Millisecond {
			t.Errorf("gave up after %v, want 2.5s", got)
		}
	})
}

// Once the first message has arrived the stream is the caller's: neither
// AttemptTimeout nor Deadline cuts it, however long it lasts.
func TestStreamCommittedOutlivesAttemptBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		s.items = 3
		s.pause = 5 * time.Second
		rec := newRecorder()
		p := testPolicy(rec)
		p.AttemptTimeout = time.Second
		p.Deadline = 2 * time.Second
		cc := streamClient(t, s, p)

		start := time.Now()
		got, err := list(t.Context(), cc, "x")
		if err != nil || len(got) != 3 {
			t.Fatalf("List = %v, %v; want all 3 messages", got, err)
		}
		if got := time.Since(start); got != 10*time.Second {
			t.Errorf("stream took %v, want 10s (two pauses)", got)
		}
		s.wantAttempts(t, listMethod, 1)
	})
}

// The creation of a client-streaming or bidirectional stream is bounded by
// AttemptTimeout; the stream handed over is not.
func TestStreamCreationBoundedByAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ctxs []context.Context
		want := &fakeStream{}
		streamer := func(ctx context.Context, _ *grpc.StreamDesc, _ *grpc.ClientConn, _ string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
			ctxs = append(ctxs, ctx)
			if len(ctxs) == 1 { // waits for a connection that never comes
				<-ctx.Done()
				return nil, status.FromContextError(ctx.Err()).Err()
			}
			return want, nil
		}
		rec := newRecorder()
		p := testPolicy(rec)
		p.AttemptTimeout = time.Second
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		start := time.Now()
		got, err := grpcretry.StreamClientInterceptor(p)(ctx, chatDesc, nil, chatMethod, streamer)
		if err != nil || got != want {
			t.Fatalf("got %v, %v; want the second stream", got, err)
		}
		if d := time.Since(start); d != time.Second+100*time.Millisecond {
			t.Errorf("took %v, want 1.1s (timeout + wait)", d)
		}
		if r := rec.Of(retry.EventRetry); len(r) != 1 || status.Code(r[0].Err) != codes.DeadlineExceeded {
			t.Errorf("retry events = %+v, want one for DEADLINE_EXCEEDED", r)
		}
		time.Sleep(10 * time.Second) // well past the attempt timeout
		if err := ctxs[1].Err(); err != nil {
			t.Errorf("the stream handed over has a done context (%v)", err)
		}
		cancel()
		if ctxs[1].Err() == nil {
			t.Error("the stream's context outlives the caller's")
		}
	})
}

// A first stream status of RESOURCE_EXHAUSTED with RetryInfo, before any
// message, is retried after at least the hint; sent trailers-only or after
// the response headers alike.
func TestStreamResourceExhaustedRetryInfoFirst(t *testing.T) {
	for _, headersFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "trailers-only", true: "after headers"}[headersFirst], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newTestServer(t)
				s.fail = onFirst(headersThen(headersFirst, func(context.Context) error {
					return withRetryInfo(codes.ResourceExhausted, 3*time.Second)
				}))
				s.items = 2
				rec := newRecorder()
				cc := streamClient(t, s, testPolicy(rec))

				start := time.Now()
				got, err := list(t.Context(), cc, "x")
				if err != nil || len(got) != 2 {
					t.Fatalf("List = %v, %v; want 2 messages from the second attempt", got, err)
				}
				r := rec.Of(retry.EventRetry)
				if len(r) != 1 || status.Code(r[0].Err) != codes.ResourceExhausted || r[0].Hint != 3*time.Second || r[0].Wait < 3*time.Second {
					t.Fatalf("retry events = %+v, want one for RESOURCE_EXHAUSTED, hint 3s, wait >= 3s", r)
				}
				if d := time.Since(start); d < 3*time.Second || d != r[0].Wait {
					t.Errorf("virtual time %v, want the wait %v (>= the 3s hint)", d, r[0].Wait)
				}
				s.wantAttempts(t, listMethod, 2)
			})
		})
	}
}

// The same status after the first message is not retried: the caller gets
// the message, then the status with its RetryInfo, as the server sent it.
func TestStreamResourceExhaustedAfterFirstMessageNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, took, err := listEndedAfterFirstMessage(t, withRetryInfo(codes.ResourceExhausted, 3*time.Second))
		st := status.Convert(err)
		if st.Code() != codes.ResourceExhausted || len(st.Details()) != 1 {
			t.Fatalf("err = %v (details %v), want RESOURCE_EXHAUSTED with its RetryInfo", err, st.Details())
		}
		if r, g := rec.Of(retry.EventRetry), rec.Of(retry.EventGiveUp); len(r)+len(g) != 0 || took != 0 {
			t.Errorf("retry events %+v, give-ups %+v after %v; want none, at once", r, g, took)
		}
	})
}

// grpc.OnFinish runs once per stream, when the stream handed over ends or
// when the retries end without one, with the stream's final status.
func TestStreamOnFinishOncePerRPC(t *testing.T) {
	tests := []struct {
		name     string
		fail     int // attempts failed with UNAVAILABLE before any message
		items    int
		end      error
		wantCode codes.Code // of the error OnFinish gets
	}{
		{name: "retried, then read to the end", fail: 2, items: 2},
		{name: "retried, empty stream", fail: 1, items: 0},
		{name: "error after the first message", items: 1, end: status.Error(codes.Unavailable, "lost"), wantCode: codes.Unavailable},
		{name: "give-up", fail: 10, wantCode: codes.Unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newTestServer(t)
				s.fail = failN(listMethod, tt.fail, codes.Unavailable)
				s.items, s.end = tt.items, tt.end
				var perCall, byDefault []error
				cc := s.dial(t, nil,
					grpc.WithStreamInterceptor(grpcretry.StreamClientInterceptor(testPolicy(newRecorder()))),
					grpc.WithDefaultCallOptions(grpc.OnFinish(func(err error) { byDefault = append(byDefault, err) })))
				_, err := list(t.Context(), cc, "x", grpc.OnFinish(func(err error) { perCall = append(perCall, err) }))
				if status.Code(err) != tt.wantCode {
					t.Fatalf("List = %v, want code %v", err, tt.wantCode)
				}
				synctest.Wait()
				for name, got := range map[string][]error{"per call": perCall, "default": byDefault} {
					if len(got) != 1 || status.Code(got[0]) != tt.wantCode {
						t.Errorf("%s OnFinish got %v, want one call with code %v", name, got, tt.wantCode)
					}
				}
			})
		})
	}
}

// Bidirectional: a creation retried while no connection can be made; the
// stream's OnFinish once, when it ends.
func TestStreamBidiOnFinishOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		rec := newRecorder()
		cc := s.dial(t, func(n int) bool { return n <= 2 }, grpc.WithStreamInterceptor(grpcretry.StreamClientInterceptor(testPolicy(rec))))
		var finished []error
		cs, err := cc.NewStream(t.Context(), chatDesc, chatMethod, grpc.WaitForReady(false), grpc.OnFinish(func(err error) { finished = append(finished, err) }))
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Of(retry.EventRetry)) == 0 {
			t.Fatal("no retry: the refused dials should have been retried")
		}
		if err := cs.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if err := cs.RecvMsg(new(healthpb.HealthCheckRequest)); err != io.EOF {
			t.Fatalf("RecvMsg = %v, want io.EOF", err)
		}
		if len(finished) != 1 || finished[0] != nil {
			t.Errorf("OnFinish got %v, want one call with nil", finished)
		}
	})
}

// Streams set grpc-previous-rpc-attempts too, replacing a forwarded value.
func TestStreamPreviousAttemptsSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		s.fail = failN(listMethod, 2, codes.Unavailable)
		s.items = 1
		cc := streamClient(t, s, testPolicy(newRecorder()))
		ctx := metadata.AppendToOutgoingContext(t.Context(), grpcretry.PreviousAttemptsKey, "7")
		if _, err := list(ctx, cc, "x"); err != nil {
			t.Fatal(err)
		}
		if got, want := s.prev(listMethod), []string{"1", "2"}; !slices.Equal(got, want) {
			t.Errorf("grpc-previous-rpc-attempts seen over 3 attempts = %q, want %q", got, want)
		}
	})
}

// A caller's context that is already done: no stream, the context's error,
// and OnFinish once with it.
func TestStreamContextAlreadyDone(t *testing.T) {
	for _, desc := range []*grpc.StreamDesc{listDesc, chatDesc} {
		t.Run(desc.StreamName, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newTestServer(t)
				cc := streamClient(t, s, testPolicy(newRecorder()))
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				var finished []error
				method := listMethod
				if desc == chatDesc {
					method = chatMethod
				}
				cs, err := cc.NewStream(ctx, desc, method, grpc.OnFinish(func(err error) { finished = append(finished, err) }))
				if err == nil {
					err = cs.SendMsg(&healthpb.HealthCheckRequest{})
					if err == nil {
						err = cs.RecvMsg(new(healthpb.HealthCheckResponse))
					}
				}
				if !errors.Is(err, context.Canceled) && status.Code(err) != codes.Canceled {
					t.Errorf("err = %v, want the context's", err)
				}
				if len(finished) != 1 {
					t.Errorf("OnFinish got %v, want one call", finished)
				}
				if n := s.count(method); n != 0 {
					t.Errorf("server saw %d attempts, want 0", n)
				}
			})
		})
	}
}
