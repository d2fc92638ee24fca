package httpretry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/testkit"
)

func get(t *testing.T, rt http.RoundTripper, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return roundTrip(t, rt, req)
}

// roundTrip sends req through rt; an error fails the test.
func roundTrip(t *testing.T, rt http.RoundTripper, req *http.Request) *http.Response {
	t.Helper()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	return resp
}

// wantHits is how many requests the server of the idempotency tables sees:
// three (every attempt) if the request is retried, else one.
func wantHits(retried bool) int32 {
	if retried {
		return 3
	}
	return 1
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return string(b)
}

func TestStatusCodes(t *testing.T) {
	tests := []struct {
		code  int
		retry bool
	}{
		{200, false}, {201, false}, {204, false}, {304, false},
		{400, false}, {401, false}, {403, false}, {404, false}, {409, false},
		{408, true}, {429, true},
		{500, true}, {501, false}, {502, true}, {503, true}, {504, true}, {505, false},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.code), func(t *testing.T) {
			srv := testkit.NewScript(t, testkit.Status(tt.code, "first"), testkit.Status(200, "second"))
			resp := get(t, NewTransport(srv.Client().Transport, fast), srv.URL)
			body := readAll(t, resp)
			wantHits, wantCode, wantBody := int32(1), tt.code, "first"
			if tt.retry {
				wantHits, wantCode, wantBody = 2, 200, "second"
			}
			if tt.code == 204 || tt.code == 304 {
				wantBody = ""
			}
			if got := srv.Hits(); got != wantHits {
				t.Errorf("server saw %d requests, want %d", got, wantHits)
			}
			if resp.StatusCode != wantCode || body != wantBody {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, wantCode, wantBody)
			}
		})
	}
}

func TestCustomStatusCodes(t *testing.T) {
	srv := testkit.NewScript(t, testkit.Status(418, ""), testkit.Status(503, "busy"))
	p := fast
	p.StatusCodes = []int{418}
	resp := get(t, NewTransport(srv.Client().Transport, p), srv.URL)
	// 418 is retried; 503 is not in the list, so it is returned at once.
	if body := readAll(t, resp); resp.StatusCode != 503 || body != "busy" || srv.Hits() != 2 {
		t.Fatalf("got %d %q after %d requests, want 503 \"busy\" after 2", resp.StatusCode, body, srv.Hits())
	}
}

// TestGiveUpReturnsLastResponse: attempts used up on a retryable status
// give the caller the last response, status and body intact, and no error.
func TestGiveUpReturnsLastResponse(t *testing.T) {
	srv := testkit.NewScript(t, testkit.Status(500, "one"), testkit.Status(502, "two"), testkit.Status(503, "three", "X-Attempt", "3"))
	ev := newEvents()
	p := fast
	p.Attempts = 3
	p.Observer = ev.Observe
	resp := get(t, NewTransport(srv.Client().Transport, p), srv.URL)
	if body := readAll(t, resp); resp.StatusCode != 503 || body != "three" || resp.Header.Get("X-Attempt") != "3" {
		t.Fatalf("got %d %q %v, want the third response", resp.StatusCode, body, resp.Header)
	}
	last := ev.Last()
	var ae *AttemptError
	if last.Kind != retry.EventGiveUp || last.Reason != retry.ReasonAttempts || !errors.As(last.Err, &ae) || ae.Status != 503 {
		t.Fatalf("last event = %+v, want a give-up on attempts with a 503 AttemptError", last)
	}
}

// TestConnectionReuse: discarded responses are drained and closed, so four
// attempts share one TCP connection.
func TestConnectionReuse(t *testing.T) {
	big := strings.Repeat("x", 32<<10) // a body the transport must drain
	srv := testkit.NewScript(t, testkit.Status(503, big), testkit.Status(503, big), testkit.Status(503, big), testkit.Status(200, "ok"))
	p := fast
	p.Attempts = 4
	resp := get(t, NewTransport(srv.Client().Transport, p), srv.URL)
	if body := readAll(t, resp); body != "ok" {
		t.Fatalf("body %q", body)
	}
	if hits, conns := srv.Hits(), srv.Conns(); hits != 4 || conns != 1 {
		t.Fatalf("%d requests over %d connections, want 4 over 1", hits, conns)
	}
}

// hijackClose answers by writing partial, then resetting the connection.
func hijackClose(partial string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		buf.WriteString(partial)
		buf.Flush()
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // close with RST
		}
		conn.Close()
	}
}

