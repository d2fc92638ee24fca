//go:build !unix

package redistest

import (
	"os"
	"testing"
)

func pause(t testing.TB, _ *os.Process) {
	t.Helper()
	t.Skip("redistest: pausing redis-server needs SIGSTOP (a Unix system)")
}

func resume(*os.Process) {}
