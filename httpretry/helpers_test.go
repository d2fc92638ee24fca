package httpretry

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/testkit"
)

// fast retries at once: no wait, no jitter, so loopback tests need no
// virtual time.
var fast = retry.Policy{InitialDelay: retry.Zero, MaxDelay: retry.Zero, Jitter: retry.Zero}

// rtFunc is an in-memory RoundTripper for tests in a synctest bubble.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// response builds a response to req with code, body and header pairs.
func response(req *http.Request, code int, body string, kv ...string) *http.Response {
	h := make(http.Header)
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return &http.Response{
		StatusCode: code, Status: http.StatusText(code), Header: h, Request: req,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}
}

// events records what an Observer receives.
type events = testkit.Recorder[retry.Event, retry.EventKind]

func newEvents() *events {
	return testkit.NewRecorder(func(e retry.Event) retry.EventKind { return e.Kind })
}

// onlyRetry returns the one retry event ev recorded and its *AttemptError;
// it fails the test if there was not exactly one, or it carried no
// *AttemptError.
func onlyRetry(t *testing.T, ev *events) (retry.Event, *AttemptError) {
	t.Helper()
	r := ev.Of(retry.EventRetry)
	var ae *AttemptError
	if len(r) != 1 || !errors.As(r[0].Err, &ae) {
		t.Fatalf("retry events %+v", r)
	}
	return r[0], ae
}

// closeCounter is a request body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }
