package redisretry

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backoffkit/retry/httpretry"
)

// DefaultDialTimeout bounds a connection's setup (the dial, the TLS
// handshake) for a client made by [NewClient], unless the URL's dial_timeout
// says otherwise. A limiter waits that long for its first calls on such a
// client; on a client made otherwise it knows nothing of the dial's bound and
// waits for each call its Timeout.
const DefaultDialTimeout = time.Second

// ClientConfig configures a client made by [NewClientWith]. URL is required;
// every other field's zero value is the documented default.
type ClientConfig struct {
	// URL is the Redis URL: "redis://[user:password@]host:port/db",
	// "rediss://..." for TLS (Memorystore with in-transit encryption, for
	// one), or "unix:///path.sock". go-redis's query parameters are read,
	// dial_timeout among them (e.g. "?dial_timeout=3s").
	URL string

	// DialTimeout bounds a connection's setup: the dial and the TLS
	// handshake. 0 means the URL's dial_timeout, else DefaultDialTimeout
	// (1 s). It is not the bound of a decision: each limiter's Timeout
	// (20 ms by default) bounds each call once a connection is up (see
	// docs/fleet.md).
	DialTimeout time.Duration

	// CAFile is a PEM file of the certificate authorities that sign the
	// server's certificate (rediss:// only). "" means the system's pool,
	// which reads the SSL_CERT_FILE and SSL_CERT_DIR environment
	// variables.
	CAFile string

	// CertFile and KeyFile are a PEM client certificate and its key, for a
	// server that asks for one (redis-server --tls-auth-clients yes). Both
	// or neither; rediss:// only.
	CertFile, KeyFile string
}

// Validate reports the first invalid field of c, naming it and its value
// (never the URL's password). It reads the certificate files.
func (c ClientConfig) Validate() error {
	_, err := c.options()
	return err
}

// NewClient returns a client for a Redis URL such as
// "redis://127.0.0.1:6379/0", "redis://user:password@host:6379/2",
// "rediss://host:6380" (TLS) or "unix:///run/redis.sock", set up for the
// limiters. It is NewClientWith(ClientConfig{URL: rawURL}).
func NewClient(rawURL string) (*redis.Client, error) {
	return NewClientWith(ClientConfig{URL: rawURL})
}

// NewClientWith returns a client configured by c, set up for the limiters:
//
//   - it honours context deadlines, so a call stops at the limiter's bound
//     instead of the client's 3 s read timeout (the limiters bound every call
//     anyway; this client also frees the connection);
//   - a connection's setup has its own bound, ClientConfig.DialTimeout
//     (1 s by default), apart from the limiters' decisions: a limiter on this
//     client waits for its first calls (the first connections) within that
//     bound, and for each call once Redis answered within its Timeout (on a
//     client made otherwise, the Timeout from the first call);
//   - it dials once and sends each command once: go-redis's retries (5 dials
//     100 ms apart, 3 tries of a command) would spend a limiter's bound and
//     hide why a call failed (a refused connection, a certificate the CA did
//     not sign); the limiters decide without Redis and try it again
//     themselves. The URL's max_retries is kept if given.
//
// It makes no network call. A URL that does not parse is an error that never
// shows the password (nor anything a redactor such as httpretry.RedactText
// would take for one). Close the client when done.
func NewClientWith(c ClientConfig) (*redis.Client, error) {
	opt, err := c.options()
	if err != nil {
		return nil, err
	}
	client := redis.NewClient(opt)
	remember(client, opt.DialTimeout)
	return client, nil
}

// options returns the go-redis options of c.
func (c ClientConfig) options() (*redis.Options, error) {
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, errors.New("redisretry: invalid Redis URL: it does not parse (want redis://host:port/db, with user:password@ before the host if the server needs a password)")
	}
	opt, err := redis.ParseURL(c.URL)
	if err != nil {
		return nil, fmt.Errorf("redisretry: invalid Redis URL %s: %s", safeURL(u), redact(err.Error(), u))
	}
	switch {
	case c.DialTimeout < 0:
		return nil, fmt.Errorf("redisretry: invalid ClientConfig.DialTimeout = %v: must not be negative (0 means the URL's dial_timeout, else %v)", c.DialTimeout, DefaultDialTimeout)
	case c.DialTimeout > 0:
		opt.DialTimeout = c.DialTimeout
	case opt.DialTimeout == 0:
		opt.DialTimeout = DefaultDialTimeout
	}
	opt.ContextTimeoutEnabled = true
	if !u.Query().Has("max_retries") {
		opt.MaxRetries = -1 // -1, not 0, disables retries
	}
	opt.DialerRetries = 1 // attempts in all: one dial
	if err := c.tls(opt, u); err != nil {
		return nil, err
	}
	return opt, nil
}

// tls sets opt's certificates from c's files.
func (c ClientConfig) tls(opt *redis.Options, u *url.URL) error {
	if c.CAFile == "" && c.CertFile == "" && c.KeyFile == "" {
		return nil
	}
	field, value := "CAFile", c.CAFile
	if value == "" {
		field, value = "CertFile", c.CertFile
	}
	if opt.TLSConfig == nil {
		return fmt.Errorf("redisretry: invalid ClientConfig.%s = %q: the URL %s does not use TLS (rediss://)", field, value, safeURL(u))
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return fmt.Errorf("redisretry: invalid ClientConfig.CAFile = %q: %w", c.CAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("redisretry: invalid ClientConfig.CAFile = %q: it holds no PEM certificate", c.CAFile)
		}
		opt.TLSConfig.RootCAs = pool
	}
	switch {
	case (c.CertFile == "") != (c.KeyFile == ""):
		return fmt.Errorf("redisretry: invalid ClientConfig.CertFile = %q, KeyFile = %q: give both (a client certificate and its key) or neither", c.CertFile, c.KeyFile)
	case c.CertFile != "":
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return fmt.Errorf("redisretry: invalid ClientConfig.CertFile = %q, KeyFile = %q: %w", c.CertFile, c.KeyFile, err)
		}
		opt.TLSConfig.Certificates = []tls.Certificate{cert}
	}
	return nil
}

// redact removes the URL from a message where it quotes it (go-redis's
// errors name the part at fault, not the password). The password's text is
// not replaced elsewhere: a short one would show itself by where it matched.
func redact(msg string, u *url.URL) string {
	if safe := safeURL(u); safe != u.String() {
		return strings.ReplaceAll(msg, u.String(), safe)
	}
	return msg
}

// safeURL is u for a message: its password hidden (as url.URL.Redacted
// does), and the values of secret query parameters too (password=, which
// go-redis refuses, key=, token=: those of httpretry.Redact).
func safeURL(u *url.URL) string {
	c := *u
	if c.RawQuery != "" {
		// The query's rules, not free text's: a value ends at '&' or ';'
		// only, whatever it holds (quotes, '<').
		c.RawQuery = strings.TrimPrefix(httpretry.Redact(&url.URL{RawQuery: c.RawQuery}), "?")
	}
	return c.Redacted()
}
