package httpretry

import (
	"errors"
	"net/http"

	"github.com/backoffkit/retry"
)

// Transport is an [http.RoundTripper] that retries requests with a
// [retry.Policy] (see the package documentation for what is retried and
// how). Create it with [NewTransport]; it is safe for concurrent use.
type Transport struct {
	base   http.RoundTripper
	policy retry.Policy
	cfg    config
	err    error
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
	t := &Transport{base: base, policy: p, cfg: config{maxBuffered: DefaultMaxBufferedBody}}
	for _, o := range opts {
		if o != nil {
			o(&t.cfg)
		}
	}
	if t.cfg.attemptTimeoutSet {
		t.policy.AttemptTimeout = t.cfg.attemptTimeout
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

// RoundTrip sends req, retrying it as the policy says. See the package
// documentation.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, t.err
	}
	// Skeleton: one attempt; the retry behaviour follows.
	return t.base.RoundTrip(req)
}

// CloseIdleConnections closes the idle connections of the base transport,
// when it has such a method (http.Client.CloseIdleConnections calls it).
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
