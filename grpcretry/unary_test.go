package grpcretry_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/grpcretry"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// check calls Health.Check through a client with the unary interceptor.
func check(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
	_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, opts...)
	return err
}

func unaryClient(t *testing.T, s *testServer, p retry.Policy, opts ...grpcretry.Option) *grpc.ClientConn {
	return s.dial(t, nil, grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(p, opts...)))
}

func TestUnaryRetriesDefaultCodes(t *testing.T) {
	for _, code := range []codes.Code{codes.Unavailable, codes.ResourceExhausted} {
		t.Run(code.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newTestServer(t)
				s.fail = failN(checkMethod, 2, code)
				rec := newRecorder()
				cc := unaryClient(t, s, testPolicy(rec))

				start := time.Now()
				if err := check(t.Context(), cc); err != nil {
					t.Fatalf("Check: %v, want success on the third attempt", err)
				}
				s.wantAttempts(t, checkMethod, 3)
				want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}
				if got := waits(rec); !slices.Equal(got, want) {
					t.Errorf("waits = %v, want %v", got, want)
				}
				// Virtual time: the waits were really waited, no more.
				if got := time.Since(start); got != 300*time.Millisecond {
					t.Errorf("call took %v of virtual time, want 300ms", got)
				}
				if got, want := s.prev(checkMethod), []string{"1", "2"}; !slices.Equal(got, want) {
					t.Errorf("grpc-previous-rpc-attempts seen = %q, want %q", got, want)
				}
				if n := len(rec.Of(retry.EventSuccess)); n != 1 {
					t.Errorf("%d success events, want 1", n)
				}
			})
		})
	}
}

func TestUnaryOtherCodesNotRetried(t *testing.T) {
	for _, code := range []codes.Code{
		codes.Canceled, codes.Unknown, codes.InvalidArgument, codes.DeadlineExceeded,
		codes.NotFound, codes.AlreadyExists, codes.PermissionDenied, codes.FailedPrecondition,
		codes.Aborted, codes.OutOfRange, codes.Unimplemented, codes.Internal, codes.DataLoss,
		codes.Unauthenticated,
	} {
		t.Run(code.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newTestServer(t)
				s.fail = failN(checkMethod, 1, code)
				rec := newRecorder()
				cc := unaryClient(t, s, testPolicy(rec))

				err := check(t.Context(), cc)
				if status.Code(err) != code {
					t.Fatalf("Check: %v, want code %v", err, code)
				}
				s.wantAttempts(t, checkMethod, 1)
				var re *retry.Error
				if errors.As(err, &re) {
					t.Errorf("a non-retryable error came back wrapped: %v", err)
				}
				if st, _ := status.FromError(err); st.Message() != "injected failure 1" {
					t.Errorf("message = %q, want the server's as is", st.Message())
				}
				g := rec.Of(retry.EventGiveUp)
				if len(g) != 1 || g[0].Reason != retry.ReasonPermanent {
					t.Errorf("give-up events = %+v, want one with reason permanent", g)
				}
			})
		})
	}
}

func TestUnaryWithCodes(t *testing.T) {
	tests := []struct {
		code     codes.Code
		attempts int
	}{
		{codes.Internal, 2},    // configured: retried
		{codes.Unavailable, 1}, // default, but replaced: not retried
	}
	for _, tt := range tests {
		t.Run(tt.code.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newTestServer(t)
				s.fail = failN(checkMethod, 1, tt.code)
				cc := unaryClient(t, s, testPolicy(newRecorder()), grpcretry.WithCodes(codes.Internal))
				_ = check(t.Context(), cc)
				s.wantAttempts(t, checkMethod, tt.attempts)
			})
		})
	}
}

