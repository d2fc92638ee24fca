package grpcretry

import (
	"context"
	"io"
	"strconv"
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
func StreamClientInterceptor(p retry.Policy, opts ...Option) grpc.StreamClientInterceptor {
	c := newConfig(opts)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		pol, callOpts := policy(p, callOpts)
		o := &opener{c: c, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, opts: callOpts, idempotent: c.isIdempotent(method)}
		if desc.ServerStreams && !desc.ClientStreams {
			return &replayStream{o: o, pol: pol}, nil
		}
		// Client-streaming or bidirectional: retry the creation only.
		return retry.Do(ctx, pol, func(context.Context) (grpc.ClientStream, error) {
			s, err := o.open()
			if err != nil {
				return nil, o.c.classify(ctx, err, nil, o.idempotent, false)
			}
			return s, nil
		})
	}
}

// opener creates the streams of one call. Streams live on the caller's
// context (not the attempt's, which the core cancels when the loop returns).
type opener struct {
	c          *config
	ctx        context.Context
	desc       *grpc.StreamDesc
	cc         *grpc.ClientConn
	method     string
	streamer   grpc.Streamer
	opts       []grpc.CallOption
	idempotent bool
	n          int // streams opened so far
}

// open creates the next stream. A creation error means grpc-go put nothing
// on the wire for it (no transport stream was created).
func (o *opener) open() (grpc.ClientStream, error) {
	ctx := o.ctx
	if o.n > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, PreviousAttemptsKey, strconv.Itoa(o.n))
	}
	o.n++
	return o.streamer(ctx, o.desc, o.cc, o.method, o.opts...)
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
	s.cs, s.err = retry.Do(o.ctx, s.pol, func(context.Context) (grpc.ClientStream, error) {
		cs, err := o.open()
		if err != nil {
			return nil, o.c.classify(o.ctx, err, nil, o.idempotent, false)
		}
		if s.sent {
			if err := cs.SendMsg(s.req); err != nil && err != io.EOF {
				// io.EOF means the stream ended: RecvMsg has its status.
				return nil, retry.Permanent(err)
			}
		}
		if s.closed {
			if err := cs.CloseSend(); err != nil {
				return nil, retry.Permanent(err)
			}
		}
		if m == nil {
			return cs, nil
		}
		switch err := cs.RecvMsg(m); err {
		case nil, io.EOF:
			s.firstRecv = err
			return cs, nil
		default:
			return nil, o.c.classify(o.ctx, err, cs.Trailer(), o.idempotent, true)
		}
	})
	if s.cs != nil {
		s.err = s.firstRecv
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
