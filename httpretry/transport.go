package httpretry

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	made   bool // by newTransport (false for a zero Transport)
}

// NewTransport returns a *Transport that sends requests with base
// (http.DefaultTransport when nil) and retries them under p, merged with any
// per-request [WithPolicy]. An invalid p or option does not panic: it is
// reported by [Transport.Err] and returned by every RoundTrip.
func NewTransport(base http.RoundTripper, p retry.Policy, opts ...Option) http.RoundTripper {
	return newTransport(base, p, opts...)
}

func newTransport(base http.RoundTripper, p retry.Policy, opts ...Option) *Transport {
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
	bodyOnce            // too long to buffer: buf, then the rest of req.Body, once
)

// call is the state of one RoundTrip across its attempts.
type call struct {
	t       *Transport
	req     *http.Request
	ctx     context.Context // the caller's
	codes   []int           // retryable status codes
	timeout time.Duration   // per attempt, 0 for none
	max     int             // attempts allowed

	idempotent bool
	header     http.Header // the request's header with an added Idempotency-Key, else nil

	bodyKind int
	buf      []byte
	bodyUsed bool // req.Body was handed to the base transport (or closed)

	n    int            // attempts made
	resp *http.Response // the successful response
	last *http.Response // the last response with a retryable status, until the next attempt

	ep   int  // current endpoint, -1 without endpoints
	move bool // the last attempt saw an overload signal: the next one moves on

	pacer bool // the policy has a Pacer, which learns the server's hints
}

// RoundTrip sends req, retrying it as the policy says. It follows the
// RoundTripper rules: req is never modified, its body is closed exactly once
// (even on errors), and its context bounds every attempt and wait. See the
// package documentation.
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
	if t.eps != nil {
		c.ep = t.eps.start()
	}
	if err := c.prepareBody(); err != nil {
		return nil, err
	}

	err := retry.Run(ctx, p, c.attempt)
	if err == nil {
		return c.resp, nil
	}
	if c.last != nil {
		// Giving up on a retryable status: the caller gets the last
		// response, as net/http callers expect, unless they gave up first.
		if ctx.Err() == nil {
			return c.last, nil
		}
		discard(c.last)
	}
	if !c.bodyUsed {
		closeBody(req)
	}
	return nil, err
}