func TestUnaryAttemptsCapExact(t *testing.T) {
	for _, attempts := range []int{1, 2, 3, 5} {
		t.Run("", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newTestServer(t)
				s.fail = func(context.Context, string, int) error {
					return withRetryInfo(codes.Unavailable, time.Millisecond)
				}
				rec := newRecorder()
				p := testPolicy(rec)
				p.Attempts = attempts
				cc := unaryClient(t, s, p)

				err := check(t.Context(), cc)
				if got := s.count(checkMethod); got != attempts {
					t.Errorf("server saw %d attempts, want exactly %d", got, attempts)
				}
				var re *retry.Error
				if !errors.As(err, &re) || re.Attempts != attempts || re.Reason != retry.ReasonAttempts {
					t.Fatalf("err = %v, want a *retry.Error after %d attempts (reason attempts)", err, attempts)
				}
				// The last status survives the wrapping, details included.
				st, ok := status.FromError(err)
				if !ok || st.Code() != codes.Unavailable {
					t.Errorf("status.FromError(err) = %v, %v; want UNAVAILABLE", st, ok)
				}
				if len(st.Details()) != 1 {
					t.Errorf("details = %v, want the RetryInfo", st.Details())
				}
				if n := len(rec.Of(retry.EventRetry)); n != attempts-1 {
					t.Errorf("%d retry events, want %d", n, attempts-1)
				}
			})
		})
	}
}

func TestUnaryRetryInfoIsAFloor(t *testing.T) {
	tests := []struct {
		name          string
		hint          time.Duration
		maxRetryAfter time.Duration
		wantWait      time.Duration
	}{
		{"hint above backoff", 2 * time.Second, 0, 2 * time.Second},
		{"hint below backoff", 10 * time.Millisecond, 0, 100 * time.Millisecond},
		{"hint capped", 30 * time.Second, 500 * time.Millisecond, 500 * time.Millisecond},
		{"hints ignored", 30 * time.Second, retry.Zero, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newTestServer(t)
				s.fail = onFirst(func(context.Context) error { return withRetryInfo(codes.ResourceExhausted, tt.hint) })
				rec := newRecorder()
				p := testPolicy(rec)
				p.MaxRetryAfter = tt.maxRetryAfter
				cc := unaryClient(t, s, p)

				start := time.Now()
				if err := check(t.Context(), cc); err != nil {
					t.Fatal(err)
				}
				r := rec.Of(retry.EventRetry)
				if len(r) != 1 {
					t.Fatalf("%d retry events, want 1", len(r))
				}
				if r[0].Wait != tt.wantWait {
					t.Errorf("wait = %v, want %v", r[0].Wait, tt.wantWait)
				}
				wantHint := tt.hint
				if tt.maxRetryAfter == retry.Zero {
					wantHint = 0
				}
				if r[0].Hint != wantHint {
					t.Errorf("hint = %v, want %v", r[0].Hint, wantHint)
				}
				if got := time.Since(start); got != tt.wantWait {
					t.Errorf("virtual time %v, want %v", got, tt.wantWait)
				}
			})
		})
	}
}

func TestUnaryHintBeyondDeadlineGivesUpAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		s.fail = func(context.Context, string, int) error {
			return withRetryInfo(codes.ResourceExhausted, 30*time.Second)
		}
		p := testPolicy(newRecorder())
		p.MaxRetryAfter = time.Minute
		cc := unaryClient(t, s, p)

		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		start := time.Now()
		err := check(ctx, cc)
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonDeadline || re.Attempts != 1 {
			t.Fatalf("err = %v, want a give-up for the deadline after 1 attempt", err)
		}
		if got := time.Since(start); got != 0 {
			t.Errorf("gave up after %v, want at once (no wait that cannot end in time)", got)
		}
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("code = %v, want RESOURCE_EXHAUSTED", status.Code(err))
		}
	})
}

