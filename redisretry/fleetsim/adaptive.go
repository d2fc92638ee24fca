package fleetsim

import (
	"math"
	"time"
)

// adaptive is one process's client rate limiter as the AWS SDKs' adaptive
// retry mode has it (botocore's ClientRateLimiter, the Java SDK's
// RateLimitingTokenBucket): a token bucket, off until the first throttle,
// whose fill rate CUBIC learns from this process's own responses (×0.7 on
// a throttle, C = 0.4), capped at twice the send rate it measures. It is
// simulated here as the per-process baseline of redisretry.AutoQuota; times
// are seconds of the run.
type adaptive struct {
	enabled                  bool
	fill, capacity, tokens   float64
	last                     float64 // the bucket's last refill
	measured, bucket         float64 // the smoothed send rate and its half-second bucket
	count                    float64
	lastMax, lastThrottle, k float64
}

const (
	awsBeta    = 0.7
	awsC       = 0.4
	awsSmooth  = 0.8
	awsMinFill = 0.5
	awsMinCap  = 1.0
)

// acquire takes a token at now and returns how long the attempt waits for
// it (the bucket may go below zero: the attempts queue).
func (a *adaptive) acquire(now float64) time.Duration {
	if !a.enabled {
		return 0
	}
	a.refill(now)
	a.tokens--
	if a.tokens >= 0 {
		return 0
	}
	return time.Duration(-a.tokens / a.fill * float64(time.Second))
}

// giveBack returns a token taken by an attempt that was not made.
func (a *adaptive) giveBack() {
	if a.enabled {
		a.tokens = min(a.tokens+1, a.capacity)
	}
}

func (a *adaptive) refill(now float64) {
	if now > a.last {
		a.tokens = min(a.capacity, a.tokens+(now-a.last)*a.fill)
	}
	a.last = now
}

// update takes a response at now: throttled or not.
func (a *adaptive) update(now float64, throttled bool) {
	t := math.Floor(now*2) / 2
	a.count++
	if t > a.bucket {
		rate := a.count / (t - a.bucket)
		a.measured = rate*awsSmooth + a.measured*(1-awsSmooth)
		a.count, a.bucket = 0, t
	}
	var rate float64
	if throttled {
		use := a.measured
		if a.enabled {
			use = min(a.measured, a.fill)
		}
		a.lastMax, a.lastThrottle = use, now
		a.k = math.Cbrt(a.lastMax * (1 - awsBeta) / awsC)
		rate = use * awsBeta
		a.enabled = true
	} else {
		a.k = math.Cbrt(a.lastMax * (1 - awsBeta) / awsC)
		d := now - a.lastThrottle - a.k
		rate = awsC*d*d*d + a.lastMax
	}
	rate = min(rate, 2*a.measured)
	a.refill(now)
	a.fill = max(rate, awsMinFill)
	a.capacity = max(rate, awsMinCap)
	a.tokens = min(a.tokens, a.capacity)
}

// rate is the fill rate while the bucket is on, else 0 (unpaced).
func (a *adaptive) rate() float64 {
	if !a.enabled {
		return 0
	}
	return a.fill
}
