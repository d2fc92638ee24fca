package redisretry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/backoffkit/retry/internal/chaos"
	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server started by a test on a free loopback port,
// with no persistence, in a temporary directory; stopped when the test ends.
type redisServer struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	args []string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// redisBinary finds redis-server, or fails under CI=true, or skips the test
// with one line saying how to install it.
func redisBinary(t testing.TB) string {
	bin, err := exec.LookPath("redis-server")
	if err == nil {
		return bin
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("redis-server not found (CI=true: a missing server is a failure; .ci/run installs it with apt-get install -y redis-server)")
	}
	t.Skip("redis-server not found: install it (Debian/Ubuntu: sudo apt-get install -y redis-server) to run the Redis tests")
	return ""
}

// startRedis starts a server; extra are more redis-server arguments. Call it
// first: when the test ends (after every cleanup registered later: clients,
// the server), it fails if a goroutine started since is still running, such
// as a limiter's refill, probe or Redis call that Close did not wait for.
func startRedis(t testing.TB, extra ...string) *redisServer {
	t.Helper()
	bin := redisBinary(t)
	before := chaos.SnapshotGoroutines()
	t.Cleanup(func() {
		if leaked := before.Leaked(2 * time.Second); len(leaked) > 0 {
			t.Errorf("%d goroutines left running after the test:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
	})
	s := &redisServer{t: t, bin: bin, port: freePort(t), dir: t.TempDir()}
	s.args = append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log"),
	}, extra...)
	s.start()
	t.Cleanup(s.kill)
	return s
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *redisServer) url() string { return "redis://" + s.addr() + "/0" }

// start runs the server and waits until it answers PING.
func (s *redisServer) start() {
	s.t.Helper()
	cmd := exec.Command(s.bin, s.args...)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil || strings.Contains(err.Error(), "NOAUTH") || strings.Contains(err.Error(), "WRONGPASS") {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.t.Fatalf("redis-server on %s did not answer: %v\n%s", s.addr(), err, log)
		}
		time.Sleep(5 * time.Millisecond) // polling for the server to listen
	}
}

// kill stops the server with SIGKILL (no shutdown) and waits for it.
func (s *redisServer) kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil {
		cmd.Process.Signal(syscall.SIGCONT) // a paused server must run to die
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// restart starts the server again on the same port.
func (s *redisServer) restart() { s.kill(); s.start() }

func (s *redisServer) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.cmd.Process.Signal(sig)
	}
}

// client returns a client with go-redis's default options (a 3 s read
// timeout, context deadlines ignored): the limiters must bound calls
// themselves.
func (s *redisServer) client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.addr()})
	t.Cleanup(func() { c.Close() })
	return c
}

// testKey returns a Key of its own for a test.
func testKey(t testing.TB) string {
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("test:%s:%s", strings.ReplaceAll(t.Name(), "/", "."), hex.EncodeToString(b[:]))
}
