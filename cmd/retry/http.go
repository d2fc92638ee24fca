package main

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/cmd/retry/internal/policy"
	"github.com/backoffkit/retry/cmd/retry/internal/proc"
	"github.com/backoffkit/retry/httpretry"
)

// Exit codes of retry http, curl's where the cause is the same (see
// httpHelp). cli.ExitGaveUp (1) is ours: the server kept answering a retryable
// status until the attempts, the deadline or the budget ran out.
const (
	curlUnsupported   = 1
	curlURLMalformat  = 3
	curlResolve       = 6
	curlConnect       = 7
	curlPartial       = 18
	curlHTTPError     = 22
	curlWrite         = 23
	curlRead          = 26
	curlTimeout       = 28
	curlTLS           = 35
	curlTooManyRedirs = 47
	curlGotNothing    = 52
	curlBadEncoding   = 61
	curlCACertFile    = 77
	curlSend          = 55
	curlRecv          = 56
)

// httpFlags are the flags of retry http.
type httpFlags struct {
	fs  *flag.FlagSet
	pf  *policy.Flags
	sig *proc.SignalWatch // the run's, once it has begun

	method         string
	data           []dataPart
	forms          []string
	header         http.Header
	removed        []string // headers to leave out ("-H 'Name:'")
	output         string
	include, head  bool
	verbose        bool
	silent, showEr bool
	fail, failBody bool
	location       bool
	trusted        bool // --location-trusted
	maxRedirs      int
	writeOut       string
	dumpHeader     string
	connectTimeout time.Duration
	proxy          string
	insecure       bool
	cacert         string
	user           string
	agent          *string
	get            bool
	compressed     bool
	url            string
	idempotent     bool
	notIdempotent  bool
	idemKey        string
	retryAll       bool
	version        bool
}

// dataPart is one -d, --data-binary or --json argument.
type dataPart struct {
	flag, value string
}

func newHTTPFlags() *httpFlags {
	fs := flag.NewFlagSet("retry http", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	h := &httpFlags{fs: fs, pf: policy.AddFlags(fs, true), header: http.Header{}, maxRedirs: 50}
	pf := h.pf
	pf.DurFlag(&pf.AttemptTimeout, "m", "attempt-timeout", "time limit of each attempt (curl's meaning), like --attempt-timeout")
	pf.DurFlag(&pf.AttemptTimeout, "max-time", "attempt-timeout", "time limit of each attempt (curl's meaning), like --attempt-timeout")
	str := func(dst *string, usage string, names ...string) {
		for _, n := range names {
			fs.StringVar(dst, n, "", usage)
		}
	}
	boolean := func(dst *bool, usage string, names ...string) {
		for _, n := range names {
			fs.BoolVar(dst, n, false, usage)
		}
	}
	fn := func(usage string, f func(string) error, names ...string) {
		for _, n := range names {
			fs.Func(n, usage, f)
		}
	}
	str(&h.method, "request `METHOD`", "X", "request")
	for _, n := range []string{"d", "data", "data-binary", "data-urlencode", "json"} {
		name := n
		fs.Func(n, "request body `DATA`", func(s string) error {
			h.data = append(h.data, dataPart{name, s})
			return nil
		})
	}
	fn("multipart form field `NAME=VALUE`", func(s string) error {
		if !strings.Contains(s, "=") {
			return errors.New("want NAME=VALUE, NAME=@FILE or NAME=<FILE")
		}
		h.forms = append(h.forms, s)
		return nil
	}, "F", "form")
	fn("request header `'Name: value'`", func(s string) error { return h.addHeader(s) }, "H", "header")
	str(&h.output, "write the body to `FILE`", "o", "output")
	boolean(&h.include, "include the response headers in the output", "i", "include")
	boolean(&h.head, "HEAD request; print the headers", "I", "head")
	boolean(&h.verbose, "print each attempt's request and response headers on stderr", "v", "verbose")
	boolean(&h.silent, "no retry log, no error message", "s", "silent")
	boolean(&h.showEr, "with -s, still print the error", "S", "show-error")
	boolean(&h.fail, "exit 22 on an HTTP error (400 and above), without the body", "f", "fail")
	boolean(&h.failBody, "exit 22 on an HTTP error, with the body", "fail-with-body")
	boolean(&h.location, "follow redirects", "L", "location")
	boolean(&h.trusted, "follow redirects and send the credentials to every host", "location-trusted")
	fn("follow at most `N` redirects (default 50)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < -1 {
			return errors.New("want a whole number (-1 for no limit)")
		}
		h.maxRedirs = n
		return nil
	}, "max-redirs")
	str(&h.writeOut, "print `FORMAT` after the transfer", "w", "write-out")
	str(&h.dumpHeader, "write the response headers to `FILE`", "D", "dump-header")
	fn("time limit of the connection; `DURATION`", func(s string) error {
		d, err := cli.ParseDuration(s)
		h.connectTimeout = d
		return err
	}, "connect-timeout")
	str(&h.proxy, "send through the proxy `URL`", "x", "proxy")
	boolean(&h.insecure, "do not verify the server's certificate", "k", "insecure")
	str(&h.cacert, "trust the CA certificates in `FILE` (PEM)", "cacert")
	str(&h.user, "basic authentication `USER:PASSWORD`", "u", "user")
	fn("User-Agent `NAME`", func(s string) error { h.agent = &s; return nil }, "A", "user-agent")
	boolean(&h.get, "send the -d data in the URL's query, with GET", "G", "get")
	boolean(&h.compressed, "ask for a compressed response and decompress it", "compressed")
	str(&h.url, "the `URL`", "url")
	fs.BoolVar(&h.idempotent, "idempotent", false, "the request is safe to repeat: retry it whatever its method")
	fs.BoolVar(&h.notIdempotent, "not-idempotent", false, "the request must not be repeated once it may have reached the server: no Google read-only rule, no retry after a 429")
	fs.StringVar(&h.idemKey, "idempotency-key", "", "send an Idempotency-Key header: auto (a random UUID, the same on every attempt) or `VALUE`; makes a POST retryable")
	boolean(&h.retryAll, "retry DNS and TLS errors too", "retry-all-errors")
	boolean(&h.version, "print the version", "V", "version")
	// curl's own retry flags have other names here; say which.
	for name, use := range map[string]string{
		"retry":          "--attempts N+1 (attempts count the first one)",
		"retry-delay":    "--initial-delay (the waits then grow exponentially)",
		"retry-max-time": "--deadline",
	} {
		use := use
		fs.Func(name, "curl's; use "+use, func(string) error {
			return fmt.Errorf("is curl's retry flag; retry http uses %s", use)
		})
	}
	fs.Func("retry-connrefused", "accepted for curl: a refused connection is always retried", func(string) error { return nil })
	fs.Lookup("retry-connrefused").Value = boolValue{}
	return h
}

