package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server started by a test on a free loopback port,
// without persistence, in a temporary directory, and killed when the test
// ends (the pattern of redisretry's tests).
type redisServer struct {
	port int
	cmd  *exec.Cmd
}

// startRedis starts a server with the extra arguments. Without a
// redis-server binary the test fails under CI=true and is skipped otherwise,
// with one line saying how to install it.
func startRedis(t *testing.T, extra ...string) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not found (CI=true: a missing server is a failure; .ci/run installs it with apt-get install -y redis-server)")
		}
		t.Skip("redis-server not found: install it (Debian/Ubuntu: sudo apt-get install -y redis-server) to run the Redis tests")
	}
	dir := t.TempDir()
	s := &redisServer{port: freePort(t)}
	s.cmd = exec.Command(bin, append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"),
	}, extra...)...)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	})
	// Wait until it listens.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr(), time.Second)
		if err == nil {
			c.Close()
			return s
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server on %s did not listen: %v\n%s", s.addr(), err, log)
		}
		time.Sleep(5 * time.Millisecond) // polling for the server to listen
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *redisServer) url() string { return "redis://" + s.addr() + "/0" }

// client returns a client of the server, closed when the test ends.
func (s *redisServer) client(t *testing.T, password string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.addr(), Password: password})
	t.Cleanup(func() { c.Close() })
	return c
}

// fleetName returns a fleet name of the test's own.
func fleetName(t *testing.T) string {
	return fmt.Sprintf("test:%s:%d", strings.ReplaceAll(t.Name(), "/", "."), time.Now().UnixNano())
}

// hashSum adds up the values of a Redis hash (the budget's counts per slot).
func hashSum(t *testing.T, c *redis.Client, key string) int64 {
	t.Helper()
	var n int64
	for _, v := range c.HGetAll(context.Background(), key).Val() {
		i, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("%s holds %q", key, v)
		}
		n += i
	}
	return n
}
