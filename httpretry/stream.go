package httpretry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The bounds of the peek at a stream's first event: the event (in SSE from
// its first data line, in NDJSON its line, in a JSON array its element) must
// begin within the first maxStreamPreamble bytes of the body (what comes
// before it: a byte order mark, SSE comments such as keep-alive pings,
// retry:, id: and event: fields, blank lines, the array's '[') and end
// within maxStreamPeek bytes of its beginning; otherwise the answer is
// handed over as it is. The transport reads at most maxStreamRead bytes.
const (
	maxStreamPeek     = 64 << 10
	maxStreamPreamble = 256 << 10
	maxStreamRead     = maxStreamPreamble + maxStreamPeek
)

// Stream formats whose first event is peeked.
const (
	streamNone  = iota
	streamSSE   // text/event-stream: events end at a blank line
	streamLines // application/x-ndjson: one JSON value per line
	streamArray // application/json that begins with '[': the first element
)

// streamFormat returns the stream format of a response's Content-Type (its
// media type, case-insensitive, parameters ignored; no allocation).
func streamFormat(contentType string) int {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.TrimSpace(mt)
	switch {
	case strings.EqualFold(mt, "text/event-stream"):
		return streamSSE
	case strings.EqualFold(mt, "application/x-ndjson"), strings.EqualFold(mt, "application/jsonl"),
		strings.EqualFold(mt, "application/jsonlines"):
		return streamLines
	case strings.EqualFold(mt, "application/json"):
		return streamArray
	}
	return streamNone
}

// isJSON reports whether a Content-Type names JSON: its media type
// (parameters ignored, compared without regard to case) contains "json",
// as application/json, application/problem+json and application/x-ndjson
// do. It allocates nothing.
func isJSON(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	for i := 0; i+4 <= len(mt); i++ {
		if strings.EqualFold(mt[i:i+4], "json") {
			return true
		}
	}
	return false
}

// firstEvent finds the end of a stream's first event, reading incrementally:
// feed it the bytes read so far; it keeps its place between calls, so that a
// stream trickled byte by byte is scanned once.
type firstEvent struct {
	format int

	pos     int  // the next byte to look at (SSE, NDJSON: the start of the current line)
	scan    int  // SSE, NDJSON: bytes before it hold no line end after pos
	started int  // start of the event (its first line, or its value)
	sawData bool // SSE: the current block has a data field
	dataAt  int  // SSE: where the first data line of the current block begins
	afterCR bool // SSE: the last line ended with a CR: an LF right after it belongs to it
	bomDone bool // a leading UTF-8 byte order mark was looked for (and skipped)

	// array: where the scanner is, and inside the first element
	phase    int // arrayStart, arrayOpen, arrayValue
	depth    int
	inString bool
	escaped  bool
	scalar   bool

	// Results, once done.
	done     bool
	notEvent bool // no event to look at: a JSON answer that is not an array, or "[]"
	end      int  // the end of the event's bytes (exclusive)
}

// Phases of the array scanner.
const (
	arrayStart = iota // before '['
	arrayOpen         // after '[', before the first element
	arrayValue        // inside the first element
)

// feed scans buf (all the bytes read so far; eof says no more will come)
// and reports whether it is done: the first event is complete, or the
// stream proved to have none to look at.
func (f *firstEvent) feed(buf []byte, eof bool) bool {
	if !f.done && !f.bomDone {
		// A UTF-8 byte order mark at the start is not part of the stream
		// (the SSE format says to ignore it; JSON parsers may).
		if len(buf) < len(bom) && !eof && bytes.HasPrefix(bom, buf) {
			return false // maybe the start of one
		}
		f.bomDone = true
		if bytes.HasPrefix(buf, bom) {
			f.pos, f.scan, f.started = len(bom), len(bom), len(bom)
		}
	}
	if !f.done {
		switch f.format {
		case streamSSE:
			f.feedSSE(buf, eof)
		case streamLines:
			f.feedLines(buf, eof)
		case streamArray:
			f.feedArray(buf, eof)
		}
	}
	return f.done
}

