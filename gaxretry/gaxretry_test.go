package gaxretry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/gaxretry"
	"github.com/backoffkit/retry/internal/testkit"
	gax "github.com/googleapis/gax-go/v2"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// grpcErr builds a gRPC error the way a server sends it, optionally with a
// google.rpc.RetryInfo detail (hint > 0).
func grpcErr(code codes.Code, hint time.Duration) error {
	st := &spb.Status{Code: int32(code), Message: "injected"}
	if hint > 0 {
		a, err := anypb.New(&errdetails.RetryInfo{RetryDelay: durationpb.New(hint)})
		if err != nil {
			panic(err)
		}
		st.Details = append(st.Details, a)
	}
	return status.ErrorProto(st)
}

// httpErr builds the *googleapi.Error that google.golang.org/api clients
// return for an HTTP error response.
func httpErr(code int, body string, header http.Header) error {
	return &googleapi.Error{Code: code, Message: http.StatusText(code), Body: body, Header: header}
}

// generatedErr builds the error a generated google.golang.org/api client's
// Do method returns for an HTTP error (gensupport.WrapError: a
// *googleapi.Error wrapping an APIError parsed from it), then wraps it as
// gax.Invoke does: apierror.FromError finds the nested APIError's gRPC status
// (gax's mapping of the HTTP code), so the outer APIError's HTTPCode() is -1.
func generatedErr(code int) error {
	ge := &googleapi.Error{Code: code, Message: http.StatusText(code)}
	inner, ok := apierror.ParseError(ge, false)
	if !ok {
		panic("apierror.ParseError failed")
	}
	ge.Wrap(inner)
	outer := apiErr(ge)
	if ae := outer.(*apierror.APIError); ae.HTTPCode() != -1 {
		panic(fmt.Sprintf("HTTPCode() = %d: gax no longer builds the error this test is about", ae.HTTPCode()))
	}
	return outer
}