func TestResetMidHeader(t *testing.T) {
	for _, partial := range []string{"", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n"} {
		srv := testkit.NewScript(t, hijackClose(partial), testkit.Status(200, "ok"))
		ev := newEvents()
		p := fast
		p.Observer = ev.Observe
		resp := get(t, NewTransport(srv.Client().Transport, p), srv.URL)
		if body := readAll(t, resp); body != "ok" || srv.Hits() != 2 {
			t.Fatalf("partial %q: got %q after %d requests, want \"ok\" after 2", partial, body, srv.Hits())
		}
		var ae *AttemptError
		retries := ev.Of(retry.EventRetry)
		if len(retries) != 1 || !errors.As(retries[0].Err, &ae) || (ae.Class != ClassReset && ae.Class != ClassEOF) {
			t.Fatalf("partial %q: retry events %+v, want one reset/eof", partial, retries)
		}
	}
}

// TestResetMidBody: once the headers arrived the response belongs to the
// caller; a reset while reading its body is not retried (nothing is
// delivered twice).
func TestResetMidBody(t *testing.T) {
	srv := testkit.NewScript(t, hijackClose("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nchunk-1"), testkit.Status(200, "again"))
	resp := get(t, NewTransport(srv.Client().Transport, fast), srv.URL)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || string(b) != "chunk-1" {
		t.Fatalf("body %q, err %v: want chunk-1 then an error", b, err)
	}
	if srv.Hits() != 1 {
		t.Fatalf("server saw %d requests, want 1", srv.Hits())
	}
}

// TestRetryableStatusMidBody: a retryable response reset while drained does
// not stop the next attempt.
func TestRetryableStatusMidBody(t *testing.T) {
	srv := testkit.NewScript(t, hijackClose("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 100\r\n\r\nbus"), testkit.Status(200, "ok"))
	resp := get(t, NewTransport(srv.Client().Transport, fast), srv.URL)
	if body := readAll(t, resp); body != "ok" || srv.Hits() != 2 {
		t.Fatalf("got %q after %d requests", body, srv.Hits())
	}
}

func TestRefusedIsRetriedForAnyMethod(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	ev := newEvents()
	p := fast
	p.Attempts = 3
	p.Observer = ev.Observe
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/items?key=SECRET", strings.NewReader("payload"))
	_, err = NewTransport(nil, p).RoundTrip(req)
	var re *retry.Error
	var ae *AttemptError
	if !errors.As(err, &re) || re.Attempts != 3 || re.Reason != retry.ReasonAttempts || !errors.As(err, &ae) || ae.Class != ClassRefused {
		t.Fatalf("err = %v, want a retry.Error after 3 refused attempts", err)
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("secret in error: %v", err)
	}
	if n := len(ev.Of(retry.EventRetry)); n != 2 {
		t.Fatalf("%d retry events, want 2", n)
	}
}

// TestPostNotIdempotent is what the CLI relies on: a POST that fails with a
// retryable status is not retried, the give-up event's Err matches
// ErrNotIdempotent and holds the AttemptError, and the caller gets the
// response.
func TestPostNotIdempotent(t *testing.T) {
	srv := testkit.NewScript(t, testkit.Status(503, "busy"), testkit.Status(200, "ok"))
	ev := newEvents()
	p := fast
	p.Observer = ev.Observe
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/items?key=SECRET", strings.NewReader("payload"))
	resp, err := NewTransport(srv.Client().Transport, p).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 503 || body != "busy" || srv.Hits() != 1 {
		t.Fatalf("got %d %q after %d requests, want the 503 after 1", resp.StatusCode, body, srv.Hits())
	}
	if k := ev.Kinds(); len(k) != 1 || k[0] != retry.EventGiveUp {
		t.Fatalf("events %v, want one give-up", k)
	}
	e := ev.Last()
	var ae *AttemptError
	if !errors.Is(e.Err, ErrNotIdempotent) || !errors.As(e.Err, &ae) || e.Reason != retry.ReasonPermanent {
		t.Fatalf("give-up event %+v: want ErrNotIdempotent and an AttemptError", e)
	}
	if ae.Method != "POST" || ae.Status != 503 || ae.Class != ClassStatus || ae.Endpoint != srv.URL || ae.URL != srv.URL+"/v1/items?key=REDACTED" {
		t.Fatalf("AttemptError %+v", ae)
	}
	if errors.Is(e.Err, ErrBodyNotReplayable) {
		t.Fatal("ErrBodyNotReplayable matches too")
	}
}

func TestPostNotIdempotentTransportError(t *testing.T) {
	srv := testkit.NewScript(t, hijackClose("HTTP/1.1 200 OK\r\n"), testkit.Status(200, "ok"))
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("payload"))
	_, err := NewTransport(srv.Client().Transport, fast).RoundTrip(req)
	if !errors.Is(err, ErrNotIdempotent) || srv.Hits() != 1 {
		t.Fatalf("err = %v after %d requests, want ErrNotIdempotent after 1", err, srv.Hits())
	}
}

func TestIdempotentPost(t *testing.T) {
	uuidV4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	tests := []struct {
		name    string
		opts    []Option
		ctx     func(context.Context) context.Context
		key     string // Idempotency-Key set by the caller
		method  string
		retried bool
		autoKey bool // a generated key is expected
	}{
		{name: "POST", method: "POST"},
		{name: "PATCH", method: "PATCH"},
		{name: "POST with key", method: "POST", key: "k-123", retried: true},
		{name: "POST marked idempotent", method: "POST", ctx: Idempotent, retried: true},
		{name: "POST allowed client-wide", method: "POST", opts: []Option{AllowNonIdempotent()}, retried: true},
		{name: "POST allowed but marked not idempotent", method: "POST", opts: []Option{AllowNonIdempotent()}, ctx: NotIdempotent},
		{name: "POST with key marked not idempotent", method: "POST", key: "k", ctx: NotIdempotent},
		{name: "POST with added key", method: "POST", opts: []Option{AddIdempotencyKey()}, retried: true, autoKey: true},
		{name: "PATCH with added key", method: "PATCH", opts: []Option{AddIdempotencyKey()}, retried: true, autoKey: true},
		{name: "POST with own key and AddIdempotencyKey", method: "POST", key: "mine", opts: []Option{AddIdempotencyKey()}, retried: true},
		{name: "POST not idempotent with AddIdempotencyKey", method: "POST", opts: []Option{AddIdempotencyKey()}, ctx: NotIdempotent},
		{name: "PUT", method: "PUT", retried: true},
		{name: "DELETE", method: "DELETE", retried: true},
		{name: "OPTIONS", method: "OPTIONS", retried: true},
		{name: "GET marked not idempotent", method: "GET", ctx: NotIdempotent},
		{name: "CONNECTish custom method", method: "PURGE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewScript(t, testkit.Status(503, "busy"), testkit.Status(503, "busy"), testkit.Status(200, "ok"))
			req := payloadRequest(tt.ctx, tt.method, srv.URL, tt.key)
			readAll(t, roundTrip(t, NewTransport(srv.Client().Transport, fast, tt.opts...), req))
			if got, want := srv.Hits(), wantHits(tt.retried); got != want {
				t.Fatalf("server saw %d requests, want %d", got, want)
			}
			seen := srv.Requests()
			key := seen[0].Header.Get("Idempotency-Key")
			for i, s := range seen {
				if s.Body != "payload" {
					t.Errorf("attempt %d body %q", i+1, s.Body)
				}
				if k := s.Header.Get("Idempotency-Key"); k != key {
					t.Errorf("attempt %d key %q, attempt 1 had %q", i+1, k, key)
				}
			}
			switch {
			case tt.autoKey && !uuidV4.MatchString(key):
				t.Errorf("added key %q is not a UUID v4", key)
			case !tt.autoKey && key != tt.key:
				t.Errorf("key %q, want %q", key, tt.key)
			}
			if tt.autoKey && req.Header.Get("Idempotency-Key") != "" {
				t.Error("the caller's request header was modified")
			}
		})
	}
}

func TestAddedKeyDiffersPerRequest(t *testing.T) {
	srv := testkit.NewScript(t, testkit.Status(200, ""))
	rt := NewTransport(srv.Client().Transport, fast, AddIdempotencyKey())
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
	}
	s := srv.Requests()
	if a, b := s[0].Header.Get("Idempotency-Key"), s[1].Header.Get("Idempotency-Key"); a == "" || a == b {
		t.Fatalf("keys %q and %q: want two different keys", a, b)
	}
}

// opaqueBody hides the type of its reader, so http.NewRequest sets no GetBody.
type opaqueBody struct{ r io.Reader }

