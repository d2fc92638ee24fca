package httpretry

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/backoffkit/retry"
)

const (
	// maxDrain is how much of a discarded response body is read so that its
	// connection can be reused; a longer body is closed unread.
	maxDrain = 64 << 10
	// maxPeek is how much of a retryable response body is read to look for
	// google.rpc.RetryInfo.
	maxPeek = 16 << 10
	// maxBodyWait bounds the time spent reading the body of a retryable
	// response, for the RetryInfo peek and for the drain before the next
	// attempt, and never past the attempt's deadline or the caller's
	// context: a body still incomplete then is closed (with its
	// connection) and the retry goes ahead. Both read at most a few KiB
	// that a healthy server sends with the headers, and the drain runs
	// after the backoff wait, so the bound is only reached by a body that
	// stalls. 1 s is the first backoff wait of Google's policy: a server
	// that just said it is overloaded and then cannot finish a small body
	// within that time is not worth waiting for (its hint is lost; a
	// drain cut short costs one new connection).
	maxBodyWait = time.Second
)

// Transport is an [http.RoundTripper] that retries requests with a
// [retry.Policy] (see the package documentation for what is retried and
// how). Create it with [NewTransport]; it is safe for concurrent use. The
// zero Transport sends with http.DefaultTransport under Google's default
// policy, without options.
type Transport struct {
	base   http.RoundTripper
	policy retry.Policy
	cfg    config
	eps    *endpoints // nil without WithEndpoints
	err    error
	made   bool // by NewTransport (false for a zero Transport)
}