// apiErr wraps err as gax.Invoke does before calling the Retryer.
func apiErr(err error) error {
	ae, ok := apierror.FromError(err)
	if !ok {
		panic(fmt.Sprintf("apierror.FromError(%v) failed", err))
	}
	return ae
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var _ net.Error = timeoutErr{}

// httpTimeoutErr is shaped like net/http's own timeout errors
// (Client.Timeout, ResponseHeaderTimeout): a net.Error timeout that matches
// context.DeadlineExceeded with an Is method.
type httpTimeoutErr struct{}

func (httpTimeoutErr) Error() string        { return "net/http: timeout awaiting response headers" }
func (httpTimeoutErr) Timeout() bool        { return true }
func (httpTimeoutErr) Temporary() bool      { return true }
func (httpTimeoutErr) Is(target error) bool { return target == context.DeadlineExceeded }

// uncomparableErr panics if compared with ==.
type uncomparableErr struct{ s []string }

func (uncomparableErr) Error() string { return "uncomparable" }

func TestClassification(t *testing.T) {
	netErr := func(errno syscall.Errno) error {
		return &url.Error{Op: "Post", URL: "https://x", Err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", errno)}}
	}
	tests := []struct {
		name string
		err  error
		opts []gaxretry.Option
		p    retry.Policy
		want bool
	}{
		{name: "grpc unavailable", err: grpcErr(codes.Unavailable, 0), want: true},
		{name: "grpc resource exhausted", err: grpcErr(codes.ResourceExhausted, 0), want: true},
		{name: "grpc internal", err: grpcErr(codes.Internal, 0)},
		{name: "grpc invalid argument", err: grpcErr(codes.InvalidArgument, 0)},
		{name: "grpc deadline exceeded", err: grpcErr(codes.DeadlineExceeded, 0)},
		{name: "grpc permission denied", err: grpcErr(codes.PermissionDenied, 0)},
		{name: "apierror grpc unavailable", err: apiErr(grpcErr(codes.Unavailable, 0)), want: true},
		{name: "apierror grpc not found", err: apiErr(grpcErr(codes.NotFound, 0))},
		{name: "grpc internal WithCodes", err: grpcErr(codes.Internal, 0), opts: []gaxretry.Option{gaxretry.WithCodes(codes.Internal)}, want: true},
		{name: "grpc unavailable WithCodes", err: grpcErr(codes.Unavailable, 0), opts: []gaxretry.Option{gaxretry.WithCodes(codes.Internal)}},
		{name: "grpc unavailable WithCodes()", err: grpcErr(codes.Unavailable, 0), opts: []gaxretry.Option{gaxretry.WithCodes()}},
		{name: "http 408", err: httpErr(408, "", nil), want: true},
		{name: "http 429", err: httpErr(429, "", nil), want: true},
		{name: "http 500", err: httpErr(500, "", nil), want: true},
		{name: "http 502", err: httpErr(502, "", nil), want: true},
		{name: "http 503", err: httpErr(503, "", nil), want: true},
		{name: "http 504", err: httpErr(504, "", nil), want: true},
		{name: "http 400", err: httpErr(400, "", nil)},
		{name: "http 401", err: httpErr(401, "", nil)},
		{name: "http 403", err: httpErr(403, "", nil)},
		{name: "http 404", err: httpErr(404, "", nil)},
		{name: "http 501", err: httpErr(501, "", nil)},
		{name: "apierror http 503", err: apiErr(httpErr(503, "", nil)), want: true},
		// apierror maps 400 to INVALID_ARGUMENT and 429 to RESOURCE_EXHAUSTED:
		// the HTTP code decides, not the mapped gRPC code.
		{name: "apierror http 429, StatusCodes without 429", err: apiErr(httpErr(429, "", nil)), p: retry.Policy{StatusCodes: []int{503}}},
		{name: "apierror http 503, StatusCodes 503", err: apiErr(httpErr(503, "", nil)), p: retry.Policy{StatusCodes: []int{503}}, want: true},
		{name: "wrapped http 503", err: fmt.Errorf("calling: %w", httpErr(503, "", nil)), want: true},
		{name: "joined http 503", err: errors.Join(errors.New("calling"), httpErr(503, "", nil)), want: true},
		{name: "joined http 404", err: errors.Join(errors.New("calling"), httpErr(404, "", nil))},
		// A generated client's error through gax.Invoke: the HTTP code
		// decides, not gax's mapping (500 INTERNAL, 504 DEADLINE_EXCEEDED,
		// 429 RESOURCE_EXHAUSTED, 408 ...).
		{name: "generated 500", err: generatedErr(500), want: true},
		{name: "generated 502", err: generatedErr(502), want: true},
		{name: "generated 504", err: generatedErr(504), want: true},
		{name: "generated 408", err: generatedErr(408), want: true},
		{name: "generated 429", err: generatedErr(429), want: true},
		{name: "generated 429, StatusCodes without 429", err: generatedErr(429), p: retry.Policy{StatusCodes: []int{408, 500, 502, 503, 504}}},
		{name: "generated 503, StatusCodes without 503", err: generatedErr(503), p: retry.Policy{StatusCodes: []int{500}}},
		{name: "generated 404", err: generatedErr(404)},
		{name: "generated 500 WithCodes()", err: generatedErr(500), opts: []gaxretry.Option{gaxretry.WithCodes()}, want: true},
		{name: "connection reset", err: netErr(syscall.ECONNRESET), want: true},
		{name: "connection refused", err: netErr(syscall.ECONNREFUSED), want: true},
		{name: "broken pipe", err: netErr(syscall.EPIPE), want: true},
		{name: "unexpected EOF", err: fmt.Errorf("reading body: %w", io.ErrUnexpectedEOF), want: true},
		{name: "net timeout", err: &url.Error{Op: "Get", URL: "https://x", Err: timeoutErr{}}, want: true},
		{name: "net timeout matching context.DeadlineExceeded", err: &url.Error{Op: "Get", URL: "https://x", Err: httpTimeoutErr{}}, want: true},
		{name: "i/o timeout", err: &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, want: true},
		{name: "context canceled", err: context.Canceled},
		{name: "context deadline", err: &url.Error{Op: "Get", URL: "https://x", Err: context.DeadlineExceeded}},
		{name: "context deadline, bare", err: context.DeadlineExceeded},
		{name: "context deadline, joined", err: errors.Join(errors.New("read failed"), context.DeadlineExceeded)},
		{name: "uncomparable error", err: uncomparableErr{[]string{"x"}}},
		{name: "plain error", err: errors.New("boom")},
		{name: "permanent", err: retry.Permanent(grpcErr(codes.Unavailable, 0))},
		{name: "Retryable veto", err: grpcErr(codes.Unavailable, 0), p: retry.Policy{Retryable: func(error) bool { return false }}},
		{name: "Retryable allows", err: grpcErr(codes.Unavailable, 0), p: retry.Policy{Retryable: func(error) bool { return true }}, want: true},
		{name: "Retryable cannot widen", err: grpcErr(codes.Internal, 0), p: retry.Policy{Retryable: func(error) bool { return true }}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p
			p.Observer = func(context.Context, retry.Event) {}
			_, got := gaxretry.New(p, tt.opts...).Retry(tt.err)
			if got != tt.want {
				t.Errorf("Retry(%v) retries = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// recorder is an Observer that keeps the events.
type recorder = testkit.Recorder[retry.Event, retry.EventKind]

func newRecorder() *recorder {
	return testkit.NewRecorder(func(e retry.Event) retry.EventKind { return e.Kind })
}

// script is a gax.APICall that fails with errs in turn, then succeeds, and
// records the (virtual) time of each attempt.
type script struct {
	errs  []error
	calls []time.Time
}

func (s *script) call(context.Context, gax.CallSettings) error {
	s.calls = append(s.calls, time.Now())
	if n := len(s.calls); n <= len(s.errs) {
		return s.errs[n-1]
	}
	return nil
}

// pauses returns the gaps between the attempts.
func (s *script) pauses() []time.Duration {
	var d []time.Duration
	for i := 1; i < len(s.calls); i++ {
		d = append(d, s.calls[i].Sub(s.calls[i-1]))
	}
	return d
}

func repeat(err error, n int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

func noJitter(rec *recorder) retry.Policy {
	return retry.Policy{Jitter: retry.Zero, Observer: rec.Observe}
}

func TestInvokeWaitsBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		s := &script{errs: repeat(grpcErr(codes.Unavailable, 0), 3)}
		if err := gax.Invoke(t.Context(), s.call, gaxretry.WithRetry(noJitter(rec))); err != nil {
			t.Fatalf("Invoke: %v, want success on the 4th attempt", err)
		}
		want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
		if got := s.pauses(); !slices.Equal(got, want) {
			t.Errorf("pauses = %v, want %v", got, want)
		}
		r := rec.Of(retry.EventRetry)
		if len(r) != 3 || r[2].Attempt != 3 || r[2].MaxAttempts != 5 || r[2].Wait != 4*time.Second {
			t.Errorf("retry events = %+v", r)
		}
	})
}

// With jitter, the pauses are exactly Policy.Backoff's for the same random
// numbers: the Retryer has no formula of its own.
func TestInvokePausesAreBackoffs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := retry.Policy{Rand: retry.NewRand(7), Observer: func(context.Context, retry.Event) {}, Shape: retry.ShapeDecorrelated}
		s := &script{errs: repeat(grpcErr(codes.Unavailable, 0), 4)}
		if err := gax.Invoke(t.Context(), s.call, gaxretry.WithRetry(p)); err != nil {
			t.Fatal(err)
		}
		u := retry.NewRand(7)
		var want []time.Duration
		var prev time.Duration
		for n := range 4 {
			prev = p.Backoff(n, prev, u())
			want = append(want, prev)
		}
		if got := s.pauses(); !slices.Equal(got, want) {
			t.Errorf("pauses = %v, want Policy.Backoff's %v", got, want)
		}
	})
}

func TestInvokeAttemptsCapExact(t *testing.T) {
	for _, attempts := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprint(attempts), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := newRecorder()
				p := noJitter(rec)
				p.Attempts = attempts
				last := grpcErr(codes.ResourceExhausted, 0)
				s := &script{errs: repeat(last, 100)}
				err := gax.Invoke(t.Context(), s.call, gaxretry.WithRetry(p))
				if len(s.calls) != attempts {
					t.Errorf("%d attempts, want exactly %d", len(s.calls), attempts)
				}
				var ae *apierror.APIError
				if !errors.As(err, &ae) || ae.GRPCStatus().Code() != codes.ResourceExhausted {
					t.Errorf("err = %v, want the last APIError (RESOURCE_EXHAUSTED)", err)
				}
				g := rec.Of(retry.EventGiveUp)
				if len(g) != 1 || g[0].Reason != retry.ReasonAttempts || g[0].Attempt != attempts {
					t.Errorf("give-up events = %+v, want one for attempts after %d", g, attempts)
				}
			})
		})
	}
}

