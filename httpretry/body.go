package httpretry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

// prefixBody reads prefix, then err if set, then rc; Close closes rc. After
// Close, Read fails as net/http's bodies do, the prefix left unread
// included.
type prefixBody struct {
	prefix []byte
	rc     io.ReadCloser
	err    error
	closed atomic.Bool
}

// errReadOnClosed is what a read of a response body after its Close
// returns (the message of net/http's own error).
var errReadOnClosed = errors.New("http: read on closed response body")

func (b *prefixBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errReadOnClosed
	}
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

func (b *prefixBody) Close() error {
	b.closed.Store(true)
	return b.rc.Close()
}

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

// readBounded reads body, a retryable response's body that the transport
// reads before a retry (the RetryInfo peek, the drain), at most limit bytes
// of it (keeping them when keep is set), and waits for that read at most
// until the bound: maxBodyWait from now, the attempt's deadline dl if that
// is sooner (zero for none), or the end of the caller's ctx. At the bound
// it gives the read up: it returns the bytes kept so far and
// errBodyStalled, with stalled set, and body is closed (it must not be
// closed again); otherwise err is the read's error (nil at the end of the
// body or the limit).
//
// The read runs in a goroutine of its own, so that nothing it waits for
// can hold the caller past the bound: Close unblocks a Read on net/http's
// bodies, but not on the body of a response net/http decompresses
// (Content-Encoding gzip) before the gzip header has come: its Close waits
// for that Read. So at the bound abort (the attempt context's cancel, nil
// if it has none) is called first, which makes net/http end the read and
// close the connection (or reset the HTTP/2 stream), and the body is
// closed in the background. Without abort such a read, and the
// connection, end when the server sends or closes, or the caller's
// context (which net/http watches) ends; the caller has gone on.
//
// It watches the attempt's deadline as a time, not the attempt's context:
// the transport ends that context itself when a body is read to its end
// (cancelBody), which is no stall.
func readBounded(body io.ReadCloser, limit int, keep bool, ctx context.Context, dl time.Time, abort func()) (buf []byte, err error, stalled bool) {
	if d := time.Now().Add(maxBodyWait); dl.IsZero() || d.Before(dl) {
		dl = d
	}
	if ctx.Err() != nil || !time.Now().Before(dl) {
		// No read has begun: Close returns at once.
		if abort != nil {
			abort()
		}
		body.Close()
		return nil, errBodyStalled, true
	}
	r := &boundedRead{done: make(chan struct{})}
	go r.read(body, limit, keep)
	stall := func() { r.stall(body, abort) }
	t := time.AfterFunc(time.Until(dl), stall)
	var unwatch func() bool
	if ctx.Done() != nil {
		unwatch = context.AfterFunc(ctx, stall)
	}
	<-r.done
	t.Stop()
	if unwatch != nil {
		unwatch()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stalled {
		return r.buf, errBodyStalled, true
	}
	return r.buf, r.err, false
}

// boundedRead is the state of one readBounded: the read and the bound race
// to end it first.
type boundedRead struct {
	mu       sync.Mutex
	buf      []byte        // the bytes kept so far (the read's own after a stall)
	err      error         // the read's error, once finished
	finished bool          // the read returned first
	stalled  bool          // the bound came first
	done     chan struct{} // closed by whichever comes first
}

// read reads body (see readBounded), publishing the bytes it keeps after
// each Read, in case the bound comes while the next one waits.
func (r *boundedRead) read(body io.Reader, limit int, keep bool) {
	var (
		b   []byte
		err error
	)
	if keep {
		b = make([]byte, 0, min(512, limit))
		for len(b) < limit {
			if len(b) == cap(b) {
				b = append(b, 0)[:len(b)] // grow
			}
			n, rerr := body.Read(b[len(b):min(cap(b), limit)])
			b = b[:len(b)+n]
			r.mu.Lock()
			if r.stalled { // given up: the caller has gone on
				r.mu.Unlock()
				return
			}
			r.buf = b // Reads write past it, never into it
			r.mu.Unlock()
			if rerr != nil {
				if rerr != io.EOF {
					err = rerr
				}
				break
			}
		}
	} else {
		_, err = io.CopyN(io.Discard, body, int64(limit))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stalled {
		r.finished, r.buf, r.err = true, b, err
		close(r.done)
	}
}

// stall ends the wait of readBounded at its bound, unless the read has
// finished: the caller gets a copy of the bytes read so far (the read may
// still write after them), then the attempt's context is cancelled and
// body closed, in this goroutine (a timer's or the context's), which a
// Close that waits for the read may hold.
func (r *boundedRead) stall(body io.Closer, abort func()) {
	r.mu.Lock()
	if r.finished || r.stalled {
		r.mu.Unlock()
		return
	}
	r.stalled = true
	r.buf = bytes.Clone(r.buf)
	close(r.done)
	r.mu.Unlock()
	if abort != nil {
		abort()
	}
	body.Close()
}

// watchBody closes body at dl (unless zero) or when ctx ends, whichever
// comes first, until stop is called; stop reports whether body was closed.
func watchBody(body io.Closer, ctx context.Context, dl time.Time) (stop func() bool) {
	var (
		mu           sync.Mutex
		done, closed bool
	)
	fire := func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			done, closed = true, true
			body.Close()
		}
	}
	var t *time.Timer
	if !dl.IsZero() {
		t = time.AfterFunc(time.Until(dl), fire)
	}
	var unwatch func() bool
	if ctx.Done() != nil {
		unwatch = context.AfterFunc(ctx, fire)
	}
	return func() bool {
		if t != nil {
			t.Stop()
		}
		if unwatch != nil {
			unwatch()
		}
		mu.Lock()
		defer mu.Unlock()
		done = true
		return closed
	}
}

