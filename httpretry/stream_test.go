package httpretry

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/chaos"
	"github.com/backoffkit/retry/internal/testkit"
)

// TestFirstEventScanner: where the first event of each stream format ends,
// fed at once and byte by byte (the scanner keeps its place between reads).
func TestFirstEventScanner(t *testing.T) {
	tests := []struct {
		name     string
		format   int
		in       string
		eof      bool
		done     bool
		notEvent bool
		data     string // the event's JSON when done
		end      int    // -1: len(in)
		split    int    // where it ends when fed byte by byte, if not at end
	}{
		{"sse LF", streamSSE, "data: {\"a\":1}\n\ndata: {\"b\":2}\n\n", false, true, false, `{"a":1}`, 15, 0},
		// Byte by byte, the event ends at the CR of its blank line: the
		// LF is not there yet, and nothing waits for it.
		{"sse CRLF", streamSSE, "data: {\"a\":1}\r\n\r\ndata: x", false, true, false, `{"a":1}`, 17, 16},
		{"sse CR", streamSSE, "data: {\"a\":1}\r\rdata: x", false, true, false, `{"a":1}`, 15, 0},
		{"sse CR at the end waits", streamSSE, "data: {\"a\":1}\r", false, false, false, "", 0, 0},
		{"sse CR at EOF", streamSSE, "data: {\"a\":1}\r\r", true, true, false, `{"a":1}`, -1, 0},
		{"sse no blank line yet", streamSSE, "data: {\"a\":1}\n", false, false, false, "", 0, 0},
		{"sse comments and a data-less block first", streamSSE, ": keep-alive\n\nevent: ping\n\ndata: {\"a\":1}\n\n", false, true, false, `{"a":1}`, -1, 0},
		{"sse two data lines", streamSSE, "event: x\ndata: [1,\ndata: 2]\nid: 7\n\n", false, true, false, "[1,\n2]", -1, 0},
		{"sse data without space", streamSSE, "data:{\"a\":1}\n\n", false, true, false, `{"a":1}`, -1, 0},
		{"sse field data only as a name", streamSSE, "database: x\n\n", false, false, false, "", 0, 0},
		// At the end of the stream, a block whose data line ended is the
		// event (the Gen AI SDKs take it); a stream that ends inside a
		// line, or before any data, has none.
		{"sse EOF after a data line", streamSSE, "data: {\"a\":1}\n", true, true, false, `{"a":1}`, -1, 0},
		{"sse EOF after a data line's CR", streamSSE, "event: x\rdata: 1\r", true, true, false, "1", -1, 0},
		{"sse EOF after data and a comment", streamSSE, "data: 1\r\ndata: 2\r\n: c\r\n", true, true, false, "1\n2", -1, 0},
		{"sse EOF inside a data line", streamSSE, "data: {\"a\":1}", true, false, false, "", 0, 0},
		{"sse EOF inside a line after data", streamSSE, "data: 1\nid: 7", true, false, false, "", 0, 0},
		{"sse EOF after a comment", streamSSE, ": c\n", true, false, false, "", 0, 0},
		{"sse EOF after a data-less block", streamSSE, "event: x\n\n", true, false, false, "", 0, 0},
		{"ndjson", streamLines, "\n  \n{\"a\":1}\n{\"b\":2}\n", false, true, false, `{"a":1}`, 11, 0},
		{"ndjson incomplete", streamLines, "{\"a\":1", false, false, false, "", 0, 0},
		{"ndjson last line at EOF", streamLines, "{\"a\":1}", true, true, false, `{"a":1}`, -1, 0},
		{"array", streamArray, " [{\"a\":[1,{\"b\":\"}]\\\"\"}]}\n,{\"c\":3}]", false, true, false, `{"a":[1,{"b":"}]\""}]}`, 24, 0},
		{"array incomplete", streamArray, "[{\"a\":\"]}", false, false, false, "", 0, 0},
		{"array of strings", streamArray, "[\"x,]\\\"y\", \"z\"]", false, true, false, `"x,]\"y"`, 9, 0},
		{"array of numbers", streamArray, "[12, 3]", false, true, false, "12", 3, 0},
		{"array of one number at EOF", streamArray, "[12", true, true, false, "12", -1, 0},
		{"empty array", streamArray, " [ ] ", false, true, true, "", 0, 0},
		{"an object is no stream", streamArray, " {\"error\":{\"code\":503}}", false, true, true, "", 0, 0},
		// An empty answer, or only white space, is no stream either: not a
		// stream that failed before its first element.
		{"json empty body", streamArray, "", true, true, true, "", 0, 0},
		{"json white space only", streamArray, " \r\n ", true, true, true, "", 0, 0},
		{"json '[' then the end", streamArray, "[ ", true, false, false, "", 0, 0},
		// A bare CR ends a line at once, also the blank line that completes
		// the event: nothing waits for the next byte.
		{"sse CR completes the event", streamSSE, "data: {\"a\":1}\r\r", false, true, false, `{"a":1}`, -1, 0},
		{"sse CR lines", streamSSE, "event: x\rdata: 1\rdata: 2\r\r", false, true, false, "1\n2", -1, 0},
		{"sse CRLF lines", streamSSE, "data: 1\r\ndata: 2\r\n\r\n", false, true, false, "1\n2", -1, 19},
		{"sse CR block without data, then LF", streamSSE, ": c\r\n\r\ndata: 1\r\n\r\n", false, true, false, "1", -1, 17},
		// A UTF-8 byte order mark at the start is skipped (the SSE format
		// says to ignore it); only at the start.
		{"sse BOM", streamSSE, "\ufeffdata: {\"a\":1}\n\n", false, true, false, `{"a":1}`, -1, 0},
		{"sse BOM only at the start", streamSSE, "data: 1\n\n", false, true, false, "1", -1, 0},
		{"sse BOM alone", streamSSE, "\ufeff", true, false, false, "", 0, 0},
		{"sse BOM then CR", streamSSE, "\ufeff: c\r\rdata: 2\r\r", false, true, false, "2", -1, 0},
		{"ndjson BOM", streamLines, "\ufeff{\"a\":1}\n", false, true, false, `{"a":1}`, 10, 0},
		{"json BOM", streamArray, "\ufeff[{\"a\":1}]", false, true, false, `{"a":1}`, 11, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			end := tt.end
			if end == -1 {
				end = len(tt.in)
			}
			check := func(how string, f *firstEvent) {
				t.Helper()
				end := end
				if how == "byte by byte" && tt.split != 0 {
					end = tt.split
				}
				if f.done != tt.done || f.notEvent != tt.notEvent {
					t.Fatalf("%s: done %v notEvent %v, want %v %v", how, f.done, f.notEvent, tt.done, tt.notEvent)
				}
				if tt.done && !tt.notEvent {
					if f.end != end {
						t.Errorf("%s: event ends at %d, want %d", how, f.end, end)
					}
					if d := f.data([]byte(tt.in)); string(d) != tt.data {
						t.Errorf("%s: data %q, want %q", how, d, tt.data)
					}
				}
			}
			f := &firstEvent{format: tt.format}
			f.feed([]byte(tt.in), tt.eof)
			check("at once", f)
			g := &firstEvent{format: tt.format}
			for i := min(1, len(tt.in)); i <= len(tt.in) && !g.done; i++ {
				g.feed([]byte(tt.in[:i]), tt.eof && i == len(tt.in))
			}
			check("byte by byte", g)
		})
	}
}