// feedSSE: lines end at CR, LF or CRLF; an event is dispatched at a blank
// line when its block had a data field (comments and other blocks are not
// events). A line ends at its CR at once (the blank line that completes an
// event included): an LF that comes next is skipped as the rest of a CRLF.
// Each byte is searched for a line end once, however the stream is split
// into reads.
//
// At the end of the stream (eof) a block with a data line is the event too,
// without its blank line, when the stream ends right after a line end: the
// SSE format would discard it, but the clients of streamed model calls
// (the Gen AI SDKs' scanners) take it, so that a retry would buy the same
// answer again. A stream that ends inside a line has failed.
func (f *firstEvent) feedSSE(buf []byte, eof bool) {
	f.scanSSE(buf)
	if eof && !f.done && f.sawData && f.pos == len(buf) {
		f.done, f.end = true, len(buf)
	}
}

// scanSSE scans the lines of buf (see feedSSE).
func (f *firstEvent) scanSSE(buf []byte) {
	for f.pos < len(buf) {
		if f.afterCR {
			f.afterCR = false
			if buf[f.pos] == '\n' {
				if f.started == f.pos {
					f.started++
				}
				f.pos++
				f.scan = f.pos
				continue
			}
		}
		i := lineEnd(buf[f.scan:])
		if i < 0 {
			f.scan = len(buf)
			return
		}
		end := f.scan + i
		next := end + 1
		if buf[end] == '\r' {
			switch {
			case next == len(buf):
				f.afterCR = true
			case buf[next] == '\n':
				next++
			}
		}
		line := buf[f.pos:end]
		f.pos, f.scan = next, next
		switch {
		case len(line) == 0:
			if f.sawData {
				f.done, f.end = true, next
				return
			}
			f.started = next // a block without data is not an event
		case line[0] == ':': // a comment
		default:
			if name, _, _ := bytes.Cut(line, []byte(":")); string(name) == "data" && !f.sawData {
				f.sawData, f.dataAt = true, end-len(line)
			}
		}
	}
}

// feedLines: the first line that is not blank; at EOF, what is left.
func (f *firstEvent) feedLines(buf []byte, eof bool) {
	for f.pos < len(buf) {
		i := bytes.IndexByte(buf[f.scan:], '\n')
		if i < 0 {
			f.scan = len(buf) // searched: no line end before it
			break
		}
		end := f.scan + i
		if len(bytes.TrimSpace(buf[f.pos:end])) > 0 {
			f.done, f.started, f.end = true, f.pos, end
			return
		}
		f.pos, f.scan = end+1, end+1
	}
	if eof && len(bytes.TrimSpace(buf[f.pos:])) > 0 {
		f.done, f.started, f.end = true, f.pos, len(buf)
	}
}

// feedArray: white space, then '[' (anything else, or the end of the body:
// not a stream), then the first element, scanned as JSON: an object, array
// or string ends at its closing byte, a number or literal at the next
// delimiter. "[]" has no event.
func (f *firstEvent) feedArray(buf []byte, eof bool) {
	for ; f.pos < len(buf); f.pos++ {
		b := buf[f.pos]
		switch f.phase {
		case arrayStart, arrayOpen:
			switch {
			case isJSONSpace(b):
			case f.phase == arrayStart && b == '[':
				f.phase = arrayOpen
			case f.phase == arrayStart, b == ']':
				f.done, f.notEvent = true, true
				return
			default:
				f.phase, f.started = arrayValue, f.pos
				switch b {
				case '{', '[':
					f.depth = 1
				case '"':
					f.inString = true
				default:
					f.scalar = true
				}
			}
		default: // arrayValue
			switch {
			case f.inString:
				switch {
				case f.escaped:
					f.escaped = false
				case b == '\\':
					f.escaped = true
				case b == '"':
					f.inString = false
					if f.depth == 0 {
						f.done, f.end = true, f.pos+1
						return
					}
				}
			case f.scalar:
				if b == ',' || b == ']' || isJSONSpace(b) {
					f.done, f.end = true, f.pos
					return
				}
			case b == '"':
				f.inString = true
			case b == '{' || b == '[':
				f.depth++
			case b == '}' || b == ']':
				if f.depth--; f.depth == 0 {
					f.done, f.end = true, f.pos+1
					return
				}
			}
		}
	}
	switch {
	case !eof:
	case f.phase == arrayStart:
		// Nothing but white space, or nothing at all (an empty answer):
		// not a stream, nothing failed.
		f.done, f.notEvent = true, true
	case f.phase == arrayValue && f.scalar:
		f.done, f.end = true, len(buf)
	}
}