// NewTransport returns a Transport that sends requests with base
// (http.DefaultTransport when nil) and retries them under p, merged with any
// per-request [WithPolicy]. An invalid p or option does not panic, so that
// NewTransport fits in a struct literal: check [Transport.Err] once after
// building it; every RoundTrip of an invalid Transport returns the same
// error without sending anything.
func NewTransport(base http.RoundTripper, p retry.Policy, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{base: base, policy: p, cfg: config{maxBuffered: DefaultMaxBufferedBody}, made: true}
	for _, o := range opts {
		if o != nil {
			o(&t.cfg)
		}
	}
	if t.cfg.attemptTimeoutSet {
		t.policy.AttemptTimeout = t.cfg.attemptTimeout
	}
	if len(t.cfg.endpoints) > 0 {
		t.eps = newEndpoints(t.cfg.endpoints, t.cfg.cooldown, t.cfg.now)
	}
	switch {
	case t.cfg.logger != nil:
		t.policy.Observer = retry.Observers(p.Observer, logObserver(t.cfg.logger, slog.LevelInfo))
	case p.Observer == nil:
		t.policy.Observer = logObserver(nil, slog.LevelDebug)
	}
	errs := t.cfg.errs
	if t.cfg.globalOnly != "" {
		if err := t.cfg.checkEndpoints(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := t.policy.Validate(); err != nil {
		errs = append(errs, err)
	}
	t.err = errors.Join(errs...)
	return t
}

// Err reports an invalid policy or option given to [NewTransport], nil if
// there was none. RoundTrip returns the same error for every request.
func (t *Transport) Err() error { return t.err }

// CloseIdleConnections closes the idle connections of the base transport,
// when it has such a method (http.Client.CloseIdleConnections calls it).
func (t *Transport) CloseIdleConnections() {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	if c, ok := base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// body kinds of a call.
const (
	bodyNone     = iota // no body, or http.NoBody
	bodyDirect          // sent once as is: no retry can happen
	bodyGetBody         // req.Body first, then GetBody
	bodyBuffered        // read into buf, replayed from there
	bodyStreamed        // not buffered in full: stream, sent again only if untouched
)

// call is the state of one RoundTrip across its attempts.
type call struct {
	t       *Transport
	req     *http.Request
	ctx     context.Context // the caller's
	codes   []int           // retryable status codes
	timeout time.Duration   // per attempt, 0 for none
	max     int             // attempts allowed

	idempotent    bool        // may be repeated after it may have reached the server
	notIdempotent bool        // marked NotIdempotent: not even a refusal is retried
	header        http.Header // a copy of the request's header with an added Idempotency-Key or profile headers, else nil
	peek          bool        // peek at the first event of a streamed answer
	peekJSON      bool        // ... also of any application/json answer (StreamPeek(ctx, true))

	bodyKind int
	buf      []byte
	stream   *streamBody   // bodyStreamed
	bodyUsed bool          // req.Body was handed to the base transport (or closed)
	next     io.ReadCloser // bodyGetBody: the next attempt's body, from GetBody
	sent     *sentBody     // the body the current attempt sends, when it can fail

	n          int                // attempts made
	resp       *http.Response     // the successful response
	last       *http.Response     // the last response with a retryable status, until the next attempt
	lastStream bool               // last is a stream that failed: closed, not drained
	lastCancel context.CancelFunc // cancels last's attempt context, nil if it has none

	ep   int  // current endpoint, -1 without endpoints
	move bool // the last attempt saw an overload signal: the next one moves on

	pacer bool // the policy has a Pacer, which learns the server's hints
}

// RoundTrip sends req, retrying it as the policy says. It follows the
// RoundTripper rules: req is never modified, its body is closed exactly once
// (even on errors), and its context bounds every attempt and wait. An error
// after an attempt is a [*retry.Error] holding the last attempt's
// [*AttemptError]. See the package documentation.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.err != nil {
		closeBody(req)
		return nil, t.err
	}
	ctx := req.Context()
	p := t.policy
	if o, ok := ctx.Value(policyKey{}).(*retry.Policy); ok {
		p = p.Merge(*o)
	}
	c := call{t: t, req: req, ctx: ctx, codes: p.Codes(), max: p.Attempts, ep: -1, pacer: p.Pacer != nil}
	if c.max == 0 {
		c.max = retry.DefaultAttempts
	}
	// The core's AttemptTimeout would cancel the attempt's context as soon as
	// the attempt returns, while the caller still reads the response body: the
	// transport applies it itself (see attemptContext).
	// An invalid (negative) value is left for the loop to report.
	if p.AttemptTimeout > 0 || p.AttemptTimeout == retry.Zero {
		c.timeout = max(p.AttemptTimeout, 0)
		p.AttemptTimeout = 0
	}
	c.idempotent = t.idempotent(req, ctx, &c)
	if len(t.cfg.profileHeader) > 0 {
		c.addProfileHeader()
	}
	if t.cfg.globalOnly != "" && t.eps == nil {
		if err := c.checkHost(); err != nil {
			closeBody(req)
			return nil, err
		}
	}
	c.peek = !t.cfg.noStreamPeek
	if on, ok := ctx.Value(peekKey{}).(bool); ok {
		c.peek, c.peekJSON = on, on
	}
	if t.eps != nil {
		c.ep = t.eps.start()
	}
	if err := c.prepareBody(); err != nil {
		return nil, err
	}

	// The loop returns an error that stopped it as it is: Elapsed for the
	// *retry.Error made of it below. (One clock read, about 20 to 60 ns; a
	// per-call Observer that kept the give-up's Elapsed instead moved the
	// call to the heap: 2 allocations.)
	start := time.Now()
	returned := false
	defer func() {
		if !returned { // a panic: an Observer, Retryable, the base transport
			c.abandon()
		}
	}()
	err := retry.Run(ctx, p, c.attempt)
	returned = true
	if c.stream != nil {
		c.stream.end()
	}
	if c.next != nil { // fetched for a retry that did not happen
		c.next.Close()
	}
	if err == nil {
		return c.resp, nil
	}
	if c.last != nil {
		// Giving up on a retryable status: the caller gets the last
		// response, as net/http callers expect, unless they gave up first.
		if !c.callerDone() {
			return c.last, nil
		}
		c.discardLast()
	}
	if !c.bodyUsed {
		closeBody(req)
	}
	if _, ok := err.(*retry.Error); !ok && c.n > 0 {
		// The loop returns an error that stopped it as it is (a TLS
		// error, a skipped retry): every give-up after an attempt is a
		// *retry.Error all the same, whose Last is that error.
		err = &retry.Error{Attempts: c.n, Elapsed: time.Since(start), Reason: retry.ReasonPermanent, Last: err}
	}
	return nil, err
}

// abandon closes what the call holds when a panic ends it (in an Observer,
// the policy's Retryable, the base transport or GetBody), before the panic
// goes on: the response nobody will get (the last retryable one, or a
// success), the body fetched for the next attempt, and the caller's body
// unless the base transport has it. Nothing is drained: a panic waits for
// nothing.
func (c *call) abandon() {
	if c.stream != nil {
		c.stream.end()
	}
	for _, rc := range []io.Closer{c.next, respBody(c.last), respBody(c.resp)} {
		if rc != nil {
			rc.Close()
		}
	}
	if !c.bodyUsed {
		closeBody(c.req)
	}
}

// respBody returns resp's body, nil if none.
func respBody(resp *http.Response) io.Closer {
	if resp == nil || resp.Body == nil {
		return nil
	}
	return resp.Body
}

// newUUID returns a random UUID, version 4 (RFC 9562).
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	const hexdigits = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, v := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hexdigits[v>>4], hexdigits[v&0xf])
	}
	return string(out)
}