// gax asks WithRetry's function for a Retryer per call: the second call
// starts from the first wait again.
func TestFreshStatePerCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := gaxretry.WithRetry(noJitter(newRecorder()))
		want := []time.Duration{time.Second, 2 * time.Second}
		for call := range 3 {
			s := &script{errs: repeat(grpcErr(codes.Unavailable, 0), 2)}
			if err := gax.Invoke(t.Context(), s.call, opt); err != nil {
				t.Fatal(err)
			}
			if got := s.pauses(); !slices.Equal(got, want) {
				t.Errorf("call %d: pauses = %v, want %v", call, got, want)
			}
		}
		// And so do two Retryers from New.
		a, b := gaxretry.New(noJitter(newRecorder())), gaxretry.New(noJitter(newRecorder()))
		a.Retry(grpcErr(codes.Unavailable, 0))
		if d, _ := b.Retry(grpcErr(codes.Unavailable, 0)); d != time.Second {
			t.Errorf("a new Retryer's first pause = %v, want 1s", d)
		}
	})
}

func TestHints(t *testing.T) {
	body429, err := os.ReadFile("testdata/google-error-429.json") // retryDelay 25s
	if err != nil {
		t.Fatal(err)
	}
	unknownDetail := `{"error": {"code": 503, "message": "busy", "details": [
		{"@type": "type.googleapis.com/example.Unknown", "x": 1},
		{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"}]}}`
	tests := []struct {
		name          string
		err           error
		maxRetryAfter time.Duration
		wantPause     time.Duration
		wantHint      time.Duration
	}{
		{name: "grpc RetryInfo above backoff", err: grpcErr(codes.ResourceExhausted, 5*time.Second), wantPause: 5 * time.Second, wantHint: 5 * time.Second},
		{name: "grpc RetryInfo below backoff", err: grpcErr(codes.Unavailable, 10*time.Millisecond), wantPause: time.Second, wantHint: 10 * time.Millisecond},
		{name: "http RetryInfo body", err: httpErr(429, string(body429), nil), wantPause: 25 * time.Second, wantHint: 25 * time.Second},
		{name: "http RetryInfo capped", err: httpErr(429, string(body429), nil), maxRetryAfter: 10 * time.Second, wantPause: 10 * time.Second, wantHint: 25 * time.Second},
		{name: "hints ignored", err: httpErr(429, string(body429), nil), maxRetryAfter: retry.Zero, wantPause: time.Second},
		{name: "http Retry-After", err: httpErr(503, "", http.Header{"Retry-After": {"7"}}), wantPause: 7 * time.Second, wantHint: 7 * time.Second},
		{name: "Retry-After beats smaller RetryInfo", err: httpErr(429, string(body429), http.Header{"Retry-After": {"30"}}), wantPause: 30 * time.Second, wantHint: 30 * time.Second},
		{name: "malformed Retry-After ignored", err: httpErr(503, "", http.Header{"Retry-After": {"soon"}}), wantPause: time.Second},
		{name: "body with an unknown detail type", err: httpErr(503, unknownDetail, nil), wantPause: 3 * time.Second, wantHint: 3 * time.Second},
		{name: "retry.After", err: retry.After(grpcErr(codes.Unavailable, 0), 4*time.Second), wantPause: 4 * time.Second, wantHint: 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := newRecorder()
				p := noJitter(rec)
				p.MaxRetryAfter = tt.maxRetryAfter
				s := &script{errs: []error{tt.err}}
				if err := gax.Invoke(t.Context(), s.call, gaxretry.WithRetry(p)); err != nil {
					t.Fatal(err)
				}
				if got := s.pauses(); len(got) != 1 || got[0] != tt.wantPause {
					t.Errorf("pauses = %v, want [%v]", got, tt.wantPause)
				}
				r := rec.Of(retry.EventRetry)
				if len(r) != 1 || r[0].Wait != tt.wantPause || r[0].Hint != tt.wantHint {
					t.Errorf("retry events = %+v, want one with wait %v, hint %v", r, tt.wantPause, tt.wantHint)
				}
			})
		})
	}
}