func (o opaqueBody) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestBodyReplay(t *testing.T) {
	payload := strings.Repeat("0123456789", 50) // 500 bytes
	tests := []struct {
		name      string
		body      func() io.Reader
		limit     int64
		replay    bool
		getBody   bool
		wantHits  int32
		wantCode  int
		skipCause error
	}{
		{name: "GetBody", body: func() io.Reader { return strings.NewReader(payload) }, getBody: true, wantHits: 3, wantCode: 200},
		{name: "buffered", body: func() io.Reader { return opaqueBody{strings.NewReader(payload)} }, wantHits: 3, wantCode: 200},
		{name: "buffered at the limit", body: func() io.Reader { return opaqueBody{strings.NewReader(payload)} }, limit: 500, wantHits: 3, wantCode: 200},
		{name: "over the limit", body: func() io.Reader { return opaqueBody{strings.NewReader(payload)} }, limit: 499, wantHits: 1, wantCode: 503, skipCause: ErrBodyNotReplayable},
		{name: "never buffered", body: func() io.Reader { return opaqueBody{strings.NewReader(payload)} }, limit: 0, wantHits: 1, wantCode: 503, skipCause: ErrBodyNotReplayable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewScript(t, testkit.Status(503, "busy"), testkit.Status(503, "busy"), testkit.Status(200, "ok"))
			ev := newEvents()
			p := fast
			p.Observer = ev.Observe
			var opts []Option
			if tt.limit != 0 || tt.name == "never buffered" {
				opts = append(opts, MaxBufferedBody(tt.limit))
			}
			cc := &closeCounter{Reader: tt.body()}
			req, _ := http.NewRequestWithContext(Idempotent(context.Background()), http.MethodPost, srv.URL, cc)
			if tt.getBody {
				req, _ = http.NewRequestWithContext(Idempotent(context.Background()), http.MethodPost, srv.URL, strings.NewReader(payload))
				orig := req.Body
				cc = &closeCounter{Reader: orig}
				req.Body = cc
			} else if req.GetBody != nil {
				t.Fatal("test body has GetBody")
			}
			resp, err := NewTransport(srv.Client().Transport, p, opts...).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if srv.Hits() != tt.wantHits || resp.StatusCode != tt.wantCode {
				t.Fatalf("got %d after %d requests, want %d after %d", resp.StatusCode, srv.Hits(), tt.wantCode, tt.wantHits)
			}
			for i, s := range srv.Requests() {
				if s.Body != payload {
					t.Errorf("attempt %d: the server got %d bytes, want the %d of the payload", i+1, len(s.Body), len(payload))
				}
			}
			if n := cc.closed.Load(); n != 1 {
				t.Errorf("the request body was closed %d times, want 1", n)
			}
			if tt.skipCause != nil {
				e := ev.Last()
				if e.Kind != retry.EventGiveUp || !errors.Is(e.Err, tt.skipCause) || errors.Is(e.Err, ErrNotIdempotent) {
					t.Errorf("last event %+v: want a give-up matching %v", e, tt.skipCause)
				}
			}
		})
	}
}

func TestGetBodyFails(t *testing.T) {
	srv := testkit.NewScript(t, testkit.Status(503, "busy"), testkit.Status(200, "ok"))
	ev := newEvents()
	p := fast
	p.Observer = ev.Observe
	req, _ := http.NewRequest(http.MethodPut, srv.URL, strings.NewReader("x"))
	boom := errors.New("boom")
	req.GetBody = func() (io.ReadCloser, error) { return nil, boom }
	resp, err := NewTransport(srv.Client().Transport, p).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 503 || body != "busy" {
		t.Fatalf("got %d %q, want the first response", resp.StatusCode, body)
	}
	if e := ev.Last(); !errors.Is(e.Err, ErrBodyNotReplayable) || !errors.Is(e.Err, boom) {
		t.Fatalf("last event %+v, want ErrBodyNotReplayable and the GetBody error", e)
	}
}

// failingBody fails after some bytes.
type failingBody struct {
	closeCounter
}