// prepareBody decides how the request body is sent on each attempt and, for
// a body without GetBody, buffers it when a retry after it was sent could
// happen: never for a request that is not idempotent (it is retried only
// after errors that prove it never left, and then the body is still
// untouched), so that such a body is streamed as it is produced.
func (c *call) prepareBody() error {
	req := c.req
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		c.bodyKind = bodyNone
		return nil
	case c.max <= 1:
		c.bodyKind = bodyDirect
		return nil
	case req.GetBody != nil:
		c.bodyKind = bodyGetBody
		return nil
	}
	limit := c.t.cfg.maxBuffered
	if !c.t.made { // a zero Transport
		limit = DefaultMaxBufferedBody
	}
	if !c.idempotent || limit == 0 || req.ContentLength > limit {
		c.bodyKind, c.stream, c.bodyUsed = bodyStreamed, &streamBody{rc: req.Body}, true
		return nil
	}
	n := limit
	if n < math.MaxInt64 {
		n++ // one byte more tells a body longer than the limit
	}
	buf, closed, err := readBody(c.ctx, req.Body, n)
	if err != nil {
		c.bodyUsed = true
		if !closed {
			req.Body.Close()
		}
		return fmt.Errorf("httpretry: reading the request body of %s %s: %w", req.Method, Redact(req.URL), err)
	}
	if int64(len(buf)) > limit {
		c.bodyKind, c.stream, c.bodyUsed = bodyStreamed, &streamBody{prefix: buf, rc: req.Body}, true
		return nil
	}
	c.buf = buf
	c.bodyKind = bodyBuffered
	c.bodyUsed = true
	req.Body.Close()
	return nil
}

// replayable reports whether the body can be sent again after an attempt:
// it can, unless it is sent as it is (bodyDirect) or it is a stream an
// attempt has read from. Every kind is named, as in nextBody.
func (c *call) replayable() bool {
	switch c.bodyKind {
	case bodyNone, bodyGetBody, bodyBuffered:
		return true
	case bodyDirect:
		return false
	default: // bodyStreamed
		return c.stream.untouched()
	}
}

// nextBody returns the body of the next attempt; changed is false when the
// request's own Body is to be sent as it is.
func (c *call) nextBody() (body io.ReadCloser, changed bool, err error) {
	switch c.bodyKind {
	case bodyNone:
		return c.req.Body, false, nil
	case bodyDirect:
		c.bodyUsed = true
		return c.req.Body, false, nil
	case bodyGetBody:
		if c.n == 1 {
			c.bodyUsed = true
			return c.req.Body, false, nil
		}
		b := c.next
		c.next = nil
		if b == nil { // not fetched by the attempt that failed (never so)
			if err := c.fetchBody(); err != nil {
				return nil, false, err
			}
			b, c.next = c.next, nil
		}
		return b, true, nil
	case bodyBuffered:
		if len(c.buf) == 0 {
			return http.NoBody, true, nil
		}
		return io.NopCloser(bytes.NewReader(c.buf)), true, nil
	default: // bodyStreamed
		return c.stream.view(), true, nil
	}
}

// fetchBody gets the next attempt's body from GetBody (bodyGetBody) as soon
// as the attempt that failed knows a retry may follow, so that a GetBody
// that fails ends the call on that attempt's error, at once.
func (c *call) fetchBody() error {
	if c.bodyKind != bodyGetBody {
		return nil
	}
	if c.next != nil {
		c.next.Close()
		c.next = nil
	}
	b, err := c.req.GetBody()
	switch {
	case err != nil:
		return err
	case b == nil: // a retry would send no body: never lose one
		return errNilGetBody
	}
	c.next = b
	return nil
}

var errNilGetBody = errors.New("httpretry: GetBody returned a nil body and no error")

