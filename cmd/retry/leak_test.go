package main

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/backoffkit/retry/cmd/retry/internal/proc"
	"github.com/backoffkit/retry/internal/chaos"
	"github.com/backoffkit/retry/internal/testkit"
)

// TestRunLeavesNoGoroutines runs each mode in-process and checks that the
// goroutines it started (signal relay, attempt waiters, HTTP connections,
// demo clients and servers) are gone once run returns.
func TestRunLeavesNoGoroutines(t *testing.T) {
	srv := testkit.NewScript(t, testkit.Status(http.StatusServiceUnavailable, "busy"))
	// os/signal starts one goroutine for good on the first Notify.
	proc.NotifySignals(make(chan os.Signal, 1))()
	before := chaos.SnapshotGoroutines()
	for _, args := range [][]string{
		{"--attempts", "2", "--initial-delay", "1ms", "--jitter", "0", "--", "sh", "-c", "exit 3"},
		{"--attempts", "2", "--attempt-timeout", "50ms", "--initial-delay", "1ms", "--", "sleep", "5"},
		{"http", "--attempts", "2", "--initial-delay", "1ms", "--jitter", "0", srv.URL},
		{"demo", "--duration", "200ms", "--clients", "2", "--strategies", "no-retry,full"},
	} {
		run(args, nil, io.Discard, io.Discard)
	}
	srv.CloseClientConnections()
	// Goroutines end asynchronously after their connections close: Leaked
	// waits a bounded time for them.
	if leaked := before.Leaked(5 * time.Second); len(leaked) > 0 {
		t.Errorf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
	}
}
