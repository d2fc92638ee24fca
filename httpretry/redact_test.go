package httpretry

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/chaos"
	"github.com/backoffkit/retry/internal/testkit"
)

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://example.com/v1/x", "https://example.com/v1/x"},
		{"https://example.com/v1/x?key=AIzaSECRET&alt=sse", "https://example.com/v1/x?key=REDACTED&alt=sse"},
		{"https://example.com/?alt=sse&access_token=ya29.SECRET&token=SECRET&pageToken=p1", "https://example.com/?alt=sse&access_token=REDACTED&token=REDACTED&pageToken=p1"},
		{"https://example.com/?KEY=SECRET&Token=SECRET", "https://example.com/?KEY=REDACTED&Token=REDACTED"},
		{"https://example.com/?ke%79=SECRET", "https://example.com/?ke%79=REDACTED"},
		{"https://example.com/?key", "https://example.com/?key=REDACTED"},
		{"https://example.com/?key=a&key=b", "https://example.com/?key=REDACTED&key=REDACTED"},
		{"https://user:SECRET@example.com/x", "https://example.com/x"},
		{"https://user@example.com/x?monkey=1", "https://example.com/x?monkey=1"},
		// Amazon S3's temporary credentials
		{"https://b.s3.amazonaws.com/o?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F&X-Amz-Security-Token=SESSION&X-Amz-Signature=abc",
			"https://b.s3.amazonaws.com/o?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=REDACTED&X-Amz-Security-Token=REDACTED&X-Amz-Signature=REDACTED"},
		// ';' separates parameters too (RawQuery keeps it)
		{"https://h/p?alt=sse;key=SEMI;x=1", "https://h/p?alt=sse;key=REDACTED;x=1"},
		// a fragment: the OAuth implicit grant's redirect
		{"https://h/cb#access_token=FRAG&state=1", "https://h/cb#access_token=REDACTED&state=1"},
		{"https://h/cb?code=1#state=x;token=FRAG", "https://h/cb?code=1#state=x;token=REDACTED"},
		{"https://h/p#section-2", "https://h/p#section-2"},
		{"https://h/p?x-goog-api-key=HDR", "https://h/p?x-goog-api-key=REDACTED"},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		before := *u
		if got := Redact(u); got != tt.want {
			t.Errorf("Redact(%s) = %s, want %s", tt.in, got, tt.want)
		}
		if *u != before {
			t.Errorf("Redact modified %s", tt.in)
		}
	}
	if Redact(nil) != "" {
		t.Error("Redact(nil) is not empty")
	}
}

func TestRedactHeader(t *testing.T) {
	h := http.Header{
		"Authorization":             {"Bearer SECRET"},
		"Proxy-Authorization":       {"Basic SECRET"},
		"X-Goog-Api-Key":            {"SECRET"},
		"x-goog-api-key":            {"SECRET"}, // not canonical
		"Cookie":                    {"a=SECRET", "b=SECRET"},
		"Set-Cookie":                {"sid=SECRET"},
		"Api-Key":                   {"SECRET"}, // Azure OpenAI
		"X-Amz-Security-Token":      {"SECRET"},
		"Ocp-Apim-Subscription-Key": {"SECRET"},
		"Content-Type":              {"application/json"},
	}
	got := RedactHeader(h)
	for name, vals := range got {
		for _, v := range vals {
			if strings.Contains(v, "SECRET") {
				t.Errorf("%s: %q not redacted", name, v)
			}
		}
	}
	if got.Get("Content-Type") != "application/json" || len(got["Cookie"]) != 2 || got.Get("Authorization") != Redacted {
		t.Errorf("RedactHeader = %v", got)
	}
	if h.Get("Authorization") != "Bearer SECRET" {
		t.Error("RedactHeader modified its argument")
	}
	if RedactHeader(nil) != nil {
		t.Error("RedactHeader(nil) is not nil")
	}
}

