package httpretry

import (
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/backoffkit/retry"
)

// TestRetryAllErrors: a TLS certificate error is not retried by default, and
// is with RetryAllErrors (as curl's --retry-all-errors does).
func TestRetryAllErrors(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are expected
	srv.StartTLS()
	defer srv.Close()
	p := retry.Policy{Attempts: 3, InitialDelay: retry.Zero, MaxDelay: retry.Zero, Jitter: retry.Zero}
	for _, tc := range []struct {
		opts     []Option
		attempts int
	}{
		{nil, 1},
		{[]Option{RetryAllErrors()}, 3},
	} {
		base := &http.Transport{} // does not trust the test server's certificate
		client := &http.Client{Transport: NewTransport(base, p, tc.opts...)}
		_, err := client.Get(srv.URL)
		base.CloseIdleConnections()
		var ae *AttemptError
		if !errors.As(err, &ae) || ae.Class != ClassTLS {
			t.Fatalf("opts %d: error %v, want a TLS AttemptError", len(tc.opts), err)
		}
		n := 1
		var re *retry.Error
		if errors.As(err, &re) {
			n = re.Attempts
		}
		if n != tc.attempts {
			t.Errorf("opts %d: %d attempts, want %d (%v)", len(tc.opts), n, tc.attempts, err)
		}
	}
}