// eventStart returns where the first event begins in buf, the bytes fed so
// far (see maxStreamPreamble): in SSE its first data line (a line still
// being read counts once it begins with "data:"), in NDJSON its line, in a
// JSON array its first element. ok is false while it has not begun; at is
// then where the line being read, or the scan, is.
func (f *firstEvent) eventStart(buf []byte) (at int, ok bool) {
	switch f.format {
	case streamSSE:
		if f.sawData {
			return f.dataAt, true
		}
		return f.pos, bytes.HasPrefix(buf[f.pos:], []byte("data:"))
	case streamLines:
		if f.done {
			return f.started, true
		}
		return f.pos, true
	}
	if f.phase == arrayValue || (f.done && !f.notEvent) {
		return f.started, true
	}
	return f.pos, false
}

// tooLong reports whether the first event is out of the peek's bounds (see
// maxStreamPreamble), buf holding the bytes fed so far: it begins too far
// into the body, or does not end within maxStreamPeek bytes of its
// beginning, or maxStreamRead bytes hold no event.
func (f *firstEvent) tooLong(buf []byte) bool {
	if f.done && f.notEvent {
		return false
	}
	at, ok := f.eventStart(buf)
	switch {
	case at > maxStreamPreamble:
		return true
	case !ok:
		return len(buf) >= maxStreamRead
	case f.done:
		return f.end-at > maxStreamPeek
	}
	return len(buf)-at >= maxStreamPeek
}

// lineEnd returns the index of the first CR or LF in b, -1 if none (two
// vectorised searches beat bytes.IndexAny on long lines).
func lineEnd(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		i = len(b)
	}
	if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
		return j
	}
	if i == len(b) {
		return -1
	}
	return i
}

// bom is the UTF-8 encoding of U+FEFF, the byte order mark.
var bom = []byte{0xEF, 0xBB, 0xBF}

func isJSONSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// data returns the JSON of the first event: the data of an SSE event (its
// data lines joined by newlines, as the SSE format says), the line or the
// element of the others.
func (f *firstEvent) data(buf []byte) []byte {
	ev := buf[f.started:f.end]
	if f.format != streamSSE {
		return ev
	}
	var (
		out   []byte
		lines int
	)
	for len(ev) > 0 {
		i := lineEnd(ev)
		line := ev
		if i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		if string(name) != "data" {
			continue
		}
		value, _ = bytes.CutPrefix(value, []byte(" "))
		switch lines++; lines {
		case 1:
			out = value // one data line, the usual case: no copy
		case 2:
			out = append(append(append([]byte(nil), out...), '\n'), value...)
		default:
			out = append(append(out, '\n'), value...)
		}
	}
	return out
}

// streamErrorEvent is the part of a Google error object that decides a
// retry: {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", ...}}.
type streamErrorEvent struct {
	Error *struct {
		Code    json.RawMessage `json:"code"`
		Status  string          `json:"status"`
		Message string          `json:"message"`
	} `json:"error"`
}

// grpcHTTP maps google.rpc.Code, by number and by name, to the HTTP status
// Google's APIs answer for it (google/rpc/code.proto).
var grpcHTTP = [...]struct {
	name string
	http int
}{
	{"OK", 200}, {"CANCELLED", 499}, {"UNKNOWN", 500}, {"INVALID_ARGUMENT", 400},
	{"DEADLINE_EXCEEDED", 504}, {"NOT_FOUND", 404}, {"ALREADY_EXISTS", 409},
	{"PERMISSION_DENIED", 403}, {"RESOURCE_EXHAUSTED", 429}, {"FAILED_PRECONDITION", 400},
	{"ABORTED", 409}, {"OUT_OF_RANGE", 400}, {"UNIMPLEMENTED", 501}, {"INTERNAL", 500},
	{"UNAVAILABLE", 503}, {"DATA_LOSS", 500}, {"UNAUTHENTICATED", 401},
}