// deadline returns ctx's deadline, zero if none.
func deadline(ctx context.Context) time.Time {
	dl, _ := ctx.Deadline()
	return dl
}

// closedBody stands for a body the transport closed because it stalled or
// its context ended: reads return err, Close does nothing (it was closed).
type closedBody struct{ err error }

func (b closedBody) Read([]byte) (int, error) { return 0, b.err }
func (closedBody) Close() error               { return nil }

// errBodyStalled is the read error of a retryable response's body that the
// transport closed because it stalled (see maxBodyWait). It is a timeout.
var errBodyStalled error = stalledError{}

type stalledError struct{}

func (stalledError) Error() string {
	return "httpretry: the response body stalled: not complete within " + maxBodyWait.String() + " or the attempt's deadline; its connection was closed"
}
func (stalledError) Timeout() bool { return true }

// readBody reads at most n bytes of a request body, until ctx ends: the
// body is then closed (a request body must let Close unblock a Read, see
// http.Request.Body) and closed reports it, with the context's cause as the
// error.
func readBody(ctx context.Context, rc io.ReadCloser, n int64) (buf []byte, closed bool, err error) {
	if ctx.Err() != nil {
		rc.Close()
		return nil, true, context.Cause(ctx)
	}
	stop := context.AfterFunc(ctx, func() { rc.Close() })
	buf, err = io.ReadAll(io.LimitReader(rc, n))
	if !stop() {
		return buf, true, context.Cause(ctx)
	}
	return buf, false, err
}

// streamBody is a request body that is not buffered in full: the bytes read
// while trying to buffer it (prefix), then the rest of the caller's body,
// sent as they are produced. Each attempt sends it through a view of its
// own. It can be sent again only when the transport gave the last view back
// untouched (closed without a Read), as net/http does when the connection
// could not be made; the caller's body is closed exactly once, by the view
// the transport reads from, or when the call ends.
type streamBody struct {
	prefix []byte

	mu     sync.Mutex
	rc     io.ReadCloser
	cur    *bodyView // the last view handed out
	ended  bool      // the call is over: a view closed from now on closes rc
	closed bool      // rc is closed
}

// view returns the body of the next attempt.
func (s *streamBody) view() *bodyView {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := &bodyView{s: s, prefix: s.prefix}
	s.cur = v
	return v
}

// untouched reports whether the last view was closed without being read:
// the body can be sent again, whole.
func (s *streamBody) untouched() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur != nil && s.cur.dropped && !s.closed
}

// end is called when the call is over: the caller's body is closed now
// unless the transport still holds the last view (it closes it later).
func (s *streamBody) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	if s.cur == nil || s.cur.dropped {
		s.closeLocked()
	}
}

func (s *streamBody) closeLocked() error {
	if s.closed {
		return nil
	}
	s.closed = true
	return s.rc.Close()
}

// bodyView is one attempt's request body (see streamBody).
type bodyView struct {
	s       *streamBody
	prefix  []byte
	read    bool // Read was called: some of the body may have been sent
	dropped bool // closed before any Read: the caller's body is left open
}

