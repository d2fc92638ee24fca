package chaos

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"
)

// Stream requests. A request with the X-Chaos-Stream header gets a 200
// streamed answer of X-Chaos-Events events (default 10, at most 10,000),
// written and flushed one at a time, in the format the header names. Each
// event is a JSON object {"seq": i, "id": "<request id>", "text": "..."}
// with seq from 0; the response carries X-Chaos-Events and the SHA-256 of
// the whole stream in X-Chaos-Sum, and no Content-Length. ReadStream
// parses and checks such a stream on the client side.
const (
	// HeaderStream asks for a streamed answer in a format: StreamSSE,
	// StreamNDJSON or StreamJSON.
	HeaderStream = "X-Chaos-Stream"
	// HeaderEvents asks for, and in the response states, the number of
	// events of a stream.
	HeaderEvents = "X-Chaos-Events"
)

// Stream formats (values of HeaderStream).
const (
	// StreamSSE is text/event-stream, each event "data: <json>\r\n\r\n", as
	// Gemini's streamGenerateContent?alt=sse sends.
	StreamSSE = "sse"
	// StreamNDJSON is application/x-ndjson, each event "<json>\n".
	StreamNDJSON = "ndjson"
	// StreamJSON is application/json, a JSON array streamed element by
	// element ("[" <json> ",\r\n" <json> ... "]"), as alt=json streams are.
	StreamJSON = "json"
)

const (
	defaultEvents = 10
	maxEvents     = 10000
)

// StreamContentType returns the Content-Type of a stream format.
func StreamContentType(format string) string {
	switch format {
	case StreamNDJSON:
		return "application/x-ndjson"
	case StreamJSON:
		return "application/json; charset=UTF-8"
	}
	return "text/event-stream"
}

// QuotaError returns, on one line, Google's 429 RESOURCE_EXHAUSTED error
// object with a google.rpc.RetryInfo asking for retryDelay: what Gemini
// sends as the first event of a stream whose quota ran out.
func QuotaError(retryDelay time.Duration) []byte {
	return []byte(retryInfoBody(strconv.FormatFloat(retryDelay.Seconds(), 'f', -1, 64)+"s", ""))
}

// FrameEvents returns the bytes of each event of a stream in format (each
// payload a JSON value on one line), the array's brackets included in the
// first and last; write and flush them one at a time to stream them.
func FrameEvents(format string, payloads [][]byte) [][]byte {
	out := make([][]byte, len(payloads))
	for i, p := range payloads {
		var b []byte
		switch format {
		case StreamNDJSON:
			b = append(append(b, p...), '\n')
		case StreamJSON:
			if i == 0 {
				b = append(b, '[')
			} else {
				b = append(b, ",\r\n"...)
			}
			b = append(b, p...)
			if i == len(payloads)-1 {
				b = append(b, ']')
			}
		default:
			b = append(append(append(b, "data: "...), p...), "\r\n\r\n"...)
		}
		out[i] = b
	}
	if len(out) == 0 && format == StreamJSON {
		out = append(out, []byte("[]"))
	}
	return out
}

// streamHeaders sets the headers of a streamed answer of chunks.
func streamHeaders(w http.ResponseWriter, format string, chunks [][]byte, events int, fault Fault) {
	h := sha256.New()
	for _, c := range chunks {
		h.Write(c)
	}
	hd := w.Header()
	hd.Set("Content-Type", StreamContentType(format))
	hd.Set(HeaderSum, hex.EncodeToString(h.Sum(nil)))
	hd.Set(HeaderEvents, strconv.Itoa(events))
	if fault != None {
		hd.Set(HeaderFault, fault.String())
	}
}

// streamError answers a stream whose only event is a quota error (before
// the effect).
func (s *Server) streamError(w http.ResponseWriter, r *http.Request, id string, idx int) {
	io.Copy(io.Discard, r.Body)
	format := r.Header.Get(HeaderStream)
	chunks := FrameEvents(format, [][]byte{QuotaError(s.cfg.RetryAfter)})
	streamHeaders(w, format, chunks, 0, StreamErrorFirst)
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(chunks[0]); err == nil && http.NewResponseController(w).Flush() == nil {
		s.note(id, idx, func(a *Attempt, _ *Record) { a.Status = http.StatusOK })
	}
}

// serveStream writes the stream of a request whose effect has run,
// applying fault.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, id string, idx int, fault Fault, format string) {
	n := defaultEvents
	if v := r.Header.Get(HeaderEvents); v != "" {
		n, _ = strconv.Atoi(v)
		n = min(max(n, 0), maxEvents)
	}
	seed := hash64(s.cfg.Seed, id, 0, 5)
	payloads := make([][]byte, n)
	for i := range payloads {
		text := make([]byte, 8+hash64(seed, id, i, 6)%56)
		Body{Seed: hash64(seed, id, i, 7), Len: int64(len(text))}.Open().Read(text)
		payloads[i], _ = json.Marshal(map[string]any{"seq": i, "id": id, "text": hex.EncodeToString(text)})
	}
	chunks := FrameEvents(format, payloads)
	streamHeaders(w, format, chunks, n, fault)
	all := bytes.Join(chunks, nil)
	sent := func() { // half the stream: the events whole in it
		whole, n := 0, 0
		for _, c := range chunks {
			if n += len(c); n > len(all)/2 {
				break
			}
			whole++
		}
		s.note(id, idx, func(a *Attempt, _ *Record) { a.Status, a.Events = http.StatusOK, whole })
	}
	if s.breakResponse(w, r, fault, all[:len(all)/2], sent) {
		return
	}
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	s.note(id, idx, func(a *Attempt, _ *Record) { a.Status = http.StatusOK })
	if fault == StreamSlowFirst {
		s.stall(r.Context())
		if r.Context().Err() != nil {
			return // the client left
		}
	}
	for i, c := range chunks {
		if _, err := w.Write(c); err != nil || rc.Flush() != nil {
			return
		}
		s.note(id, idx, func(a *Attempt, _ *Record) { a.Events++ })
		if i == 0 && fault == StreamResetAfterFirst {
			s.abort(w, r)
			return
		}
	}
}