// TestLogRedacted: the log records carry the HTTP details and no secret,
// for statuses, transport errors and give-ups.
func TestLogRedacted(t *testing.T) {
	srv := testkit.NewScript(t, testkit.Status(503, "busy"), testkit.Status(200, "ok"))
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	rt := NewTransport(srv.Client().Transport, fast, WithLogger(logger))

	secret := func(base string) string {
		return strings.Replace(base, "http://", "http://user:SECRETPW@", 1) + "/v1/x?key=SECRET1&access_token=SECRET2&token=SECRET3&alt=sse"
	}
	send := func(method, url string) {
		req, _ := http.NewRequest(method, url, strings.NewReader("SECRETBODY"))
		req.Header.Set("Authorization", "Bearer SECRET4")
		req.Header.Set("X-Goog-Api-Key", "SECRET5")
		req.Header.Set("Cookie", "sid=SECRET6")
		resp, err := rt.RoundTrip(req)
		if err == nil {
			readAll(t, resp)
		} else if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("secret in the error: %v", err)
		}
	}
	send("GET", secret(srv.URL))  // a 503, retried, then 200
	send("POST", secret(srv.URL)) // 200 (the script repeats its last answer): no record
	srv2 := testkit.NewScript(t, testkit.Status(500, "oops"))
	send("POST", secret(srv2.URL))     // not idempotent: give-up
	send("GET", secret(refusedURL(t))) // refused: 4 retries, then give-up

	out := buf.String()
	if strings.Contains(out, "SECRET") {
		t.Fatalf("secret in the log:\n%s", out)
	}
	for _, want := range []string{
		`level=INFO msg="httpretry: retry" method=GET host=127.0.0.1`, "path=/v1/x", "status=503", "attempt=1", "max_attempts=5", "wait=0s",
		`msg="httpretry: giving up" method=POST`, "status=500", "reason=permanent", `skipped="not idempotent"`,
		"class=refused", "reason=attempts",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n != 1+1+5 { // 1 retry; 1 give-up; 4 retries + 1 give-up
		t.Errorf("%d records, want 7:\n%s", n, out)
	}
}

// TestDefaultLogDebug: without WithLogger or an Observer the records go to
// slog.Default at Debug level.
func TestDefaultLogDebug(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(old)
	srv := testkit.NewScript(t, testkit.Status(503, "busy"), testkit.Status(200, "ok"))
	readAll(t, get(t, NewTransport(srv.Client().Transport, fast), srv.URL+"/x?key=SECRET"))
	if out := buf.String(); !strings.Contains(out, `level=DEBUG msg="httpretry: retry" method=GET`) || strings.Contains(out, "SECRET") {
		t.Fatalf("log:\n%s", out)
	}
}

func TestAttemptErrorMessage(t *testing.T) {
	u, _ := url.Parse("https://u:p@example.com/v1?key=SECRET")
	c := &call{req: &http.Request{Method: "GET", URL: u}, ep: -1}
	inner := &url.Error{Op: "Get", URL: u.String(), Err: errors.New("connection reset")}
	for _, ae := range []*AttemptError{
		c.attemptError(u, 503, ClassStatus, nil),
		c.attemptError(u, 0, ClassReset, inner),
	} {
		msg := ae.Error()
		if strings.Contains(msg, "SECRET") || strings.Contains(msg, "u:p") || !strings.Contains(msg, "https://example.com/v1?key=REDACTED") {
			t.Errorf("message %q", msg)
		}
	}
	if got := c.attemptError(u, 503, ClassStatus, nil).Error(); got != "httpretry: GET https://example.com/v1?key=REDACTED: 503 Service Unavailable" {
		t.Errorf("message %q", got)
	}
}

// TestNoGoroutineLeak: after retries of every kind on loopback servers and
// closing idle connections, the goroutine count returns to where it was.
func TestNoGoroutineLeak(t *testing.T) {
	before := chaos.SnapshotGoroutines()
	func() {
		srv := testkit.NewScript(t, testkit.Status(503, strings.Repeat("x", 100<<10)), hijackClose(""), testkit.Status(200, "ok"))
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		p := fast
		p.Attempts = 3
		rt := NewTransport(tr, p, WithAttemptTimeout(time.Minute))
		for range 5 {
			readAll(t, get(t, rt, srv.URL))
		}
		req, _ := http.NewRequest("GET", refusedURL(t), nil)
		if _, err := rt.RoundTrip(req); err == nil {
			t.Fatal("no error from a refused connection")
		}
		srv.Close()
	}()
	// Connection goroutines end asynchronously: Leaked waits a bounded time.
	if leaked := before.Leaked(5 * time.Second); len(leaked) > 0 {
		t.Fatalf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
	}
}