// boolValue is a flag.Value that takes no argument and does nothing.
type boolValue struct{}

func (boolValue) String() string   { return "" }
func (boolValue) Set(string) error { return nil }
func (boolValue) IsBoolFlag() bool { return true }

// addHeader adds a -H header: "Name: value", "Name;" for an empty value,
// or "Name:" to leave out a header retry would send (User-Agent, Accept,
// Content-Type).
func (h *httpFlags) addHeader(s string) error {
	if name, ok := strings.CutSuffix(s, ";"); ok && !strings.Contains(name, ":") && validHeaderName(name) {
		h.header.Add(name, "")
		return nil
	}
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || !validHeaderName(name) {
		return errors.New("want 'Name: value'")
	}
	value = strings.TrimSpace(value)
	if value == "" {
		h.removed = append(h.removed, http.CanonicalHeaderKey(name))
		return nil
	}
	if strings.ContainsAny(value, "\r\n") {
		return errors.New("a header value cannot hold a line break")
	}
	h.header.Add(name, value)
	return nil
}

func validHeaderName(name string) bool {
	return name != "" && !strings.ContainsAny(name, " \t\r\n:;()<>@,\\\"/[]?={}")
}

// testBaseTransport, set only by tests, replaces the network under the
// retrying transport: a test serves the requests in process, on
// testing/synctest's virtual clock.
var testBaseTransport http.RoundTripper

