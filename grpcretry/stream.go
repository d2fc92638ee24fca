package grpcretry

import (
	"context"
	"io"
	"sync"
	"sync/atomic"

	"github.com/backoffkit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// StreamClientInterceptor returns a stream client interceptor that retries
// streams under p, only before their first message is received: the
// creation of any stream, and for server-streaming methods also a failure of
// the first RecvMsg before any message arrived, with the buffered request
// sent again (see the package documentation). Install it with
// grpc.WithStreamInterceptor; use [CallPolicy] to override p for one call.
//
// Policy.AttemptTimeout and Policy.Deadline bound each stream attempt until
// the stream is handed over (its first message received, or for
// client-streaming and bidirectional methods its creation); from then on the
// stream lives on the caller's context alone. grpc.OnFinish callbacks run
// once, when the stream handed over ends or when the retries end without a
// stream, as for a call without the interceptor.
func StreamClientInterceptor(p retry.Policy, opts ...Option) grpc.StreamClientInterceptor {
	c := newConfig(opts)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		pol, co := split(p, callOpts)
		o := &opener{c: c, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, co: co, idempotent: c.isIdempotent(method),
			bounded: pol.AttemptTimeout > 0 || pol.Deadline > 0}
		if desc.ServerStreams && !desc.ClientStreams {
			return &replayStream{o: o, pol: pol}, nil
		}
		// Client-streaming or bidirectional: retry the creation only.
		a, err := retry.Do(ctx, pol, func(actx context.Context) (*attempt, error) {
			a, err := o.open(actx)
			if err != nil {
				return nil, o.classify(actx, err, nil, false)
			}
			if !a.commit() {
				return nil, o.classify(actx, errAttemptTimeout(), nil, true)
			}
			return a, nil
		})
		if err != nil {
			o.finished(err)
			return nil, err
		}
		return a.cs, nil
	}
}

// errAttemptTimeout is the error of a stream attempt whose context ended
// just as the stream was about to be handed over: grpc-go's own error for a
// context deadline.
func errAttemptTimeout() error { return status.FromContextError(context.DeadlineExceeded).Err() }

// opener creates the streams of one call.
type opener struct {
	c          *config
	ctx        context.Context // the caller's
	desc       *grpc.StreamDesc
	cc         *grpc.ClientConn
	method     string
	streamer   grpc.Streamer
	co         callOpts
	idempotent bool
	bounded    bool // the policy bounds attempts: the loop's attempt contexts are not the caller's
	n          int  // streams opened so far

	finishOnce sync.Once
}

// attempt is one stream of a call. When the policy bounds attempts, its
// context is a child of the caller's, cancelled when the attempt's context
// (bounded by Policy.AttemptTimeout and Policy.Deadline) ends before the
// stream is committed, or once the stream has ended; committing it (handing
// it over) detaches it from the attempt's context, which the loop cancels as
// soon as the attempt returns. Otherwise the attempt's context is the
// caller's, and cancel and stop are nil.
type attempt struct {
	o      *opener
	cs     grpc.ClientStream
	cancel context.CancelFunc
	stop   func() bool // stops watching the attempt's context

	mu        sync.Mutex
	committed bool
	ended     bool  // grpc-go finished the stream
	err       error // with this status
}

// open creates the next stream, on a context of its own bounded by actx
// until it is committed. A creation error means grpc-go put nothing on the
// wire for it (no transport stream was created).
func (o *opener) open(actx context.Context) (*attempt, error) {
	a := &attempt{o: o}
	sctx := o.ctx
	if o.bounded {
		sctx, a.cancel = context.WithCancel(o.ctx)
		a.stop = context.AfterFunc(actx, a.cancel)
	}
	if o.n > 0 {
		o.co.retrying()
	}
	sctx = withPreviousAttempts(sctx, o.n)
	o.n++
	opts := o.co.attempt
	if o.bounded || len(o.co.finish) > 0 { // else nothing to learn from the stream's end
		opts = append(opts[:len(opts):len(opts)], grpc.OnFinish(a.onFinish))
	}
	cs, err := o.streamer(sctx, o.desc, o.cc, o.method, opts...)
	if err != nil {
		a.abandon()
		return nil, err
	}
	a.cs = cs
	return a, nil
}

// classify is the config's classify for a stream attempt. grpc-go reports a
// stream whose context was cancelled as CANCELED; when the attempt's context
// ended and not the caller's, that was the attempt's bound, reported as
// DEADLINE_EXCEEDED as a unary attempt's would be.
func (o *opener) classify(actx context.Context, err error, trailer metadata.MD, reached bool) error {
	if actx.Err() != nil && o.ctx.Err() == nil && status.Code(err) == codes.Canceled {
		err = errAttemptTimeout()
	}
	return o.c.classify(actx, err, trailer, o.idempotent, reached)
}