func (v *bodyView) Read(p []byte) (int, error) {
	v.s.mu.Lock()
	if v.dropped || v.s.closed {
		v.s.mu.Unlock()
		return 0, errReadAfterClose
	}
	v.read = true
	v.s.mu.Unlock()
	if len(v.prefix) > 0 {
		n := copy(p, v.prefix)
		v.prefix = v.prefix[n:]
		return n, nil
	}
	return v.s.rc.Read(p)
}

// Close closes the caller's body once the view has been read from (a Read
// blocked on it returns), or once the call is over; an untouched view is
// only marked, so that the body can be sent again.
func (v *bodyView) Close() error {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	if v.dropped {
		return nil
	}
	if v.read || v.s.ended {
		return v.s.closeLocked()
	}
	v.dropped = true
	return nil
}

var errReadAfterClose = errors.New("httpretry: read of a closed request body")

// sentBody is the request body of one attempt as the base transport reads
// it. It records the body's own failure, so that the attempt's error can be
// told from a network failure (ClassBody): a read error other than io.EOF
// while the body is open (a read that fails because the transport closed
// the body is not the body's fault), or a length other than the request's
// ContentLength. Close closes the body it wraps.
type sentBody struct {
	rc   io.ReadCloser
	want int64 // the request's ContentLength; 0 or less: unknown

	mu     sync.Mutex
	n      int64 // bytes read
	err    error // the body's failure, the first one
	closed bool
}

// watchSent returns body wrapped in a sentBody, or nil when it needs none:
// no body, or one that cannot fail (an in-memory reader whose length is
// the ContentLength cl, or unknown), or a file (the base transport sends
// one with sendfile, which a wrapper would prevent).
func watchSent(body io.ReadCloser, cl int64) *sentBody {
	if body == nil || body == http.NoBody {
		return nil
	}
	var r io.Reader = body
	if u, ok := unwrapNopCloser(body); ok {
		r = u
	}
	var n int
	switch m := r.(type) {
	case *bytes.Reader:
		n = m.Len()
	case *strings.Reader:
		n = m.Len()
	case *bytes.Buffer:
		n = m.Len()
	case syscall.Conn: // an *os.File
		return nil
	default:
		return &sentBody{rc: body, want: cl}
	}
	if cl <= 0 || int64(n) == cl {
		return nil
	}
	return &sentBody{rc: body, want: cl}
}

var (
	nopCloserType         = reflect.TypeOf(io.NopCloser(nil))
	nopCloserWriterToType = reflect.TypeOf(io.NopCloser(struct {
		io.Reader
		io.WriterTo
	}{}))
)

// unwrapNopCloser returns the reader inside an io.NopCloser, as net/http
// does to see an in-memory body.
func unwrapNopCloser(r io.Reader) (io.Reader, bool) {
	switch reflect.TypeOf(r) {
	case nopCloserType, nopCloserWriterToType:
		u, ok := reflect.ValueOf(r).Field(0).Interface().(io.Reader)
		return u, ok && u != nil
	}
	return nil, false
}

func (b *sentBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.mu.Lock()
	if !b.closed && b.err == nil {
		b.n += int64(n)
		switch {
		case err != nil && err != io.EOF: // io.Reader returns io.EOF itself, never wrapped
			b.err = err
		case b.want > 0 && (b.n > b.want || err == io.EOF && b.n < b.want):
			b.err = &bodyLengthError{n: b.n, want: b.want}
		}
	}
	b.mu.Unlock()
	return n, err
}

func (b *sentBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return b.rc.Close()
}

// failure returns the body's failure, nil if none.
func (b *sentBody) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// bodyLengthError is the failure of a request body longer or shorter than
// its ContentLength.
type bodyLengthError struct{ n, want int64 }

func (e *bodyLengthError) Error() string {
	if e.n > e.want {
		return fmt.Sprintf("httpretry: the request body is longer than its ContentLength of %d bytes", e.want)
	}
	return fmt.Sprintf("httpretry: the request body ended after %d of its ContentLength's %d bytes", e.n, e.want)
}

// bodyError is a transport error caused by the failure of the request
// body, when the transport error does not hold that failure itself.
type bodyError struct{ err, body error }

func (e *bodyError) Error() string {
	return e.err.Error() + " (reading the request body: " + e.body.Error() + ")"
}
func (e *bodyError) Unwrap() []error { return []error{e.err, e.body} }