// runHTTP is "retry http".
func runHTTP(args []string, stdout, stderr io.Writer) int {
	const prog = "retry http"
	h := newHTTPFlags()
	expanded, err := expandShortFlags(h.fs, args)
	var positional []string
	var help bool
	if err == nil {
		positional, help, err = parseInterspersed(h.fs, expanded)
	}
	if help {
		printHTTPHelp(stdout)
		return cli.ExitOK
	}
	log := policy.NewEventLog(stderr, prog, h.pf, describeHTTP)
	log.KeepGiveUp = true
	if h.silent && !h.showEr {
		log.Silent = true
	}
	if h.silent {
		log.Quiet = true
	}
	if err != nil {
		scan := args
		if expanded != nil {
			scan = expanded
		}
		log.JSON = policy.ScanLogFormat(h.fs, scan, true) == "json" // the error may come before --log-format
		return log.Fail(err)
	}
	defer log.RouteStdLog()() // net/http's own lines (a Transport's) join the log
	if h.version {
		fmt.Fprintln(stdout, cli.VersionLine())
		return cli.ExitOK
	}
	if h.url != "" {
		positional = append([]string{h.url}, positional...)
	}
	if len(positional) != 1 {
		return log.Fail(cli.Usagef("want exactly one URL, got %d arguments", len(positional)))
	}
	x, err := h.prepare(positional[0])
	if err != nil {
		return log.Fail(err)
	}
	if h.notIdempotent {
		switch {
		case h.idempotent:
			return log.Fail(cli.Usagef("--not-idempotent and --idempotent say the opposite"))
		case h.idemKey != "" || x.header.Get("Idempotency-Key") != "":
			return log.Fail(cli.Usagef("--not-idempotent and an Idempotency-Key say the opposite"))
		}
		log.Describe = func(err error) policy.AttemptInfo {
			info := describeHTTP(err)
			if errors.Is(err, httpretry.ErrNotIdempotent) {
				info.WhyStop = "the request is marked --not-idempotent"
			}
			return info
		}
	}
	for _, w := range x.warnings {
		log.Warn(w)
	}
	p, err := h.pf.Build()
	if err != nil {
		return log.Fail(err)
	}
	log.Hint(p.Resolved())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := proc.WatchSignals(cancel)
	defer sig.Stop()
	h.sig = sig
	switch {
	case h.idempotent:
		ctx = httpretry.Idempotent(ctx)
	case h.notIdempotent:
		ctx = httpretry.NotIdempotent(ctx)
	}
	req, err := http.NewRequestWithContext(ctx, x.method, x.url.String(), bytes.NewReader(x.body))
	if err != nil {
		return log.Fail(cli.Usagef("%v", err))
	}
	if x.body == nil {
		req.Body, req.GetBody, req.ContentLength = nil, nil, 0
	}
	req.Header = x.header
	req.Host = x.host

	var opts []httpretry.Option
	switch h.idemKey {
	case "":
	case "auto":
		opts = append(opts, httpretry.AddIdempotencyKey())
	default:
		req.Header.Set("Idempotency-Key", h.idemKey)
	}
	if h.retryAll {
		opts = append(opts, httpretry.RetryAllErrors())
	}
	if prof := h.pf.Used; prof.Name != "" {
		// The profile's consumption headers (flex, priority); a -H of the
		// same name, even empty or removed, is the caller's and wins.
		opts = append(opts, httpretry.WithProfile(prof.Name))
	}
	retries := 0
	following := h.location || h.trusted
	hops := &hopRecorder{log: log, follow: following}
	p.Observer = retry.Observers(hops.observe, func(_ context.Context, e retry.Event) {
		if e.Kind == retry.EventRetry {
			retries++ // the observer runs on client.Do's goroutine
		}
	})
	// As curl, --cacert is read only when a certificate may be checked.
	base, err := h.transport(!h.insecure && (x.url.Scheme == "https" || following))
	if err != nil {
		return log.Fail(err)
	}
	defer base.CloseIdleConnections()
	fl, err := policy.OpenFleet(h.pf.Fleet, p.Deadline, log)
	if err != nil {
		return log.Fail(err)
	}
	defer fl.Close()
	fl.Apply(&p, log)
	wire := &wireStats{}
	var rt http.RoundTripper = connected{rt: base, wire: wire}
	if testBaseTransport != nil {
		rt = testBaseTransport
	}
	if h.verbose {
		rt = &verboseTransport{rt: rt, log: log}
	}
	tr := httpretry.NewTransport(rt, p, opts...)
	if err := tr.Err(); err != nil {
		return log.Fail(cli.Usagef("%v", err))
	}
	hops.rt, hops.wire = tr, wire
	hops.deadline, hops.deadlineName = max(p.Deadline, 0), h.pf.LimitName("Deadline", p.Deadline)
	// Without -L the response is the answer, whatever its Location says
	// (http.Client would fail on one that does not parse).
	do := hops.RoundTrip
	if following {
		do = (&http.Client{Transport: hops, CheckRedirect: func(req *http.Request, via []*http.Request) error {
			err := h.checkRedirect(req, via)
			if _, refused := err.(*cli.ExitError); refused {
				hops.refused = true // a redirect taken, that leads nowhere: counted, as curl
			}
			return err
		}}).Do
	}

	start := time.Now()
	hops.start = start
	res := &transfer{method: x.method, given: x.url, url: x.url, start: start, output: h.output, referer: x.header.Get("Referer"), wire: wire}
	defer func() {
		if h.writeOut != "" {
			res.retries, res.total = retries, time.Since(start)
			res.redirects = max(len(hops.urls)-1, 0)
			if hops.refused {
				res.redirects++
			}
			res.url = hops.effectiveURL(x.url)
			res.answers, res.lastHop = hops.resps, hops.offset
			res.errormsg = log.ClosingError()
			if hops.cur != nil && base.Proxy != nil {
				p, err := base.Proxy(hops.cur)
				res.proxied = err == nil && p != nil
			}
			writeOut(x.writeOut, res, stdout, stderr)
		}
	}()
	resp, err := do(req)
	if err != nil {
		hops.failed()
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		h.writeHopHeaders(stdout, hops)
		if n := len(hops.resps); n > 0 {
			res.resp = hops.resps[n-1] // -w: the last answer (a redirect), as curl
		}
		if code := sig.ExitCode(); code != 0 {
			res.exit = code
			return code
		}
		if hops.badLocation != nil {
			res.exit = curlURLMalformat
			log.FailCode(hops.badLocation, res.exit)
			return res.exit
		}
		if errors.Is(err, httpretry.ErrRegionalEndpoint) {
			res.exit = cli.ExitUsage
			log.FailCode(regionalProfileError(h.pf.Used, err), res.exit)
			return res.exit
		}
		res.exit = transportExitCode(err)
		if !log.GaveUp {
			log.FailCode(fmt.Errorf("%s %s: %v", x.method, httpretry.Redact(x.url), redactURLError(err)), res.exit)
		}
		return res.exit
	}
	defer resp.Body.Close()
	res.resp = resp
	res.exit = h.writeResponse(stdout, log, p, resp, hops, res)
	if code := sig.ExitCode(); code != 0 {
		res.exit = code
	}
	hops.answered(res.exit)
	return res.exit
}

