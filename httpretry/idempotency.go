package httpretry

import (
	"context"
	"net/http"
	"strings"
)

// googleReadOnlyMethods are the custom methods of Google's generative AI
// APIs (the Gemini API, generativelanguage.googleapis.com, and Vertex AI,
// aiplatform.googleapis.com) that change no server state: they generate,
// count, tokenize, embed or predict, and create nothing. Each is a POST to
// {resource}:{method}, the resource a model (models/*, tunedModels/*,
// publishers/*/models/*) or a Vertex AI endpoint (endpoints/*).
//
// Methods that create something are left out on purpose: the uploads of
// files and their :register, cachedContents and tunedModels (POST to the
// collection), :batchGenerateContent and :asyncBatchEmbedContent (they
// create a batch job), :predictLongRunning (it starts an operation).
var googleReadOnlyMethods = [...]string{
	"generateContent",
	"streamGenerateContent",
	"countTokens",
	"computeTokens",
	"embedContent",
	"batchEmbedContents",
	"predict",
	"rawPredict",
}

// googleCollections are the collections whose resources take the methods
// of googleReadOnlyMethods: the segment of the path before the last one.
var googleCollections = [...]string{"models", "tunedModels", "endpoints"}

// GoogleReadOnly reports whether req calls one of the methods of Google's
// generative AI APIs that change no server state, and so are safe to repeat
// (see "Idempotency" in the package documentation): a POST whose URL path
// ends in a segment {id}:{method}, after a segment models, tunedModels or
// endpoints, with {method} one of generateContent, streamGenerateContent,
// countTokens, computeTokens, embedContent, batchEmbedContents, predict and
// rawPredict. For example
//
//	POST /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse
//	POST /v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent
//	POST /v1/projects/p/locations/us-central1/endpoints/1234:rawPredict
//
// Whatever the host: generativelanguage.googleapis.com, a regional Vertex
// AI host, or a proxy or Gemini-compatible server that serves the same
// paths. The query is not looked at. The path, decoded (%3A is a colon), is
// compared exactly, case included: :GenerateContent, :generateContentUpload
// or a trailing slash do not match. The transport applies it to every request
// unless built with [WithGoogleReadOnly](false); it is exported so that a
// rule of [IdempotentIf] can build on it (for example to apply it to some
// hosts only).
//
// predict and rawPredict only answer, unless the model behind them writes
// something: a custom container may, and an image model asked to store its
// output in a Cloud Storage bucket does. Such calls are not safe to repeat:
// mark them [NotIdempotent], or turn the rule off.
func GoogleReadOnly(req *http.Request) bool {
	if req == nil || req.URL == nil || req.Method != http.MethodPost {
		return false
	}
	p := req.URL.Path
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return false
	}
	last := p[i+1:]
	j := strings.LastIndexByte(last, ':')
	if j <= 0 { // no method, or no resource id before it
		return false
	}
	method := last[j+1:]
	found := false
	for _, m := range googleReadOnlyMethods {
		if method == m {
			found = true
			break
		}
	}
	if !found {
		return false
	}
	coll := p[:i]
	coll = coll[strings.LastIndexByte(coll, '/')+1:]
	for _, c := range googleCollections {
		if coll == c {
			return true
		}
	}
	return false
}

// idempotent decides whether the request may be repeated after it may have
// reached the server (see "Idempotency" in the package documentation, whose
// order this follows), and adds an Idempotency-Key when the options say so.
// It also records an explicit NotIdempotent mark in c.notIdempotent.
func (t *Transport) idempotent(req *http.Request, ctx context.Context, c *call) bool {
	mark, marked := ctx.Value(idemKey{}).(bool)
	if marked && !mark {
		c.notIdempotent = true
		return false
	}
	if _, ok := req.Header["Idempotency-Key"]; ok {
		return true
	}
	if t.cfg.addIdempotencyKey && (req.Method == http.MethodPost || req.Method == http.MethodPatch) {
		c.header = req.Header.Clone()
		if c.header == nil {
			c.header = make(http.Header)
		}
		c.header.Set("Idempotency-Key", newUUID())
		return true
	}
	if marked || t.cfg.allowNonIdempotent {
		return true
	}
	// A zero Transport has the default options: Google's rule on.
	if !t.cfg.noGoogleReadOnly && GoogleReadOnly(req) {
		return true
	}
	for _, rule := range t.cfg.rules {
		if rule(req) {
			return true
		}
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// refused reports whether ae, a failed attempt of a request that is not
// idempotent, was refused: answered with a status that says the server did
// not act on the request, so that it may be sent again. That is a 429, or a
// 503 with a hint (Retry-After or RetryInfo: hinted asks for it), and never
// for a request marked NotIdempotent.
func (c *call) refused(ae *AttemptError, hinted func() bool) bool {
	if c.notIdempotent || ae.Class != ClassStatus {
		return false
	}
	switch ae.Status {
	case http.StatusTooManyRequests:
		return true
	case http.StatusServiceUnavailable:
		return hinted()
	}
	return false
}