// TestEventStatus: which first events stand for which status.
func TestEventStatus(t *testing.T) {
	spec, err := os.ReadFile("testdata/google-error-429.json")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		data   string
		code   int
		status string
		ok     bool
	}{
		{"Google's 429 (the spec's body)", string(spec), 429, "RESOURCE_EXHAUSTED", true},
		{"503 UNAVAILABLE", `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`, 503, "UNAVAILABLE", true},
		{"gRPC code number 8", `{"error":{"code":8,"message":"quota"}}`, 429, "RESOURCE_EXHAUSTED", true},
		{"gRPC code number 14", `{"error":{"code":14}}`, 503, "UNAVAILABLE", true},
		{"status name only", `{"error":{"status":"UNAVAILABLE"}}`, 503, "UNAVAILABLE", true},
		{"code as a string", `{"error":{"code":"429"}}`, 429, "", true},
		{"400 INVALID_ARGUMENT", `{"error":{"code":400,"status":"INVALID_ARGUMENT"}}`, 400, "INVALID_ARGUMENT", true},
		{"unknown status name", `{"error":{"status":"MAYBE_LATER"}}`, 0, "MAYBE_LATER", false},
		{"code out of range", `{"error":{"code":9000}}`, 0, "", false},
		{"a normal chunk", `{"candidates":[{"content":{"parts":[{"text":"hi"}]}}]}`, 0, "", false},
		{"error not an object", `{"error":"boom"}`, 0, "", false},
		{"not JSON", `[DONE]`, 0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, status, _, ok := eventStatus([]byte(tt.data))
			if code != tt.code || status != tt.status || ok != tt.ok {
				t.Fatalf("eventStatus = %d %q %v, want %d %q %v", code, status, ok, tt.code, tt.status, tt.ok)
			}
		})
	}
}

// streamReply returns a response of a streamed answer whose body yields the
// chunks (one per Read), then err (io.EOF if nil).
func streamReply(ct string, err error, chunks ...string) func(*http.Request) (*http.Response, error) {
	return func(r *http.Request) (*http.Response, error) {
		resp := response(r, 200, "", "Content-Type", ct)
		var rs []io.Reader
		for _, c := range chunks {
			rs = append(rs, strings.NewReader(c))
		}
		if err != nil {
			rs = append(rs, iotest.ErrReader(err))
		}
		resp.Body, resp.ContentLength = io.NopCloser(io.MultiReader(rs...)), -1
		return resp, nil
	}
}

// sseOf frames JSON events as Gemini's alt=sse stream does.
func sseOf(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: " + e + "\r\n\r\n")
	}
	return b.String()
}

const (
	chunk1    = `{"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"}}]}`
	chunk2    = `{"candidates":[{"content":{"parts":[{"text":"lo."}],"role":"model"},"finishReason":"STOP"}]}`
	quota429  = `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"25s"}]}}`
	invalid   = `{"error":{"code":400,"message":"Invalid argument.","status":"INVALID_ARGUMENT"}}`
	ctSSE     = "text/event-stream"
	ctNDJSON  = "application/x-ndjson"
	ctJSON    = "application/json; charset=UTF-8"
	streamURL = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=SECRET"
)

// resetErr is a connection reset while reading a body.
var resetErr error = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}