// regionalProfileError is the one line for a request refused because its
// host is a regional Vertex AI endpoint while the profile (priority, flex)
// is served by the global endpoint only: it names --profile (or the config
// key) instead of httpretry's option.
func regionalProfileError(prof policy.ProfileUse, err error) error {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, "): "); ok && strings.Contains(msg, "WithProfile(") {
		msg = rest
	}
	return fmt.Errorf("%s %s: %s (use https://aiplatform.googleapis.com, or another profile)", prof.From, prof.Name, httpretry.RedactText(msg))
}

// writeResponse writes the response (headers with -i/-I/-D, the body unless
// -f refuses it) and returns the exit code.
func (h *httpFlags) writeResponse(stdout io.Writer, log *policy.EventLog, p retry.Policy, resp *http.Response, hops *hopRecorder, res *transfer) int {
	status := resp.StatusCode
	retryable := p.RetriesStatus(status)
	httpError := status >= 400 && (h.fail || h.failBody)
	// writeFailed reports a write error (exit 23) and whether there was one.
	writeFailed := func(err error) int {
		var we *writeError
		if errors.As(err, &we) {
			err = we.err
		}
		log.FailCode(err, curlWrite)
		return curlWrite
	}

	if h.dumpHeader != "" {
		d := newOutput("-D", h.dumpHeader, stdout)
		for _, r := range hops.resps {
			if err := writeHead(d, r); err != nil {
				d.close(false)
				return writeFailed(err)
			}
		}
		if err := d.close(true); err != nil {
			return writeFailed(err)
		}
	}
	out := newOutput("-o", h.output, stdout)
	out.binaryCheck = h.output == "" && proc.IsTerminal(stdout)
	// -f: no body for an HTTP error (curl 7.88 still writes -i's headers).
	noBody := h.head || httpError && h.fail && !h.failBody
	if h.include || h.head {
		for _, r := range hops.resps {
			if err := writeHead(out, r); err != nil {
				out.close(false)
				return writeFailed(err)
			}
		}
	}
	if !noBody {
		var body io.Reader = resp.Body
		var err error
		if h.compressed {
			body, err = decompress(resp)
			if err != nil {
				out.close(false)
				code := bodyExitCode(err)
				log.FailCode(fmt.Errorf("%s %s: %v", res.method, httpretry.Redact(resp.Request.URL), err), code)
				return code
			}
		}
		if _, err := io.Copy(countWriter{out, &res.size}, body); err != nil {
			out.close(false)
			var we *writeError
			if errors.As(err, &we) {
				return writeFailed(err)
			}
			if code := h.sig.ExitCode(); code != 0 { // Ctrl-C, SIGTERM: no receive error
				log.FailCode(fmt.Errorf("reading the body of %s %s: interrupted by %s", res.method, httpretry.Redact(resp.Request.URL), h.sig.Name()), code)
				return code
			}
			code := bodyExitCode(err)
			why := redactURLError(err).Error()
			if code == curlTimeout {
				why = h.bodyTimeout(p, hops.start, why)
			}
			log.FailCode(fmt.Errorf("reading the body of %s %s: %s", res.method, httpretry.Redact(resp.Request.URL), why), code)
			return code
		}
	}
	if err := out.close(!noBody || h.include || h.head); err != nil {
		return writeFailed(err)
	}
	switch {
	case retryable && log.GaveUp:
		return cli.ExitGaveUp // the give-up line said why
	case httpError:
		log.FailCode(fmt.Errorf("%s %s: %s (%s)", res.method, httpretry.Redact(resp.Request.URL), resp.Status, notRetriedWhy(status, retryable)), curlHTTPError)
		return curlHTTPError
	}
	return cli.ExitOK
}

// writeHopHeaders writes the headers of the hops that answered (redirects)
// with -D, -i or -I, when a later hop failed: as curl, which has written
// them by then. A write error is not reported: the request's is.
func (h *httpFlags) writeHopHeaders(stdout io.Writer, hops *hopRecorder) {
	if len(hops.resps) == 0 {
		return
	}
	write := func(o *output) {
		for _, r := range hops.resps {
			if writeHead(o, r) != nil {
				break
			}
		}
		o.close(true)
	}
	if h.dumpHeader != "" {
		write(newOutput("-D", h.dumpHeader, stdout))
	}
	if h.include || h.head {
		write(newOutput("-o", h.output, stdout))
	}
}

// bodyTimeout says which limit cut the body of the answer short, read after
// the attempt returned it: the --deadline if it has passed (counted from
// the request's start), else the attempt's --max-time; err if neither is
// set (a timeout of the connection's own).
func (h *httpFlags) bodyTimeout(p retry.Policy, start time.Time, err string) string {
	switch {
	case p.Deadline > 0 && time.Since(start) >= p.Deadline:
		return "timed out: the " + h.pf.LimitName("Deadline", p.Deadline) + " passed"
	case p.AttemptTimeout > 0:
		return "timed out: the attempt's " + h.pf.LimitName("AttemptTimeout", p.AttemptTimeout) + " passed"
	}
	return err
}

func notRetriedWhy(status int, retryable bool) string {
	if retryable {
		return "gave up"
	}
	return fmt.Sprintf("not retried: %d is not in --codes", status)
}

