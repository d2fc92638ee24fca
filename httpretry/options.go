package httpretry

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/backoffkit/retry"
)

// DefaultMaxBufferedBody is the default limit of [MaxBufferedBody]: 1 MiB.
const DefaultMaxBufferedBody = 1 << 20

// An Option configures a [Transport].
type Option func(*config)

type config struct {
	allowNonIdempotent bool
	addIdempotencyKey  bool
	maxBuffered        int64
	attemptTimeout     time.Duration
	attemptTimeoutSet  bool
	logger             *slog.Logger
	endpoints          []string
	cooldown           time.Duration
	endpointsSet       bool
	now                func() time.Time // for tests of the cool-down; nil means time.Now
	retryAllErrors     bool
	noStreamPeek       bool
	noGoogleReadOnly   bool                       // WithGoogleReadOnly(false)
	rules              []func(*http.Request) bool // IdempotentIf
	profileHeader      []headerField              // WithProfile: the headers to add
	globalOnly         string                     // WithProfile("priority" or "flex"): the name; regional hosts are refused
	errs               []error
}

func (c *config) errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("httpretry: "+format, args...))
}

// RetryAllErrors makes every transport error retryable, as curl's
// --retry-all-errors does: a failed DNS lookup (a name not found included),
// a TLS handshake or certificate error, and errors of no known class are
// retried like a connection reset, still under the idempotency and body
// rules. A failure of the request body itself ([ClassBody]: a read error,
// a length other than its ContentLength) is never retried: the body would
// fail again. Use it when a name or certificate is expected to become
// valid soon (a service being deployed).
func RetryAllErrors() Option {
	return func(c *config) { c.retryAllErrors = true }
}

// AllowNonIdempotent makes the transport retry every method, POST and PATCH
// included, unless a request's context is marked with [NotIdempotent]. Use it
// only for a client whose requests are all safe to repeat.
func AllowNonIdempotent() Option {
	return func(c *config) { c.allowNonIdempotent = true }
}

// WithGoogleReadOnly turns on (the default) or off the rule that takes a
// call of one of the read-only methods of Google's generative AI APIs
// (generateContent, streamGenerateContent, countTokens, computeTokens,
// embedContent, batchEmbedContents, predict, rawPredict: see
// [GoogleReadOnly]) for idempotent, whatever the host, in the way Google's
// generated clients keep a retry setting per method. Off, such a POST is
// retried like any other POST: when it is made idempotent otherwise (a
// mark, a key, [AllowNonIdempotent], a rule of [IdempotentIf]) or the
// server refused it (see "Idempotency" in the package documentation). A
// request marked [NotIdempotent] is never idempotent, whatever this says.
func WithGoogleReadOnly(on bool) Option {
	return func(c *config) { c.noGoogleReadOnly = !on }
}

// IdempotentIf adds a rule to the transport: a request for which rule
// returns true is idempotent, that is safe to repeat, whatever its method,
// unless its context is marked [NotIdempotent]. For example, the chat
// completions of an OpenAI-compatible server, which change no server state:
//
//	httpretry.IdempotentIf(func(r *http.Request) bool {
//		return r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions"
//	})
//
// The rules are asked after the context mark, the Idempotency-Key header,
// [AllowNonIdempotent] and Google's rule ([GoogleReadOnly]), in the order
// given, until one returns true (see "Idempotency" in the package
// documentation); once per call to RoundTrip, before the first attempt,
// from any goroutine: a rule must be safe for concurrent use, must not
// modify the request, and must not read its body. A nil rule is an error
// reported by [Transport.Err].
func IdempotentIf(rule func(*http.Request) bool) Option {
	return func(c *config) {
		if rule == nil {
			c.errorf("IdempotentIf: the rule is nil")
			return
		}
		c.rules = append(c.rules, rule)
	}
}

// AddIdempotencyKey makes the transport add an Idempotency-Key header, a
// random UUID version 4, to every POST and PATCH request that lacks one and
// is not marked with [NotIdempotent]. The key is the same on every attempt of
// the request, so a server that honours the header runs it at most once, and
// the request becomes retryable.
func AddIdempotencyKey() Option {
	return func(c *config) { c.addIdempotencyKey = true }
}

// MaxBufferedBody sets how many bytes of a request body without GetBody are
// read into memory before the first attempt of a request that may be
// retried, so that it can be sent again (default 1 MiB; see "Request
// bodies" in the package documentation for the latency this costs). A
// longer body is streamed and not retried once sent (see
// [ErrBodyNotReplayable]). n = 0 means such bodies are never buffered, nor
// read ahead; math.MaxInt64 means no limit; a negative n is an error.
func MaxBufferedBody(n int64) Option {
	return func(c *config) {
		if n < 0 {
			c.errorf("MaxBufferedBody(%d): the limit must not be negative", n)
			return
		}
		c.maxBuffered = n
	}
}

// WithAttemptTimeout sets the policy's AttemptTimeout: each attempt, from
// sending the request to closing the response body, gets at most d, separately
// from the policy's Deadline, which bounds all attempts together. An attempt
// that times out is retried. A per-request [WithPolicy] can still override it.
// Typical values: seconds for real-time chat, 10 to 30 minutes for Vertex AI
// Flex pay-as-you-go. d must be positive (or [retry.Zero] for none).
func WithAttemptTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 && d != retry.Zero {
			c.errorf("WithAttemptTimeout(%v): the timeout must be positive (retry.Zero for none)", d)
			return
		}
		c.attemptTimeout = d
		c.attemptTimeoutSet = true
	}
}