func TestUnaryPushback(t *testing.T) {
	tests := []struct {
		name        string
		pushback    string
		more        string        // a second value, if not ""
		retryInfo   time.Duration // 0: none
		wantTries   int
		wantWait    time.Duration
		wantStopped bool
	}{
		{name: "floor", pushback: "750", wantTries: 2, wantWait: 750 * time.Millisecond},
		{name: "zero", pushback: "0", wantTries: 2, wantWait: 100 * time.Millisecond},
		{name: "larger than RetryInfo", pushback: "900", retryInfo: 300 * time.Millisecond, wantTries: 2, wantWait: 900 * time.Millisecond},
		{name: "smaller than RetryInfo", pushback: "200", retryInfo: 600 * time.Millisecond, wantTries: 2, wantWait: 600 * time.Millisecond},
		{name: "negative", pushback: "-1", wantTries: 1, wantStopped: true},
		{name: "malformed", pushback: "soon", wantTries: 1, wantStopped: true},
		{name: "negative beats RetryInfo", pushback: "-5", retryInfo: time.Second, wantTries: 1, wantStopped: true},
		// grpc-go: more than one value means "do not retry", whatever they say.
		{name: "two values", pushback: "100", more: "200", wantTries: 1, wantStopped: true},
		{name: "two equal values", pushback: "100", more: "100", wantTries: 1, wantStopped: true},
		{name: "comma-joined values", pushback: "100,200", wantTries: 1, wantStopped: true},
		{name: "empty", pushback: "", wantTries: 1, wantStopped: true},
		{name: "beyond int64 ms", pushback: "99999999999999999999", wantTries: 1, wantStopped: true},
		{name: "huge, capped by MaxRetryAfter", pushback: "9223372036854775807", wantTries: 2, wantWait: 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newTestServer(t)
				s.fail = func(ctx context.Context, _ string, n int) error {
					if n > 1 {
						return nil
					}
					md := metadata.Pairs(grpcretry.PushbackKey, tt.pushback)
					if tt.more != "" {
						md.Append(grpcretry.PushbackKey, tt.more)
					}
					grpc.SetTrailer(ctx, md)
					if tt.retryInfo > 0 {
						return withRetryInfo(codes.Unavailable, tt.retryInfo)
					}
					return status.Error(codes.Unavailable, "busy")
				}
				rec := newRecorder()
				cc := unaryClient(t, s, testPolicy(rec))

				err := check(t.Context(), cc)
				s.wantAttempts(t, checkMethod, tt.wantTries)
				if tt.wantStopped {
					if !errors.Is(err, grpcretry.ErrPushback) || status.Code(err) != codes.Unavailable {
						t.Errorf("err = %v, want ErrPushback with the UNAVAILABLE status", err)
					}
					g := rec.Of(retry.EventGiveUp)
					if len(g) != 1 || !errors.Is(g[0].Err, grpcretry.ErrPushback) {
						t.Errorf("give-up events = %+v, want one whose Err is ErrPushback", g)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if w := waits(rec); len(w) != 1 || w[0] != tt.wantWait {
					t.Errorf("waits = %v, want [%v]", w, tt.wantWait)
				}
			})
		})
	}
}

func TestUnaryNonIdempotentNotRetriedOnceSent(t *testing.T) {
	for _, opt := range []grpcretry.Option{
		grpcretry.WithNonIdempotent(checkMethod),
		grpcretry.WithIdempotent(func(m string) bool { return m != checkMethod }),
	} {
		synctest.Test(t, func(t *testing.T) {
			s := newTestServer(t)
			s.fail = failN(checkMethod, 1, codes.Unavailable)
			rec := newRecorder()
			cc := unaryClient(t, s, testPolicy(rec), opt)

			err := check(t.Context(), cc)
			s.wantAttempts(t, checkMethod, 1)
			if !errors.Is(err, grpcretry.ErrNotIdempotent) {
				t.Errorf("err = %v, want one matching ErrNotIdempotent", err)
			}
			if st, _ := status.FromError(err); st.Code() != codes.Unavailable || st.Message() != "injected failure 1" {
				t.Errorf("status = %v, want the server's UNAVAILABLE as is", st)
			}
			g := rec.Of(retry.EventGiveUp)
			if len(g) != 1 || g[0].Reason != retry.ReasonPermanent || !errors.Is(g[0].Err, grpcretry.ErrNotIdempotent) {
				t.Errorf("give-up events = %+v, want one (permanent, ErrNotIdempotent)", g)
			}
		})
	}
}

func TestUnaryNonIdempotentRetriedWhenNeverSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		rec := newRecorder()
		// The first two dials are refused: the first attempts fail before
		// any stream exists, so they provably never reached the server.
		cc := s.dial(t, func(n int) bool { return n <= 2 },
			grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(testPolicy(rec), grpcretry.WithNonIdempotent(checkMethod))))

		if err := check(t.Context(), cc); err != nil {
			t.Fatalf("Check: %v, want success once the server is reachable", err)
		}
		s.wantAttempts(t, checkMethod, 1)
		r := rec.Of(retry.EventRetry)
		if len(r) == 0 {
			t.Fatal("no retry: the refused connection should have been retried")
		}
		for _, e := range r {
			if status.Code(e.Err) != codes.Unavailable {
				t.Errorf("retried error %v, want UNAVAILABLE", e.Err)
			}
		}
	})
}

func TestUnaryServerUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		rec := newRecorder()
		p := testPolicy(rec)
		cc := s.dial(t, func(int) bool { return true },
			grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(p, grpcretry.WithNonIdempotent(checkMethod))))

		err := check(t.Context(), cc)
		var re *retry.Error
		if !errors.As(err, &re) || re.Attempts != p.Attempts || re.Reason != retry.ReasonAttempts {
			t.Fatalf("err = %v, want a give-up after %d attempts", err, p.Attempts)
		}
		if status.Code(err) != codes.Unavailable {
			t.Errorf("code = %v, want UNAVAILABLE", status.Code(err))
		}
		s.wantAttempts(t, checkMethod, 0)
	})
}

func TestUnaryCallPolicy(t *testing.T) {
	tests := []struct {
		name     string
		opts     []grpc.CallOption
		attempts int
	}{
		{"none", nil, 4},
		{"off", []grpc.CallOption{grpcretry.CallPolicy(retry.Policy{Attempts: 1})}, 1},
		{"two, beside other options", []grpc.CallOption{grpc.WaitForReady(false), grpcretry.CallPolicy(retry.Policy{Attempts: 2}), grpc.MaxCallRecvMsgSize(1 << 20)}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newTestServer(t)
				s.fail = failN(checkMethod, 10, codes.Unavailable)
				cc := unaryClient(t, s, testPolicy(newRecorder()))
				_ = check(t.Context(), cc, tt.opts...)
				s.wantAttempts(t, checkMethod, tt.attempts)
			})
		})
	}
}

func TestUnaryAttemptTimeoutRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		s.fail = onFirst(hang) // the first attempt hangs until the client gives up on it
		rec := newRecorder()
		p := testPolicy(rec)
		p.AttemptTimeout = time.Second
		cc := unaryClient(t, s, p)

		start := time.Now()
		if err := check(t.Context(), cc); err != nil {
			t.Fatalf("Check: %v, want success on the second attempt", err)
		}
		s.wantAttempts(t, checkMethod, 2)
		wantTimeoutRetry(t, rec, start)
	})
}

func TestUnaryInvalidPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		cc := unaryClient(t, s, retry.Policy{InitialDelay: time.Minute, MaxDelay: time.Second})
		err := check(t.Context(), cc)
		var ve *retry.ValidationError
		if !errors.As(err, &ve) || ve.Field != "MaxDelay" {
			t.Fatalf("err = %v, want a *retry.ValidationError naming MaxDelay", err)
		}
		s.wantAttempts(t, checkMethod, 0)
	})
}

func TestUnaryCallerCancelStopsWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		s.fail = failN(checkMethod, 10, codes.Unavailable)
		p := testPolicy(newRecorder())
		p.InitialDelay = 10 * time.Second
		p.MaxDelay = time.Minute
		cc := unaryClient(t, s, p)

		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(3*time.Second, cancel)
		start := time.Now()
		err := check(ctx, cc)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled in the chain", err)
		}
		if got := time.Since(start); got != 3*time.Second {
			t.Errorf("returned after %v, want 3s (when the caller cancelled)", got)
		}
		s.wantAttempts(t, checkMethod, 1)
	})
}

// The retried call sees the RetryInfo detail through the *retry.Error.
func TestUnaryDetailsKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		s.fail = func(context.Context, string, int) error {
			return withRetryInfo(codes.Unavailable, 42*time.Millisecond)
		}
		p := testPolicy(newRecorder())
		p.Attempts = 2
		cc := unaryClient(t, s, p)
		st := status.Convert(check(t.Context(), cc))
		var ri *errdetails.RetryInfo
		for _, d := range st.Details() {
			if r, ok := d.(*errdetails.RetryInfo); ok {
				ri = r
			}
		}
		if ri.GetRetryDelay().AsDuration() != 42*time.Millisecond {
			t.Errorf("RetryInfo lost: details %v", st.Details())
		}
	})
}

