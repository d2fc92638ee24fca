package httpcmd

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/cmd/retry/internal/clitest"
	"github.com/backoffkit/retry/cmd/retry/internal/proc"
)

// TestDeadlineBoundsTheRedirectChain: with -L, --deadline bounds the whole
// request, every hop, and the events count their time from its start. On a
// virtual clock: /a fails twice and redirects at 600ms (waits of 300ms), so
// /b has 400ms left: attempts at 600ms and 900ms, and the next (1200ms)
// would pass the deadline. Each hop used to get a deadline of its own: /b
// had 1s, four attempts, and the give-up said 300ms.
func TestDeadlineBoundsTheRedirectChain(t *testing.T) {
	proc.NotifySignals(make(chan os.Signal, 1))() // os/signal's goroutine starts outside the bubble
	synctest.Test(t, func(t *testing.T) {
		var a, b atomic.Int32
		testBaseTransport = clitest.MemTransport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/a":
				if a.Add(1) < 3 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				http.Redirect(w, r, "/b", http.StatusFound)
			case "/b":
				b.Add(1)
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		})}
		defer func() { testBaseTransport = nil }()
		var stdout, stderr bytes.Buffer
		start := time.Now()
		code := Run([]string{"-L", "--deadline", "1s", "--attempts", "10", "--initial-delay", "300ms",
			"--exp-base", "1", "--jitter", "0", "--log-format", "json", "-w", "%{num_redirects} %{url_effective}",
			"http://127.0.0.1/a"}, &stdout, &stderr)
		took := time.Since(start)
		if code != cli.ExitGaveUp || a.Load() != 3 || b.Load() != 2 || took != 900*time.Millisecond {
			t.Errorf("exit %d after %v, %d requests to /a and %d to /b; want exit %d after 900ms, 3 and 2; stderr:\n%s",
				code, took, a.Load(), b.Load(), cli.ExitGaveUp, stderr.String())
		}
		var got []string
		for _, l := range clitest.JSONLines(t, stderr.String()) {
			got = append(got, fmt.Sprintf("%v %v %v@%v", l["event"], l["url"], l["attempt"], l["elapsed_ms"]))
		}
		want := []string{
			"retry http://127.0.0.1/a 1@0", "retry http://127.0.0.1/a 2@300",
			"redirect http://127.0.0.1/b 3@600",
			"retry http://127.0.0.1/b 1@600", "give-up http://127.0.0.1/b 2@900",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("events (kind, URL, attempt@elapsed_ms):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if stdout.String() != "1 http://127.0.0.1/b" {
			t.Errorf("-w: %q, want %q", stdout.String(), "1 http://127.0.0.1/b")
		}
	})
}