// The hint gets jitter on top, as in the core loop, and the cap bounds both.
func TestHintJitter(t *testing.T) {
	p := retry.Policy{Rand: func() float64 { return 0.5 }, Observer: func(context.Context, retry.Event) {}}
	d, ok := gaxretry.New(p).Retry(grpcErr(codes.Unavailable, 5*time.Second))
	if !ok || d != 5500*time.Millisecond {
		t.Errorf("pause = %v, %v; want 5.5s (5s hint + half of the 1s jitter)", d, ok)
	}
	p.MaxRetryAfter = 5200 * time.Millisecond
	if d, _ := gaxretry.New(p).Retry(grpcErr(codes.Unavailable, 5*time.Second)); d != 5200*time.Millisecond {
		t.Errorf("pause = %v, want the 5.2s cap", d)
	}
}

func TestDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		p := noJitter(rec)
		p.Deadline = 2500 * time.Millisecond
		s := &script{errs: repeat(grpcErr(codes.Unavailable, 0), 10)}
		start := time.Now()
		err := gax.Invoke(t.Context(), s.call, gaxretry.WithRetry(p))
		if status.Code(err) != codes.Unavailable {
			t.Errorf("err = %v, want the last UNAVAILABLE", err)
		}
		// Waits 1s (ends at 1s), then 2s would end at 3s > 2.5s: give up.
		if len(s.calls) != 2 {
			t.Errorf("%d attempts, want 2", len(s.calls))
		}
		if got := time.Since(start); got != time.Second {
			t.Errorf("gave up after %v, want 1s (no pause that ends after the deadline)", got)
		}
		g := rec.Of(retry.EventGiveUp)
		if len(g) != 1 || g[0].Reason != retry.ReasonDeadline {
			t.Errorf("give-up events = %+v, want one for the deadline", g)
		}
	})
}