// TestStreamFirstEvent: the transport's decision for the first event of a
// streamed answer to a request it may repeat (a POST marked Idempotent, as
// for generateContent), in virtual time: what the caller gets (byte for
// byte), how many attempts, the wait (a RetryInfo hint in the error event is
// honoured), and the retry's class.
func TestStreamFirstEvent(t *testing.T) {
	good := sseOf(chunk1, chunk2)
	tests := []struct {
		name    string
		first   func(*http.Request) (*http.Response, error)
		want    string        // the body the caller reads
		wantErr bool          // ... and then a read error
		hits    int           // attempts
		wait    time.Duration // between the attempts
		class   string        // of the retry
		status  int           // of the retry's AttemptError
		hint    string        // its HintSource
	}{
		{name: "good stream", first: streamReply(ctSSE, nil, good), want: good, hits: 1},
		{name: "good stream in tiny reads", first: streamReply(ctSSE, nil, strings.Split(good, "")...), want: good, hits: 1},
		{name: "quota error first, hinted", first: streamReply(ctSSE, nil, sseOf(quota429)), want: good, hits: 2, wait: 25 * time.Second,
			class: ClassStreamError, status: 429, hint: HintRetryInfo},
		{name: "UNAVAILABLE first, no hint", first: streamReply(ctSSE, nil, sseOf(`{"error":{"code":503,"status":"UNAVAILABLE"}}`)), want: good, hits: 2,
			wait: time.Second, class: ClassStreamError, status: 503},
		{name: "reset before the first event", first: streamReply(ctSSE, resetErr, "data: {\"candi"), want: good, hits: 2,
			wait: time.Second, class: ClassReset},
		{name: "EOF inside the first data line", first: streamReply(ctSSE, nil, "data: {\"candidates\":[]}"), want: good, hits: 2,
			wait: time.Second, class: ClassEOF},
		// A data line ended, then the end of the stream without the blank
		// line: the first event, the caller's answer (as the Gen AI SDKs
		// read it), still checked for an error.
		{name: "EOF after a data line", first: streamReply(ctSSE, nil, "data: {\"candidates\":[]}\r\n"), want: "data: {\"candidates\":[]}\r\n", hits: 1},
		{name: "quota error then EOF without the blank line", first: streamReply(ctSSE, nil, "data: "+quota429+"\n"), want: good, hits: 2,
			wait: 25 * time.Second, class: ClassStreamError, status: 429, hint: HintRetryInfo},
		{name: "empty stream", first: streamReply(ctSSE, nil), want: good, hits: 2, wait: time.Second, class: ClassEOF},
		{name: "reset after the first event", first: streamReply(ctSSE, resetErr, sseOf(chunk1), "data: {\"cand"),
			want: sseOf(chunk1) + "data: {\"cand", wantErr: true, hits: 1},
		{name: "error after the first event", first: streamReply(ctSSE, nil, sseOf(chunk1, quota429)), want: sseOf(chunk1, quota429), hits: 1},
		{name: "non-retryable error first", first: streamReply(ctSSE, nil, sseOf(invalid)), want: sseOf(invalid), hits: 1},
		{name: "over-long first event", first: streamReply(ctSSE, nil, "data: "+strings.Repeat("x", 70<<10)+"\r\n\r\n"),
			want: "data: " + strings.Repeat("x", 70<<10) + "\r\n\r\n", hits: 1},
		{name: "quota error first after a byte order mark", first: streamReply(ctSSE, nil, "\ufeff"+sseOf(quota429)), want: good, hits: 2,
			wait: 25 * time.Second, class: ClassStreamError, status: 429, hint: HintRetryInfo},
		{name: "quota error first, bare CR line ends", first: streamReply(ctSSE, nil, "data: "+quota429+"\r\r"), want: good, hits: 2,
			wait: 25 * time.Second, class: ClassStreamError, status: 429, hint: HintRetryInfo},
		{name: "ndjson quota error first", first: streamReply(ctNDJSON, nil, quota429+"\n"), want: good, hits: 2, wait: 25 * time.Second,
			class: ClassStreamError, status: 429, hint: HintRetryInfo},
		{name: "json array quota error first", first: streamReply(ctJSON, nil, "[", quota429[:50], quota429[50:], "]"), want: good, hits: 2,
			wait: 25 * time.Second, class: ClassStreamError, status: 429, hint: HintRetryInfo},
		{name: "json array good", first: streamReply(ctJSON, nil, "["+chunk1+",\r\n"+chunk2+"]"), want: "[" + chunk1 + ",\r\n" + chunk2 + "]", hits: 1},
		{name: "json object is not a stream", first: streamReply(ctJSON, nil, quota429), want: quota429, hits: 1},
		{name: "json array reset before its first element", first: streamReply(ctJSON, resetErr, "[{\"a\":"), want: good, hits: 2,
			wait: time.Second, class: ClassReset},
		{name: "plain text is not a stream", first: streamReply("text/plain", nil, "data: x\n\n"), want: "data: x\n\n", hits: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls []time.Time
				ev := newEvents()
				p := retry.Policy{Jitter: retry.Zero, Observer: ev.Observe}
				rt := NewTransport(sequence(&calls, tt.first, streamReply(ctSSE, nil, good)), p)
				req, _ := http.NewRequestWithContext(Idempotent(context.Background()), http.MethodPost, streamURL, strings.NewReader(`{"contents":[]}`))
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != tt.want || (err != nil) != tt.wantErr {
					t.Fatalf("the caller read %d bytes %.80q (err %v), want %d bytes %.80q (error: %v)", len(b), b, err, len(tt.want), tt.want, tt.wantErr)
				}
				if len(calls) != tt.hits {
					t.Fatalf("%d attempts, want %d", len(calls), tt.hits)
				}
				if tt.hits < 2 {
					if r := ev.Of(retry.EventRetry); len(r) != 0 {
						t.Fatalf("retries %+v, want none", r)
					}
					return
				}
				if w := calls[1].Sub(calls[0]); w != tt.wait {
					t.Errorf("waited %v, want %v", w, tt.wait)
				}
				_, ae := onlyRetry(t, ev)
				if ae.Class != tt.class || ae.Status != tt.status || ae.HintSource != tt.hint {
					t.Errorf("AttemptError class %q status %d hint %q, want %q %d %q", ae.Class, ae.Status, ae.HintSource, tt.class, tt.status, tt.hint)
				}
				if strings.Contains(ae.Error(), "SECRET") {
					t.Errorf("secret in %q", ae.Error())
				}
			})
		})
	}
}

// TestStreamNotPeeked: the first event is handed over as it came, without
// peeking, when no retry could follow or peeking is off.
func TestStreamNotPeeked(t *testing.T) {
	errFirst := sseOf(quota429)
	tests := []struct {
		name   string
		ctx    func(context.Context) context.Context
		method string
		opts   []Option
		p      retry.Policy
		header []string // response header pairs added
	}{
		{name: "POST without a key, Google's rule off", method: http.MethodPost, opts: []Option{WithGoogleReadOnly(false)}},
		{name: "last attempt", method: http.MethodGet, p: retry.Policy{Attempts: 1}},
		{name: "WithStreamPeek(false)", method: http.MethodGet, opts: []Option{WithStreamPeek(false)}},
		{name: "StreamPeek(ctx, false)", method: http.MethodGet, ctx: func(c context.Context) context.Context { return StreamPeek(c, false) }},
		{name: "NotIdempotent", method: http.MethodGet, ctx: NotIdempotent},
		{name: "compressed", method: http.MethodGet, header: []string{"Content-Encoding", "gzip"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls []time.Time
				body := errFirst
				if len(tt.header) > 0 {
					var z bytes.Buffer
					zw := gzip.NewWriter(&z)
					io.WriteString(zw, errFirst)
					zw.Close()
					body = z.String()
				}
				first := func(r *http.Request) (*http.Response, error) {
					resp, _ := streamReply(ctSSE, nil, body)(r)
					for i := 0; i+1 < len(tt.header); i += 2 {
						resp.Header.Set(tt.header[i], tt.header[i+1])
					}
					return resp, nil
				}
				p := tt.p
				p.Jitter = retry.Zero
				rt := NewTransport(sequence(&calls, first, streamReply(ctSSE, nil, sseOf(chunk1))), p, tt.opts...)
				ctx := context.Background()
				if tt.ctx != nil {
					ctx = tt.ctx(ctx)
				}
				req, _ := http.NewRequestWithContext(ctx, tt.method, streamURL, nil)
				start := time.Now()
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != body || len(calls) != 1 || time.Since(start) != 0 {
					t.Fatalf("got %.60q after %d attempts, %v; want the first answer as it came, at once", b, len(calls), time.Since(start))
				}
				if _, ok := resp.Body.(*prefixBody); ok {
					t.Fatal("the body was peeked")
				}
			})
		})
	}
	// And StreamPeek(ctx, true) turns it back on for one request.
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Time
		rt := NewTransport(sequence(&calls, streamReply(ctSSE, nil, errFirst), streamReply(ctSSE, nil, sseOf(chunk1))),
			retry.Policy{Jitter: retry.Zero}, WithStreamPeek(false))
		req, _ := http.NewRequestWithContext(StreamPeek(context.Background(), true), http.MethodGet, streamURL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if b := readAll(t, resp); b != sseOf(chunk1) || len(calls) != 2 {
			t.Fatalf("got %q after %d attempts, want the second stream", b, len(calls))
		}
	})
}