var _ = retry.Zero

func TestRedactText(t *testing.T) {
	tests := []struct{ in, want, secret string }{
		{`Post "https://generativelanguage.googleapis.com/v1beta/models/m:generateContent?key=AIzaSECRET&alt=sse": EOF`,
			`Post "https://generativelanguage.googleapis.com/v1beta/models/m:generateContent?key=REDACTED&alt=sse": EOF`, "AIzaSECRET"},
		{`Get "http://h/x?a=1&access_token=ya29.SECRET": dial tcp: refused`,
			`Get "http://h/x?a=1&access_token=REDACTED": dial tcp: refused`, "ya29.SECRET"},
		{`Get "http://h/x?TOKEN=SECRET"`, `Get "http://h/x?TOKEN=REDACTED"`, "SECRET"},
		{`Get "https://b/o?X-Goog-Signature=abc123&x=1"`, `Get "https://b/o?X-Goog-Signature=REDACTED&x=1"`, "abc123"},
		{`Get "https://user:pa55@h/x": timeout`, `Get "https://REDACTED@h/x": timeout`, "pa55"},
		{`Get "http://h/x?monkey=banana"`, `Get "http://h/x?monkey=banana"`, ""},
		{`Get "https://h/p?%6Bey=ENCSECRET": EOF`, `Get "https://h/p?%6Bey=REDACTED": EOF`, "ENCSECRET"},
		{`Get "https://h/cb#access_token=FRAGSECRET&state=1"`, `Get "https://h/cb#access_token=REDACTED&state=1"`, "FRAGSECRET"},
		{`Get "https://b/o?X-Amz-Security-Token=SESSIONSECRET"`, `Get "https://b/o?X-Amz-Security-Token=REDACTED"`, "SESSIONSECRET"},
		{`Get "https://h/p?alt=sse;key=SEMISECRET": EOF`, `Get "https://h/p?alt=sse;key=REDACTED": EOF`, "SEMISECRET"},
		{`Get "https://h/p?key=A&key=B"`, `Get "https://h/p?key=REDACTED&key=REDACTED"`, ""},
		{`key=A at the start of text is no parameter`, `key=A at the start of text is no parameter`, ""},
		{"no url here", "no url here", ""},
		{`GET http://h/?key=SECRET: 404 Not Found`, `GET http://h/?key=REDACTED: 404 Not Found`, "SECRET"},
		{`GET http://h/?key=REDACTED: 404`, `GET http://h/?key=REDACTED: 404`, ""},
		{`redis://h/0?password=SECRET:`, `redis://h/0?password=REDACTED:`, "SECRET"},
		{`GET http://h/?key=SEC:RET: EOF`, `GET http://h/?key=REDACTED: EOF`, "RET"},
		{`GET http://h/?key=SECRET:: EOF`, `GET http://h/?key=REDACTED: EOF`, "SECRET"},
		{`Location: http://h/ok?key=abc?SECRETTAIL`, `Location: http://h/ok?key=REDACTED`, "SECRETTAIL"},
		{`GET http://h/?a=1?key=SECRET&b=2`, `GET http://h/?a=1?key=REDACTED&b=2`, "SECRET"},
	}
	for _, tt := range tests {
		got := RedactText(tt.in)
		if got != tt.want {
			t.Errorf("RedactText(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
		if tt.secret != "" && strings.Contains(got, tt.secret) {
			t.Errorf("secret %q leaked: %q", tt.secret, got)
		}
	}
}

// TestRedactAgrees: Redact and RedactText hide the same secrets (one rule
// set): for each URL, no secret value survives either, and every other
// value survives both.
func TestRedactAgrees(t *testing.T) {
	for _, raw := range []string{
		"https://h/p?key=S1&alt=sse",
		"https://h/p?ke%79=S1&Token=S2&pageToken=keep1",
		"https://h/p?a=keep1;sig=S1;b=keep2",
		"https://h/p?X-Amz-Security-Token=S1&X-Amz-Date=keep1",
		"https://h/cb?state=keep1#access_token=S1&token_type=keep2",
		"https://h/p?apiKey=S1&API_KEY=S2&client_secret=S3&password=S4&id_token=S5&refresh_token=S6&keep1=keep2",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, out := range []string{Redact(u), RedactText(`Get "` + raw + `": EOF`)} {
			for i := 1; i <= 6; i++ {
				if strings.Contains(out, "S"+strconv.Itoa(i)) {
					t.Errorf("%s: secret S%d left in %s", raw, i, out)
				}
			}
			for _, keep := range []string{"keep1", "keep2"} {
				if strings.Contains(raw, keep) && !strings.Contains(out, keep) {
					t.Errorf("%s: %s lost in %s", raw, keep, out)
				}
			}
		}
	}
}

// FuzzRedact: whatever the value of a secret parameter and wherever it
// sits (in the query or the fragment, after '&' or ';', its name in any
// case or percent-encoded), neither Redact nor RedactText lets it through,
// and the other parameters survive both.
func FuzzRedact(f *testing.F) {
	f.Add(uint8(0), "AIzaSyA-secret", uint8(0), false, false, uint8(0))
	f.Add(uint8(17), "FQoGZXIvYXdzEJr", uint8(1), true, true, uint8(5))
	f.Fuzz(func(t *testing.T, which uint8, value string, sep uint8, frag, encode bool, upper uint8) {
		if len(value) < 6 || strings.Contains("REDACTED", value) || strings.Contains(value, "keep") {
			return
		}
		for _, r := range value {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~", r)) {
				return
			}
		}
		name := []byte(secretParams[int(which)%len(secretParams)])
		if i := int(upper) % (len(name) + 1); i < len(name) && name[i] >= 'a' && name[i] <= 'z' {
			name[i] -= 'a' - 'A'
		}
		n := string(name)
		if encode {
			n = "%" + strings.ToUpper(strconv.FormatInt(int64(n[0]), 16)) + n[1:]
		}
		s := [...]string{"&", ";"}[sep%2]
		raw := "https://h.example/p?a=keep1" + s + n + "=" + value + s + "b=keep2"
		if frag {
			raw = "https://h.example/p?a=keep1#c=keep3" + s + n + "=" + value + s + "b=keep2"
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Skip()
		}
		for _, out := range []string{Redact(u), RedactText(`Get "` + raw + `": EOF`)} {
			if strings.Contains(out, value) {
				t.Fatalf("%s: the value of %s left in %s", raw, n, out)
			}
			for _, keep := range []string{"keep1", "keep2"} {
				if !strings.Contains(out, keep) {
					t.Fatalf("%s: %s lost in %s", raw, keep, out)
				}
			}
		}
	})
}

// TestRedactTextCredentials: credentials a server may quote in its error
// text, outside any URL, are hidden by RedactText; the words around them
// and text that only looks alike are kept.
func TestRedactTextCredentials(t *testing.T) {
	const key = "AIzaSyA0123456789abcdefghijklmnopq_-XYZ" // the shape of a real key: 39 characters
	tests := []struct{ in, want string }{
		{"API key " + key + " not valid", "API key REDACTED not valid"},
		{"key AIzaSyTOPSECRET0123456789 expired", "key REDACTED expired"}, // shorter than a real key: hidden too
		{"AIza is a prefix", "AIza is a prefix"},
		{"token Bearer ya29.a0AfB_TOPSECRET-3== rejected", "token Bearer REDACTED rejected"},
		{"got bearer eyJhbGciOi.eyJzdWIi.SflKxw", "got bearer REDACTED"},
		{"x-goog-api-key: TOPSECRET5 is not allowed", "x-goog-api-key: REDACTED is not allowed"},
		{"X-Goog-Api-Key:TOPSECRET5", "X-Goog-Api-Key:REDACTED"},
		{`{"x-goog-api-key": "TOPSECRET5", "a": 1}`, `{"x-goog-api-key": "REDACTED", "a": 1}`},
		{"authorization: Bearer ya29.TOPSECRET3, then", "authorization: REDACTED, then"},
		{"Authorization: Basic dXNlcjpwYXNz", "Authorization: REDACTED"},
		{"Proxy-Authorization=TOPSECRET6 used", "Proxy-Authorization=REDACTED used"},
		{"header x-api-key: K1; api-key: K2", "header x-api-key: REDACTED; api-key: REDACTED"},
		{"Cookie: sid=S1; theme=S2\nnext line", "Cookie: REDACTED\nnext line"},
		{"the authorization header is missing", "the authorization header is missing"},
		{"a key: value pair", "a key: value pair"},
		{"x-goog-api-key: REDACTED", "x-goog-api-key: REDACTED"}, // stable when applied twice
	}
	for _, tt := range tests {
		got := RedactText(tt.in)
		if got != tt.want {
			t.Errorf("RedactText(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
		if again := RedactText(got); again != got {
			t.Errorf("RedactText is not stable on %q: %q", got, again)
		}
	}
	// A transport error's text, in an AttemptError's message.
	u, _ := url.Parse("https://example.com/v1")
	c := &call{req: &http.Request{Method: "GET", URL: u}, ep: -1}
	msg := c.attemptError(u, 0, ClassOther, errors.New("proxy: x-goog-api-key: TOPSECRET1 refused")).Error()
	if strings.Contains(msg, "TOPSECRET") || !strings.Contains(msg, "x-goog-api-key: REDACTED refused") {
		t.Errorf("AttemptError message %q", msg)
	}
}

// TestStreamErrorTextRedacted: a server's error event that quotes an API
// key, a bearer token and credential headers (in its message and its
// status): none of them reaches the AttemptError, the *retry.Error, the
// Observer's events or the transport's log.
func TestStreamErrorTextRedacted(t *testing.T) {
	const (
		key = "AIzaSyA0123456789abcdefghijklmnopq_-XYZ"
		msg = "API key " + key + " and Bearer ya29.TOPSECRET3 and x-goog-api-key: TOPSECRET5 and authorization: Basic TOPSECRET6"
	)
	ev := `{"error":{"code":503,"status":"UNAVAILABLE Bearer TOPSECRET7","message":"` + msg + `",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3600s"}]}}`
	var texts []string
	// A retry (the hint ignored), then a give-up (the hint past the deadline).
	for _, p := range []retry.Policy{{Attempts: 2, MaxRetryAfter: retry.Zero, InitialDelay: retry.Zero, Jitter: retry.Zero}, {Deadline: time.Minute}} {
		var (
			evs = newEvents()
			log strings.Builder
		)
		p.Observer = evs.Observe
		rt := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
			return streamReply(ctSSE, nil, sseOf(ev))(r)
		}), p, WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
		req, _ := http.NewRequest(http.MethodGet, streamURL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(evs.Events()) == 0 || evs.Events()[0].Err == nil {
			t.Fatalf("events %+v, want a retry or a give-up with the error first", evs.Events())
		}
		texts = append(texts, evs.Events()[0].Err.Error(), log.String())
	}
	if !strings.Contains(texts[0], "API key REDACTED and Bearer REDACTED and x-goog-api-key: REDACTED") {
		t.Errorf("the message lost its words: %q", texts[0])
	}
	for _, s := range texts {
		for _, secret := range []string{"AIzaSy", "TOPSECRET"} {
			if strings.Contains(s, secret) {
				t.Errorf("%q in %q", secret, s)
			}
		}
	}
	if !strings.Contains(texts[0], "API key REDACTED and Bearer REDACTED") {
		t.Errorf("the message lost its words: %q", texts[0])
	}
}