// eventStatus returns the HTTP status an error event stands for, and the
// event's status name and message: its "code" when that is an HTTP status
// (100 to 599, as Google's JSON errors have), else the HTTP status of its
// "code" read as a google.rpc.Code number (0 to 16, as gRPC-gateway errors
// have), else that of its "status" name. ok is false when data is not an
// error object or names no known status.
func eventStatus(data []byte) (code int, status, message string, ok bool) {
	if !bytes.Contains(data, []byte(`"error"`)) {
		return 0, "", "", false // not an error object: no need to decode it
	}
	var ev streamErrorEvent
	if json.Unmarshal(data, &ev) != nil || ev.Error == nil {
		return 0, "", "", false
	}
	status, message = ev.Error.Status, ev.Error.Message
	if n, err := strconv.Atoi(strings.Trim(string(ev.Error.Code), `"`)); err == nil {
		switch {
		case n >= 100 && n <= 599:
			return n, status, message, true
		case n >= 0 && n < len(grpcHTTP):
			if status == "" {
				status = grpcHTTP[n].name
			}
			return grpcHTTP[n].http, status, message, true
		}
	}
	for _, g := range grpcHTTP {
		if g.name == status {
			return g.http, status, message, true
		}
	}
	return 0, status, message, false
}

// streamError is the error of an attempt whose stream began with an error
// event. Its message is redacted.
type streamError struct {
	status  string // the event's status name, if any
	message string
}

func (e *streamError) Error() string {
	msg := "the stream's first event is an error"
	if e.status != "" {
		msg += " " + RedactText(e.status)
	}
	if e.message != "" {
		msg += ": " + RedactText(e.message)
	}
	return msg
}

// beforeFirstEvent wraps the read error of a stream that failed before its
// first event was complete.
type beforeFirstEvent struct{ err error }

func (e *beforeFirstEvent) Error() string {
	return "the stream failed before its first event: " + e.err.Error()
}
func (e *beforeFirstEvent) Unwrap() error { return e.err }

// peekResult is what peekFirstEvent saw.
type peekResult struct {
	prefix []byte // the bytes read, to put back in front of the body
	err    error  // the read error that ended the peek (io.EOF included), to put back after them
	failed bool   // err came before the first event was complete
	long   bool   // the first event is out of the peek's bounds: handed over as it is
	ev     firstEvent
	closed bool // the body was closed because ctx ended
}

// peekBufs holds the scratch buffers of peekFirstEvent: the bytes read are
// copied out at their exact size, so that a stream costs one small
// allocation for them, not a 4 KiB one.
var peekBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// peekFirstEvent reads body until the first event of the stream is complete,
// or proves out of bounds (see maxStreamPreamble), or the body fails or
// ends. If the
// caller's ctx ends or the attempt's deadline dl (zero for none) passes
// first, body is closed, so that a base transport that does not watch them
// cannot hold the attempt past them. (The attempt's context itself is not
// watched: the transport ends it when a body is read to its end.)
func peekFirstEvent(body io.ReadCloser, format int, ctx context.Context, dl time.Time) (r peekResult) {
	r.ev.format = format
	if ctx.Done() != nil || !dl.IsZero() {
		stop := watchBody(body, ctx, dl)
		defer func() { r.closed = stop() }()
	}
	bp := peekBufs.Get().(*[]byte)
	buf := (*bp)[:0]
	defer func() {
		if cap(buf) <= 4<<10 { // keep the pool's buffers small
			*bp = buf[:0]
			peekBufs.Put(bp)
		}
	}()
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow
		}
		n, err := body.Read(buf[len(buf):min(cap(buf), maxStreamRead)])
		buf = buf[:len(buf)+n]
		done := r.ev.feed(buf, err == io.EOF)
		if long := r.ev.tooLong(buf); done || long || err != nil {
			r.prefix = bytes.Clone(buf)
			r.err = err
			r.long = long
			r.failed = err != nil && !done && !long
			return r
		}
	}
}

// peekable reports whether the first event of resp should be peeked: a
// successful streamed answer, not compressed, not declared empty, to a
// request that may be sent again, with peeking on. An application/json
// answer is a stream only to a request that looks like one (see
// streamMethod) or asks for a peek with StreamPeek(ctx, true): other JSON
// answers (an object, a watch that sends nothing for minutes) are handed
// over with their headers. An SSE or NDJSON answer to a GET is peeked only
// when the GET names a streamed call (streamMethod, or alt=sse in its
// query) or asks for a peek: any other GET is a subscription (an
// EventSource, a feed) that may stay quiet for long, and whose caller may
// watch its keep-alive comments: it is handed over with its headers.
func (c *call) peekable(resp *http.Response) int {
	if !c.peek || resp.StatusCode < 200 || resp.StatusCode > 299 ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusResetContent ||
		resp.Body == nil || resp.Body == http.NoBody || resp.ContentLength == 0 ||
		c.req.Method == http.MethodHead || c.n >= c.max || !c.idempotent || !c.replayable() {
		return streamNone
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return streamNone // bytes the scanner cannot read
	}
	f := streamFormat(resp.Header.Get("Content-Type"))
	switch {
	case f == streamNone, c.peekJSON: // c.peekJSON: StreamPeek(ctx, true)
	case f == streamArray:
		if !streamMethod(c.req.URL) {
			return streamNone
		}
	case c.req.Method == "" || c.req.Method == http.MethodGet:
		if !streamMethod(c.req.URL) && !altSSE(c.req.URL) {
			return streamNone
		}
	}
	return f
}