// request is what the flags say to send.
type request struct {
	method   string
	url      *url.URL
	host     string // -H Host: sent as the Host, "" for the URL's
	header   http.Header
	body     []byte // nil for none
	writeOut string
	warnings []string // about -w, printed even with -s (as curl)
}

// proc.Prepare builds the request from the flags and the URL argument.
func (h *httpFlags) prepare(rawURL string) (*request, error) {
	u, err := parseHTTPURL(rawURL)
	if err != nil {
		return nil, err
	}
	x := &request{url: u, header: h.header.Clone()}
	var jsonData bool
	var parts, jsonParts []string
	for _, d := range h.data {
		v, err := readDataArg(d)
		if err != nil {
			return nil, err
		}
		if d.flag == "json" {
			jsonData = true
			jsonParts = append(jsonParts, v)
			continue
		}
		parts = append(parts, v)
	}
	switch {
	case jsonData && len(parts) > 0:
		return nil, cli.Usagef("--json cannot be combined with -d/--data/--data-binary")
	case len(h.forms) > 0 && len(h.data) > 0:
		return nil, cli.Usagef("-F cannot be combined with -d/--data/--json (a request has one body)")
	case h.head && len(h.data)+len(h.forms) > 0 && !h.get:
		return nil, cli.Usagef("-I (HEAD) cannot send a body (-d, --json, -F)")
	case h.get && len(h.forms) > 0:
		return nil, cli.Usagef("-G cannot send a -F form")
	}
	switch {
	case h.get:
		if len(parts)+len(jsonParts) > 0 {
			q := strings.Join(append(parts, jsonParts...), "&")
			if err := checkURLBytes(q, "the -G data"); err != nil {
				return nil, err
			}
			if u.RawQuery != "" {
				u.RawQuery += "&" + q
			} else {
				u.RawQuery = q
			}
		}
	case jsonData:
		x.body = []byte(strings.Join(jsonParts, ""))
		setDefault(x.header, "Content-Type", "application/json")
		setDefault(x.header, "Accept", "application/json")
	case len(parts) > 0:
		x.body = []byte(strings.Join(parts, "&"))
		setDefault(x.header, "Content-Type", "application/x-www-form-urlencoded")
	case len(h.forms) > 0:
		body, ctype, err := multipartBody(h.forms)
		if err != nil {
			return nil, err
		}
		x.body = body
		setDefault(x.header, "Content-Type", ctype)
	}
	x.method = strings.ToUpper(h.method)
	switch {
	case x.method != "":
		if !validHeaderName(x.method) {
			return nil, cli.Usagef("-X %q: not a valid method", h.method)
		}
	case h.head:
		x.method = http.MethodHead
	case x.body != nil:
		x.method = http.MethodPost
	default:
		x.method = http.MethodGet
	}
	user, pass, hasUser := strings.Cut(h.user, ":")
	if h.user != "" && !hasUser {
		return nil, cli.Usagef("-u: want USER:PASSWORD (retry http does not prompt for a password)")
	}
	if h.user == "" && u.User != nil { // user info in the URL, as curl (-u wins)
		user, hasUser = u.User.Username(), true
		pass, _ = u.User.Password()
	}
	if _, set := x.header["Authorization"]; hasUser && !set { // as curl: -H Authorization wins
		req := http.Request{Header: http.Header{}}
		req.SetBasicAuth(user, pass)
		x.header.Set("Authorization", req.Header.Get("Authorization"))
	}
	ua := "backoffkit-retry/" + cli.Version()
	if h.agent != nil {
		ua = *h.agent
	}
	setDefault(x.header, "User-Agent", ua)
	setDefault(x.header, "Accept", "*/*")
	if h.compressed {
		setDefault(x.header, "Accept-Encoding", "gzip, deflate")
	}
	for _, name := range h.removed {
		if name == "User-Agent" {
			x.header[name] = []string{""} // net/http then sends none
			continue
		}
		// Present with no value: nothing is sent, and a header the
		// transport would add (a --profile's) stays out too.
		x.header[name] = nil
	}
	if v := x.header.Get("Host"); v != "" { // net/http sends req.Host, never Header["Host"]
		x.host = v
	}
	x.header.Del("Host")
	x.writeOut, x.warnings, err = readWriteOut(h.writeOut)
	if err != nil {
		return nil, err
	}
	return x, nil
}

func setDefault(h http.Header, name, value string) {
	if _, ok := h[http.CanonicalHeaderKey(name)]; !ok {
		h.Set(name, value)
	}
}

