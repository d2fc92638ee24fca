package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backoffkit/retry/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server started by a test on a free loopback port,
// without persistence, in a temporary directory, and killed when the test
// ends (see internal/redistest).
type redisServer struct{ *redistest.Server }

// startRedis starts a server with the extra arguments, and returns once it
// accepts connections. Without a redis-server binary the test fails under
// CI=true and is skipped otherwise, with one line saying how to install it.
func startRedis(t *testing.T, extra ...string) *redisServer {
	t.Helper()
	return &redisServer{redistest.Start(t, extra...)}
}

func (s *redisServer) addr() string { return s.Addr() }

func (s *redisServer) url() string { return s.URL() }

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