// StreamResult is what a client received of a chaos stream.
type StreamResult struct {
	// Seqs are the seq numbers of the complete events received, in order
	// (an event cut by the end of the body is not counted).
	Seqs []int
	// ErrorEvent is true when an event was an error object (not in Seqs).
	ErrorEvent bool
	// Err is the body's read error, nil if it ended cleanly.
	Err error
}

// ErrStreamCorrupt reports a stream that delivered an event twice, skipped
// one, or ended cleanly without all of its events or with another checksum:
// what a retry after the first event, or a careless replay, would cause.
var ErrStreamCorrupt = errors.New("chaos: stream delivered an event twice, out of order, or missed one")

// ReadStream reads a chaos stream to its end (or its first read error),
// closes the body, and returns the events received. The error wraps
// ErrStreamCorrupt when the events are not 0, 1, 2, ... in order, or when
// the body ended cleanly with fewer events than X-Chaos-Events or another
// checksum than X-Chaos-Sum; a stream cut by a read error is not corrupt
// (its failure is visible), only shorter.
func ReadStream(resp *http.Response) (StreamResult, error) {
	defer resp.Body.Close()
	raw, readErr := io.ReadAll(resp.Body)
	res := StreamResult{Err: readErr}
	events, ok := Events(resp.Header.Get("Content-Type"), raw, readErr == nil)
	if !ok {
		return res, fmt.Errorf("chaos: not a stream: Content-Type %q", resp.Header.Get("Content-Type"))
	}
	for _, ev := range events {
		var e struct {
			Seq   *int            `json:"seq"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(ev, &e); err != nil {
			return res, fmt.Errorf("%w: event %q: %v", ErrStreamCorrupt, ev, err)
		}
		if e.Error != nil {
			res.ErrorEvent = true
			continue
		}
		if e.Seq == nil || *e.Seq != len(res.Seqs) {
			return res, fmt.Errorf("%w: event %s after %d events", ErrStreamCorrupt, ev, len(res.Seqs))
		}
		res.Seqs = append(res.Seqs, *e.Seq)
	}
	if readErr != nil || res.ErrorEvent {
		return res, nil
	}
	if want, _ := strconv.Atoi(resp.Header.Get(HeaderEvents)); len(res.Seqs) != want {
		return res, fmt.Errorf("%w: the stream ended cleanly after %d of %d events", ErrStreamCorrupt, len(res.Seqs), want)
	}
	if want := resp.Header.Get(HeaderSum); want != "" {
		if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != want {
			return res, fmt.Errorf("%w: the stream's checksum differs", ErrStreamCorrupt)
		}
	}
	return res, nil
}

// Events returns the complete events of the bytes of a stream whose
// Content-Type is contentType (SSE with LF or CRLF line ends: the data of
// each event ended by a blank line; NDJSON: each line, the last one only if
// clean says the stream ended there; a JSON array: each whole, valid
// element), and false if contentType is not a stream format. A UTF-8 byte
// order mark at the start is not part of the stream (the SSE format says to
// ignore it; JSON parsers may). It is written independently of httpretry's
// scanner, so that tests can compare them.
func Events(contentType string, raw []byte, clean bool) ([][]byte, bool) {
	raw = bytes.TrimPrefix(raw, []byte("\ufeff"))
	mt, _, _ := mime.ParseMediaType(contentType)
	switch mt {
	case "text/event-stream":
		return sseEvents(raw), true
	case "application/x-ndjson":
		return lineEvents(raw, clean), true
	case "application/json":
		return arrayEvents(raw), true
	}
	return nil, false
}

// sseEvents returns the data of each complete event (ended by a blank
// line) of an SSE stream whose lines end with LF or CRLF.
func sseEvents(raw []byte) [][]byte {
	var (
		out  [][]byte
		data []byte
	)
	for len(raw) > 0 {
		line, rest, found := bytes.Cut(raw, []byte("\n"))
		if !found {
			break // an unterminated line, the event is not complete
		}
		raw = rest
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			if data != nil {
				out = append(out, data)
				data = nil
			}
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
		}
	}
	return out
}

// lineEvents returns the complete lines of an NDJSON stream (the last one
// only if the stream ended cleanly).
func lineEvents(raw []byte, clean bool) [][]byte {
	var out [][]byte
	for len(raw) > 0 {
		line, rest, found := bytes.Cut(raw, []byte("\n"))
		if !found && !clean {
			break
		}
		if len(bytes.TrimSpace(line)) > 0 {
			out = append(out, line)
		}
		raw = rest
	}
	return out
}

// arrayEvents returns the complete elements of a streamed JSON array.
func arrayEvents(raw []byte) [][]byte {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return nil
	}
	var out [][]byte
	for dec.More() {
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			break
		}
		out = append(out, v)
	}
	return out
}