func TestBodyReadErrorWhileBuffering(t *testing.T) {
	srv := testkit.NewScript(t, testkit.Status(200, "ok"))
	boom := errors.New("disk on fire")
	cc := &closeCounter{Reader: io.MultiReader(strings.NewReader("abc"), errReader{boom})}
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"?token=SECRET", cc)
	_, err := NewTransport(srv.Client().Transport, fast).RoundTrip(req)
	if !errors.Is(err, boom) || strings.Contains(err.Error(), "SECRET") || cc.closed.Load() != 1 || srv.Hits() != 0 {
		t.Fatalf("err = %v, closed %d, hits %d", err, cc.closed.Load(), srv.Hits())
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestRequestNotModified(t *testing.T) {
	srv := testkit.NewScript(t, testkit.Status(503, ""), testkit.Status(200, "ok"))
	p := fast
	rt := NewTransport(srv.Client().Transport, p, AddIdempotencyKey(), WithAttemptTimeout(time.Minute),
		WithEndpoints([]string{srv.URL}, time.Second))
	req, _ := http.NewRequest(http.MethodPost, "https://example.invalid/v1/x?a=1", opaqueBody{strings.NewReader("body")})
	req.Header.Set("Authorization", "Bearer t")
	before := *req
	beforeURL := *req.URL
	beforeHeader := req.Header.Clone()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if srv.Hits() != 2 {
		t.Fatalf("%d requests", srv.Hits())
	}
	if *req.URL != beforeURL || req.Host != before.Host || req.ContentLength != before.ContentLength ||
		req.Body != before.Body || req.GetBody != nil || req.Context() != before.Context() || len(req.Header) != len(beforeHeader) ||
		req.Header.Get("Authorization") != "Bearer t" || req.Header.Get("Idempotency-Key") != "" {
		t.Fatalf("the caller's request changed: %+v", req)
	}
	for i, s := range srv.Requests() {
		if s.Path != "/v1/x" || s.RawQuery != "a=1" || s.Header.Get("Authorization") != "Bearer t" || s.Body != "body" {
			t.Errorf("attempt %d: %+v", i+1, s)
		}
	}
}

func TestPerRequestOverrideMerge(t *testing.T) {
	base := fast
	base.Attempts = 2
	for _, tc := range []struct {
		name      string
		status    int
		overrides []retry.Policy // WithPolicy, in this order
		want      int            // requests
	}{
		// The override changes Attempts only: the zero waits stay.
		{"attempts", 503, []retry.Policy{{Attempts: 4}}, 4},
		{"status codes", 418, []retry.Policy{{StatusCodes: []int{418}}}, 2}, // the transport's Attempts: 2
		{"nested", 418, []retry.Policy{{StatusCodes: []int{418}}, {Attempts: 3}}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testkit.NewScript(t, testkit.Status(tc.status, ""))
			ctx := context.Background()
			for _, o := range tc.overrides {
				ctx = WithPolicy(ctx, o)
			}
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
			resp, err := NewTransport(srv.Client().Transport, base).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if srv.Hits() != int32(tc.want) {
				t.Fatalf("%d requests, want %d", srv.Hits(), tc.want)
			}
		})
	}
	t.Run("invalid", func(t *testing.T) {
		srv := testkit.NewScript(t, testkit.Status(200, ""))
		cc := &closeCounter{Reader: strings.NewReader("x")}
		req, _ := http.NewRequestWithContext(WithPolicy(context.Background(), retry.Policy{Attempts: -1}), "PUT", srv.URL, cc)
		_, err := NewTransport(srv.Client().Transport, base).RoundTrip(req)
		var ve *retry.ValidationError
		if !errors.As(err, &ve) || ve.Field != "Attempts" || srv.Hits() != 0 || cc.closed.Load() != 1 {
			t.Fatalf("err = %v, hits %d, closed %d", err, srv.Hits(), cc.closed.Load())
		}
	})
}

// badConfig is a case of a policy and options that NewTransport and
// NewClient must refuse: the error names want.
type badConfig struct {
	name string
	p    retry.Policy
	opts []Option
	want string
}

