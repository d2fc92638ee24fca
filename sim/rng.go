package sim

import (
	"hash/fnv"
	"math/rand/v2"
	"time"
)

// mix is SplitMix64's finaliser: it turns related inputs (a seed and small
// indices) into unrelated 64-bit values.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// nameHash gives a strategy a stable identity for seeding, so its numbers do
// not depend on which other strategies run or in which order.
func nameHash(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// seedFor derives the two PCG seeds of one independent stream.
func seedFor(seed uint64, parts ...uint64) (uint64, uint64) {
	s := mix(seed)
	for _, p := range parts {
		s = mix(s ^ p)
	}
	return s, mix(s ^ 0x5851f42d4c957f2d)
}

// source is a seeded random source with the distributions the models need.
type source struct {
	pcg rand.PCG
	r   *rand.Rand
}

func newSource() *source {
	s := &source{}
	s.r = rand.New(&s.pcg)
	return s
}

func (s *source) seed(a, b uint64) { s.pcg.Seed(a, b) }

// float64 returns a uniform value in [0, 1).
func (s *source) float64() float64 { return s.r.Float64() }

// normal returns a Normal(mean, sd) duration truncated at 0.
func (s *source) normal(mean, sd time.Duration) int64 {
	d := float64(mean) + s.r.NormFloat64()*float64(sd)
	if d < 0 {
		return 0
	}
	return int64(d)
}

// exp returns an exponentially distributed duration with the given mean.
func (s *source) exp(mean float64) int64 {
	return int64(s.r.ExpFloat64() * mean)
}