// pipeTransport returns a transport (of retry.Policy{} and opts) whose base
// answers 200 with the header kv and, of unknown length, the body written
// to pw. Every attempt shares the one body.
func pipeTransport(kv []string, opts ...Option) (*Transport, *io.PipeWriter) {
	pr, pw := io.Pipe()
	return NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
		resp := response(r, 200, "", kv...)
		resp.Body, resp.ContentLength = pr, -1
		return resp, nil
	}), retry.Policy{}, opts...), pw
}

// TestStreamNoAddedLatency: the caller gets the response, and can read the
// first event, as soon as the first event is complete, not later; the rest
// of the stream flows as it comes.
func TestStreamNoAddedLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, pw := pipeTransport([]string{"Content-Type", ctSSE})
		go func() {
			time.Sleep(2 * time.Second) // the model thinks
			io.WriteString(pw, "data: "+chunk1[:20])
			time.Sleep(time.Second)
			io.WriteString(pw, chunk1[20:]+"\r\n\r\n")
			time.Sleep(10 * time.Second)
			io.WriteString(pw, sseOf(chunk2))
			pw.Close()
		}()
		start := time.Now()
		req, _ := http.NewRequest(http.MethodGet, streamURL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if at := time.Since(start); at != 3*time.Second {
			t.Fatalf("the response came at %v, want 3s (when its first event was complete)", at)
		}
		first := make([]byte, len(sseOf(chunk1)))
		if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != sseOf(chunk1) || time.Since(start) != 3*time.Second {
			t.Fatalf("first event %q (%v) at %v", first, err, time.Since(start))
		}
		rest, err := io.ReadAll(resp.Body)
		if err != nil || string(rest) != sseOf(chunk2) || time.Since(start) != 13*time.Second {
			t.Fatalf("rest %q (%v) at %v", rest, err, time.Since(start))
		}
		resp.Body.Close()
	})
}

// TestStreamStallPastAttemptTimeout: a first event that does not come within
// the attempt timeout fails the attempt (retried); one that comes in time is
// delivered. The chaos server's slow-first-event fault, over a pipe.
func TestStreamStallPastAttemptTimeout(t *testing.T) {
	for _, slow := range []time.Duration{5 * time.Second, 20 * time.Second} {
		t.Run(slow.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, base := ChaosOnPipe(t, chaos.Config{StallMax: slow, Decide: inTurn(chaos.StreamSlowFirst, chaos.None)}, 2)
				ev := newEvents()
				rt := NewTransport(base, retry.Policy{Jitter: retry.Zero, Observer: ev.Observe}, WithAttemptTimeout(10*time.Second))
				req, _ := http.NewRequest(http.MethodGet, "http://chaos/v1/m:streamGenerateContent?alt=sse", nil)
				req.Header.Set(chaos.HeaderID, "s")
				req.Header.Set(chaos.HeaderStream, chaos.StreamSSE)
				start := time.Now()
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				res, err := chaos.ReadStream(resp)
				if err != nil || res.Err != nil || len(res.Seqs) != 10 {
					t.Fatalf("stream %+v, %v", res, err)
				}
				took := time.Since(start)
				if slow < 10*time.Second {
					if s.Hits("s") != 1 || took != slow {
						t.Fatalf("%d attempts in %v, want 1 in %v", s.Hits("s"), took, slow)
					}
					return
				}
				var ae *AttemptError
				r := ev.Of(retry.EventRetry)
				if s.Hits("s") != 2 || took != 11*time.Second || len(r) != 1 || !errors.As(r[0].Err, &ae) || ae.Class != ClassTimeout {
					t.Fatalf("%d attempts in %v, retries %+v; want 2 in 11s after a timeout", s.Hits("s"), took, r)
				}
			})
		})
	}
}

// TestStreamGiveUpReturnsTheStream: when the loop gives up after a stream
// error (the hint would pass the deadline), the caller gets that response,
// its body as the server sent it.
func TestStreamGiveUpReturnsTheStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Time
		ev := newEvents()
		rt := NewTransport(sequence(&calls, streamReply(ctSSE, nil, sseOf(quota429))),
			retry.Policy{Deadline: 10 * time.Second, Observer: ev.Observe})
		req, _ := http.NewRequest(http.MethodGet, streamURL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if b := readAll(t, resp); b != sseOf(quota429) || len(calls) != 1 {
			t.Fatalf("got %q after %d attempts", b, len(calls))
		}
		if e := ev.Last(); e.Kind != retry.EventGiveUp || e.Reason != retry.ReasonDeadline {
			t.Fatalf("last event %+v", e)
		}
	})
}

// TestStreamCallerCancelDuringPeek: the caller's cancellation while the
// first event is awaited ends the call with the context's error at once,
// and the body is closed.
func TestStreamCallerCancelDuringPeek(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBlockingBody()
		rt := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
			resp := response(r, 200, "", "Content-Type", ctSSE)
			resp.Body, resp.ContentLength = b, -1
			return resp, nil
		}), retry.Policy{})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(4*time.Second, cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, streamURL, nil)
		start := time.Now()
		_, err := rt.RoundTrip(req)
		if !errors.Is(err, context.Canceled) || time.Since(start) != 4*time.Second || b.n.Load() == 0 {
			t.Fatalf("err %v after %v, body closed %d times", err, time.Since(start), b.n.Load())
		}
	})
}

