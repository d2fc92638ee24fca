package redisretry

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/backoffkit/retry/internal/chaos"
	"github.com/backoffkit/retry/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server started by a test on a free loopback port,
// with no persistence, in a temporary directory; stopped when the test ends
// (see internal/redistest).
type redisServer struct{ *redistest.Server }

// startRedis starts a server; extra are more redis-server arguments. Call it
// first: when the test ends (after every cleanup registered later: clients,
// the server), it fails if a goroutine started since is still running, such
// as a limiter's refill, probe or Redis call that Close did not wait for.
// Without a redis-server binary the test fails under CI=true and is skipped
// otherwise.
func startRedis(t testing.TB, extra ...string) *redisServer {
	t.Helper()
	before := chaos.SnapshotGoroutines()
	t.Cleanup(func() {
		if leaked := before.Leaked(2 * time.Second); len(leaked) > 0 {
			t.Errorf("%d goroutines left running after the test:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
	})
	return &redisServer{redistest.Start(t, extra...)}
}

func (s *redisServer) addr() string { return s.Addr() }

func (s *redisServer) url() string { return s.URL() }

// kill stops the server with SIGKILL (an outage) and waits for it.
func (s *redisServer) kill() { s.Kill() }

// start starts the killed server again on the same port.
func (s *redisServer) start() { s.Restart() }

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
