package curl

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/cmd/retry/internal/policy"
	"github.com/backoffkit/retry/httpretry"
)

// This file holds what retry http needs to read curl's command lines and
// write curl's outputs: combined short flags, request bodies, -w, headers.

// ExpandShortFlags splits combined one-letter flags as curl reads them:
// "-fsSL" is "-f -s -S -L", and "-XPOST", "-sXPOST" or "-d'a=1'" give the
// flag that takes a value the rest of the word, '=' included ("-d=foo"
// sends "=foo", as in curl). "name=value" is read only in "--name=value"
// and in Go's one-dash spelling of a long flag ("-attempts=3"). The values
// of flags are left alone; everything after "--" too. A later letter that
// is no flag is an error naming it in the word as typed ("-Z (in
// -fsSLZ)"); a word whose first letter is none is left for the flag
// package to report ("-nope").
func ExpandShortFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	out := make([]string, 0, len(args))
	takesValue := func(f *flag.Flag) bool {
		b, ok := f.Value.(interface{ IsBoolFlag() bool })
		return !ok || !b.IsBoolFlag()
	}
	// whole passes a word on as the flag package reads it, with the next
	// argument as its value if it needs one.
	whole := func(i int, f *flag.Flag, hasValue bool) int {
		out = append(out, args[i])
		if f != nil && takesValue(f) && !hasValue && i+1 < len(args) {
			i++
			out = append(out, args[i]) // its value, whatever it looks like
		}
		return i
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...), nil
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			out = append(out, a)
			continue
		}
		if strings.HasPrefix(a, "--") {
			name, _, hasValue := strings.Cut(a[2:], "=")
			i = whole(i, fs.Lookup(name), hasValue)
			continue
		}
		if name, _, hasValue := strings.Cut(a[1:], "="); len([]rune(name)) > 1 {
			if f := fs.Lookup(name); f != nil { // Go's -attempts or -attempts=3
				i = whole(i, f, hasValue)
				continue
			}
		}
		// -abc: one-letter flags; one that takes a value takes the rest.
		letters := []rune(a[1:])
		for j, r := range letters {
			f := fs.Lookup(string(r))
			if f == nil {
				if j == 0 { // no flag at all: the flag package reports it
					out = append(out, a)
					break
				}
				return nil, cli.Usagef("flag provided but not defined: -%c (in %s)", r, a)
			}
			out = append(out, "-"+string(r))
			if takesValue(f) {
				if rest := string(letters[j+1:]); rest != "" {
					out = append(out, rest)
				} else if i+1 < len(args) {
					i++
					out = append(out, args[i])
				}
				break
			}
		}
	}
	return out, nil
}

// ReadDataArg returns the data of one -d, --data-binary, --json or
// --data-urlencode: the text itself, or the content of @FILE (@- for
// stdin). -d strips carriage returns and newlines from a file, as curl
// does; --data-binary and --json keep them. A file that cannot be read is
// exit 26, as in curl (which sends an empty body for -d with a warning:
// retry refuses to send what was not meant).
func ReadDataArg(d DataPart) (string, error) {
	if d.Flag == "data-urlencode" {
		return urlEncodeArg(d.Value)
	}
	name, ok := strings.CutPrefix(d.Value, "@")
	if !ok {
		return d.Value, nil
	}
	b, err := readFileArg(name)
	if err != nil {
		return "", cli.ExitErrorf(ExitRead, "%s @%s: cannot read: %v", cli.DashName(d.Flag), name, cli.UnwrapPath(err))
	}
	if d.Flag == "d" || d.Flag == "data" {
		b = bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("\r"), nil), []byte("\n"), nil)
	}
	return string(b), nil
}

// readFileArg reads a FILE named in an argument, "-" for stdin.
func readFileArg(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name)
}

// urlEncodeArg reads one --data-urlencode as curl 7.88 does: "content",
// "=content", "name=content" (the first '=' ends the name), else
// "@file" or "name@file" (the file read whole); the content is
// URL-encoded (see urlEncode), the name sent as given.
func urlEncodeArg(arg string) (string, error) {
	name, content, sep := "", arg, byte(0)
	if i := strings.IndexByte(arg, '='); i >= 0 {
		name, content, sep = arg[:i], arg[i+1:], '='
	} else if i := strings.IndexByte(arg, '@'); i >= 0 {
		name, content, sep = arg[:i], arg[i+1:], '@'
	}
	if sep == '@' {
		b, err := readFileArg(content)
		if err != nil {
			return "", cli.ExitErrorf(ExitRead, "--data-urlencode %s@%s: cannot read: %v", name, content, cli.UnwrapPath(err))
		}
		content = string(b)
	}
	if name == "" {
		return urlEncode(content), nil
	}
	return name + "=" + urlEncode(content), nil
}

