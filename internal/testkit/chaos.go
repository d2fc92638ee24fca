package testkit

import (
	"net/http"
	"testing"

	"github.com/backoffkit/retry/internal/chaos"
)

// ChaosOnPipe starts a chaos server configured by cfg on a new in-memory
// pipe (it replaces cfg.Listener), so that it runs in t's synctest bubble
// when t is a bubble's, and returns it with a transport to it that keeps up
// to idle connections alive. Both are closed when the test ends, the
// transport's idle connections first. A cfg that chaos.Start refuses fails
// the test.
func ChaosOnPipe(t testing.TB, cfg chaos.Config, idle int) (*chaos.Server, *http.Transport) {
	t.Helper()
	cfg.Listener = chaos.NewPipeListener()
	s, err := chaos.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := s.Transport(idle)
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		s.Close()
	})
	return s, tr
}