// attempt is the function the retry loop calls: one HTTP attempt. Its error
// is an *AttemptError (with a hint when the server gave one), marked
// retry.Permanent when the failure is not retryable, and retry.Unretryable
// when it is but this request may not be repeated (an overload signal the
// Budget and the Throttle must count as a failure all the same).
func (c *call) attempt(actx context.Context) error {
	c.n++
	body, newBody, err := c.nextBody()
	if err != nil {
		// GetBody failed (never so: the attempt that failed fetched the
		// body): keep the previous response for the caller. The call ends
		// on a transient failure, which the limiters must count as such
		// (Unretryable, not Permanent).
		ae := c.attemptError(c.req.URL, 0, ClassBody, nil)
		if c.last != nil {
			ae.Status, ae.Class = c.last.StatusCode, ClassStatus
		}
		return retry.Unretryable(&skipError{reason: ErrBodyNotReplayable, err: ae, cause: err})
	}
	if c.last != nil {
		c.discardLast()
	}
	c.sent = nil
	if sb := watchSent(body, c.req.ContentLength); sb != nil {
		body, newBody, c.sent = sb, true, sb
	}
	if c.ep >= 0 && c.move {
		c.ep = c.t.eps.next(c.ep)
	}
	c.move = false

	rctx, cancel := c.attemptContext(actx)
	req := c.req
	if newBody || c.ep >= 0 || c.header != nil || cancel != nil {
		req = c.req.WithContext(rctx) // a shallow copy: never modify the caller's
		if newBody {
			req.Body = body
			if c.bodyKind == bodyBuffered {
				if req.ContentLength <= 0 {
					req.ContentLength = int64(len(c.buf))
				}
				buf := c.buf
				req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
			}
		}
		if c.header != nil {
			req.Header = c.header
		}
		if c.ep >= 0 {
			ep := c.t.eps.list[c.ep]
			u := *c.req.URL
			u.Scheme, u.Host = ep.scheme, ep.host
			req.URL, req.Host = &u, ""
		}
	}

	base := c.t.base
	if base == nil { // a zero Transport
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		if resp != nil && resp.Body != nil {
			// A base that breaks the RoundTripper rule and returns both:
			// net/http's Client ignores such a response; close it.
			resp.Body.Close()
		}
		timedOut := cancel != nil && rctx.Err() != nil
		if cancel != nil {
			cancel()
		}
		if c.callerDone() {
			return err // the caller's own cancel or deadline: the loop stops
		}
		cl, err := c.classify(err, timedOut)
		ae := c.attemptError(req.URL, 0, cl.class, err)
		if c.ep >= 0 {
			overload := cl.class == ClassRefused
			c.t.eps.record(c.ep, overload, false)
			c.move = overload
		}
		if !c.retries(cl) {
			return retry.Permanent(ae)
		}
		return c.failed(ae, cl.neverSent, nil)
	}
	if cancel != nil {
		switch {
		case resp.Body == nil, resp.Body == http.NoBody:
			// Nothing to read: the attempt is over (and the caller can
			// still tell an empty body by resp.Body == http.NoBody).
			cancel()
		case resp.StatusCode == http.StatusSwitchingProtocols:
			// The upgrade ends the attempt: its body is the connection
			// (an io.ReadWriteCloser), the caller's from now on and not
			// bounded by the attempt's timeout (net/http no longer
			// watches the request's context either).
			cancel()
		default:
			resp.Body = keepWriter(resp.Body, &cancelBody{rc: resp.Body, cancel: cancel})
		}
	}
	code := resp.StatusCode
	retryable := c.retriesStatus(code)
	format := streamNone
	if !retryable {
		format = c.peekable(resp)
	}
	if format == streamNone {
		c.recordAnswer(code, retryable) // a stream is recorded by what its first event says
	}
	if !retryable {
		if format != streamNone {
			return c.peekStream(resp, format, rctx, req.URL)
		}
		c.resp = resp
		return nil
	}
	c.last, c.lastStream, c.lastCancel = resp, false, cancel
	ae := c.attemptError(req.URL, code, ClassStatus, nil)
	err = c.failed(ae, false, func() (time.Duration, string) { return hint(resp, c.ctx, deadline(rctx), cancel) })
	c.callerDone() // a peek cut at the caller's deadline: the loop must see the context ended
	return err
}