// urlEncode percent-encodes s as curl's --data-urlencode: letters, digits
// and "-._~" stay, a space becomes '+', every other byte %XX.
func urlEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
			b.WriteByte(c)
		case c == ' ':
			b.WriteByte('+')
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// MultipartBody builds a multipart/form-data body from -F fields:
// NAME=VALUE, NAME=@FILE (a file part), NAME=<FILE (the file's content as a
// value), each optionally followed by ;type=MIME and, for @FILE,
// ;filename=NAME.
// fileTypes are the Content-Types curl gives a -F file part by the file's
// extension (its own table: the same on every machine, unlike mime's).
var fileTypes = map[string]string{
	".gif": "image/gif", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png",
	".svg": "image/svg+xml", ".txt": "text/plain", ".htm": "text/html", ".html": "text/html",
	".pdf": "application/pdf", ".xml": "application/xml",
}

// FileType is the Content-Type curl gives a -F file named name, "" if its
// table has none.
func FileType(name string) string {
	return fileTypes[strings.ToLower(filepath.Ext(name))]
}

// MultipartBody returns the multipart/form-data body of the -F fields
// (name=value, name=@file, name=<file, with ;type= and ;filename=) and
// its Content-Type.
func MultipartBody(fields []string) ([]byte, string, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, field := range fields {
		name, spec, _ := strings.Cut(field, "=")
		value, params, _ := strings.Cut(spec, ";")
		var ctype, filename string
		for _, p := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			switch k {
			case "type":
				ctype = v
			case "filename":
				filename = v
			case "":
			default:
				return nil, "", cli.Usagef("-F %s: unknown parameter %q (want type= or filename=)", name, k)
			}
		}
		h := textproto.MIMEHeader{}
		var content []byte
		switch {
		case strings.HasPrefix(value, "@"), strings.HasPrefix(value, "<"):
			path := value[1:]
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, "", cli.ExitErrorf(ExitRead, "-F %s: cannot read %s: %v", name, path, cli.UnwrapPath(err))
			}
			content = b
			if value[0] == '@' {
				if ctype == "" { // as curl: by the filename= name, else the file's
					ctype = FileType(filename)
					if ctype == "" {
						ctype = FileType(path)
					}
					if ctype == "" {
						ctype = "application/octet-stream"
					}
				}
				if filename == "" {
					filename = filepath.Base(path)
				}
			}
		default:
			content = []byte(value)
		}
		disp := fmt.Sprintf(`form-data; name="%s"`, escapeQuotes(name))
		if filename != "" {
			disp += fmt.Sprintf(`; filename="%s"`, escapeQuotes(filename))
		}
		h.Set("Content-Disposition", disp)
		if ctype != "" {
			h.Set("Content-Type", ctype)
		}
		part, err := w.CreatePart(h)
		if err != nil {
			return nil, "", err
		}
		part.Write(content)
	}
	if err := w.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), w.FormDataContentType(), nil
}

