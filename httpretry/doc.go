// Package httpretry is an [http.RoundTripper] that retries failed HTTP
// requests the way Google's guidance says: truncated exponential backoff with
// jitter, driven by the [retry] package's loop and a [retry.Policy].
//
// It is a drop-in for any Go HTTP client, including SDKs that accept an
// *http.Client:
//
//	client, err := httpretry.NewClient(retry.Policy{}) // Google's defaults
//	t := httpretry.NewTransport(nil, p)                 // t.Err(): a bad p?
//	client := &http.Client{Transport: t}
//
// # What is retried
//
// A response whose status code is in the policy's StatusCodes (default 408,
// 429, 500, 502, 503 and 504) is retried. So are transport errors that are
// transient, classified by their type, never by their message text:
// connection refused, reset or aborted, broken pipe, io.EOF and
// io.ErrUnexpectedEOF before a response, timeouts (net.Error.Timeout, and the
// per-attempt timeout), temporary DNS failures, HTTP/2 GOAWAY and
// REFUSED_STREAM. Anything else is not retried: TLS certificate errors, an
// unknown host, an unsupported scheme or invalid URL, and the caller's own
// context cancellation or deadline. (Redirects are followed by http.Client
// above the transport, so "too many redirects" never reaches it.)
// Policy.Retryable, when set, can only narrow this set further.
//
// An attempt that fails because the request body does (its Read returns an
// error other than io.EOF, or it yields more or fewer bytes than the
// request's ContentLength) is never retried, not even with
// [RetryAllErrors]: its [*AttemptError] has Class [ClassBody], and the
// body's error stays in the error's chain (errors.Is). The body is the
// caller's: a replay would read it again from GetBody, which fails the
// same way, and a body whose length is not its ContentLength is a bug that
// no retry fixes. (A read that fails because the transport closed the body
// is not the body's failure. A body shorter than its ContentLength fails
// the attempt on HTTP/1.1 only: HTTP/2 sends it and leaves the server to
// refuse it. A body that is a file or a network connection is handed to
// the base transport as it is, so that the kernel can copy it with
// sendfile or splice: its read errors are classified like any transport
// error.)
//
// # Idempotency
//
// A request that may have reached the server is sent again only when it is
// idempotent: sending it twice has the effect of sending it once. The
// decision, first match wins:
//
//  1. the context mark: [Idempotent] or [NotIdempotent], the innermost wins;
//  2. an Idempotency-Key header, the caller's or one added by
//     [AddIdempotencyKey] (to POST and PATCH requests that lack one);
//  3. [AllowNonIdempotent]: every request is;
//  4. a rule: Google's read-only methods ([GoogleReadOnly]), unless the
//     transport was built with [WithGoogleReadOnly](false), then the rules
//     added with [IdempotentIf], in order;
//  5. the method, following RFC 9110 section 9.2.2: GET, HEAD, OPTIONS,
//     TRACE, PUT and DELETE are idempotent; POST, PATCH and any other
//     method are not.
//
// Google's rule takes for idempotent a POST to a method of the Gemini API
// or Vertex AI that changes no server state: generateContent,
// streamGenerateContent, countTokens, computeTokens, embedContent,
// batchEmbedContents, predict and rawPredict, called on a model, a tuned
// model or a Vertex AI endpoint (/v1beta/models/gemini-2.5-flash:generateContent),
// whatever the host. Generating content is not strictly idempotent (the
// answer differs each time), but it creates nothing, so Google's guidance
// calls it safe to retry. The methods that create something (file uploads,
// cachedContents, tunedModels, batch jobs) are not on the list. So the calls
// of a Gen AI SDK client built on this transport need no mark.
//
// A request that is not idempotent is still sent again after:
//
//   - an error that proves it never reached the server: the dial failed
//     (connection refused, for example), or HTTP/2 REFUSED_STREAM. This
//     holds even for a request marked [NotIdempotent].
//   - a refusal: a 429 Too Many Requests, or a 503 Service Unavailable with
//     a Retry-After header or a RetryInfo (see "Server hints"). A rate
//     limit or an overload turns a request away before acting on it, and
//     RFC 9110 lets a client repeat a request that is not idempotent when
//     it knows the first one was not applied. This does not hold for a
//     request marked [NotIdempotent] (use it for a server that may act and
//     then answer 429). Other retryable answers (500, 502, 504, 408, a 503
//     without a hint, a reset) may come after the server acted: they are
//     no such proof.
//
// Either way the body rules below still apply: the body of a request that
// is not idempotent is streamed, not buffered, so after a refusal it is
// sent again only when it has a GetBody or the transport had read none of
// it, and never in part.
//
// When a retry is skipped because of idempotency, the policy's Observer gets
// a give-up event whose Err matches [ErrNotIdempotent] (errors.Is) and holds
// the [*AttemptError] (errors.As); RoundTrip returns the response of the
// one attempt made, or a [*retry.Error] that holds its error (see Errors).
//
// # Request bodies
//
// A body is replayed with Request.GetBody when it is set (http.NewRequest
// sets it for bytes, strings and bytes.Reader bodies). GetBody is called
// for the next attempt as soon as the failed one is known to be retried,
// before the wait: when it fails (or returns a nil body) the call ends at
// once with the failed attempt's error, as a skipped retry (see below),
// and the retry is never sent without its body. Otherwise, when the
// request may be retried after it was sent (it is idempotent, see above,
// and has more than one attempt), the body is read into memory up to
// [MaxBufferedBody] (default 1 MiB) and replayed from there.
//
// Buffering costs latency: nothing is sent until the whole body has been
// read, so a body produced slowly delays the request by the time it takes,
// and one that is only produced once the response has begun (a full-duplex
// HTTP/2 exchange) is never complete: the call then ends with the caller's
// context. Give such a body a GetBody, or mark the request [NotIdempotent],
// or use MaxBufferedBody(0).
//
// Any other body (a request that is not idempotent, a body longer than the
// limit, MaxBufferedBody(0)) is streamed as it is produced, without a copy.
// It is sent again (after an error that proves the request never left,
// connection refused for example, or after a refusal) only if the
// transport had not read any of it; otherwise the retry is skipped and the
// give-up event's Err matches [ErrBodyNotReplayable]. A partial or doubled
// body is never sent.
// [MaxBufferedBody](math.MaxInt64) buffers without a limit.
// The caller's request body is closed exactly once, and the caller's
// *http.Request is never modified (attempts that need a different body,
// URL, header or context use a copy). A panic in the policy's Observer or
// Retryable, in the base transport or in GetBody goes on up to the caller,
// after the transport closed what it held: the response it would have
// retried or returned, the body fetched for the next attempt, the
// caller's body.
//
// # Responses
//
// A response that is not retried is handed to the caller as soon as its
// headers arrive (a stream, as soon as its first event is complete, see
// below); the rest of its body is never read or buffered. A response that
// is retried is drained (at most 64 KiB) and closed before the next
// attempt, so the attempts share one HTTP/1 connection (an HTTP/2 response
// is closed at once: that resets its stream only; so is a stream whose
// first event failed, see below). Reading the body of a
// retryable response (this drain, and the peek for RetryInfo below) takes
// at most 1 s, and never longer than the attempt's deadline or the caller's
// context: a body that stalls is closed, with its connection, and the retry
// goes ahead. (That read runs on a goroutine of its own, which the retry
// does not wait for past the bound: the body of a response net/http
// decompresses, Content-Encoding gzip, cannot be closed while its first
// Read waits for the gzip header. With an attempt timeout or a deadline
// the transport cancels the attempt's context, and net/http closes the
// connection at once; without one, that read and its connection end when
// the server sends or closes, or the caller's context ends.) When the transport gives up on a retryable status (attempts
// used up, deadline, budget) it returns the last response, status and body
// intact, with a nil error, as net/http callers expect.
//
// # Errors
//
// Every error RoundTrip returns after at least one attempt is a
// [*retry.Error] (errors.As), whatever stopped the loop: the attempts or
// the deadline used up, the caller's context, an error that is not
// retried (a TLS error, a request body that failed: Reason
// retry.ReasonPermanent) or a skipped retry (ReasonPermanent too). Its Last
// error holds the last attempt's [*AttemptError] (or, when the caller's
// context ended that attempt, the base transport's error as it came, or the
// context's error when it ended the wait for a stream's first event), and
// errors.Is reaches the causes through it: the transport error (syscall.ECONNRESET, ...),
// [ErrNotIdempotent] or [ErrBodyNotReplayable] for a skipped retry,
// GetBody's error, the request body's error, the context's error. (An
// invalid Transport, or a request body that fails while it is buffered
// before the first attempt, returns its own error: no attempt was made.)
// When the caller's deadline ends an attempt, the Reason is
// retry.ReasonContext, whichever of its timers and the transport's own
// (the bound of a body's read) fires first.
// http.Client wraps each in a *url.Error, as it does any transport's.
//
// # Streams
//
// A streamed answer can fail after its 200 status: Gemini's
// streamGenerateContent sends a quota error as the first event of its
// stream, or the connection drops before the first event. Until the first
// event reaches the caller nothing has been delivered, so a retry is safe
// and invisible; after it, a retry would deliver events twice. So, for a 2xx
// answer whose Content-Type is text/event-stream, application/x-ndjson or
// application/json beginning with '[' (an alt=json stream), to a request the
// transport may repeat (idempotent, its body replayable, an attempt left),
// the transport reads the body up to the end of its first event: in SSE,
// the blank line after an event with data (comments and data-less blocks
// are skipped; lines end at LF, CRLF or a bare CR, and the event is
// complete at the CR or LF that ends its blank line, without waiting for
// another byte; a UTF-8 byte order mark in front is skipped), or the end
// of the stream right after the line end of a data line (see below); in
// NDJSON, the first line that is not blank; in a JSON array, its first
// element.
//
// text/event-stream and application/x-ndjson say by their type that they
// are streams: the answer to a POST (a call: generateContent, a chat
// completion) is peeked whatever its URL. A GET is also how one subscribes
// to a feed (an EventSource, a notification stream) that may stay quiet
// for minutes, sending keep-alive comments meanwhile that its caller may
// watch: the answer to a GET is peeked only when the GET names a streamed
// call (its URL path's last segment holds ":stream", or its query has
// alt=sse) or its context asks for it with [StreamPeek](ctx, true); any
// other is handed over with its headers, unpeeked. An application/json
// answer is taken for a stream only when the request looks like one: one
// of Google's streaming methods, whose URL path's last segment holds
// ":stream" (as in
// /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=json), or a
// request whose context asks for it with [StreamPeek](ctx, true). Any
// other JSON answer (an object, a watch that sends nothing for minutes) is
// handed over with its headers, unpeeked. So is an empty answer: a
// Content-Length of 0 (http.NoBody stays http.NoBody), or a JSON body
// that ends before its '['.
//
// The attempt fails as retryable when:
//
//   - the first event is an error object, {"error": {...}}, whose "code"
//     (an HTTP status, or a google.rpc.Code number) or else "status"
//     (RESOURCE_EXHAUSTED, UNAVAILABLE, ... mapped to their HTTP statuses
//     as Google's APIs do) is one of the policy's StatusCodes; its
//     google.rpc.RetryInfo is the hint for the wait, and the retry's
//     [*AttemptError] has Class [ClassStreamError] and that Status;
//   - or the body fails or ends before the first event is complete (a
//     reset, an EOF, the attempt timeout or deadline): the error's class
//     says which (ClassTimeout only when the attempt's time was up). At
//     the end of an SSE stream, a block whose data line ended (CR or LF)
//     is the first event without its blank line: the SSE format would
//     discard it, but the Gen AI SDKs read it as a chunk, so that a retry
//     would only buy the same answer again; it is checked like any first
//     event. A stream that ends inside a line, or before any data, has
//     failed.
//
// Otherwise the caller gets the response at once, its body unchanged: the
// bytes read are put back in front of it, byte for byte, and the rest flows
// as it comes, without a copy. The first event must begin within the first
// 256 KiB of the body (what comes before it: a byte order mark, comments
// such as keep-alive pings, retry:, id: and event: fields, blank lines, the
// array's '[') and end within 64 KiB of its beginning (in SSE, its first
// data line): otherwise the answer is handed over as it is. Once the first
// event has been handed over nothing is retried: a later failure reaches the
// caller as it happened. A stream that is retried is closed before the next
// attempt, not drained. When the loop gives up after a failed stream
// (attempts, deadline, budget), the caller gets that last response, its body
// as the server sent it. Reading the first event takes no time of its own:
// the caller could read nothing of the answer sooner. What comes before that
// event (SSE comments such as keep-alive pings) reaches the caller with it,
// not as it comes: a caller that must see them (an idle watchdog) turns the
// peek off for its request with [StreamPeek](ctx, false). It is bounded by
// the attempt's timeout and deadline, not by the 1 s of a retryable answer's
// body (a model may think for a while before its first token). Compressed
// answers the base transport did not decode are not peeked.
// [WithStreamPeek](false) turns peeking off for a transport, [StreamPeek] on
// or off for one request.
//
// # Server hints
//
// On a retryable status, a Retry-After header (delta-seconds, or an HTTP-date
// in any of the three formats http.ParseTime knows, measured from the
// response's Date header when it has a valid one: the date is in the
// server's clock, not this machine's) and, failing that,
// google.rpc.RetryInfo.retryDelay in a Google JSON error body are used as a
// hint: the next wait is at least the hint, plus jitter, capped by the
// policy's MaxRetryAfter (default MaxDelay). The body is peeked (at most
// 16 KiB and 1 s, only for a retryable status with a JSON or missing
// Content-Type: a media type holding "json", in any case, such as
// Application/JSON or application/problem+json) and handed back unchanged
// if the response is returned (a body that stalled yields the bytes read,
// then a timeout error). A body the transport peeked at fails every Read
// after its Close, as net/http's do. A hinted
// wait that would end after the policy's or the context's deadline ends the
// loop at once and the response is returned.
//
// # Timeouts
//
// Policy.AttemptTimeout (or [WithAttemptTimeout]) bounds each attempt,
// separately from Policy.Deadline, which bounds them all; an attempt that
// times out is retried. Both also bound reading the body of the response that
// is returned, like http.Client.Timeout: the response's context ends when
// its body is closed, read to the end, or the time is up. A 101 Switching
// Protocols response ends the attempt: its body, the upgraded connection (an
// io.ReadWriteCloser), is handed over as the base transport made it, and
// neither bound applies to it. Errors of attempts that timed out say so
// with a Timeout method, as net/http's do, also through *url.Error.
//
// # Per-request overrides
//
// [WithPolicy] attaches a policy to a request's context. It is merged over
// the transport's policy field by field with [retry.Policy.Merge]: every
// field set in the override (non-zero, or [retry.Zero]) wins, every field
// left zero keeps the transport's value. (The Gen AI SDKs replace the whole
// options struct instead; we do not.) Nested WithPolicy calls merge too, the
// innermost last.
//
// # Logging and redaction
//
// Every retry and give-up produces one event for the policy's Observer. With
// no Observer the transport logs one structured record per retry and give-up
// to slog.Default at Debug level (or to the logger given with [WithLogger],
// at Info): method, host, path, endpoint, status or error class, attempt,
// wait, hint and hint source. Secrets never appear: URLs are written with
// [Redact] (the values of key, access_token, token, signed URLs'
// signatures and credentials and other secret parameters, in the query or
// the fragment, are replaced by REDACTED, user info is removed) and
// headers are never logged (use [RedactHeader] to log them yourself).
// [*AttemptError] messages are redacted too, with [RedactText], which
// applies the same rules to URLs quoted in text and also hides, anywhere
// in the text, Google API keys (AIza...), bearer tokens and the values of
// credential headers ("x-goog-api-key: ...", "Authorization: ..."): the
// message of a stream's error event, which the server writes, may quote
// them.
//
// # Endpoint fallback
//
// [WithEndpoints] sends requests to an ordered list of base URLs (for
// example a regional Vertex AI host, another region, the global endpoint);
// see its documentation for the rotation and cool-down rules.
//
// # Profiles and Vertex AI's consumption options
//
// A [retry.Profile] is a policy; on Vertex AI the "flex" and "priority"
// profiles also need request headers, without which a request is served
// as Standard pay-as-you-go: [WithProfile] adds them to every request that
// lacks them (a header the caller set wins) and keeps both profiles on
// Vertex AI's global endpoint, the only one that serves them;
// [ProfileHeader] returns them for a client that sets its own:
//
//	p, _ := retry.Profile("flex")
//	client, err := httpretry.NewClient(p, httpretry.WithProfile("flex"))
//
// Which option served a request is in the response body's
// usageMetadata.trafficType (ON_DEMAND, ON_DEMAND_PRIORITY,
// ON_DEMAND_FLEX, PROVISIONED_THROUGHPUT). The transport does not read
// the body of a response it hands over (beyond a stream's first event),
// so it does not report it: the caller reads it from the body it decodes
// anyway (the Gen AI SDK's UsageMetadata.TrafficType; in a stream, the
// chunk that carries usageMetadata).
package httpretry
