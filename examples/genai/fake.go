package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/backoffkit/retry/internal/chaos"
)

// error429 is Google's RESOURCE_EXHAUSTED error body with a RetryInfo
// detail, its retryDelay shortened to 0.3 s so that the demo is quick.
//
//go:embed testdata/google-error-429.json
var error429 []byte

// error503 is the body of an overloaded model's 503.
const error503 = `{"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}}`

// okResponse is a valid generateContent response. The fake writes in
// place of trafficSlot the usageMetadata.trafficType with which Vertex AI
// would have served the request (see trafficType).
const okResponse = `{
  "candidates": [{
    "content": {"role": "model", "parts": [{"text": "Hello from the fake Gemini."}]},
    "finishReason": "STOP",
    "index": 0
  }],
  "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 6, "totalTokenCount": 9, "trafficType": "` + trafficSlot + `"},
  "modelVersion": "gemini-2.5-flash"
}`

// trafficSlot marks where the fake writes a reply's traffic type.
const trafficSlot = "$TRAFFIC_TYPE"

// The consumption headers of Vertex AI.
const (
	headerRequestType       = "X-Vertex-AI-LLM-Request-Type"
	headerSharedRequestType = "X-Vertex-AI-LLM-Shared-Request-Type"
)

// trafficType returns the usageMetadata.trafficType of a request with
// header h, as Vertex AI reports it for a project without Provisioned
// Throughput: ON_DEMAND_PRIORITY for Priority, ON_DEMAND_FLEX for Flex,
// ON_DEMAND (Standard) otherwise.
func trafficType(h http.Header) string {
	switch strings.ToLower(h.Get(headerSharedRequestType)) {
	case "priority":
		return "ON_DEMAND_PRIORITY"
	case "flex":
		return "ON_DEMAND_FLEX"
	}
	return "ON_DEMAND"
}

// chunks are the texts of the chunks of a good streamed answer.
var chunks = []string{"Hello", " from", " the fake", " Gemini."}

// reply is one scripted answer of the fake endpoint: a status and a body,
// or a streamed answer.
type reply struct {
	status     int
	retryAfter string // the Retry-After header, if any
	body       string

	// A streamed answer, as streamGenerateContent?alt=sse sends it: 200,
	// text/event-stream, then each of events (one line of JSON each) as an
	// SSE event "data: <json>\r\n\r\n", flushed one at a time. Then, if
	// reset, the connection is reset; if stall, the fake sends nothing more
	// until the client leaves.
	stream bool
	events []string
	reset  bool
	stall  bool
}

var (
	reply429 = reply{status: http.StatusTooManyRequests, body: string(error429)}
	reply503 = reply{status: http.StatusServiceUnavailable, retryAfter: "1", body: error503}
	replyOK  = reply{status: http.StatusOK, body: okResponse}

	// streamQuota is a stream whose first and only event is the 429 with
	// RetryInfo: a quota that ran out after the stream began.
	streamQuota = streamOf(oneLine(error429))
	// streamReset sends the stream's headers, then resets the connection
	// before any event.
	streamReset = reply{stream: true, reset: true}
	// streamOK is a good stream of the chunks.
	streamOK = streamOf(chunkEvents(chunks)...)
	// streamCut sends the first chunk, then the 429 with RetryInfo: an
	// error after the stream began, which must reach the caller.
	streamCut = streamOf(chunkEvents(chunks)[0], oneLine(error429))
)

// streamOf returns a streamed reply of events.
func streamOf(events ...string) reply {
	return reply{stream: true, events: events}
}

// oneLine returns the JSON body b compacted to one line, as an SSE data
// field carries it.
func oneLine(b []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		panic(err) // an embedded body that is not JSON
	}
	return buf.String()
}

// chunkEvents returns the streamGenerateContent chunks of texts: each a
// GenerateContentResponse with one text part, the last one with the finish
// reason and the usage.
func chunkEvents(texts []string) []string {
	out := make([]string, len(texts))
	for i, t := range texts {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": t}}}, "index": 0}
		chunk := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": "fake-stream-1"}
		if i == len(texts)-1 {
			cand["finishReason"] = "STOP"
			chunk["usageMetadata"] = map[string]any{"promptTokenCount": 3, "candidatesTokenCount": len(texts), "totalTokenCount": 3 + len(texts)}
		}
		b, err := json.Marshal(chunk)
		if err != nil {
			panic(err)
		}
		out[i] = string(b)
	}
	return out
}

// hit is what the fake saw of one request.
type hit struct {
	method, path string
	query        string // the raw query: alt=sse for a stream
	apiKey       string // the x-goog-api-key header, kept to prove it was sent
	status       int
	events       int // the events of a stream written and flushed

	// The values of the consumption headers (headerRequestType and
	// headerSharedRequestType), all of them: two would be a bug.
	requestType, sharedType []string
}

// fakeGemini is a local stand-in for the Gemini API's generateContent,
// streamGenerateContent, countTokens and batchEmbedContents methods, Vertex
// AI's embedContent and predict (express mode), and the start of a file
// upload: it checks the request like the real one would (method, path,
// alt=sse for a stream, API key, the JSON body's main field) and answers
// with the next reply of its script, the last one repeating.
type fakeGemini struct {
	mu     sync.Mutex
	script []reply
	hits   []hit

	// consumption, when set, is the header every request must carry: each
	// of its headers once, with its value; any other consumption header
	// is refused too. A request that does not is answered 400.
	consumption http.Header
}

func newFakeGemini(script ...reply) *fakeGemini {
	return &fakeGemini{script: script}
}