// TestStreamEndpointMoves: a quota error event is an overload signal like a
// 429 status: with WithEndpoints the retry moves to the next endpoint.
func TestStreamEndpointMoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hosts []string
		var n atomic.Int32
		rt := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
			hosts = append(hosts, r.URL.Host)
			if n.Add(1) == 1 {
				return streamReply(ctSSE, nil, sseOf(quota429))(r)
			}
			return streamReply(ctSSE, nil, sseOf(chunk1))(r)
		}), retry.Policy{MaxRetryAfter: retry.Zero, Jitter: retry.Zero},
			WithEndpoints([]string{"https://us-central1.example.com", "https://global.example.com"}, time.Minute))
		resp := get(t, rt, "https://x/v1/m:streamGenerateContent?alt=sse")
		readAll(t, resp)
		if strings.Join(hosts, ",") != "us-central1.example.com,global.example.com" {
			t.Fatalf("hosts %v, want the retry on the next endpoint", hosts)
		}
	})
}

// TestStreamErrorsCoolEndpointDown: two quota error events in a row from
// one endpoint are two overload signals, like two 429s: it cools down.
func TestStreamErrorsCoolEndpointDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hosts []string
		rt := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
			hosts = append(hosts, r.URL.Host)
			if r.URL.Host == "a.example.com" {
				return streamReply(ctSSE, nil, sseOf(quota429))(r)
			}
			return streamReply(ctSSE, nil, sseOf(chunk1))(r)
		}), retry.Policy{MaxRetryAfter: retry.Zero, Jitter: retry.Zero},
			WithEndpoints([]string{"https://a.example.com", "https://b.example.com"}, time.Hour))
		for range 3 {
			readAll(t, get(t, rt, "https://x/v1/m:streamGenerateContent?alt=sse"))
		}
		// a (error), b; a (error: the second in a row, a cools down), b; then b only.
		if got := strings.Join(hosts, ","); got != "a.example.com,b.example.com,a.example.com,b.example.com,b.example.com" {
			t.Fatalf("hosts %s", got)
		}
	})
}

// TestStreamStallCustomTransport: a base RoundTripper whose body ignores
// the request's context: a first event that never comes is still cut at the
// attempt's timeout (the body closed), and the attempt retried as a timeout.
func TestStreamStallCustomTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stalled := newBlockingBody()
		var calls []time.Time
		ev := newEvents()
		rt := NewTransport(sequence(&calls,
			func(r *http.Request) (*http.Response, error) {
				resp := response(r, 200, "", "Content-Type", ctSSE)
				resp.Body, resp.ContentLength = stalled, -1
				return resp, nil
			},
			streamReply(ctSSE, nil, sseOf(chunk1))), retry.Policy{Jitter: retry.Zero, Observer: ev.Observe}, WithAttemptTimeout(5*time.Second))
		resp := get(t, rt, streamURL)
		if b := readAll(t, resp); b != sseOf(chunk1) || len(calls) != 2 || calls[1].Sub(calls[0]) != 6*time.Second {
			t.Fatalf("got %q after %d attempts", b, len(calls))
		}
		var ae *AttemptError
		if r := ev.Of(retry.EventRetry); len(r) != 1 || !errors.As(r[0].Err, &ae) || ae.Class != ClassTimeout || stalled.n.Load() != 1 {
			t.Fatalf("retries %+v, body closed %d times; want one timeout, closed once", r, stalled.n.Load())
		}
	})
}

// TestFirstEventScansEachByteOnce: the SSE and NDJSON scanners search each
// byte for a line end once, however the stream is split into reads, so
// that a first event trickled byte by byte costs linear time (see
// BenchmarkFirstEventTrickle), not quadratic. The probe: between two
// feeds, the bytes already searched are overwritten with a complete event;
// a scanner that searched them again would report it.
func TestFirstEventScansEachByteOnce(t *testing.T) {
	for _, tc := range []struct {
		format int
		probe  string
	}{
		{streamSSE, "data: 1\n\n"},
		{streamSSE, "data: 1\r\r"},
		{streamLines, "{}\n"},
	} {
		f := &firstEvent{format: tc.format}
		buf := []byte("data: {\"text\":\"" + strings.Repeat("x", 100))
		if f.feed(buf, false) {
			t.Fatal("done before a line end")
		}
		copy(buf, tc.probe)
		if f.feed(append(buf, `yz`...), false) {
			t.Errorf("format %d: bytes searched before were searched again (%q found)", tc.format, tc.probe)
		}
	}
}

// TestStreamHandedOverAtOnce: the caller gets a stream as soon as its
// first event is complete, with bare CR line ends too (the CR that ends
// the blank line completes the event: nothing waits for the next byte),
// and a UTF-8 byte order mark in front.
func TestStreamHandedOverAtOnce(t *testing.T) {
	for _, first := range []string{
		"data: {\"a\":1}\n\n",
		"data: {\"a\":1}\r\n\r\n",
		"data: {\"a\":1}\r\r",
		"\ufeffdata: {\"a\":1}\r\r",
	} {
		synctest.Test(t, func(t *testing.T) {
			rt, pw := pipeTransport([]string{"Content-Type", ctSSE})
			go func() {
				io.WriteString(pw, first)
				time.Sleep(10 * time.Second)
				io.WriteString(pw, "data: {\"b\":2}\n\n")
				pw.Close()
			}()
			start := time.Now()
			resp := get(t, rt, streamURL)
			if at := time.Since(start); at != 0 {
				t.Errorf("%q: the response came after %v, want at once", first, at)
			}
			if b := readAll(t, resp); b != first+"data: {\"b\":2}\n\n" {
				t.Errorf("the caller read %q", b)
			}
		})
	}
}