// idempotent decides whether the request may be repeated (see the package
// documentation), adding an Idempotency-Key when the options say so.
func (t *Transport) idempotent(req *http.Request, ctx context.Context, c *call) bool {
	mark, marked := ctx.Value(idemKey{}).(bool)
	if marked && !mark {
		return false
	}
	if _, ok := req.Header["Idempotency-Key"]; ok {
		return true
	}
	if t.cfg.addIdempotencyKey && (req.Method == http.MethodPost || req.Method == http.MethodPatch) {
		c.header = req.Header.Clone()
		if c.header == nil {
			c.header = make(http.Header)
		}
		c.header.Set("Idempotency-Key", newUUID())
		return true
	}
	if marked || t.cfg.allowNonIdempotent {
		return true
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
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
// a body without GetBody, buffers it when a retry could happen.
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
	if req.ContentLength > limit {
		c.bodyKind = bodyOnce
		return nil
	}
	buf, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
	if err != nil {
		c.bodyUsed = true
		req.Body.Close()
		return fmt.Errorf("httpretry: reading the request body of %s %s: %w", req.Method, Redact(req.URL), err)
	}
	c.buf = buf
	if int64(len(buf)) > limit {
		c.bodyKind = bodyOnce
		return nil
	}
	c.bodyKind = bodyBuffered
	c.bodyUsed = true
	req.Body.Close()
	return nil
}

// replayable reports whether the body can be sent again after an attempt.
func (c *call) replayable() bool {
	return c.bodyKind != bodyOnce && c.bodyKind != bodyDirect
}

// nextBody returns the body of the next attempt; changed is false when the
// request's own Body is to be sent.
func (c *call) nextBody() (body io.ReadCloser, changed bool, err error) {
	switch c.bodyKind {
	case bodyNone:
		return nil, false, nil
	case bodyDirect:
		c.bodyUsed = true
		return nil, false, nil
	case bodyGetBody:
		if c.n == 1 {
			c.bodyUsed = true
			return nil, false, nil
		}
		b, err := c.req.GetBody()
		if err != nil {
			return nil, false, err
		}
		return b, true, nil
	case bodyBuffered:
		if len(c.buf) == 0 {
			return http.NoBody, true, nil
		}
		return io.NopCloser(bytes.NewReader(c.buf)), true, nil
	default: // bodyOnce
		c.bodyUsed = true
		return &prefixBody{prefix: c.buf, rc: c.req.Body}, true, nil
	}
}

// attempt is the function the retry loop calls: one HTTP attempt. Its error
// is an *AttemptError (with a hint when the server gave one), marked
// retry.Permanent when the failure must not be retried.
func (c *call) attempt(actx context.Context) error {
	c.n++
	body, newBody, err := c.nextBody()
	if err != nil {
		// GetBody failed: keep the previous response for the caller.
		ae := c.attemptError(c.req.URL, 0, ClassBody, nil)
		if c.last != nil {
			ae.Status, ae.Class = c.last.StatusCode, ClassStatus
		}
		return retry.Permanent(&skipError{reason: ErrBodyNotReplayable, err: ae, cause: err})
	}
	if c.last != nil {
		discard(c.last)
		c.last = nil
	}
	if c.ep >= 0 && c.move {
		c.ep = c.t.eps.next(c.ep)
	}
	c.move = false

	rctx, cancel := c.attemptContext(actx)
	req := c.req
	if newBody || c.ep >= 0 || c.header != nil || rctx != c.ctx {
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
		timedOut := cancel != nil && rctx.Err() != nil
		if cancel != nil {
			cancel()
		}
		if c.ctx.Err() != nil {
			return err // the caller's own cancel or deadline: the loop stops
		}
		cl := classify(err, timedOut)
		ae := c.attemptError(req.URL, 0, cl.class, err)
		if c.ep >= 0 {
			overload := cl.class == ClassRefused
			c.t.eps.record(c.ep, overload, false)
			c.move = overload
		}
		switch {
		case !cl.retryable && !(c.t.cfg.retryAllErrors && cl.class != ClassBody):
			return retry.Permanent(ae)
		case c.n >= c.max:
			return ae // the last attempt: the loop gives up
		case !c.idempotent && !cl.neverSent:
			return retry.Permanent(&skipError{reason: ErrNotIdempotent, err: ae})
		case !c.replayable():
			return retry.Permanent(&skipError{reason: ErrBodyNotReplayable, err: ae})
		}
		return ae
	}
	if cancel != nil {
		if resp.Body == nil {
			cancel()
		} else {
			resp.Body = &cancelBody{rc: resp.Body, cancel: cancel}
		}
	}
	code := resp.StatusCode
	retryable := false
	for _, rc := range c.codes {
		if rc == code {
			retryable = true
			break
		}
	}
	if c.ep >= 0 {
		overload := code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable
		c.t.eps.record(c.ep, overload, true)
		c.move = overload && retryable
	}
	if !retryable {
		c.resp = resp
		return nil
	}
	c.last = resp
	ae := c.attemptError(req.URL, code, ClassStatus, nil)
	var skip error // why the loop must not retry the request, nil if it may
	switch {
	case c.n >= c.max: // the last attempt: the loop gives up anyway
	case !c.idempotent:
		skip = ErrNotIdempotent
	case !c.replayable():
		skip = ErrBodyNotReplayable
	}
	var aerr error = ae
	if skip != nil {
		aerr = &skipError{reason: skip, err: ae}
	}
	// The loop needs the hint for a retry only; a Pacer (a fleet's shared
	// cooldown) learns it from every attempt, the last one included.
	if (c.n < c.max && skip == nil) || c.pacer {
		if d, src := hint(resp); src != "" {
			ae.HintSource = src
			aerr = retry.After(aerr, d)
		}
	}
	if skip != nil {
		return retry.Permanent(aerr)
	}
	return aerr
}

// attemptContext returns the context of one HTTP attempt. It derives from the
// caller's context, not from actx, the loop's attempt context: the loop
// cancels that one as soon as the attempt returns, while the caller is still
// to read the response body. The deadline is the earlier of the loop's (the
// policy's Deadline) and the per-attempt timeout; cancel is nil when there is
// none, and otherwise runs when the response body is closed or read to its end.
func (c *call) attemptContext(actx context.Context) (context.Context, context.CancelFunc) {
	var (
		dl  time.Time
		has bool
	)
	if actx != c.ctx {
		dl, has = actx.Deadline()
	}
	if c.timeout > 0 {
		if d := time.Now().Add(c.timeout); !has || d.Before(dl) {
			dl, has = d, true
		}
	}
	if !has {
		return c.ctx, nil
	}
	return context.WithDeadline(c.ctx, dl)
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
// else google.rpc.RetryInfo in a JSON body. Peeking at the body replaces
// resp.Body with one that yields the same bytes.
func hint(resp *http.Response) (time.Duration, string) {
	if v := resp.Header.Get("Retry-After"); v != "" {
		if d, ok := ParseRetryAfter(v, time.Now()); ok {
			return d, HintRetryAfter
		}
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		return 0, ""
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" && !strings.Contains(ct, "json") {
		return 0, ""
	}
	prefix, err := io.ReadAll(io.LimitReader(resp.Body, maxPeek))
	resp.Body = &prefixBody{prefix: prefix, rc: resp.Body, err: err}
	if err != nil {
		return 0, ""
	}
	if d, ok := ParseRetryInfo(prefix); ok {
		return d, HintRetryInfo
	}
	return 0, ""
}

// discard drains (at most maxDrain bytes) and closes a response that is not
// handed to the caller, so that its connection can be reused.
func discard(resp *http.Response) {
	if resp.Body == nil {
		return
	}
	io.CopyN(io.Discard, resp.Body, maxDrain)
	resp.Body.Close()
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
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
	if err == io.EOF {
		b.cancel()
	}
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.rc.Close()
	b.cancel()
	return err
}
