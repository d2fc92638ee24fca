package httpretry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/backoffkit/retry"
)

// BenchmarkTransport compares a GET answered 200 through the bare
// http.Transport and through the retrying Transport, on a loopback server.
func BenchmarkTransport(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport)
	run := func(b *testing.B, rt http.RoundTripper) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/models?key=secret", nil)
		b.ReportAllocs()
		for b.Loop() {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatal(resp.Status)
			}
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, base) })
	b.Run("get-200", func(b *testing.B) { run(b, NewTransport(base, retry.Policy{})) })
}