// failed returns the loop's error for an attempt that failed in a way
// that is retried (ae; neverSent says the request provably never reached
// the server). The loop retries it unless this was the last attempt, or
// the retry is skipped: the request is not idempotent and may have been
// acted on (sent, and not refused: see refused), or its body cannot be
// sent again (not replayable, or GetBody fails: the next attempt's body is
// fetched here, so that the call ends on this attempt's error at once). A
// skipped retry is Unretryable, a *skipError holding ae. hint, when set,
// returns the server's hint for the next wait; it is asked at most once,
// and only when the hint matters: for a retry, for the policy's Pacer (a
// fleet's shared cooldown learns it from every attempt, the last one
// included), or to tell whether a 503 to a request that is not idempotent
// is a refusal.
func (c *call) failed(ae *AttemptError, neverSent bool, hint func() (time.Duration, string)) error {
	var (
		skip, cause error // why the loop must not retry the request, nil if it may
		d           time.Duration
		src         string
		asked       bool
	)
	// ask asks hint once. (A closure, not a struct holding hint: that would
	// move the call to the heap.)
	ask := func() {
		if !asked && hint != nil {
			d, src = hint()
			asked = true
		}
	}
	if c.n < c.max {
		switch {
		case !c.idempotent && !neverSent && !c.refused(ae, func() bool { ask(); return src != "" }):
			skip = ErrNotIdempotent
		case !c.replayable():
			skip = ErrBodyNotReplayable
		default:
			if cause = c.fetchBody(); cause != nil {
				skip = ErrBodyNotReplayable
			}
		}
	}
	var err error = ae
	if skip != nil {
		err = &skipError{reason: skip, err: ae, cause: cause}
	}
	if hint != nil && ((c.n < c.max && skip == nil) || c.pacer) {
		if ask(); src != "" {
			ae.HintSource = src
			err = retry.After(err, d)
		}
	}
	if skip != nil {
		return retry.Unretryable(err)
	}
	return err
}

// retries reports whether a transport error of class cl is retried: a
// retryable class, or any class but ClassBody with RetryAllErrors.
func (c *call) retries(cl classification) bool {
	return cl.retryable || (c.t.cfg.retryAllErrors && cl.class != ClassBody)
}

// classify classifies err, the transport error of the current attempt
// (timedOut: its deadline passed), and returns the error its AttemptError
// keeps. A failure of the request body the attempt sent (a read error, or
// a length other than its ContentLength) is ClassBody, whatever error the
// base transport made of it.
func (c *call) classify(err error, timedOut bool) (classification, error) {
	if c.sent != nil {
		if berr := c.sent.failure(); berr != nil {
			if _, short := berr.(*bodyLengthError); !short && !errors.Is(err, berr) {
				err = &bodyError{err: err, body: berr}
			}
			return classification{class: ClassBody}, err
		}
	}
	return classify(err, timedOut), err
}