// transport returns the base transport the flags describe: curl's proxy,
// TLS and connect-timeout settings, no transparent decompression (curl asks
// for none without --compressed), and no DNS lookup of names under
// .invalid (RFC 6761: they fail at once).
func (h *httpFlags) transport(verify bool) (*http.Transport, error) {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if h.connectTimeout > 0 {
		dialer.Timeout = h.connectTimeout
	}
	tlsConfig := &tls.Config{InsecureSkipVerify: h.insecure}
	if h.cacert != "" && verify {
		pem, err := os.ReadFile(h.cacert)
		if err != nil {
			return nil, cli.ExitErrorf(curlCACertFile, "--cacert %s: cannot read: %v", h.cacert, cli.UnwrapPath(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, cli.ExitErrorf(curlCACertFile, "--cacert %s: no PEM certificate in it", h.cacert)
		}
		tlsConfig.RootCAs = pool
	}
	proxy := http.ProxyFromEnvironment
	if h.proxy != "" {
		s := h.proxy
		if !strings.Contains(s, "://") {
			s = "http://" + s
		}
		pu, err := url.Parse(s)
		if err != nil || pu.Host == "" {
			return nil, cli.Usagef("-x %s: not a proxy URL", cli.HideUserInfo(h.proxy))
		}
		proxy = http.ProxyURL(pu)
	}
	handshake := 10 * time.Second
	if h.connectTimeout > 0 {
		handshake = h.connectTimeout
	}
	limit := h.connectTimeout
	if limit <= 0 {
		limit = defaultConnectLimit
	}
	return &http.Transport{
		Proxy: proxy,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if host, _, err := net.SplitHostPort(addr); err == nil && isInvalidName(host) {
				return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}}
			}
			start := time.Now()
			conn, err := dialer.DialContext(ctx, network, addr)
			if err == nil {
				// The whole connect phase, a proxy's CONNECT or SOCKS
				// handshake included (net/http bounds neither), ends by
				// then; connected clears it (see connected).
				conn.SetDeadline(start.Add(limit))
			}
			return conn, err
		},
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   handshake,
		ForceAttemptHTTP2:     true,
		DisableCompression:    true,
		MaxIdleConns:          10,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}, nil
}

// parseProblem says why s does not parse as a URL (err, url.Parse's error),
// never quoting its user info: url.Parse's error quotes the part at fault,
// with user info the password ("invalid port \":s3cret\" after host").
func parseProblem(s string, err error) string {
	// With user info or a secret value, what url.Parse says may quote them
	// ("%zz" of a token): say what it says of the URL with them hidden.
	if hidden := cli.HideUserInfo(s); hidden != s {
		_, herr := url.Parse(hidden)
		if herr == nil {
			return "it does not parse (in a password or a secret value, percent-encode '%', '/', '?', '#' and '@')"
		}
		err = herr
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return httpretry.RedactText(err.Error())
}

// defaultConnectLimit bounds the connect phase (dial, proxy handshake,
// TLS) without --connect-timeout, as curl's default of 300 s does.
const defaultConnectLimit = 5 * time.Minute

// connected is the RoundTripper under the retrying transport: it clears the
// connect phase's deadline that the dialer set on a connection once a
// request has it (httptrace's GotConn, after any proxy handshake and TLS).
// It also records what httptrace says of each attempt in wire, for -w.
type connected struct {
	rt   http.RoundTripper
	wire *wireStats
}

func (c connected) RoundTrip(req *http.Request) (*http.Response, error) {
	w := c.wire
	if w == nil {
		w = &wireStats{}
	}
	a := &attemptTrace{}
	trace := w.trace(a)
	record := trace.GotConn
	trace.GotConn = func(info httptrace.GotConnInfo) {
		if info.Conn != nil {
			info.Conn.SetDeadline(time.Time{})
		}
		record(info)
	}
	resp, err := c.rt.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if err == nil {
		w.answered(a, req)
	}
	return resp, err
}

// CloseIdleConnections passes the call on.
func (c connected) CloseIdleConnections() {
	if ci, ok := c.rt.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// isInvalidName reports whether host is "invalid" or under ".invalid", a
// name that must never resolve (RFC 6761, section 6.4).
func isInvalidName(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "invalid" || strings.HasSuffix(host, ".invalid")
}

var errTooManyRedirects = errors.New("too many redirects")

// checkRedirect follows redirects only with -L, at most --max-redirs. As
// curl does, it sends no Referer (unless -H set one), percent-encodes the
// spaces of a Location, and keeps credentials (Authorization, Cookie, API
// keys: see secretHeader) for the origin of the URL given (scheme, host,
// port), unless --location-trusted; net/http would send them to another
// port or scheme of the same host, and to subdomains.
func (h *httpFlags) checkRedirect(req *http.Request, via []*http.Request) error {
	if !h.location && !h.trusted {
		return http.ErrUseLastResponse
	}
	if h.maxRedirs >= 0 && len(via) > h.maxRedirs {
		return fmt.Errorf("%w: more than %d (--max-redirs)", errTooManyRedirects, h.maxRedirs)
	}
	if scheme := strings.ToLower(req.URL.Scheme); scheme != "http" && scheme != "https" {
		return cli.ExitErrorf(curlUnsupported, "a redirect to %s: protocol %q not supported (-L follows http:// and https:// only)",
			httpretry.Redact(req.URL), scheme)
	}
	if req.URL.Hostname() == "" {
		return cli.ExitErrorf(curlURLMalformat, "a redirect to %s: URL rejected: no host", httpretry.Redact(req.URL))
	}
	if p := req.URL.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n > 65535 {
			return cli.ExitErrorf(curlURLMalformat, "a redirect to %s: URL rejected: port %s is outside 0-65535", httpretry.Redact(req.URL), p)
		}
	}
	req.URL.RawQuery = strings.ReplaceAll(req.URL.RawQuery, " ", "%20")
	if via[0].Header.Get("Referer") == "" {
		req.Header.Del("Referer")
	}
	if !h.trusted && !sameOrigin(via[0].URL, req.URL) {
		for name := range req.Header {
			if secretHeader(name) {
				req.Header.Del(name)
			}
		}
	}
	return nil
}

// transportExitCode maps the error of a request that got no response to
// curl's exit code for the same cause.
func transportExitCode(err error) int {
	if errors.Is(err, errTooManyRedirects) {
		return curlTooManyRedirs
	}
	var ee *cli.ExitError
	if errors.As(err, &ee) { // a redirect refused by checkRedirect or RoundTrip
		return ee.Code
	}
	var addrErr *net.AddrError
	if errors.As(err, &addrErr) { // a redirect to an invalid port
		return curlURLMalformat
	}
	var ae *httpretry.AttemptError
	if errors.As(err, &ae) {
		switch ae.Class {
		case httpretry.ClassDNS:
			return curlResolve
		case httpretry.ClassRefused, httpretry.ClassDial:
			return curlConnect
		case httpretry.ClassTimeout:
			return curlTimeout
		case httpretry.ClassTLS:
			return curlTLS
		case httpretry.ClassBrokenPipe:
			return curlSend
		case httpretry.ClassBody:
			return curlRead
		case httpretry.ClassEOF:
			if errors.Is(err, io.EOF) { // closed before a byte of the answer
				return curlGotNothing
			}
		}
		return curlRecv
	}
	var re *retry.Error
	if errors.As(err, &re) && re.Last == nil { // refused before any attempt
		if re.Reason == retry.ReasonDeadline { // the fleet's wait would pass --deadline
			return curlTimeout
		}
		return cli.ExitGaveUp
	}
	var to interface{ Timeout() bool }
	if errors.As(err, &to) && to.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return curlTimeout
	}
	return curlRecv
}