// TestStreamEmptyAnswer: a 2xx streamed answer with an empty body (a
// Content-Length of 0, HTTP/2's empty body, a chunked body without a byte)
// is handed over as it is, at the first attempt, with an attempt timeout
// or a deadline too: an empty JSON answer is not a stream that failed.
// http.NoBody stays http.NoBody, so that the caller can tell.
func TestStreamEmptyAnswer(t *testing.T) {
	bodies := []struct {
		name string
		ct   string
		make func(*http.Response)
	}{
		{"json, Content-Length 0 (http.NoBody)", ctJSON, func(r *http.Response) { r.Body, r.ContentLength = http.NoBody, 0 }},
		{"json, HTTP/2 empty body", ctJSON, func(r *http.Response) {
			r.Body, r.ContentLength, r.ProtoMajor = io.NopCloser(bytes.NewReader(nil)), 0, 2
		}},
		{"json, chunked, empty", ctJSON, func(r *http.Response) { r.Body, r.ContentLength = io.NopCloser(strings.NewReader("")), -1 }},
		{"json, chunked, white space", ctJSON, func(r *http.Response) { r.Body, r.ContentLength = io.NopCloser(strings.NewReader("\r\n")), -1 }},
		{"sse, Content-Length 0 (http.NoBody)", ctSSE, func(r *http.Response) { r.Body, r.ContentLength = http.NoBody, 0 }},
	}
	for _, b := range bodies {
		for _, pc := range timeoutPolicies {
			t.Run(b.name+"/"+pc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var calls []time.Time
					rt := NewTransport(sequence(&calls, func(r *http.Request) (*http.Response, error) {
						resp := response(r, 200, "", "Content-Type", b.ct)
						b.make(resp)
						return resp, nil
					}), pc.p, pc.opts...)
					start := time.Now()
					resp := get(t, rt, streamURL)
					noBody := resp.Body == http.NoBody
					if body := readAll(t, resp); body != "" && body != "\r\n" || len(calls) != 1 || time.Since(start) != 0 {
						t.Fatalf("got %d %q after %d attempts in %v, want the empty answer at once", resp.StatusCode, body, len(calls), time.Since(start))
					}
					if strings.Contains(b.name, "http.NoBody") && !noBody {
						t.Errorf("resp.Body is a %T, want http.NoBody", resp.Body)
					}
				})
			})
		}
	}
}

// TestStreamEmptyAnswerLoopback: the same over real connections: net/http's
// empty bodies for HTTP/1.1 (Content-Length: 0, and chunked) and HTTP/2.
func TestStreamEmptyAnswerLoopback(t *testing.T) {
	for _, tc := range []struct {
		name    string
		h2      bool
		chunked bool
	}{{"HTTP/1.1 Content-Length 0", false, false}, {"HTTP/1.1 chunked", false, true}, {"HTTP/2", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int32
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(200)
				if tc.chunked {
					w.(http.Flusher).Flush()
				}
			}))
			testkit.Start(t, srv, tc.h2)
			rt := NewTransport(srv.Client().Transport, fast, WithAttemptTimeout(time.Minute))
			resp := get(t, rt, srv.URL+"/v1/models/m:streamGenerateContent")
			if b := readAll(t, resp); b != "" || hits.Load() != 1 || resp.StatusCode != 200 {
				t.Fatalf("%s: got %d %q after %d requests, want the empty 200 after 1", resp.Proto, resp.StatusCode, b, hits.Load())
			}
		})
	}
}

// TestJSONPeekedOnlyForStreams: an application/json answer is peeked only
// when the request looks like a stream (a Google streaming method, the
// path's last segment holding ":stream") or asks for it with
// StreamPeek(ctx, true); any other JSON answer (an object, a watch that
// sends nothing for a while) is handed over with its headers. SSE and
// NDJSON say they are streams by their type: peeked whatever the path for
// a POST (a call); for a GET only when it names a streamed call (":stream",
// alt=sse) or asks for it, any other GET being a subscription that may
// stay quiet for long (review 3, finding 4: the two rows "GET plain path"
// were peeked before).
func TestJSONPeekedOnlyForStreams(t *testing.T) {
	idem := func(c context.Context) context.Context { return Idempotent(c) }
	for _, tc := range []struct {
		name   string
		url    string
		ct     string
		method string // GET if empty
		ctx    func(context.Context) context.Context
		opts   []Option
		peeked bool
	}{
		{name: "json, plain path", url: "https://example.com/v1/watch", ct: ctJSON},
		{name: "json, generateContent", url: "https://example.com/v1/models/m:generateContent", ct: ctJSON},
		{name: "json, plain path, WithStreamPeek(true)", url: "https://example.com/v1/watch", ct: ctJSON, opts: []Option{WithStreamPeek(true)}},
		{name: "json, streamGenerateContent", url: "https://example.com/v1beta/models/m:streamGenerateContent?alt=json", ct: ctJSON, peeked: true},
		{name: "json, streamRawPredict", url: "https://example.com/v1/projects/p/endpoints/e:streamRawPredict", ct: ctJSON, peeked: true},
		{name: "json, plain path, StreamPeek(ctx, true)", url: "https://example.com/v1/watch", ct: ctJSON,
			ctx: func(c context.Context) context.Context { return StreamPeek(c, true) }, peeked: true},
		{name: "json, streamGenerateContent, StreamPeek(ctx, false)", url: "https://example.com/v1/models/m:streamGenerateContent", ct: ctJSON,
			ctx: func(c context.Context) context.Context { return StreamPeek(c, false) }},
		{name: "sse, GET plain path", url: "https://example.com/v1/events", ct: ctSSE},
		{name: "ndjson, GET plain path", url: "https://example.com/v1/events", ct: ctNDJSON},
		{name: "sse, GET plain path, alt=json", url: "https://example.com/v1/events?alt=json", ct: ctSSE},
		{name: "sse, GET plain path, alt=sse", url: "https://example.com/v1/events?x=1&ALT=SSE", ct: ctSSE, peeked: true},
		{name: "sse, GET streamGenerateContent", url: streamURL, ct: ctSSE, peeked: true},
		{name: "ndjson, GET streamRawPredict", url: "https://example.com/v1/projects/p/endpoints/e:streamRawPredict", ct: ctNDJSON, peeked: true},
		{name: "sse, GET plain path, StreamPeek(ctx, true)", url: "https://example.com/v1/events", ct: ctSSE,
			ctx: func(c context.Context) context.Context { return StreamPeek(c, true) }, peeked: true},
		{name: "sse, POST plain path", url: "https://example.com/v1/chat/completions", ct: ctSSE, method: http.MethodPost, ctx: idem, peeked: true},
		{name: "ndjson, POST plain path", url: "https://example.com/api/generate", ct: ctNDJSON, method: http.MethodPost, ctx: idem, peeked: true},
		{name: "json, POST plain path", url: "https://example.com/v1/models/m:generateContent", ct: ctJSON, method: http.MethodPost, ctx: idem},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt, pw := pipeTransport([]string{"Content-Type", tc.ct}, tc.opts...)
				body := map[string]string{ctJSON: `[{"a":1}]`, ctSSE: sseOf(`{"a":1}`), ctNDJSON: "{\"a\":1}\n"}[tc.ct]
				go func() {
					time.Sleep(time.Second) // the body comes after its headers
					io.WriteString(pw, body)
					pw.Close()
				}()
				ctx := context.Background()
				if tc.ctx != nil {
					ctx = tc.ctx(ctx)
				}
				method := tc.method
				if method == "" {
					method = http.MethodGet
				}
				req, _ := http.NewRequestWithContext(ctx, method, tc.url, nil)
				start := time.Now()
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				want := time.Duration(0)
				if tc.peeked {
					want = time.Second
				}
				if at := time.Since(start); at != want {
					t.Errorf("the response came after %v, want %v (peeked: %v)", at, want, tc.peeked)
				}
				if b := readAll(t, resp); b != body {
					t.Errorf("the caller read %q, want %q", b, body)
				}
			})
		})
	}
}

