package grpcretry

import (
	"context"
	"strconv"

	"github.com/backoffkit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// callOpts are a call's options sorted out for its attempts. Options that
// grpc-go applies once per RPC must not be handed to every attempt as they
// are: grpc.OnFinish would run once per attempt, and grpc.Header,
// grpc.Trailer and grpc.Peer would keep an earlier attempt's values when the
// last attempt got no stream (grpc-go then fills none of them).
type callOpts struct {
	attempt []grpc.CallOption // for each attempt: the call's, less CallPolicy and OnFinish
	finish  []func(error)     // the OnFinish callbacks, run once, when the call ends
	header  []*metadata.MD    // grpc.Header destinations, cleared before each retry
	trailer []*metadata.MD    // grpc.Trailer destinations, cleared before each retry
	peer    []*peer.Peer      // grpc.Peer destinations, cleared before each retry
}

// split applies the CallPolicy options among opts to p and sorts out the
// rest. When opts hold neither a CallPolicy nor an OnFinish, the attempts get
// opts as they are (no copy).
func split(p retry.Policy, opts []grpc.CallOption) (retry.Policy, callOpts) {
	c := callOpts{attempt: opts}
	strip := false
	for _, o := range opts {
		switch o := o.(type) {
		case callPolicy:
			p = p.Merge(o.p)
			strip = true
		case grpc.OnFinishCallOption:
			c.finish = append(c.finish, o.OnFinish)
			strip = true
		case grpc.HeaderCallOption:
			c.header = append(c.header, o.HeaderAddr)
		case grpc.TrailerCallOption:
			c.trailer = append(c.trailer, o.TrailerAddr)
		case grpc.PeerCallOption:
			c.peer = append(c.peer, o.PeerAddr)
		}
	}
	if strip {
		c.attempt = make([]grpc.CallOption, 0, len(opts))
		for _, o := range opts {
			switch o.(type) {
			case callPolicy, grpc.OnFinishCallOption:
			default:
				c.attempt = append(c.attempt, o)
			}
		}
	}
	return p, c
}

// retrying clears the caller's Header, Trailer and Peer destinations before
// a retry, so that they end up describing the last attempt only.
func (c *callOpts) retrying() {
	for _, h := range c.header {
		if h != nil {
			*h = nil
		}
	}
	for _, t := range c.trailer {
		if t != nil {
			*t = nil
		}
	}
	for _, p := range c.peer {
		if p != nil {
			*p = peer.Peer{}
		}
	}
}

// finished runs the OnFinish callbacks with err. Call it once per call.
func (c *callOpts) finished(err error) {
	for _, f := range c.finish {
		f(err)
	}
}

// withPreviousAttempts returns ctx with the grpc-previous-rpc-attempts
// request header set to n, or removed for n == 0: a value already there
// (forwarded from an incoming call, say) describes another call.
func withPreviousAttempts(ctx context.Context, n int) context.Context {
	if n == 0 && metadata.ValueFromOutgoingContext(ctx, PreviousAttemptsKey) == nil {
		return ctx // the common first attempt: nothing to copy
	}
	md, _ := metadata.FromOutgoingContext(ctx) // a copy, keys lowercased
	if n == 0 {
		md.Delete(PreviousAttemptsKey)
	} else {
		if md == nil {
			md = metadata.MD{}
		}
		md.Set(PreviousAttemptsKey, strconv.Itoa(n))
	}
	return metadata.NewOutgoingContext(ctx, md)
}
