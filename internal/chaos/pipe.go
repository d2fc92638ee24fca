package chaos

import (
	"context"
	"net"
	"sync"
)

// PipeListener is an in-memory net.Listener whose connections are net.Pipe
// pairs made by DialContext. A server on it, and a client dialling it, can
// run inside a testing/synctest bubble: nothing blocks on real I/O, so stalls,
// timeouts and hints run in virtual time and the bubble catches every
// goroutine left behind.
type PipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// NewPipeListener returns an open PipeListener.
func NewPipeListener() *PipeListener {
	return &PipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept waits for the next DialContext and returns the server's end.
func (l *PipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and DialContext. Connections already made stay open.
func (l *PipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr returns a placeholder address, "pipe".
func (l *PipeListener) Addr() net.Addr { return pipeAddr{} }

// DialContext connects to the listener (the network and address are
// ignored), for http.Transport.DialContext.
func (l *PipeListener) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
	case <-ctx.Done():
		client.Close()
		server.Close()
		return nil, ctx.Err()
	}
	client.Close()
	server.Close()
	return nil, &net.OpError{Op: "dial", Net: "pipe", Err: net.ErrClosed}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