// timeoutPolicies are the ways an attempt can have a timeout, and none: the
// transport must tell a stream's end from a timeout under each.
var timeoutPolicies = []struct {
	name string
	p    retry.Policy
	opts []Option
}{
	{"no timeout", retry.Policy{}, nil},
	{"WithAttemptTimeout", retry.Policy{}, []Option{WithAttemptTimeout(10 * time.Second)}},
	{"Policy.Deadline", retry.Policy{Deadline: time.Minute}, nil},
}

// TestStreamEOFIsNoTimeout: a stream that ends before its first event is
// retried as an EOF, not as a timeout, also when an attempt timeout or a
// deadline is set (the transport ends the attempt's context itself when a
// body reaches its end: that is no timeout).
func TestStreamEOFIsNoTimeout(t *testing.T) {
	for _, tc := range timeoutPolicies {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls []time.Time
				ev := newEvents()
				p := tc.p
				p.Jitter, p.Observer = retry.Zero, ev.Observe
				rt := NewTransport(sequence(&calls, streamReply(ctSSE, nil, ": only a comment\n\n"), streamReply(ctSSE, nil, sseOf(chunk1))), p, tc.opts...)
				readAll(t, get(t, rt, streamURL))
				var ae *AttemptError
				r := ev.Of(retry.EventRetry)
				if len(r) != 1 || !errors.As(r[0].Err, &ae) {
					t.Fatalf("retries %+v", r)
				}
				if ae.Class != ClassEOF || ae.Timeout() {
					t.Errorf("class %q, Timeout() %v; want %q, false", ae.Class, ae.Timeout(), ClassEOF)
				}
			})
		})
	}
}

// blockAfter is a body that yields s, then blocks until it is closed.
func blockAfter(s string) (io.ReadCloser, *blockingBody) {
	b := newBlockingBody()
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(strings.NewReader(s), b), b}, b
}

// TestRetriedStreamClosedAtOnce: a stream whose first event failed is
// closed before the retry, not drained (it may go on for long: draining
// would hold the retry for up to a second); so is an HTTP/2 answer with a
// retryable status (closing it resets its stream, not its connection).
func TestRetriedStreamClosedAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first func(r *http.Request, body io.ReadCloser) *http.Response
	}{
		{"stream error event, HTTP/1.1", func(r *http.Request, body io.ReadCloser) *http.Response {
			resp := response(r, 200, "", "Content-Type", ctSSE)
			resp.Body, resp.ContentLength = body, -1
			return resp
		}},
		{"503, HTTP/2", func(r *http.Request, body io.ReadCloser) *http.Response {
			resp := response(r, 503, "", "Content-Type", "text/plain")
			resp.Body, resp.ContentLength, resp.ProtoMajor = body, -1, 2
			return resp
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				body, b := blockAfter(sseOf(`{"error":{"code":503,"status":"UNAVAILABLE"}}`))
				var calls []time.Time
				rt := NewTransport(sequence(&calls, func(r *http.Request) (*http.Response, error) { return tc.first(r, body), nil },
					streamReply(ctSSE, nil, sseOf(chunk1))), fast)
				if got := readAll(t, get(t, rt, streamURL)); got != sseOf(chunk1) || len(calls) != 2 {
					t.Fatalf("got %q after %d attempts", got, len(calls))
				}
				if w := calls[1].Sub(calls[0]); w != 0 || b.n.Load() != 1 {
					t.Errorf("the retry came %v after the first attempt, its body closed %d times; want at once, closed once", w, b.n.Load())
				}
			})
		})
	}
}

// TestPeekedBodyReadAfterClose: a body whose first bytes the transport
// peeked at reads like net/http's after Close: an error, none of the
// bytes put back.
func TestPeekedBodyReadAfterClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, resp := range []*http.Response{
			// a stream, peeked to its first event
			get(t, NewTransport(rtFunc(streamReply(ctSSE, nil, sseOf(chunk1, chunk2))), retry.Policy{}), streamURL),
			// a 429 whose RetryInfo was read, returned on giving up (the
			// hint passes the deadline)
			get(t, NewTransport(rtFunc(reply(429, quota429, "Content-Type", ctJSON)), retry.Policy{Deadline: 10 * time.Second}), streamURL),
		} {
			if _, ok := resp.Body.(*prefixBody); !ok {
				t.Fatalf("the body is a %T, not peeked", resp.Body)
			}
			resp.Body.Close()
			if n, err := resp.Body.Read(make([]byte, 10)); n != 0 || err == nil {
				t.Errorf("Read after Close = %d, %v; want 0 and an error", n, err)
			}
		}
	})
}

// pastDeadline is a context whose deadline has passed by the clock while
// its Done has not closed yet: the moment between a deadline and the timer
// that ends the context, which a busy machine stretches.
type pastDeadline struct {
	context.Context
	dl time.Time
}

func (c pastDeadline) Deadline() (time.Time, bool) { return c.dl, true }