func TestInvalidOptions(t *testing.T) {
	tests := []badConfig{
		{"policy", retry.Policy{MaxDelay: -time.Second}, nil, "MaxDelay"},
		{"buffer", retry.Policy{}, []Option{MaxBufferedBody(-1)}, "MaxBufferedBody(-1)"},
		{"timeout", retry.Policy{}, []Option{WithAttemptTimeout(-time.Second)}, "WithAttemptTimeout(-1s)"},
		{"no endpoints", retry.Policy{}, []Option{WithEndpoints(nil, time.Second)}, "list of endpoints is empty"},
		{"scheme", retry.Policy{}, []Option{WithEndpoints([]string{"ftp://x"}, time.Second)}, `endpoint 0 "ftp://x": the scheme must be http or https`},
		{"path", retry.Policy{}, []Option{WithEndpoints([]string{"https://a", "https://b/v1"}, time.Second)}, `endpoint 1 "https://b/v1"`},
		{"userinfo", retry.Policy{}, []Option{WithEndpoints([]string{"https://u:p@b"}, time.Second)}, "user info"},
		{"cooldown", retry.Policy{}, []Option{WithEndpoints([]string{"https://b"}, -time.Second)}, "cooldown -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := NewTransport(nil, tt.p, tt.opts...)
			if rt.Err() == nil || !strings.Contains(rt.Err().Error(), tt.want) {
				t.Fatalf("Err() = %v, want it to say %q", rt.Err(), tt.want)
			}
			cc := &closeCounter{Reader: strings.NewReader("x")}
			req, _ := http.NewRequest("PUT", "http://127.0.0.1:1/", cc)
			if _, err := rt.RoundTrip(req); err != rt.Err() || cc.closed.Load() != 1 {
				t.Fatalf("RoundTrip err = %v, closed %d", err, cc.closed.Load())
			}
		})
	}
	if err := NewTransport(nil, retry.Policy{}, WithEndpoints([]string{"https://a:443/", "http://127.0.0.1:8080"}, 0)).Err(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
}

func TestNewClient(t *testing.T) {
	srv := testkit.NewScript(t, testkit.Status(503, ""), testkit.Status(200, "ok"))
	c, err := NewClient(fast)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Transport.(*Transport); !ok {
		t.Fatalf("transport %T", c.Transport)
	}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); body != "ok" || srv.Hits() != 2 {
		t.Fatalf("got %q after %d", body, srv.Hits())
	}
	c.CloseIdleConnections()
}

// TestNewClientReportsErrors: an invalid policy or option is returned by
// NewClient as an error naming what is wrong, and NewTransport's result is a
// *Transport, so Err needs no type assertion.
func TestNewClientReportsErrors(t *testing.T) {
	tests := []badConfig{
		{"policy", retry.Policy{Attempts: -2}, nil, "Attempts"},
		{"option", retry.Policy{}, []Option{MaxBufferedBody(-5)}, "MaxBufferedBody(-5)"},
		{"both", retry.Policy{MaxDelay: -time.Second}, []Option{WithAttemptTimeout(-time.Second)}, "MaxDelay"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewClient(tt.p, tt.opts...)
			if err == nil || c != nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewClient = %v, %v; want a nil client and an error naming %q", c, err, tt.want)
			}
			var tr *Transport = NewTransport(nil, tt.p, tt.opts...)
			if tr.Err() == nil || tr.Err().Error() != err.Error() {
				t.Fatalf("Transport.Err() = %v, NewClient's error %v: want the same", tr.Err(), err)
			}
		})
	}
}

var _ = bytes.NewReader

func TestInvalidAttemptTimeoutOverride(t *testing.T) {
	req, _ := http.NewRequestWithContext(WithPolicy(context.Background(), retry.Policy{AttemptTimeout: -time.Second}), "GET", "https://example.com/", nil)
	_, err := NewTransport(rtFunc(func(*http.Request) (*http.Response, error) {
		t.Fatal("no attempt expected")
		return nil, nil
	}), retry.Policy{}).RoundTrip(req)
	var ve *retry.ValidationError
	if !errors.As(err, &ve) || ve.Field != "AttemptTimeout" {
		t.Fatalf("err = %v, want a ValidationError for AttemptTimeout", err)
	}
}

// TestNilResponseBody: a base RoundTripper may return a response without a
// body; nothing panics.
func TestNilResponseBody(t *testing.T) {
	n := 0
	rt := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
		n++
		code := 503
		if n == 2 {
			code = 204
		}
		return &http.Response{StatusCode: code, Header: http.Header{}, Request: r}, nil
	}), fast, WithAttemptTimeout(time.Minute))
	req, _ := http.NewRequest("GET", "https://example.com/", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil || resp.StatusCode != 204 || n != 2 {
		t.Fatalf("got %v, %v after %d attempts", resp, err, n)
	}
}

func TestZeroTransport(t *testing.T) {
	srv := testkit.NewScript(t, testkit.Status(503, ""), testkit.Status(200, "ok"))
	p := fast
	var rt http.RoundTripper = &Transport{policy: p}
	req, _ := http.NewRequest("PUT", srv.URL, opaqueBody{strings.NewReader("body")})
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); body != "ok" || srv.Hits() != 2 || srv.Requests()[1].Body != "body" {
		t.Fatalf("got %q after %d requests", body, srv.Hits())
	}
	rt.(*Transport).CloseIdleConnections()
}