// A caller that forwards incoming metadata may already carry
// grpc-previous-rpc-attempts (the upstream call's): each attempt sends the
// value of this call only, set, never appended, and none on the first.
func TestUnaryPreviousAttemptsSet(t *testing.T) {
	for name, outgoing := range map[string]func(context.Context) context.Context{
		"NewOutgoingContext": func(ctx context.Context) context.Context {
			return metadata.NewOutgoingContext(ctx, metadata.Pairs(grpcretry.PreviousAttemptsKey, "7", "x-other", "kept"))
		},
		"AppendToOutgoingContext": func(ctx context.Context) context.Context {
			return metadata.AppendToOutgoingContext(ctx, "Grpc-Previous-Rpc-Attempts", "7", "x-other", "kept")
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newTestServer(t)
				var others []string
				s.fail = func(ctx context.Context, m string, n int) error {
					md, _ := metadata.FromIncomingContext(ctx)
					others = append(others, md.Get("x-other")...)
					return failN(checkMethod, 2, codes.Unavailable)(ctx, m, n)
				}
				cc := unaryClient(t, s, testPolicy(newRecorder()))
				if err := check(outgoing(t.Context()), cc); err != nil {
					t.Fatal(err)
				}
				if got, want := s.prev(checkMethod), []string{"1", "2"}; !slices.Equal(got, want) {
					t.Errorf("grpc-previous-rpc-attempts seen over 3 attempts = %q, want %q", got, want)
				}
				if want := []string{"kept", "kept", "kept"}; !slices.Equal(others, want) {
					t.Errorf("other metadata seen = %q, want %q", others, want)
				}
			})
		})
	}
}

// grpc.OnFinish runs once per RPC, as grpc-go promises, with the error the
// call returns; not once per attempt. Options given per call and as the
// connection's defaults alike.
func TestUnaryOnFinishOncePerRPC(t *testing.T) {
	tests := []struct {
		name     string
		fail     func(context.Context, string, int) error
		wantCode codes.Code
	}{
		{"success after retries", failN(checkMethod, 2, codes.Unavailable), codes.OK},
		{"give-up", failN(checkMethod, 10, codes.Unavailable), codes.Unavailable},
		{"not retryable", failN(checkMethod, 1, codes.PermissionDenied), codes.PermissionDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newTestServer(t)
				s.fail = tt.fail
				var perCall, byDefault []error
				cc := s.dial(t, nil,
					grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(testPolicy(newRecorder()))),
					grpc.WithDefaultCallOptions(grpc.OnFinish(func(err error) { byDefault = append(byDefault, err) })))
				err := check(t.Context(), cc, grpc.OnFinish(func(err error) { perCall = append(perCall, err) }))
				if status.Code(err) != tt.wantCode {
					t.Fatalf("Check = %v, want code %v", err, tt.wantCode)
				}
				for name, got := range map[string][]error{"per call": perCall, "default": byDefault} {
					if len(got) != 1 || !errors.Is(got[0], err) {
						t.Errorf("%s OnFinish got %v, want exactly the call's error [%v]", name, got, err)
					}
				}
			})
		})
	}
}

// The caller's grpc.Header, grpc.Trailer and grpc.Peer describe the last
// attempt, even when it got no stream (grpc-go then fills none of them):
// never an earlier attempt's pushback trailer next to a later error.
func TestUnaryCallerMetadataFromLastAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestServer(t)
		s.fail = func(ctx context.Context, _ string, n int) error {
			grpc.SetHeader(ctx, metadata.Pairs("x-attempt", strconv.Itoa(n)))
			grpc.SetTrailer(ctx, metadata.Pairs(grpcretry.PushbackKey, "10"))
			return status.Error(codes.Unavailable, "going away")
		}
		p := testPolicy(newRecorder())
		p.Attempts = 2
		// Between the attempts the server goes away for good: the second
		// attempt fails without a stream (the dial is refused).
		p.Observer = func(_ context.Context, e retry.Event) {
			if e.Kind == retry.EventRetry {
				s.srv.Stop()
				synctest.Wait() // the client has seen its connection close
			}
		}
		cc := s.dial(t, func(n int) bool { return n > 1 }, grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(p)))
		var header, trailer metadata.MD
		var pr peer.Peer
		err := check(t.Context(), cc, grpc.Header(&header), grpc.Trailer(&trailer), grpc.Peer(&pr))
		var re *retry.Error
		if !errors.As(err, &re) || re.Attempts != 2 || status.Code(err) != codes.Unavailable {
			t.Fatalf("err = %v, want a give-up after 2 attempts, UNAVAILABLE", err)
		}
		if s.count(checkMethod) != 1 {
			t.Fatalf("server saw %d attempts, want 1 (the second never reached it)", s.count(checkMethod))
		}
		if len(header) != 0 || len(trailer) != 0 || pr.Addr != nil {
			t.Errorf("header %v, trailer %v, peer %v: want none, as the last attempt got none", header, trailer, pr.Addr)
		}
	})
}