// TestStreamCallerDeadlineDuringPeek: when the caller's deadline passes
// while the first event is awaited, the call ends with an error matching
// context.DeadlineExceeded, even in the moment before the caller's context
// says so itself; never with a response whose first event never came.
func TestStreamCallerDeadlineDuringPeek(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBlockingBody()
		var calls []time.Time
		rt := NewTransport(sequence(&calls, func(r *http.Request) (*http.Response, error) {
			resp := response(r, 200, "", "Content-Type", ctSSE)
			resp.Body, resp.ContentLength = b, -1
			return resp, nil
		}), fast)
		ctx := pastDeadline{context.Background(), time.Now().Add(2 * time.Second)}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, streamURL, nil)
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		if resp != nil || !errors.Is(err, context.DeadlineExceeded) || len(calls) != 1 || b.n.Load() != 1 {
			t.Fatalf("response %v, err %v after %d attempts, body closed %d times; want a deadline error after 1, closed once", resp != nil, err, len(calls), b.n.Load())
		}
	})
}

// errorEvent returns an SSE event of exactly n bytes, from its data line
// to its blank line: a 503 error whose message pads it.
func errorEvent(n int) string {
	const head, tail = `data: {"error":{"code":503,"status":"UNAVAILABLE","message":"`, `"}}` + "\n\n"
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

// pings returns SSE keep-alive comment lines, at least n bytes of them.
func pings(n int) string { return strings.Repeat(": ping\n", (n+6)/7) }

// TestStreamPeekBounds: the 64 KiB bound of the first event counts the
// event only, from its first data line: comments (keep-alive pings),
// retry:, id: and event: fields, blank lines and a byte order mark before
// it have a bound of their own (256 KiB). An event within both is looked
// at (an error retried); one out of either is handed over byte for byte,
// whatever the sizes of the reads.
func TestStreamPeekBounds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ct      string
		body    string
		retried bool
	}{
		// Before the fix, everything read counted: all of these but the
		// last three were handed over.
		{"64 KiB of pings, then a small error event (review 3)", ctSSE, pings(64<<10) + errorEvent(100), true},
		{"10 KiB of pings, then an error event of 64 KiB", ctSSE, pings(10<<10) + errorEvent(64<<10), true},
		{"a BOM, retry:, id:, event:, then an error event of 64 KiB", ctSSE,
			"\ufeffretry: 100\nid: 7\n\n: hello\n\nevent: error\n" + errorEvent(64<<10), true},
		{"256 KiB of pings, then an error event of 64 KiB", ctSSE, pings(256<<10-7) + errorEvent(64<<10), true},
		{"100 KiB of blank lines, then an NDJSON error line", ctNDJSON,
			strings.Repeat("\n", 100<<10) + `{"error":{"code":503,"status":"UNAVAILABLE"}}` + "\n", true},
		// Out of bounds: handed over.
		{"an error event of 64 KiB + 1 after pings", ctSSE, pings(10<<10) + errorEvent(64<<10+1), false},
		{"more than 256 KiB of pings, then an error event", ctSSE, pings(256<<10+8) + errorEvent(100), false},
		{"one comment line of 400 KiB, then an error event", ctSSE, ":" + strings.Repeat("p", 400<<10) + "\n" + errorEvent(100), false},
	} {
		for _, chunk := range []int{1 << 20, 4096, 1000} {
			t.Run(tc.name+"/reads of "+strconv.Itoa(chunk), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var chunks []string
					for b := tc.body; b != ""; b = b[min(chunk, len(b)):] {
						chunks = append(chunks, b[:min(chunk, len(b))])
					}
					var calls []time.Time
					rt := NewTransport(sequence(&calls, streamReply(tc.ct, nil, chunks...), streamReply(ctSSE, nil, sseOf(chunk1))), fast)
					got := readAll(t, get(t, rt, streamURL))
					if tc.retried {
						if len(calls) != 2 || got != sseOf(chunk1) {
							t.Fatalf("%d attempts, got %d bytes; want the error retried", len(calls), len(got))
						}
						return
					}
					if len(calls) != 1 || got != tc.body {
						t.Fatalf("%d attempts, got %d bytes (%d sent, same: %v); want the first answer byte for byte", len(calls), len(got), len(tc.body), got == tc.body)
					}
				})
			})
		}
	}
}

// TestStreamSubscriptionHandedOverAtOnce: a GET answered with a stream
// that sends keep-alive comments long before its first event (a
// subscription, quiet by design) is handed over with its headers at once,
// and the caller reads each comment as it comes (its idle watchdog can
// run); a streamed call (a POST, or a GET naming a streaming method) is
// still held until its first event, the comments with it. Before the fix
// every one of them was held until the first event (1.5 s here).
func TestStreamSubscriptionHandedOverAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		url    string
		ct     string
		held   bool
	}{
		{"GET feed, SSE", http.MethodGet, "https://example.com/v1/events", ctSSE, false},
		{"GET feed, NDJSON", http.MethodGet, "https://example.com/v1/events", ctNDJSON, false},
		{"GET streamGenerateContent", http.MethodGet, streamURL, ctSSE, true},
		{"POST", http.MethodPost, "https://example.com/v1/chat/completions", ctSSE, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt, pw := pipeTransport([]string{"Content-Type", tc.ct, "X-Request-Id", "r1"})
				ping, first := ": ping\n\n", sseOf(chunk1)
				if tc.ct == ctNDJSON {
					ping, first = "\n", chunk1+"\n"
				}
				go func() {
					for range 15 { // every 100 ms, then the first event at 1.5 s
						io.WriteString(pw, ping)
						time.Sleep(100 * time.Millisecond)
					}
					io.WriteString(pw, first)
					pw.Close()
				}()
				start := time.Now()
				req, _ := http.NewRequestWithContext(Idempotent(context.Background()), tc.method, tc.url, nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				at := time.Since(start)
				if want := map[bool]time.Duration{false: 0, true: 1500 * time.Millisecond}[tc.held]; at != want || resp.Header.Get("X-Request-Id") != "r1" {
					t.Fatalf("the response came after %v, want %v", at, want)
				}
				if !tc.held {
					b := make([]byte, len(ping))
					if _, err := io.ReadFull(resp.Body, b); err != nil || string(b) != ping || time.Since(start) != 0 {
						t.Fatalf("first read %q (%v) at %v, want the first comment at once", b, err, time.Since(start))
					}
				}
				rest, err := io.ReadAll(resp.Body)
				if err != nil || !strings.HasSuffix(string(rest), first) || time.Since(start) != 1500*time.Millisecond {
					t.Fatalf("read %q (%v) by %v", rest, err, time.Since(start))
				}
			})
		})
	}
}
