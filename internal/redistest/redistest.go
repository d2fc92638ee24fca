// Package redistest runs a real redis-server for tests: on a free loopback
// port, with no persistence, in a temporary directory, stopped when the test
// ends. Start returns once the server has logged that it accepts
// connections (an event, not a poll), and starts it again on another port
// if the one it picked was taken meanwhile.
//
// Without a redis-server binary a test fails under CI=true (CI must run the
// Redis tests; .ci/run installs the server) and is skipped otherwise, with
// one line saying how to install it.
package redistest

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// readyLine is what redis-server logs once it accepts connections (6.x and
// 7.x; 7.2 adds the listener's kind after it).
const readyLine = "Ready to accept connections"

// startLimit bounds the wait for a server to start: a server that neither
// logs readyLine nor exits in that time fails the test instead of hanging it.
const startLimit = 30 * time.Second

// Server is a redis-server started by [Start].
type Server struct {
	t    testing.TB
	bin  string
	args []string // without --port

	mu     sync.Mutex
	port   int
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// Start starts a server with the extra redis-server arguments (such as
// "--requirepass", "secret") and returns once it accepts connections. The
// server is killed when the test ends.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not found (CI=true: a missing server is a failure; .ci/run installs it with apt-get install -y redis-server)")
		}
		t.Skip("redis-server not found: install it (Debian/Ubuntu: sudo apt-get install -y redis-server) to run the Redis tests")
	}
	s := &Server{t: t, bin: bin, args: append([]string{
		"--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--logfile", "", // the log goes to stdout, read for readyLine
	}, extra...)}
	t.Cleanup(s.Kill)
	for try := 1; ; try++ {
		s.mu.Lock()
		s.port = FreePort(t)
		s.mu.Unlock()
		taken, out := s.run()
		switch {
		case !taken:
			return s
		case try == 5:
			t.Fatalf("redis-server found its port taken 5 times in a row:\n%s", out)
		}
	}
}

// Addr is the server's address, 127.0.0.1:PORT.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "127.0.0.1:" + strconv.Itoa(s.port)
}

// URL is the server's redis:// URL, database 0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Kill stops the server with SIGKILL (no shutdown: an outage) and waits for
// it. A stopped server (SIGSTOP) is killed too. Kill of a server that is not
// running does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	resume(cmd.Process) // a paused server must run to die
	cmd.Process.Kill()
	<-exited
}

// Restart starts the server again on the same port (after [Server.Kill])
// and returns once it accepts connections.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	if taken, out := s.run(); taken {
		s.t.Fatalf("redis-server cannot listen on its port again (taken meanwhile):\n%s", out)
	}
}

// Pause stops the server without closing its connections (SIGSTOP): a
// server that stalls, as one swapping or frozen by a debugger does. Resume
// (SIGCONT) lets it run again. On a system without those signals Pause
// skips the test.
func (s *Server) Pause() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		pause(s.t, s.cmd.Process)
	}
}

// Resume lets a paused server run again.
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		resume(s.cmd.Process)
	}
}

// run starts the server on s.port and waits until it is ready. It reports
// taken, with the server's output, if the server could not listen because
// the port was in use; any other failure fails the test.
func (s *Server) run() (taken bool, out string) {
	s.t.Helper()
	s.mu.Lock()
	args := append([]string{"--port", strconv.Itoa(s.port)}, s.args...)
	s.mu.Unlock()
	log := &readyWriter{ready: make(chan struct{})}
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait() // also waits for the copy of its output into log
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()

	limit := time.NewTimer(startLimit)
	defer limit.Stop()
	select {
	case <-log.ready:
		return false, ""
	case <-exited:
		s.mu.Lock()
		s.cmd = nil
		s.mu.Unlock()
		out := log.String()
		if strings.Contains(out, "Address already in use") {
			return true, out
		}
		s.t.Fatalf("redis-server exited before it accepted connections (%v):\n%s", cmd.ProcessState, out)
	case <-limit.C:
		s.Kill()
		s.t.Fatalf("redis-server did not accept connections within %v:\n%s", startLimit, log.String())
	}
	return false, ""
}

// readyWriter keeps a server's output and closes ready once it has logged
// readyLine.
type readyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	said  bool
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.said && bytes.Contains(w.buf.Bytes(), []byte(readyLine)) {
		w.said = true
		close(w.ready)
	}
	return len(p), nil
}

func (w *readyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// FreePort returns a loopback TCP port that was free a moment ago: for a
// server to start on (it may be taken again, see Start), or for an address
// where nothing listens.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