func escapeQuotes(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// Output is where -o or -D writes: stdout ("" or "-"), or a FILE created
// at the first write (or by close), so that an answer that writes nothing
// (-f on an HTTP error) leaves an existing FILE as it was, as in curl.
// Write errors (the file's creation included) are *WriteError, to tell
// them from errors reading the body.
type Output struct {
	Flag, name string    // "-o", "out.bin"
	W          io.Writer // stdout, or the file once created
	f          *os.File
	// BinaryCheck: stdout is a terminal that was not asked for ("-o -"):
	// refuse output that holds a NUL byte, as curl does.
	BinaryCheck bool
}

// NewOutput returns the output of -o or -D (flag) named name.
func NewOutput(flag, name string, stdout io.Writer) *Output {
	o := &Output{Flag: flag, name: name}
	if name == "" || name == "-" {
		o.W = stdout
	}
	return o
}

func (o *Output) Write(p []byte) (int, error) {
	if o.W == nil {
		if err := o.create(); err != nil {
			return 0, err
		}
	}
	if o.BinaryCheck && bytes.IndexByte(p, 0) >= 0 {
		return 0, &WriteError{errBinaryToTerminal}
	}
	n, err := o.W.Write(p)
	if err != nil {
		err = &WriteError{fmt.Errorf("%s %s: %v", o.Flag, o.displayName(), cli.UnwrapPath(err))}
	}
	return n, err
}

var errBinaryToTerminal = errors.New(`binary output can mess up your terminal; use "-o -" to write it there anyway, or "-o FILE" to save it`)

func (o *Output) displayName() string {
	if o.f == nil && (o.name == "" || o.name == "-") {
		return "(stdout)"
	}
	return o.name
}

func (o *Output) create() error {
	f, err := os.Create(o.name)
	if err != nil {
		return &WriteError{fmt.Errorf("%s %s: %v", o.Flag, o.name, cli.UnwrapPath(err))}
	}
	o.f, o.W = f, f
	return nil
}

// Close closes the file, creating it first (empty) if nothing was written
// and create is set (curl creates FILE for an empty answer).
func (o *Output) Close(create bool) error {
	if o.W == nil && create {
		if err := o.create(); err != nil {
			return err
		}
	}
	if o.f == nil {
		return nil
	}
	f := o.f
	o.f = nil
	if err := f.Close(); err != nil {
		return &WriteError{fmt.Errorf("%s %s: %v", o.Flag, o.name, cli.UnwrapPath(err))}
	}
	return nil
}

// WriteError is a failure to write the output (curl's exit 23).
type WriteError struct{ Err error }

func (e *WriteError) Error() string { return e.Err.Error() }
func (e *WriteError) Unwrap() error { return e.Err }

// CountWriter counts the bytes written through it.
type CountWriter struct {
	W io.Writer
	N *int64
}

func (c CountWriter) Write(p []byte) (int, error) {
	n, err := c.W.Write(p)
	*c.N += int64(n)
	return n, err
}

// WriteHead writes a response's status line and headers as curl -i does:
// "HTTP/1.1 200 OK" (or "HTTP/2 200"), the headers, a blank line (see
// headText).
func WriteHead(w io.Writer, resp *http.Response) error {
	_, err := io.WriteString(w, headText(resp))
	return err
}

// headText is a response's head as retry http writes it: the status line,
// the header of headerOf, a blank line. net/http keeps neither the case
// nor the order of header names (it canonicalises them into a map): they
// come sorted, canonical ("Content-Type"), each name's values in the order
// received.
func headText(resp *http.Response) string {
	var b strings.Builder
	b.WriteString(statusLine(resp) + "\r\n")
	h := headerOf(resp)
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			b.WriteString(k + ": " + v + "\r\n")
		}
	}
	b.WriteString("\r\n")
	return b.String()
}

// headerOf returns resp's header as the server sent it: net/http moves
// Transfer-Encoding out of it (into resp.TransferEncoding), and curl shows
// it ("Transfer-Encoding: chunked").
func headerOf(resp *http.Response) http.Header {
	if len(resp.TransferEncoding) == 0 || resp.Header.Get("Transfer-Encoding") != "" {
		return resp.Header
	}
	h := resp.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h["Transfer-Encoding"] = []string{strings.Join(resp.TransferEncoding, ", ")}
	return h
}

// numHeaders is curl's num_headers: the header lines of resp (nil: 0).
func numHeaders(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	n := 0
	for _, vs := range headerOf(resp) {
		n += len(vs)
	}
	return n
}

func statusLine(resp *http.Response) string {
	if resp.ProtoMajor == 2 {
		return fmt.Sprintf("HTTP/2 %d", resp.StatusCode)
	}
	proto := resp.Proto
	if proto == "" {
		proto = "HTTP/1.1"
	}
	return proto + " " + resp.Status
}