// finished runs the caller's OnFinish callbacks once.
func (o *opener) finished(err error) {
	o.finishOnce.Do(func() { o.co.finished(err) })
}

// commit hands the stream over: it is no longer bounded by the attempt's
// context, and its end is reported to the caller's OnFinish callbacks. It
// returns false, and commits nothing, if the attempt's context ended first
// (the stream is then being cancelled).
func (a *attempt) commit() bool {
	if a.stop != nil && !a.stop() {
		return false
	}
	a.mu.Lock()
	a.committed = true
	ended, err := a.ended, a.err
	a.mu.Unlock()
	if ended { // an empty stream, say: io.EOF on the first RecvMsg
		a.o.finished(err)
	}
	return true
}

// onFinish is the attempt's grpc.OnFinish: the stream has ended.
func (a *attempt) onFinish(err error) {
	if a.cancel != nil {
		a.cancel() // release the attempt's context
	}
	a.mu.Lock()
	a.ended, a.err = true, err
	committed := a.committed
	a.mu.Unlock()
	if committed {
		a.o.finished(err)
	}
}

// abandon ends an attempt that is not handed over.
func (a *attempt) abandon() {
	if a.stop != nil {
		a.stop()
		a.cancel()
	}
}

// replayStream is the stream of a server-streaming call: it buffers the one
// request and opens the stream at the first RecvMsg (or Header), retrying
// until the first message (or io.EOF) arrives.
type replayStream struct {
	o   *opener
	pol retry.Policy

	mu     sync.Mutex
	req    any  // the request, once sent
	sent   bool // SendMsg was called
	closed bool // CloseSend was called

	ready     atomic.Bool       // the retry window is over: cs and err are final
	cs        grpc.ClientStream // the stream handed over, nil if none
	err       error             // the window's error, returned by RecvMsg
	firstRecv error             // the first RecvMsg's result: nil or io.EOF
}

// start runs the retry window once. With m != nil the window ends with the
// first message received into m (or the stream's end); with m == nil
// (Header) it ends once a stream exists.
func (s *replayStream) start(m any) (firstDone bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready.Load() {
		return false
	}
	o := s.o
	a, err := retry.Do(o.ctx, s.pol, func(actx context.Context) (*attempt, error) {
		a, err := o.open(actx)
		if err != nil {
			return nil, o.classify(actx, err, nil, false)
		}
		cs := a.cs
		if s.sent {
			if err := cs.SendMsg(s.req); err != nil && err != io.EOF {
				// io.EOF means the stream ended: RecvMsg has its status.
				a.abandon()
				return nil, retry.Permanent(err)
			}
		}
		if s.closed {
			if err := cs.CloseSend(); err != nil {
				a.abandon()
				return nil, retry.Permanent(err)
			}
		}
		if m != nil {
			switch err := cs.RecvMsg(m); err {
			case nil, io.EOF:
				s.firstRecv = err
			default:
				a.abandon()
				return nil, o.classify(actx, err, cs.Trailer(), true)
			}
		}
		if !a.commit() {
			return nil, o.classify(actx, errAttemptTimeout(), nil, true)
		}
		return a, nil
	})
	if err != nil {
		s.err = err
		o.finished(err)
	} else {
		s.cs, s.err = a.cs, s.firstRecv
	}
	s.ready.Store(true)
	return m != nil
}

func (s *replayStream) Header() (metadata.MD, error) {
	s.start(nil)
	if s.cs == nil {
		return nil, s.err
	}
	return s.cs.Header()
}

func (s *replayStream) Trailer() metadata.MD {
	if !s.ready.Load() || s.cs == nil {
		return nil
	}
	return s.cs.Trailer()
}

func (s *replayStream) CloseSend() error {
	s.mu.Lock()
	if !s.ready.Load() {
		s.closed = true
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	if s.cs == nil {
		return nil
	}
	return s.cs.CloseSend()
}

func (s *replayStream) Context() context.Context {
	if s.ready.Load() && s.cs != nil {
		return s.cs.Context()
	}
	return s.o.ctx
}

func (s *replayStream) SendMsg(m any) error {
	s.mu.Lock()
	if !s.ready.Load() {
		defer s.mu.Unlock()
		if s.sent || s.closed {
			return status.Error(codes.Internal, "SendMsg called after CloseSend")
		}
		s.req, s.sent = m, true
		return nil
	}
	s.mu.Unlock()
	if s.cs == nil {
		return io.EOF // the stream failed: RecvMsg returns its error
	}
	return s.cs.SendMsg(m)
}

func (s *replayStream) RecvMsg(m any) error {
	if !s.ready.Load() && s.start(m) {
		return s.err
	}
	if s.cs == nil {
		return s.err
	}
	return s.cs.RecvMsg(m)
}