// bodyExitCode maps an error reading the response body to curl's code.
func bodyExitCode(err error) int {
	var to interface{ Timeout() bool }
	var corrupt flate.CorruptInputError
	var enc *encodingError
	switch {
	case errors.As(err, &enc):
		return curlBadEncoding
	case errors.Is(err, gzip.ErrHeader), errors.Is(err, gzip.ErrChecksum), errors.Is(err, zlib.ErrHeader),
		errors.Is(err, zlib.ErrChecksum), errors.Is(err, zlib.ErrDictionary), errors.As(err, &corrupt):
		return curlBadEncoding // --compressed: not what Content-Encoding says
	case errors.Is(err, io.ErrUnexpectedEOF):
		return curlPartial
	case errors.As(err, &to) && to.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return curlTimeout
	}
	return curlRecv
}

// parseInterspersed parses flags anywhere among the arguments (as curl
// does): "URL -H x" works like "-H x URL". After "--" everything is
// positional.
func parseInterspersed(fs *flag.FlagSet, args []string) (positional []string, help bool, err error) {
	for {
		if help, err = cli.ParseFlags(fs, args); help || err != nil {
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

// parseHTTPURL reads s as curl reads a URL: a scheme is a word followed
// by ":/" ("http:/h" is http://h, extra slashes are dropped), or one of the
// URI schemes written without slashes (mailto:, data:, ...); without one it
// is an http:// URL ("host:8080/x", "user:pw@host"). Only http and https
// are supported (exit 1, as curl). A space or a control character anywhere,
// a URL that does not parse, no host or a port above 65535 is rejected
// (exit 3, as curl): nothing malformed goes onto the wire.
func parseHTTPURL(s string) (*url.URL, error) {
	if err := checkURLBytes(s, "the URL"); err != nil {
		return nil, err
	}
	if scheme, rest, ok := splitScheme(s); ok {
		scheme = strings.ToLower(scheme)
		if scheme != "http" && scheme != "https" {
			return nil, cli.ExitErrorf(curlUnsupported, "protocol %q not supported (want an http:// or https:// URL)", scheme)
		}
		s = scheme + "://" + strings.TrimLeft(rest, "/")
	} else {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		if hidden := cli.HideUserInfo(s); hidden != s {
			return nil, cli.ExitErrorf(curlURLMalformat, "URL rejected: %s: %s", hidden, parseProblem(s, err))
		}
		return nil, cli.ExitErrorf(curlURLMalformat, "URL rejected: %s", parseProblem(s, err))
	}
	if u.Hostname() == "" {
		return nil, cli.ExitErrorf(curlURLMalformat, "URL rejected: no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n > 65535 {
			return nil, cli.ExitErrorf(curlURLMalformat, "URL rejected: port %s is outside 0-65535", p)
		}
	}
	return u, nil
}

// slashlessSchemes are URI schemes written without "//" (mailto:x@y): a
// URL starting with one is refused as an unsupported protocol, not read as
// user info of a scheme-less URL (curl would send mailto:x@y to host y).
var slashlessSchemes = []string{"mailto", "tel", "sms", "data", "javascript", "urn", "news", "about", "magnet", "geo", "sip", "sips", "xmpp"}

// splitScheme returns the scheme of s and what follows its colon, if s
// starts with one (see parseHTTPURL).
func splitScheme(s string) (scheme, rest string, ok bool) {
	scheme, rest, ok = strings.Cut(s, ":")
	if !ok || scheme == "" || !isASCIILetter(scheme[0]) {
		return "", "", false
	}
	for i := 0; i < len(scheme); i++ {
		c := scheme[i]
		if !isASCIILetter(c) && !('0' <= c && c <= '9') && c != '+' && c != '-' && c != '.' {
			return "", "", false
		}
	}
	if strings.HasPrefix(rest, "/") {
		return scheme, rest, true
	}
	for _, n := range slashlessSchemes {
		if strings.EqualFold(scheme, n) {
			return scheme, rest, true
		}
	}
	return "", "", false
}

func isASCIILetter(c byte) bool { return 'A' <= c&^0x20 && c&^0x20 <= 'Z' }

// checkURLBytes refuses a URL holding a space or a control character (an
// HTTP request line ends at a space: curl rejects them too). what names
// where it came from ("the URL", "the -G data").
func checkURLBytes(s, what string) error {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ':
			return cli.ExitErrorf(curlURLMalformat, "URL rejected: malformed input: a space in %s at byte %d (percent-encode it as %%20)", what, i)
		case c < ' ' || c == 0x7f:
			return cli.ExitErrorf(curlURLMalformat, "URL rejected: malformed input: control character %#02x in %s at byte %d", c, what, i)
		}
	}
	return nil
}

// sameOrigin reports whether a and b have the same origin: scheme, host
// (without regard to case) and port (80 and 443 when not given).
func sameOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		switch strings.ToLower(u.Scheme) {
		case "https":
			return "443"
		case "http":
			return "80"
		}
		return ""
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

// secretHeader reports whether a header may carry a credential: those
// httpretry.RedactHeader hides, and any whose name says it holds an
// authorization, a key, a token, a secret, a password, a session, a
// signature, a credential or a cookie (api-key, X-Auth-Token,
// Ocp-Apim-Subscription-Key, ...). Idempotency-Key is no secret.
func secretHeader(name string) bool {
	if v := httpretry.RedactHeader(http.Header{name: {"x"}})[name]; len(v) == 1 && v[0] == httpretry.Redacted {
		return true
	}
	n := strings.ToLower(name)
	if n == "idempotency-key" {
		return false
	}
	for _, w := range []string{"auth", "key", "token", "secret", "password", "passwd", "session", "signature", "credential", "cookie"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// redactHeaders returns a copy of h safe to print: the values of
// secretHeader names are REDACTED, and the others lose the credentials of
// any URL in them (a Location's or a Link's key= or user info).
func redactHeaders(h http.Header) http.Header {
	c := make(http.Header, len(h))
	for name, vals := range h {
		red := make([]string, len(vals))
		for i, v := range vals {
			switch {
			case secretHeader(name):
				red[i] = httpretry.Redacted
			case name == "Location" || name == "Content-Location":
				red[i] = cli.RedactRawURL(v)
			default:
				red[i] = httpretry.RedactText(v)
			}
		}
		c[name] = red
	}
	return c
}

// redactURLError drops the URL that *url.Error puts in its message (ours is
// printed redacted instead), and the "httpretry: METHOD URL: " of an
// attempt's error; what is left loses the credentials of any URL it quotes
// (a Location that did not parse, a proxy's).
func redactURLError(err error) error {
	var ae *httpretry.AttemptError
	if errors.As(err, &ae) {
		return errors.New(attemptText(ae))
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return errors.New(httpretry.RedactText(err.Error()))
}

// attemptText is an attempt error without its "httpretry: METHOD URL: "
// prefix, the credentials of any URL it quotes redacted: the class and the
// cause ("refused (dial tcp ...: connection refused)").
func attemptText(ae *httpretry.AttemptError) string {
	msg := ae.Error()
	if _, rest, ok := strings.Cut(msg, ae.URL+": "); ok {
		return httpretry.RedactText(rest)
	}
	return httpretry.RedactText(strings.TrimPrefix(msg, "httpretry: "))
}

// describeHTTP turns an httpretry attempt error into log fields.
func describeHTTP(err error) policy.AttemptInfo {
	var ae *httpretry.AttemptError
	if !errors.As(err, &ae) {
		msg := redactURLError(err).Error()
		return policy.AttemptInfo{What: msg, Error: msg}
	}
	info := policy.AttemptInfo{Method: ae.Method, URL: ae.URL, Status: ae.Status}
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
		info.What = ae.Method + " " + ae.URL + ": " + attemptText(ae)
		info.Error = attemptText(ae)
	}
	switch {
	case errors.Is(err, httpretry.ErrNotIdempotent):
		info.WhyStop = fmt.Sprintf("%s is not idempotent; pass --idempotent or --idempotency-key to allow retries", ae.Method)
	case errors.Is(err, httpretry.ErrBodyNotReplayable):
		info.WhyStop = "the request body cannot be sent again"
	case ae.Class == httpretry.ClassDNS || ae.Class == httpretry.ClassTLS:
		info.WhyStop = "a " + strings.ToUpper(ae.Class) + " error is not retried without --retry-all-errors"
	case errors.As(err, new(*net.AddrError)):
		info.WhyStop = "the address is invalid"
	}
	return info
}
