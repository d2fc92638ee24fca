package redisretry

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// DialBoundOf is, for the external tests, how long a limiter on client waits
// for its first calls: the client's dial bound if the limiters know it, 0
// otherwise.
func DialBoundOf(client redis.Scripter) time.Duration { return envFor(client, nil).connect }
