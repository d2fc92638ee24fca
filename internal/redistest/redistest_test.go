package redistest

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// ping sends PING in Redis's inline protocol and returns the first line of
// the answer, or the error.
func ping(t *testing.T, addr string) (string, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second)) // bounds a broken server, not a wait
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// TestStartKillRestart: Start returns a server that answers at once (it
// waited for the ready line), Kill stops it, Restart brings it back on the
// same port.
func TestStartKillRestart(t *testing.T) {
	s := Start(t, "--requirepass", "pw")
	addr := s.Addr()
	if got, err := ping(t, addr); err != nil || got != "-NOAUTH Authentication required.\r\n" {
		t.Fatalf("after Start: PING = %q, %v; want NOAUTH (the extra arguments applied)", got, err)
	}
	s.Kill()
	if _, err := ping(t, addr); err == nil {
		t.Fatalf("after Kill: %s still answers", addr)
	}
	s.Kill() // a second Kill does nothing
	s.Restart()
	if s.Addr() != addr {
		t.Fatalf("Restart moved the server from %s to %s", addr, s.Addr())
	}
	if got, err := ping(t, addr); err != nil || got[0] != '-' {
		t.Fatalf("after Restart: PING = %q, %v", got, err)
	}
	s.Pause() // Kill must still stop a paused server
}
