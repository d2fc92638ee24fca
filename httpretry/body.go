package httpretry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// The transport wraps a response body it hands over (to end the attempt's
// context with it, or to put back bytes it peeked at); a wrapper must not
// hide what callers assert on a body. net/http's bodies are plain
// io.ReadClosers except the upgraded connection of a 101 Switching Protocols,
// an io.ReadWriteCloser with CloseWrite (which the transport never wraps);
// keepWriter keeps those abilities for any other body that has them.

// keepWriter returns wrapped, which reads and closes orig, as a body that
// also writes to orig (with CloseWrite) when orig is an io.Writer, so that a
// caller's type assertion to io.ReadWriteCloser still works.
func keepWriter(orig, wrapped io.ReadCloser) io.ReadCloser {
	w, ok := orig.(io.Writer)
	if !ok {
		return wrapped
	}
	return &writerBody{ReadCloser: wrapped, w: w}
}

// writerBody is a wrapped body that keeps its original's Write and CloseWrite.
type writerBody struct {
	io.ReadCloser
	w io.Writer
}

func (b *writerBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// CloseWrite closes the write side of the original body, when it can
// (net/http's upgraded connections can), like net/http's own 101 body.
func (b *writerBody) CloseWrite() error {
	if cw, ok := b.w.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("CloseWrite: %w", http.ErrNotSupported)
}

// prefixBody reads prefix, then err if set, then rc; Close closes rc.
type prefixBody struct {
	prefix []byte
	rc     io.ReadCloser
	err    error
}

func (b *prefixBody) Read(p []byte) (int, error) {
	if len(b.prefix) > 0 {
		n := copy(p, b.prefix)
		b.prefix = b.prefix[n:]
		return n, nil
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.rc.Read(p)
}

func (b *prefixBody) Close() error { return b.rc.Close() }

// cancelBody ends an attempt's context when its body is closed or read to
// its end.
type cancelBody struct {
	rc     io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF { // io.Reader returns io.EOF itself, never wrapped
		b.cancel()
	}
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.rc.Close()
	b.cancel()
	return err
}

// bounded runs read, which reads body, and closes body if read has not
// returned after maxBodyWait, at ctx's deadline if that is sooner, or when
// ctx ends (Close unblocks a Read on net/http's bodies; closing one before
// its end also closes its HTTP/1 connection, which is then never reused).
// It reports whether body was closed that way (it must not be closed again).
func bounded(body io.Closer, ctx context.Context, read func()) (stalled bool) {
	d := maxBodyWait
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	if d <= 0 || ctx.Err() != nil {
		body.Close()
		return true
	}
	var (
		mu   sync.Mutex
		done bool
	)
	stop := func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			done, stalled = true, true
			body.Close()
		}
	}
	t := time.AfterFunc(d, stop)
	unwatch := context.AfterFunc(ctx, stop)
	read()
	t.Stop()
	unwatch()
	mu.Lock()
	defer mu.Unlock()
	done = true
	return stalled
}

// closedBody stands for a body that bounded closed.
type closedBody struct{}

func (closedBody) Read([]byte) (int, error) { return 0, errBodyStalled }
func (closedBody) Close() error             { return nil }

// errBodyStalled is the read error of a retryable response's body that the
// transport closed because it stalled (see maxBodyWait). It is a timeout.
var errBodyStalled error = stalledError{}

type stalledError struct{}

func (stalledError) Error() string {
	return "httpretry: the response body stalled: not complete within " + maxBodyWait.String() + " or the attempt's deadline; its connection was closed"
}
func (stalledError) Timeout() bool { return true }