// Decompress returns resp's body decoded from its Content-Encoding
// (--compressed): every coding listed, the last applied first (RFC 9110);
// identity passes. Another coding (br, zstd: curl without them) is an error
// (curl's 61), as is a compressed stream that ends before the body does.
func Decompress(resp *http.Response) (io.Reader, error) {
	var codings []string
	for _, v := range resp.Header.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	raw := &rawBody{r: resp.Body}
	body := bufio.NewReader(raw)
	if _, err := body.Peek(1); err == io.EOF || len(codings) == 0 {
		return body, nil // nothing to decode (a 204, a HEAD)
	}
	var r io.Reader = body
	for i := len(codings) - 1; i >= 0; i-- {
		var err error
		switch codings[i] {
		case "gzip", "x-gzip":
			r, err = gzip.NewReader(r)
		case "deflate": // zlib, or raw deflate from servers that get it wrong
			var head bytes.Buffer
			zr, zerr := zlib.NewReader(io.TeeReader(r, &head))
			if zerr == nil {
				r = zr
			} else {
				r = flate.NewReader(io.MultiReader(&head, r))
			}
		default:
			err = &encodingError{fmt.Sprintf("Content-Encoding %q: retry http decodes gzip and deflate only", codings[i])}
		}
		if err != nil {
			return nil, err
		}
	}
	return &decodedBody{r: r, raw: raw}, nil
}

// rawBody is a response body that remembers whether it ended well.
type rawBody struct {
	r   io.Reader
	eof bool // it returned io.EOF: every byte came
}

func (b *rawBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// decodedBody is a decoded body: a compressed stream cut short inside a
// body that came whole is an encoding error, not a transfer cut short.
type decodedBody struct {
	r   io.Reader
	raw *rawBody
}

func (d *decodedBody) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if errors.Is(err, io.ErrUnexpectedEOF) && d.raw.eof {
		err = &encodingError{"the compressed stream ends before the body does"}
	}
	return n, err
}

// encodingError is a body not in the Content-Encoding it claims.
type encodingError struct{ msg string }

func (e *encodingError) Error() string { return e.msg }

// HopRecorder records the response of each hop (redirects included) that
// the client gets from the retrying transport, for -i, -I and -D. Its
// observe, the transport's observer, holds back each hop's success event:
// the transport sees a hop as a request of its own, and a hop answered with
// a redirect that the client follows is no success of the request. The event
// is logged when the client starts the next hop (as a redirect) or by finish.
//
// Each hop runs a retry loop of its own (--attempts counts per hop), but the
// request has one --deadline: RoundTrip gives each hop what is left of it,
// and the events it logs count their elapsed time from the request's start.
type HopRecorder struct {
	RT           http.RoundTripper
	Log          *policy.EventLog
	Start        time.Time     // when the request began
	Deadline     time.Duration // the policy's Deadline, 0 for none
	DeadlineName string        // it, for messages: "--deadline (1s)"
	Follow       bool          // -L: the client follows redirects
	Wire         *WireStats    // -w's record of the attempts (a hop begins in it)

	URLs    []*url.URL       // the URL of each hop begun
	Cur     *http.Request    // the hop running
	Resps   []*http.Response // the response of each hop that got one
	Offset  time.Duration    // when the current hop began, since start
	pending *retry.Event     // the last hop's success, not yet logged
	hop     int              // the hop of pending: its index in resps
	// BadLocation: the last response is a redirect to follow whose Location
	// does not parse (the client's error then says only "failed to parse").
	BadLocation error
	Refused     bool // the last redirect was taken but could not be followed (its target)
}

// RoundTrip runs one hop. It and observe run on the client's goroutine.
func (h *HopRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	h.flush(false) // a new hop: the last one was a redirect, followed
	h.Offset = time.Since(h.Start)
	if h.Deadline > 0 {
		left := h.Deadline - h.Offset
		if left <= 0 { // not fetched: not the effective URL, nor a redirect followed
			closeRequestBody(req)
			if len(h.URLs) == 0 { // the first hop: there was no redirect
				return nil, cli.ExitErrorf(ExitTimeout, "the %s passed before the request was sent", h.DeadlineName)
			}
			return nil, cli.ExitErrorf(ExitTimeout, "the %s passed before the redirect to %s was followed",
				h.DeadlineName, httpretry.Redact(req.URL))
		}
		req = req.WithContext(httpretry.WithPolicy(req.Context(), retry.Policy{Deadline: left}))
	}
	h.URLs = append(h.URLs, req.URL)
	h.Cur = req
	h.Wire.newHop()
	resp, err := h.RT.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	h.Resps = append(h.Resps, resp)
	if h.Follow && isRedirect(resp.StatusCode) {
		if loc := resp.Header.Get("Location"); loc != "" {
			if _, err := req.URL.Parse(loc); err != nil {
				h.Refused = true
				h.BadLocation = cli.ExitErrorf(ExitURLMalformat, "%s %s: %d with a Location that is not a URL (%q: %s)",
					req.Method, httpretry.Redact(req.URL), resp.StatusCode, cli.RedactRawURL(loc), parseProblem(loc, err))
			}
		}
	}
	return resp, nil
}