func (f *fakeGemini) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := hit{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, apiKey: r.Header.Get("x-goog-api-key"),
		requestType: r.Header.Values(headerRequestType), sharedType: r.Header.Values(headerSharedRequestType)}
	rep := f.checkConsumption(r)
	if rep.status == 0 {
		rep = f.check(r)
	}
	f.mu.Lock()
	if rep.status == 0 && !rep.stream {
		i := min(len(f.hits), len(f.script)-1)
		rep = f.script[i]
		if rep.stream != strings.HasSuffix(r.URL.Path, ":streamGenerateContent") {
			rep = badReply(http.StatusBadRequest, fmt.Sprintf("fake: the script's reply %d does not fit %s", i+1, r.URL.Path))
		}
	}
	if rep.stream {
		h.status = http.StatusOK
	} else {
		h.status = rep.status
	}
	i := len(f.hits)
	f.hits = append(f.hits, h)
	f.mu.Unlock()

	if rep.stream {
		f.serveStream(w, r, i, rep)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	if rep.retryAfter != "" {
		w.Header().Set("Retry-After", rep.retryAfter)
	}
	w.WriteHeader(rep.status)
	io.WriteString(w, strings.ReplaceAll(rep.body, trafficSlot, trafficType(r.Header)))
}

// serveStream writes the streamed reply rep to the i-th request.
func (f *fakeGemini) serveStream(w http.ResponseWriter, r *http.Request, i int, rep reply) {
	w.Header().Set("Content-Type", chaos.StreamContentType(chaos.StreamSSE))
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	payloads := make([][]byte, len(rep.events))
	for j, ev := range rep.events {
		payloads[j] = []byte(ev)
	}
	for _, ev := range chaos.FrameEvents(chaos.StreamSSE, payloads) {
		if _, err := w.Write(ev); err != nil || rc.Flush() != nil {
			return // the client left
		}
		f.mu.Lock()
		f.hits[i].events++
		f.mu.Unlock()
	}
	switch {
	case rep.reset:
		reset(w)
	case rep.stall:
		<-r.Context().Done()
	}
}

// reset cuts the connection of w: a TCP reset (the connection is hijacked
// and closed with SO_LINGER 0), a plain close on other connections.
func reset(w http.ResponseWriter) {
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // HTTP/2: the stream is reset
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// badReply is an error answer of the real API's shape.
func badReply(status int, msg string) reply {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": msg}})
	return reply{status: status, body: string(b)}
}

// The paths the fake serves, as the SDK builds them against a base URL:
// the Gemini API's model methods, Vertex AI's in express mode (an API key,
// no project), and the start of a Gemini API file upload.
const (
	geminiModels = "/v1beta/models/"
	vertexModels = "/v1beta1/publishers/google/models/"
	uploadPath   = "/upload/v1beta/files"
)

// modelMethods are the methods the fake serves on a model, by path prefix,
// and the field of the JSON body each must carry.
var modelMethods = map[string]map[string]string{
	geminiModels: {"generateContent": "contents", "streamGenerateContent": "contents", "countTokens": "contents", "batchEmbedContents": "requests"},
	vertexModels: {"generateContent": "contents", "embedContent": "content", "predict": "instances"},
}

// checkConsumption returns an error reply for a request whose consumption
// headers are not f.consumption, when it is set, or the zero reply.
func (f *fakeGemini) checkConsumption(r *http.Request) reply {
	if f.consumption == nil {
		return reply{}
	}
	for _, name := range []string{headerRequestType, headerSharedRequestType} {
		got, want := r.Header.Values(name), f.consumption.Values(name)
		if !slices.Equal(got, want) {
			return badReply(http.StatusBadRequest, fmt.Sprintf("fake: %s: %q, want %q", name, got, want))
		}
	}
	return reply{}
}

// check returns an error reply for a request the real API would refuse, or
// the zero reply.
func (f *fakeGemini) check(r *http.Request) reply {
	bad := badReply
	if r.Method != http.MethodPost {
		return bad(http.StatusNotFound, "not found: "+r.Method+" "+r.URL.Path)
	}
	if r.Header.Get("x-goog-api-key") == "" {
		return bad(http.StatusUnauthorized, "API key missing")
	}
	field := ""
	if r.URL.Path == uploadPath {
		// The start of a resumable upload: it creates the file.
		if r.Header.Get("X-Goog-Upload-Protocol") != "resumable" || r.Header.Get("X-Goog-Upload-Command") != "start" {
			return bad(http.StatusBadRequest, "this fake serves the start of a resumable upload only")
		}
	} else {
		method := ""
		for prefix, methods := range modelMethods {
			if rest, ok := strings.CutPrefix(r.URL.Path, prefix); ok {
				model, m, _ := strings.Cut(rest, ":")
				if model != "" && !strings.Contains(model, "/") {
					method, field = m, methods[m]
				}
			}
		}
		switch {
		case field == "":
			return bad(http.StatusNotFound, "not found: "+r.Method+" "+r.URL.Path)
		case method == "streamGenerateContent" && r.URL.Query().Get("alt") != "sse":
			return bad(http.StatusBadRequest, "this fake streams with alt=sse only")
		}
	}
	if field == "" { // the upload's start: its body, if any, is the file's metadata
		io.Copy(io.Discard, r.Body)
		return reply{}
	}
	var body map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return bad(http.StatusBadRequest, "invalid JSON body")
	}
	if v, ok := body[field]; !ok || len(v) < 3 { // at least [x] or {}
		return bad(http.StatusBadRequest, "the body has no "+field)
	}
	return reply{}
}

// Hits returns a copy of the requests seen so far.
func (f *fakeGemini) Hits() []hit {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]hit(nil), f.hits...)
}
