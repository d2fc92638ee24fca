package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
)

const httpUsage = `Usage: retry http [flags] URL

A curl-like client that retries with httpretry: statuses in --codes (default
408, 429, 500, 502, 503, 504) and transient network errors (connection
refused or reset, timeouts) are retried with truncated exponential backoff
with jitter. A server's Retry-After header or google.rpc.RetryInfo body is
honoured (capped by --max-retry-after). Other statuses (400, 401, 403, 404,
...) are not retried.

GET, HEAD, OPTIONS, PUT and DELETE are retried. POST and PATCH are sent once
unless --idempotent or --idempotency-key is given (or an Idempotency-Key
header): repeating them could run them twice. The log says so when a retry
is skipped for that reason.

The response body goes to stdout (or -o FILE); one line per retry goes to
stderr. Secrets are never logged: Authorization, x-goog-api-key and cookie
headers are not printed, and key, access_token and token query values are
shown as REDACTED.

Exit status:
  0  the final response is 2xx or 3xx
  1  gave up: the final response is another status, or a transport error
     (the reason is on stderr)
  2  bad usage or config
  130/143  interrupted by SIGINT/SIGTERM

Flags:
`

// runHTTP is "retry http".
func runHTTP(args []string, stdout, stderr io.Writer) int {
	const prog = "retry http"
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	pf := addPolicyFlags(fs, true)
	method := fs.String("X", "", "request `METHOD` (default GET, or POST with -d)")
	var data *string
	fs.Func("d", "request body `DATA`; @FILE reads a file, @- reads stdin", func(s string) error {
		data = &s
		return nil
	})
	header := http.Header{}
	fs.Func("H", "request header `'Name: value'` (repeatable)", func(s string) error {
		name, value, ok := strings.Cut(s, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") {
			return errors.New("want 'Name: value'")
		}
		header.Add(name, strings.TrimSpace(value))
		return nil
	})
	output := fs.String("o", "", "write the body to `FILE` instead of stdout")
	idempotent := fs.Bool("idempotent", false, "the request is safe to repeat: retry it whatever its method")
	idemKey := fs.String("idempotency-key", "", "send an Idempotency-Key header: auto (a random UUID, the same on every attempt) or `VALUE`; makes a POST retryable")

	positional, help, err := parseInterspersed(fs, args)
	if help {
		io.WriteString(stdout, httpUsage)
		printFlags(stdout, fs)
		return exitOK
	}
	if err != nil {
		return fail(stderr, prog, err)
	}
	if len(positional) != 1 {
		return fail(stderr, prog, usagef("want exactly one URL, got %d arguments", len(positional)))
	}
	u, err := parseHTTPURL(positional[0])
	if err != nil {
		return fail(stderr, prog, err)
	}
	p, err := pf.build()
	if err != nil {
		return fail(stderr, prog, err)
	}

	var body []byte
	if data != nil {
		body, err = readData(*data)
		if err != nil {
			return fail(stderr, prog, err)
		}
	}
	m := strings.ToUpper(*method)
	switch {
	case m == "" && data != nil:
		m = http.MethodPost
	case m == "":
		m = http.MethodGet
	case strings.ContainsAny(m, " \t\r\n()<>@,;:\\\"/[]?={}"):
		return fail(stderr, prog, usagef("-X %q: not a valid method", *method))
	}

	var opts []httpretry.Option
	switch *idemKey {
	case "":
	case "auto":
		opts = append(opts, httpretry.AddIdempotencyKey())
	default:
		header.Set("Idempotency-Key", *idemKey)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := watchSignals(cancel)
	defer sig.stop()
	if *idempotent {
		ctx = httpretry.Idempotent(ctx)
	}

	var bodyReader io.Reader
	if body != nil {
		bodyReader = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, m, u.String(), bodyReader)
	if err != nil {
		return fail(stderr, prog, usagef("%v", err))
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}

	log := newEventLog(stderr, prog, pf, describeHTTP)
	var lastGiveUp retry.Event // the observer runs on this goroutine (client.Do)
	p.Observer = retry.Observers(log.observer(), func(_ context.Context, e retry.Event) {
		if e.Kind == retry.EventGiveUp {
			lastGiveUp = e
		}
	})
	tr := httpretry.NewTransport(nil, p, opts...)
	if err := tr.Err(); err != nil {
		return fail(stderr, prog, usagef("%v", err))
	}
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	resp, err := client.Do(req)
	if err != nil {
		if code := sig.exitCode(); code != 0 {
			return code
		}
		return fail(stderr, prog, fmt.Errorf("%s %s: %v", m, httpretry.Redact(u), redactURLError(err)))
	}
	defer resp.Body.Close()

	out := stdout
	if *output != "" {
		f, err := os.Create(*output)
		if err != nil {
			return fail(stderr, prog, fmt.Errorf("-o %s: %v", *output, unwrapPath(err)))
		}
		defer f.Close()
		out = f
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		if code := sig.exitCode(); code != 0 {
			return code
		}
		return fail(stderr, prog, fmt.Errorf("reading the body of %s %s: %v", m, httpretry.Redact(resp.Request.URL), redactURLError(err)))
	}
	if *output != "" {
		if err := out.(*os.File).Close(); err != nil {
			return fail(stderr, prog, fmt.Errorf("-o %s: %v", *output, unwrapPath(err)))
		}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return exitOK
	}
	var why string
	switch {
	case lastGiveUp.Kind == retry.EventGiveUp:
		why = fmt.Sprintf("gave up after %d attempt(s): %s", lastGiveUp.Attempt, reasonText(lastGiveUp.Reason, describeHTTP(lastGiveUp.Err)))
	case p.RetriesStatus(resp.StatusCode):
		why = "gave up"
	default:
		why = fmt.Sprintf("not retried: %d is not in --codes", resp.StatusCode)
	}
	fmt.Fprintf(stderr, "%s: %s %s: %s (%s)\n", prog, m, httpretry.Redact(resp.Request.URL), resp.Status, why)
	return exitGaveUp
}

// parseInterspersed parses flags anywhere among the arguments (as curl
// does): "URL -H x" works like "-H x URL". After "--" everything is
// positional.
func parseInterspersed(fs *flag.FlagSet, args []string) (positional []string, help bool, err error) {
	for {
		if help, err = parseFlags(fs, args); help || err != nil {
			return nil, help, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, false, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), false, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// parseHTTPURL checks that s is an absolute http or https URL.
func parseHTTPURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, usagef("invalid URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, usagef("URL %s: want an http:// or https:// URL", httpretry.Redact(u))
	}
	if u.Host == "" {
		return nil, usagef("URL %s: no host", httpretry.Redact(u))
	}
	return u, nil
}

// readData returns the body given with -d: DATA, @FILE or @- (stdin).
func readData(d string) ([]byte, error) {
	name, ok := strings.CutPrefix(d, "@")
	if !ok {
		return []byte(d), nil
	}
	if name == "-" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return nil, usagef("-d @-: cannot read stdin: %v", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, usagef("-d @%s: cannot read: %v", name, unwrapPath(err))
	}
	return b, nil
}

// redactURLError drops the URL that *url.Error puts in its message (ours is
// printed redacted instead).
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// describeHTTP turns an httpretry attempt error into log fields.
func describeHTTP(err error) attemptInfo {
	var ae *httpretry.AttemptError
	if !errors.As(err, &ae) {
		msg := redactURLError(err).Error()
		return attemptInfo{What: msg, Error: msg}
	}
	info := attemptInfo{Method: ae.Method, URL: ae.URL, Status: ae.Status}
	switch ae.HintSource {
	case httpretry.HintRetryAfter:
		info.HintSource = "Retry-After"
	case httpretry.HintRetryInfo:
		info.HintSource = "RetryInfo"
	default:
		info.HintSource = ae.HintSource
	}
	if ae.Status != 0 {
		info.What = fmt.Sprintf("%s %s: %d %s", ae.Method, ae.URL, ae.Status, http.StatusText(ae.Status))
	} else {
		msg := strings.TrimPrefix(ae.Error(), "httpretry: ")
		info.What = msg
		info.Error = msg
	}
	switch {
	case errors.Is(err, httpretry.ErrNotIdempotent):
		info.WhyStop = fmt.Sprintf("%s is not idempotent; pass --idempotent or --idempotency-key to allow retries", ae.Method)
	case errors.Is(err, httpretry.ErrBodyNotReplayable):
		info.WhyStop = "the request body cannot be sent again"
	}
	return info
}

// signalWatch cancels a context on SIGINT or SIGTERM and remembers which.
type signalWatch struct {
	stop func()
	got  chan os.Signal
}

func watchSignals(cancel context.CancelFunc) *signalWatch {
	sigs := make(chan os.Signal, 2)
	stopNotify := notifySignals(sigs)
	w := &signalWatch{got: make(chan os.Signal, 1)}
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			w.got <- s
			cancel()
		case <-done:
		}
	}()
	w.stop = func() { stopNotify(); close(done) }
	return w
}

// exitCode returns 128+N if signal N was received, else 0.
func (w *signalWatch) exitCode() int {
	select {
	case s := <-w.got:
		w.got <- s
		if n, ok := s.(syscall.Signal); ok {
			return 128 + int(n)
		}
		return 130
	default:
		return 0
	}
}
