package testkit

import (
	"io"
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/backoffkit/retry/internal/chaos"
)

// TestChaosOnPipe: the server answers over the pipe through the transport
// returned, with the faults cfg decides; when the test ends both are closed,
// so that the bubble ends with no goroutine of theirs left (synctest.Test
// fails the test if one is).
func TestChaosOnPipe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, tr := ChaosOnPipe(t, chaos.Config{Decide: func(string, int) chaos.Fault { return chaos.None }}, 1)
		req, _ := http.NewRequest(http.MethodGet, "http://chaos/", nil)
		req.Header.Set(chaos.HeaderID, "x")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || s.Hits("x") != 1 {
			t.Fatalf("status %d after %d hits, want 200 after 1", resp.StatusCode, s.Hits("x"))
		}
	})
}