// isRedirect reports whether http.Client follows a response with code (and
// a Location).
func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// closeRequestBody closes the body of a request that is not sent, as a
// RoundTripper must.
func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// EffectiveURL is the URL fetched last (curl's url_effective): that of the
// last hop begun, or first if none was.
func (h *HopRecorder) EffectiveURL(first *url.URL) *url.URL {
	if n := len(h.URLs); n > 0 {
		return h.URLs[n-1]
	}
	return first
}

// Observe is the transport's observer: it passes every event but a success on.
func (h *HopRecorder) Observe(_ context.Context, e retry.Event) {
	e.Elapsed += h.Offset
	if e.Kind == retry.EventSuccess {
		h.pending, h.hop = &e, len(h.Resps)
		return
	}
	var ae *httpretry.AttemptError
	if e.Err != nil && h.Cur != nil && !errors.As(e.Err, &ae) {
		// Not the transport's attempt error (a signal's cancel, the
		// context's deadline): say which request it stopped.
		info := Describe(e.Err)
		if errors.Is(e.Err, context.Canceled) {
			info.Error = "interrupted"
		}
		info.Method, info.URL = h.Cur.Method, httpretry.Redact(h.Cur.URL)
		info.What = info.Method + " " + info.URL + ": " + info.Error
		h.Log.Emit(e, info)
		return
	}
	h.Log.Event(e)
}

// Failed logs the success event held back for the last hop when the client
// returned an error: a redirect that was not followed.
func (h *HopRecorder) Failed() { h.flush(false) }

// Answered logs the success event held back for the last hop, the answer
// the client returned, once retry http has its exit status: the request's
// success if it is 0, else nothing (the closing line says what failed: -f
// and an HTTP error, a body cut short).
func (h *HopRecorder) Answered(exit int) {
	if exit != 0 {
		h.pending = nil
		return
	}
	h.flush(true)
}

func (h *HopRecorder) flush(final bool) {
	e := h.pending
	h.pending = nil
	if e == nil || h.hop >= len(h.Resps) { // its hop returned no response
		return
	}
	h.Log.Hop(*e, h.Resps[h.hop], final && h.hop == len(h.Resps)-1)
}

// CloseIdleConnections passes the call on (http.Client calls it).
func (h *HopRecorder) CloseIdleConnections() {
	if c, ok := h.RT.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// VerboseTransport prints each attempt's request and response headers
// (-v), as curl's "> " and "< " lines, secrets redacted.
type VerboseTransport struct {
	RT  http.RoundTripper
	Log *policy.EventLog
}

func (v *VerboseTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	u := *req.URL
	redacted, _ := url.Parse(httpretry.Redact(&u))
	target := u.RequestURI()
	if redacted != nil {
		target = redacted.RequestURI()
	}
	host := req.Host
	if host == "" {
		host = u.Host
	}
	lines := []string{fmt.Sprintf("> %s %s HTTP/1.1", req.Method, target), "> Host: " + host}
	lines = append(lines, headerLines("> ", redactHeaders(req.Header))...)
	v.Log.Verbose("request", append(lines, ">"))
	resp, err := v.RT.RoundTrip(req)
	if err != nil {
		v.Log.Verbose("error", []string{"* " + httpretry.RedactText(RedactURLError(err).Error())})
		return resp, err
	}
	lines = []string{"< " + statusLine(resp)}
	lines = append(lines, headerLines("< ", redactHeaders(headerOf(resp)))...)
	v.Log.Verbose("response", append(lines, "<"))
	return resp, nil
}

func (v *VerboseTransport) CloseIdleConnections() {
	if c, ok := v.RT.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func headerLines(prefix string, h http.Header) []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		for _, v := range h[k] {
			out = append(out, prefix+k+": "+v)
		}
	}
	return out
}

// DataPart is one -d, --data-binary or --json argument.
type DataPart struct {
	Flag, Value string
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

// Describe turns an httpretry attempt error into log fields.
func Describe(err error) policy.AttemptInfo {
	var ae *httpretry.AttemptError
	if !errors.As(err, &ae) {
		msg := RedactURLError(err).Error()
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
