package httpcmd

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
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
	"github.com/backoffkit/retry/cmd/retry/internal/curl"
	"github.com/backoffkit/retry/cmd/retry/internal/policy"
	"github.com/backoffkit/retry/cmd/retry/internal/proc"
	"github.com/backoffkit/retry/httpretry"
)

// httpFlags are the flags of retry http.
type httpFlags struct {
	fs  *flag.FlagSet
	pf  *policy.Flags
	sig *proc.SignalWatch // the run's, once it has begun

	method         string
	data           []curl.DataPart
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
			h.data = append(h.data, curl.DataPart{Flag: name, Value: s})
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
	fn("follow at most `N` redirects (default 50)",
		cli.IntIn(-1, math.MaxInt, "want a whole number (-1 for no limit)", func(n int) { h.maxRedirs = n }), "max-redirs")
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

// Run is "retry http".
func Run(args []string, stdout, stderr io.Writer) int {
	const prog = "retry http"
	h := newHTTPFlags()
	expanded, err := curl.ExpandShortFlags(h.fs, args)
	var positional []string
	var help bool
	if err == nil {
		positional, help, err = parseInterspersed(h.fs, expanded)
	}
	if help {
		printHTTPHelp(stdout)
		return cli.ExitOK
	}
	log := policy.NewEventLog(stderr, prog, h.pf, curl.Describe)
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
			info := curl.Describe(err)
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
	hops := &curl.HopRecorder{Log: log, Follow: following}
	p.Observer = retry.Observers(hops.Observe, func(_ context.Context, e retry.Event) {
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
	wire := &curl.WireStats{}
	var rt http.RoundTripper = connected{rt: base, wire: wire}
	if testBaseTransport != nil {
		rt = testBaseTransport
	}
	if h.verbose {
		rt = &curl.VerboseTransport{RT: rt, Log: log}
	}
	tr := httpretry.NewTransport(rt, p, opts...)
	if err := tr.Err(); err != nil {
		return log.Fail(cli.Usagef("%v", err))
	}
	hops.RT, hops.Wire = tr, wire
	hops.Deadline, hops.DeadlineName = max(p.Deadline, 0), h.pf.LimitName("Deadline", p.Deadline)
	// Without -L the response is the answer, whatever its Location says
	// (http.Client would fail on one that does not parse).
	do := hops.RoundTrip
	if following {
		do = (&http.Client{Transport: hops, CheckRedirect: func(req *http.Request, via []*http.Request) error {
			err := h.checkRedirect(req, via)
			if _, refused := err.(*cli.ExitError); refused {
				hops.Refused = true // a redirect taken, that leads nowhere: counted, as curl
			}
			return err
		}}).Do
	}

	start := time.Now()
	hops.Start = start
	res := &curl.Transfer{Method: x.method, Given: x.url, URL: x.url, Start: start, Output: h.output, Referer: x.header.Get("Referer"), Wire: wire}
	defer func() {
		if h.writeOut != "" {
			res.Retries, res.Total = retries, time.Since(start)
			res.Redirects = max(len(hops.URLs)-1, 0)
			if hops.Refused {
				res.Redirects++
			}
			res.URL = hops.EffectiveURL(x.url)
			res.Answers, res.LastHop = hops.Resps, hops.Offset
			res.ErrorMsg = log.ClosingError()
			if hops.Cur != nil && base.Proxy != nil {
				p, err := base.Proxy(hops.Cur)
				res.Proxied = err == nil && p != nil
			}
			curl.WriteOut(x.writeOut, res, stdout, stderr)
		}
	}()
	resp, err := do(req)
	if err != nil {
		hops.Failed()
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		h.writeHopHeaders(stdout, hops)
		if n := len(hops.Resps); n > 0 {
			res.Resp = hops.Resps[n-1] // -w: the last answer (a redirect), as curl
		}
		if code := sig.ExitCode(); code != 0 {
			res.Exit = code
			return code
		}
		if hops.BadLocation != nil {
			res.Exit = curl.ExitURLMalformat
			log.FailCode(hops.BadLocation, res.Exit)
			return res.Exit
		}
		if errors.Is(err, httpretry.ErrRegionalEndpoint) {
			res.Exit = cli.ExitUsage
			log.FailCode(regionalProfileError(h.pf.Used, err), res.Exit)
			return res.Exit
		}
		res.Exit = curl.TransportExitCode(err)
		if !log.GaveUp {
			log.FailCode(fmt.Errorf("%s %s: %v", x.method, httpretry.Redact(x.url), curl.RedactURLError(err)), res.Exit)
		}
		return res.Exit
	}
	defer resp.Body.Close()
	res.Resp = resp
	res.Exit = h.writeResponse(stdout, log, p, resp, hops, res)
	if code := sig.ExitCode(); code != 0 {
		res.Exit = code
	}
	hops.Answered(res.Exit)
	return res.Exit
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
func (h *httpFlags) writeResponse(stdout io.Writer, log *policy.EventLog, p retry.Policy, resp *http.Response, hops *curl.HopRecorder, res *curl.Transfer) int {
	status := resp.StatusCode
	retryable := p.RetriesStatus(status)
	httpError := status >= 400 && (h.fail || h.failBody)
	// writeFailed reports a write error (exit 23) and whether there was one.
	writeFailed := func(err error) int {
		var we *curl.WriteError
		if errors.As(err, &we) {
			err = we.Err
		}
		log.FailCode(err, curl.ExitWrite)
		return curl.ExitWrite
	}

	if h.dumpHeader != "" {
		d := curl.NewOutput("-D", h.dumpHeader, stdout)
		for _, r := range hops.Resps {
			if err := curl.WriteHead(d, r); err != nil {
				d.Close(false)
				return writeFailed(err)
			}
		}
		if err := d.Close(true); err != nil {
			return writeFailed(err)
		}
	}
	out := curl.NewOutput("-o", h.output, stdout)
	out.BinaryCheck = h.output == "" && proc.IsTerminal(stdout)
	// -f: no body for an HTTP error (curl 7.88 still writes -i's headers).
	noBody := h.head || httpError && h.fail && !h.failBody
	if h.include || h.head {
		for _, r := range hops.Resps {
			if err := curl.WriteHead(out, r); err != nil {
				out.Close(false)
				return writeFailed(err)
			}
		}
	}
	if !noBody {
		var body io.Reader = resp.Body
		var err error
		if h.compressed {
			body, err = curl.Decompress(resp)
			if err != nil {
				out.Close(false)
				code := curl.BodyExitCode(err)
				log.FailCode(fmt.Errorf("%s %s: %v", res.Method, httpretry.Redact(resp.Request.URL), err), code)
				return code
			}
		}
		if _, err := io.Copy(curl.CountWriter{W: out, N: &res.Size}, body); err != nil {
			out.Close(false)
			var we *curl.WriteError
			if errors.As(err, &we) {
				return writeFailed(err)
			}
			if code := h.sig.ExitCode(); code != 0 { // Ctrl-C, SIGTERM: no receive error
				log.FailCode(fmt.Errorf("reading the body of %s %s: interrupted by %s", res.Method, httpretry.Redact(resp.Request.URL), h.sig.Name()), code)
				return code
			}
			code := curl.BodyExitCode(err)
			why := curl.RedactURLError(err).Error()
			if code == curl.ExitTimeout {
				why = h.bodyTimeout(p, hops.Start, why)
			}
			log.FailCode(fmt.Errorf("reading the body of %s %s: %s", res.Method, httpretry.Redact(resp.Request.URL), why), code)
			return code
		}
	}
	if err := out.Close(!noBody || h.include || h.head); err != nil {
		return writeFailed(err)
	}
	switch {
	case retryable && log.GaveUp:
		return cli.ExitGaveUp // the give-up line said why
	case httpError:
		log.FailCode(fmt.Errorf("%s %s: %s (%s)", res.Method, httpretry.Redact(resp.Request.URL), resp.Status, notRetriedWhy(status, retryable)), curl.ExitHTTPError)
		return curl.ExitHTTPError
	}
	return cli.ExitOK
}

// writeHopHeaders writes the headers of the hops that answered (redirects)
// with -D, -i or -I, when a later hop failed: as curl, which has written
// them by then. A write error is not reported: the request's is.
func (h *httpFlags) writeHopHeaders(stdout io.Writer, hops *curl.HopRecorder) {
	if len(hops.Resps) == 0 {
		return
	}
	write := func(o *curl.Output) {
		for _, r := range hops.Resps {
			if curl.WriteHead(o, r) != nil {
				break
			}
		}
		o.Close(true)
	}
	if h.dumpHeader != "" {
		write(curl.NewOutput("-D", h.dumpHeader, stdout))
	}
	if h.include || h.head {
		write(curl.NewOutput("-o", h.output, stdout))
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

// prepare builds the request from the flags and the URL argument.
func (h *httpFlags) prepare(rawURL string) (*request, error) {
	u, err := curl.ParseHTTPURL(rawURL)
	if err != nil {
		return nil, err
	}
	x := &request{url: u, header: h.header.Clone()}
	var jsonData bool
	var parts, jsonParts []string
	for _, d := range h.data {
		v, err := curl.ReadDataArg(d)
		if err != nil {
			return nil, err
		}
		if d.Flag == "json" {
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
			if err := curl.CheckURLBytes(q, "the -G data"); err != nil {
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
		body, ctype, err := curl.MultipartBody(h.forms)
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
	x.writeOut, x.warnings, err = curl.ReadWriteOut(h.writeOut)
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
			return nil, cli.ExitErrorf(curl.ExitCACertFile, "--cacert %s: cannot read: %v", h.cacert, cli.UnwrapPath(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, cli.ExitErrorf(curl.ExitCACertFile, "--cacert %s: no PEM certificate in it", h.cacert)
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
			if host, _, err := net.SplitHostPort(addr); err == nil && curl.IsInvalidName(host) {
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

// defaultConnectLimit bounds the connect phase (dial, proxy handshake,
// TLS) without --connect-timeout, as curl's default of 300 s does.
const defaultConnectLimit = 5 * time.Minute

// connected is the RoundTripper under the retrying transport: it clears the
// connect phase's deadline that the dialer set on a connection once a
// request has it (httptrace's GotConn, after any proxy handshake and TLS).
// It also records what httptrace says of each attempt in wire, for -w.
type connected struct {
	rt   http.RoundTripper
	wire *curl.WireStats
}

func (c connected) RoundTrip(req *http.Request) (*http.Response, error) {
	w := c.wire
	if w == nil {
		w = &curl.WireStats{}
	}
	a := &curl.AttemptTrace{}
	trace := w.Trace(a)
	record := trace.GotConn
	trace.GotConn = func(info httptrace.GotConnInfo) {
		if info.Conn != nil {
			info.Conn.SetDeadline(time.Time{})
		}
		record(info)
	}
	resp, err := c.rt.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if err == nil {
		w.Answered(a, req)
	}
	return resp, err
}

// CloseIdleConnections passes the call on.
func (c connected) CloseIdleConnections() {
	if ci, ok := c.rt.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// checkRedirect follows redirects only with -L, at most --max-redirs. As
// curl does, it sends no Referer (unless -H set one), percent-encodes the
// spaces of a Location, and keeps credentials (Authorization, Cookie, API
// keys: see curl.SecretHeader) for the origin of the URL given (scheme, host,
// port), unless --location-trusted; net/http would send them to another
// port or scheme of the same host, and to subdomains.
func (h *httpFlags) checkRedirect(req *http.Request, via []*http.Request) error {
	if !h.location && !h.trusted {
		return http.ErrUseLastResponse
	}
	if h.maxRedirs >= 0 && len(via) > h.maxRedirs {
		return fmt.Errorf("%w: more than %d (--max-redirs)", curl.ErrTooManyRedirects, h.maxRedirs)
	}
	if scheme := strings.ToLower(req.URL.Scheme); scheme != "http" && scheme != "https" {
		return cli.ExitErrorf(curl.ExitUnsupported, "a redirect to %s: protocol %q not supported (-L follows http:// and https:// only)",
			httpretry.Redact(req.URL), scheme)
	}
	if req.URL.Hostname() == "" {
		return cli.ExitErrorf(curl.ExitURLMalformat, "a redirect to %s: URL rejected: no host", httpretry.Redact(req.URL))
	}
	if p := req.URL.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n > 65535 {
			return cli.ExitErrorf(curl.ExitURLMalformat, "a redirect to %s: URL rejected: port %s is outside 0-65535", httpretry.Redact(req.URL), p)
		}
	}
	req.URL.RawQuery = strings.ReplaceAll(req.URL.RawQuery, " ", "%20")
	if via[0].Header.Get("Referer") == "" {
		req.Header.Del("Referer")
	}
	if !h.trusted && !curl.SameOrigin(via[0].URL, req.URL) {
		for name := range req.Header {
			if curl.SecretHeader(name) {
				req.Header.Del(name)
			}
		}
	}
	return nil
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

// Flags returns the flag set of retry http: every flag Run accepts, as it
// parses them (the manual lists each one).
func Flags() *flag.FlagSet { return newHTTPFlags().fs }