// WithLogger makes the transport log one structured record per retry and one
// per give-up to l at Info level, with the method, host, path, endpoint,
// status or error class, attempt, wait, hint and hint source, and no secret
// (see [Redact]). Without it (and without a Policy.Observer) the same records
// go to slog.Default at Debug level, which is silent unless enabled. When the
// policy also has an Observer, both are called. A nil l means slog.Default.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l == nil {
			l = slog.Default()
		}
		c.logger = l
	}
}

// WithEndpoints sends every request to one of an ordered list of endpoints,
// base URLs made of a scheme (http or https), a host and an optional port,
// for example a regional Vertex AI host, another region, then the global
// endpoint. The request's scheme and host are replaced by the endpoint's;
// its path, query and headers are kept.
//
// The rules:
//   - A request starts at the first endpoint that is not cooling down (the
//     first of the list when all are).
//   - A retry after an overload signal (status 429 or 503, or connection
//     refused) goes to the next endpoint in order that is not cooling down,
//     wrapping around; a retry after any other retryable failure stays on
//     the same endpoint.
//   - An endpoint that returns two overload signals in a row (counted over
//     all requests) cools down for cooldown: no request starts there and no
//     retry moves there until then, unless every endpoint is cooling down.
//     Any other response resets its count.
//   - Only requests that are retried move; a request that is not retryable
//     (see the package documentation on idempotency) is sent once, to the
//     endpoint it starts at.
//
// [AttemptError].Endpoint and the log records say which endpoint served each
// attempt. An empty list, an invalid URL, a path, query or user info in an
// endpoint, or a negative cooldown is an error reported by [Transport.Err]
// and by every RoundTrip.
func WithEndpoints(endpoints []string, cooldown time.Duration) Option {
	list := append([]string(nil), endpoints...)
	return func(c *config) {
		c.endpointsSet = true
		if len(list) == 0 {
			c.errorf("WithEndpoints: the list of endpoints is empty")
			return
		}
		if cooldown < 0 {
			c.errorf("WithEndpoints: cooldown %v must not be negative", cooldown)
			return
		}
		for i, e := range list {
			if err := checkEndpoint(e); err != nil {
				c.errorf("WithEndpoints: endpoint %d %q: %v", i, e, err)
				return
			}
		}
		c.endpoints = list
		c.cooldown = cooldown
	}
}

func checkEndpoint(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("not a URL (%v)", err.(*url.Error).Err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("the scheme must be http or https")
	case u.Host == "":
		return fmt.Errorf("no host")
	case u.User != nil:
		return fmt.Errorf("user info is not allowed")
	case strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("only scheme://host[:port] is allowed, without path, query or fragment")
	}
	return nil
}

// WithStreamPeek turns first-event peeking on (the default) or off for
// every request: see "Streams" in the package documentation. On, it peeks
// at SSE and NDJSON answers (to a GET only when it names a streamed call:
// ":stream..." in the path, or alt=sse), and at application/json answers
// to Google's streaming methods (":stream..." in the path). [StreamPeek]
// overrides it for one request.
func WithStreamPeek(on bool) Option {
	return func(c *config) { c.noStreamPeek = !on }
}

type policyKey struct{}
type idemKey struct{}
type peekKey struct{}

// StreamPeek returns a copy of ctx that turns first-event peeking on or off
// for the requests made with it, whatever the transport's [WithStreamPeek]
// says: for example off for a stream whose first event the caller must see
// as soon as its bytes arrive, even when incomplete, or its keep-alive
// comments as they come. On, it also takes any application/json answer
// that begins with '[' for a stream (its first element is peeked), and
// peeks at the SSE or NDJSON answer to a GET, whatever the URL: use it for
// a stream whose URL does not say ":stream" (nor alt=sse for a GET).
func StreamPeek(ctx context.Context, on bool) context.Context {
	return context.WithValue(ctx, peekKey{}, on)
}

// WithPolicy returns a copy of ctx that carries p as an override for the
// requests made with it. The transport merges p over its own policy field by
// field (see [retry.Policy.Merge]): fields set in p win, fields left zero
// keep the transport's value. Calls nest: an inner WithPolicy is merged over
// an outer one. An Observer set in p replaces the transport's, its logging
// included (combine them with [retry.Observers] to keep both).
func WithPolicy(ctx context.Context, p retry.Policy) context.Context {
	if outer, ok := ctx.Value(policyKey{}).(*retry.Policy); ok {
		p = outer.Merge(p)
	}
	return context.WithValue(ctx, policyKey{}, &p)
}

// Idempotent returns a copy of ctx that marks the requests made with it as
// safe to retry, whatever their method and whatever the transport's rules
// say: for example a POST to a method of an API that changes no server
// state. (Gemini's and Vertex AI's read-only methods, generateContent
// among them, need no mark: see [WithGoogleReadOnly].) The innermost mark,
// Idempotent or [NotIdempotent], wins.
func Idempotent(ctx context.Context) context.Context {
	return context.WithValue(ctx, idemKey{}, true)
}

// NotIdempotent returns a copy of ctx that marks the requests made with it as
// unsafe to repeat, whatever their method, headers, or the transport's
// options and rules say: they are retried only after errors that prove
// they never reached the server, not even after a 429 (see "Idempotency"
// in the package documentation). The innermost mark, [Idempotent] or
// NotIdempotent, wins.
func NotIdempotent(ctx context.Context) context.Context {
	return context.WithValue(ctx, idemKey{}, false)
}

// NewClient returns an *http.Client whose Transport is
// NewTransport(nil, p, opts...): http.DefaultTransport with retries. An
// invalid p or option is returned as the error (the same as
// [Transport.Err]), with a nil client.
func NewClient(p retry.Policy, opts ...Option) (*http.Client, error) {
	t := NewTransport(nil, p, opts...)
	if t.err != nil {
		return nil, t.err
	}
	return &http.Client{Transport: t}, nil
}