func TestDeadlineRefusesLongHint(t *testing.T) {
	p := retry.Policy{Deadline: 10 * time.Second, MaxRetryAfter: time.Minute, Observer: func(context.Context, retry.Event) {}}
	if d, ok := gaxretry.New(p).Retry(grpcErr(codes.ResourceExhausted, 30*time.Second)); ok {
		t.Errorf("Retry = %v, true; want no retry: the hinted pause ends after the deadline", d)
	}
}

func TestInvalidPolicyPanics(t *testing.T) {
	for name, f := range map[string]func(retry.Policy){
		"New":       func(p retry.Policy) { gaxretry.New(p) },
		"WithRetry": func(p retry.Policy) { gaxretry.WithRetry(p) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				v := recover()
				ve, ok := v.(*retry.ValidationError)
				if !ok || ve.Field != "Attempts" {
					t.Errorf("panic %#v, want the *retry.ValidationError naming Attempts, as documented", v)
				}
			}()
			f(retry.Policy{Attempts: -1})
		})
	}
}

// Without an Observer, retries go to slog.Default at Debug level, like the
// core loop's.
func TestDefaultObserverLogsToSlog(t *testing.T) {
	var buf strings.Builder
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(old)

	d, ok := gaxretry.New(retry.Policy{Jitter: retry.Zero}).Retry(grpcErr(codes.Unavailable, 0))
	if !ok || d != time.Second {
		t.Errorf("Retry = %v, %v; want 1s, true", d, ok)
	}
	if out := buf.String(); !strings.Contains(out, "level=DEBUG msg=retry attempt=1 max_attempts=5 wait=1s") {
		t.Errorf("log = %q, want a debug retry record", out)
	}
}