// callerDone reports whether the caller's context has ended, or its
// deadline has passed by the clock. A context's Err says so only once its
// timer has run, a moment later (stretched on a busy machine), and the
// transport's own timers (a body read's bound, a peek's) may see the
// deadline first: callerDone then waits for that moment (at most
// maxBodyWait, for a context whose Done is late or never comes), so that
// the loop sees the context ended too and gives up on it (ReasonContext,
// with the context's cause), whichever timer fired first.
func (c *call) callerDone() bool {
	if c.ctx.Err() != nil {
		return true
	}
	dl, ok := c.ctx.Deadline()
	if !ok || time.Now().Before(dl) {
		return false
	}
	if done := c.ctx.Done(); done != nil {
		t := time.NewTimer(maxBodyWait)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
	return true
}

// callerErr returns the error of the caller's context once callerDone:
// its cause, or context.DeadlineExceeded while it has not ended yet.
func (c *call) callerErr() error {
	if err := context.Cause(c.ctx); err != nil {
		return err
	}
	return context.DeadlineExceeded
}

// attemptContext returns the context of one HTTP attempt. It derives from the
// caller's context, not from actx, the loop's attempt context: the loop
// cancels that one as soon as the attempt returns, while the caller is still
// to read the response body. The deadline is the earlier of the loop's (the
// policy's Deadline) and the per-attempt timeout; cancel is nil when there is
// none, and otherwise runs when the response body is closed or read to its end.
//
// Contexts are never compared with == (the caller's may be a value of an
// uncomparable type): a deadline the caller's context already has needs no
// new context.
func (c *call) attemptContext(actx context.Context) (context.Context, context.CancelFunc) {
	dl, has := actx.Deadline()
	if c.timeout > 0 {
		if d := time.Now().Add(c.timeout); !has || d.Before(dl) {
			dl, has = d, true
		}
	}
	if !has {
		return c.ctx, nil
	}
	if own, ok := c.ctx.Deadline(); ok && !dl.Before(own) {
		return c.ctx, nil
	}
	return context.WithDeadline(c.ctx, dl)
}

// recordAnswer tells the endpoints (with WithEndpoints) that the attempt
// got an answer with status code (a 429 or 503 is an overload signal), and
// whether a retry of it moves on.
func (c *call) recordAnswer(code int, retryable bool) {
	if c.ep < 0 {
		return
	}
	overload := code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable
	c.t.eps.record(c.ep, overload, true)
	c.move = overload && retryable
}

func (c *call) attemptError(u interface{ String() string }, status int, class string, err error) *AttemptError {
	ae := &AttemptError{Method: c.req.Method, Status: status, Class: class, Err: err}
	if ae.Method == "" {
		ae.Method = http.MethodGet
	}
	if url := c.req.URL; url != nil {
		v := *url
		if c.ep >= 0 {
			ep := c.t.eps.list[c.ep]
			v.Scheme, v.Host = ep.scheme, ep.host
		}
		ae.URL = Redact(&v)
		ae.Endpoint = v.Scheme + "://" + v.Host
		ae.host, ae.path = v.Host, v.Path
	}
	return ae
}

// hint returns the server's hint for the next wait: the Retry-After header,
// else google.rpc.RetryInfo in a JSON body. Peeking at the body (bounded by
// maxPeek bytes, and in time by maxBodyWait, the attempt's deadline dl and
// the caller's ctx; abort cancels the attempt's context, nil if it has
// none, see readBounded) replaces resp.Body with one that yields the same
// bytes, then the error that ended the peek, if any.
func hint(resp *http.Response, ctx context.Context, dl time.Time, abort func()) (time.Duration, string) {
	if v := resp.Header.Get("Retry-After"); v != "" {
		if d, ok := ParseRetryAfter(v, serverNow(resp.Header, v)); ok {
			return d, HintRetryAfter
		}
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		return 0, ""
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" && !isJSON(ct) {
		return 0, ""
	}
	rest := resp.Body
	prefix, err, stalled := readBounded(resp.Body, maxPeek, true, ctx, dl, abort)
	if stalled {
		rest = closedBody{errBodyStalled} // closed once, not again
	}
	resp.Body = keepWriter(resp.Body, &prefixBody{prefix: prefix, rc: rest, err: err})
	if err != nil {
		return 0, ""
	}
	if d, ok := ParseRetryInfo(prefix); ok {
		return d, HintRetryInfo
	}
	return 0, ""
}

// serverNow returns the time a Retry-After value v is measured from: for
// an HTTP-date, the response's Date header when it is valid (the server's
// clock, in which the date is written), else the local clock.
func serverNow(h http.Header, v string) time.Time {
	if !isDigits(strings.TrimSpace(v)) {
		if t, err := http.ParseTime(h.Get("Date")); err == nil {
			return t
		}
	}
	return time.Now()
}

// discardLast discards c.last, the response of the previous attempt.
func (c *call) discardLast() {
	if c.lastStream {
		// A stream is not drained: it may go on for long, and its
		// first event already said it failed.
		c.last.Body.Close()
	} else {
		discard(c.last, c.ctx, c.lastCancel)
	}
	c.last, c.lastStream, c.lastCancel = nil, false, nil
}

// discard drains (at most maxDrain bytes, for at most maxBodyWait, not past
// its attempt's deadline nor the caller's ctx) and closes a response that is
// not handed to the caller, so that its HTTP/1 connection can be reused; a
// body not drained in time is closed with its connection (abort cancels
// its attempt's context, nil if it has none: see readBounded). An HTTP/2
// response is closed at once: that resets its stream only, its connection
// stays.
func discard(resp *http.Response, ctx context.Context, abort func()) {
	if resp.Body == nil {
		return
	}
	if resp.ProtoMajor >= 2 {
		resp.Body.Close()
		return
	}
	var dl time.Time
	if resp.Request != nil {
		dl = deadline(resp.Request.Context())
	}
	if _, _, stalled := readBounded(resp.Body, maxDrain, false, ctx, dl, abort); !stalled {
		resp.Body.Close()
	}
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
