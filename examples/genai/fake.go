package main

import (
	_ "embed"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
)

// error429 is Google's RESOURCE_EXHAUSTED error body with a RetryInfo
// detail, its retryDelay shortened to 0.3 s so that the demo is quick.
//
//go:embed testdata/google-error-429.json
var error429 []byte

// error503 is the body of an overloaded model's 503.
const error503 = `{"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}}`

// okResponse is a valid generateContent response.
const okResponse = `{
  "candidates": [{
    "content": {"role": "model", "parts": [{"text": "Hello from the fake Gemini."}]},
    "finishReason": "STOP",
    "index": 0
  }],
  "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 6, "totalTokenCount": 9},
  "modelVersion": "gemini-2.5-flash"
}`

// reply is one scripted answer of the fake endpoint.
type reply struct {
	status     int
	retryAfter string // the Retry-After header, if any
	body       string
}

var (
	reply429 = reply{status: http.StatusTooManyRequests, body: string(error429)}
	reply503 = reply{status: http.StatusServiceUnavailable, retryAfter: "1", body: error503}
	replyOK  = reply{status: http.StatusOK, body: okResponse}
)

// hit is what the fake saw of one request.
type hit struct {
	method, path string
	apiKey       string // the x-goog-api-key header, kept to prove it was sent
	status       int
}

// fakeGemini is a local stand-in for the Gemini API's generateContent
// endpoint: it checks the request like the real one would (method, path,
// API key, JSON body with contents) and answers with the next reply of its
// script, the last one repeating.
type fakeGemini struct {
	mu     sync.Mutex
	script []reply
	hits   []hit
}

func newFakeGemini(script ...reply) *fakeGemini {
	return &fakeGemini{script: script}
}

func (f *fakeGemini) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := hit{method: r.Method, path: r.URL.Path, apiKey: r.Header.Get("x-goog-api-key")}
	rep := f.check(r)
	f.mu.Lock()
	if rep.status == 0 {
		i := min(len(f.hits), len(f.script)-1)
		rep = f.script[i]
	}
	h.status = rep.status
	f.hits = append(f.hits, h)
	f.mu.Unlock()

	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	if rep.retryAfter != "" {
		w.Header().Set("Retry-After", rep.retryAfter)
	}
	w.WriteHeader(rep.status)
	io.WriteString(w, rep.body)
}

// check returns an error reply for a request the real API would refuse, or
// the zero reply.
func (f *fakeGemini) check(r *http.Request) reply {
	bad := func(status int, msg string) reply {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": msg}})
		return reply{status: status, body: string(b)}
	}
	switch {
	case r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1beta/models/") || !strings.HasSuffix(r.URL.Path, ":generateContent"):
		return bad(http.StatusNotFound, "not found: "+r.Method+" "+r.URL.Path)
	case r.Header.Get("x-goog-api-key") == "":
		return bad(http.StatusUnauthorized, "API key missing")
	}
	var body struct {
		Contents []json.RawMessage `json:"contents"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Contents) == 0 {
		return bad(http.StatusBadRequest, "invalid JSON body or no contents")
	}
	return reply{}
}

// Hits returns a copy of the requests seen so far.
func (f *fakeGemini) Hits() []hit {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]hit(nil), f.hits...)
}
