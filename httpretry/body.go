package httpretry

import (
	"context"
	"fmt"
	"io"
	"net/http"
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