// altSSE reports whether u's query asks for server-sent events, as Google's
// APIs take it: alt=sse.
func altSSE(u *url.URL) bool {
	if u == nil {
		return false
	}
	for q := u.RawQuery; q != ""; {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		if strings.EqualFold(kv, "alt=sse") {
			return true
		}
	}
	return false
}

// streamMethod reports whether u names one of Google's streaming methods:
// the last segment of its path holds ":stream", as in
// /v1beta/models/gemini-2.5-flash:streamGenerateContent.
func streamMethod(u *url.URL) bool {
	if u == nil {
		return false
	}
	p := u.Path
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	return strings.Contains(p, ":stream")
}

// peekStream reads the first event of a streamed answer (see "Streams" in
// the package documentation) and either hands the response over, with the
// bytes read put back in front of its body, or fails the attempt as
// retryable: the first event is an error with a retryable status (the
// event's RetryInfo is the hint), or the body failed before the first event
// was complete. A failed stream is kept, like a retryable status, for the
// caller in case the loop gives up: its body then yields what was read,
// then the error, as it would have without the transport.
func (c *call) peekStream(resp *http.Response, format int, rctx context.Context, u interface{ String() string }) error {
	orig := resp.Body
	r := peekFirstEvent(orig, format, c.ctx, deadline(rctx))
	rest := orig
	done := c.callerDone()
	if r.closed { // closed once, not again
		why := context.DeadlineExceeded // the attempt's, or the caller's
		if c.ctx.Err() != nil {
			why = context.Cause(c.ctx)
		}
		rest = closedBody{err: why}
	}
	resp.Body = keepWriter(orig, &prefixBody{prefix: r.prefix, rc: rest, err: r.err})

	if r.failed {
		if done {
			// The caller's own cancel or deadline: the loop stops. A body
			// the transport closed for it failed for that reason, not the
			// read's ("use of closed network connection").
			resp.Body.Close()
			if r.closed {
				return c.callerErr()
			}
			return r.err
		}
		// A timeout when the body was closed at the attempt's deadline or
		// that deadline has passed: not when the attempt's context ended
		// (the transport ends it itself when the body reaches its end).
		dl := deadline(rctx)
		cl, err := c.classify(r.err, r.closed || (!dl.IsZero() && !time.Now().Before(dl)))
		c.recordAnswer(resp.StatusCode, false)
		if !c.retries(cl) {
			c.resp = resp // as it happened
			return nil
		}
		c.last, c.lastStream = resp, true
		return c.failed(c.attemptError(u, 0, cl.class, &beforeFirstEvent{err}), false, nil)
	}
	var (
		data []byte
		code int
		ok   bool
		st   string
		msg  string
	)
	if r.ev.done && !r.ev.notEvent && !r.long {
		data = r.ev.data(r.prefix)
		code, st, msg, ok = eventStatus(data)
	}
	if !ok || !c.retriesStatus(code) {
		// A good first event, a non-retryable error, an over-long first
		// event, or no stream after all: the caller's.
		c.recordAnswer(resp.StatusCode, false)
		c.resp = resp
		return nil
	}
	c.recordAnswer(code, true)
	c.last, c.lastStream = resp, true
	ae := c.attemptError(u, code, ClassStreamError, &streamError{status: st, message: msg})
	return c.failed(ae, false, func() (time.Duration, string) {
		if d, ok := ParseRetryInfo(data); ok {
			return d, HintRetryInfo
		}
		return 0, ""
	})
}

// retriesStatus reports whether code is one of the policy's retryable
// status codes.
func (c *call) retriesStatus(code int) bool {
	for _, rc := range c.codes {
		if rc == code {
			return true
		}
	}
	return false
}
