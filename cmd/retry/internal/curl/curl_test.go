package curl

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
)

// TestFileType: a -F file part's Content-Type, by curl's own table.
func TestFileType(t *testing.T) {
	for path, want := range map[string]string{
		"a.txt": "text/plain", "dir.d/A.TXT": "text/plain", "x.png": "image/png", "r.html": "text/html",
		"doc.pdf": "application/pdf", "blob.bin": "", "noext": "", "": "",
		"t.json": "", // not in curl 7.88's table
	} {
		if got := FileType(path); got != want {
			t.Errorf("fileType(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestHopAfterTheDeadline: a hop that would begin once the --deadline has
// passed is not sent: exit 28, its body closed, the flag named as typed;
// the message says whether it was the request or a redirect.
func TestHopAfterTheDeadline(t *testing.T) {
	first := &url.URL{Scheme: "http", Host: "127.0.0.1", Path: "/first"}
	for _, tc := range []struct {
		name   string
		before []*url.URL // the hops begun before it
		want   string
	}{
		{"the request", nil, "the --deadline (1s) passed before the request was sent"},
		{"a redirect", []*url.URL{first}, "the --deadline (1s) passed before the redirect to http://127.0.0.1/next?key=REDACTED was followed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sent atomic.Int32
			h := &HopRecorder{
				RT: roundTripFunc(func(*http.Request) (*http.Response, error) {
					sent.Add(1)
					return nil, errors.New("sent")
				}),
				Start: time.Now().Add(-2 * time.Second), Deadline: time.Second, DeadlineName: "--deadline (1s)",
				URLs: tc.before,
			}
			body := &bodyCloses{Reader: strings.NewReader("x")}
			req, _ := http.NewRequest("POST", "http://127.0.0.1/next?key=s3cr3t", body)
			resp, err := h.RoundTrip(req)
			var ee *cli.ExitError
			if resp != nil || !errors.As(err, &ee) || ee.Code != ExitTimeout || sent.Load() != 0 || body.closed != 1 {
				t.Fatalf("RoundTrip = %v, %v; sent %d, body closed %d times; want exit %d, nothing sent, the body closed once",
					resp, err, sent.Load(), body.closed, ExitTimeout)
			}
			if err.Error() != tc.want {
				t.Errorf("error %q, want %q", err, tc.want)
			}
			if len(h.URLs) != len(tc.before) {
				t.Errorf("%d hops begun, want %d: the refused hop was not fetched", len(h.URLs), len(tc.before))
			}
			if tc.before == nil {
				if u := h.EffectiveURL(first); u != first {
					t.Errorf("url_effective %v, want the first URL: the refused hop was not fetched", u)
				}
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// bodyCloses is a request body that counts its Close calls.
type bodyCloses struct {
	io.Reader
	closed int
}

func (c *bodyCloses) Close() error { c.closed++; return nil }
