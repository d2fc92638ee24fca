package backend

import "math"

// The fleet's learnt rate (rate.lua): one rate for every process of a fleet
// whose capacity has no number (a shared pool, such as Vertex AI's Standard
// PayGo), cut multiplicatively on a congestion signal and grown while the
// fleet uses it: back to where it was cut by a scale-free CUBIC curve, then
// past it doubling every recovery. Rates are integers of
// micro-requests per second (µreq/s), times microseconds of the server's
// clock, so that the script's doubles and the model's float64 compute the
// same numbers.

// RateWindow is how long (µs) the fleet's send rate is measured over.
const RateWindow = 1_000_000

// RateArgs are rate.lua's ARGV.
type RateArgs struct {
	// Epoch is the epoch (the number of cuts so far) under which the
	// reporting process paced an attempt that met congestion (a 429); -1
	// for none (a read). Only a report of the current epoch cuts: one cut
	// per reaction of the fleet, not one per process that saw it.
	Epoch int64
	// Used is how long (µs, at least 1) the rate held the process's
	// attempts back since its last call (their waits for slots; MaxWait for
	// one refused), 0 if it did not. The rate grows only while it is used:
	// by that time, at most the time since the last call that said so (or
	// the last cut) and a window, so that processes held back at once count
	// the time once, the calls of processes that were not held back take
	// nothing away, and a rate that held back a few clustered attempts is
	// not counted as used all the while.
	Used int64
	// Sent is the attempts the process started since its last call, for
	// the fleet's send rate.
	Sent int64
	// Beta is the factor of a cut, in millionths (700000: ×0.7).
	Beta int64
	// Recovery (µs) is how long the rate, used all the while, takes to
	// climb back to where it was cut.
	Recovery int64
	// Floor and Ceiling bound the rate (µreq/s); the rate starts at the
	// Ceiling.
	Floor, Ceiling int64
	// TTL (ms) is how long the state is kept after the last call.
	TTL int64
	// Hold (µs), with a report (Epoch >= 0), is how long the server said
	// it would stay full: its 429's retry hint (RetryInfo, Retry-After),
	// at most Recovery; 0 for none. A cut from the measure holds the next
	// one until then: the 429s of that time say the server is still full,
	// not that the new rate is too high (a server that counts over a
	// window answers 429 until its window frees, however slow the fleet
	// has become). Unless the last window was flooded (as many 429s as
	// served) and the cut rate is above twice what it served: the fleet
	// is far above the capacity, and the 429s to come say so.
	Hold int64
	// Served and Rejected are the attempts of the process that ended since
	// its last call without a 429 and with one: a window in which the fleet
	// met as many 429s as it was served says the fleet is far above the
	// capacity (see Hold).
	Served, Rejected int64
}

// RateState is the state rate.lua keeps in its hash.
type RateState struct {
	Epoch int64 // cuts so far
	Wmax  int64 // the rate before the last cut, or the Ceiling at first (µreq/s)
	Grown int64 // time the rate was used since the last cut (µs)
	At    int64 // the last call that said the rate was used, or the last cut, or the state's start (µs of server time)
	N     int64 // attempts counted since NT
	NT    int64 // the start of the current measure (µs)
	Meas  int64 // the send rate measured over the last window (µreq/s; 0: none yet)
	UG    int64 // of the current window, the time the rate was used (µs)
	UW    int64 // the share of the last window the rate was used, in millionths
	Hold  int64 // the end of the last cut's hold: a report before it does not cut (µs of server time; 0: none)
	MP    int64 // the send rate measured over the window before the last (µreq/s; 0: none)
	K     int64 // attempts served (ended without a 429) counted since NT
	R     int64 // attempts rejected (429) counted since NT
	OK    int64 // the served rate of the last window if it was flooded: it lasted at most two RateWindows, served at least one attempt and rejected at least as many (µreq/s; else 0)
	KT    int64 // the NT that K, R and OK belong to: another NT (a window closed by a script that does not keep them) resets them
}

// maxCount bounds the counts of one call (Sent, Served, Rejected): the
// script's numbers are doubles, exact to 2^53.
const maxCount = 1 << 31

func count(n int64) int64 { return max(min(n, maxCount), 0) }

// RateReply is rate.lua's reply.
type RateReply struct {
	Rate  int64 // the learnt rate now (µreq/s)
	Epoch int64 // cuts so far
	Cut   bool  // this call cut the rate
	Now   int64 // the server's time (µs)
	Meas  int64 // the fleet's send rate last measured (µreq/s)
}

// Valid reports whether r is a reply the script can give for a.
func (r RateReply) Valid(a RateArgs) bool {
	const limit = 1 << 53
	return r.Now > 0 && r.Now < limit && r.Epoch >= 0 && r.Epoch < limit && r.Meas >= 0 && r.Meas < limit &&
		r.Rate >= min(a.Floor, a.Ceiling) && r.Rate <= max(a.Ceiling, a.Floor) && (!r.Cut || (r.Epoch == a.Epoch+1))
}

// RateKey returns the key of the learnt rate of the fleet named key.
func RateKey(key string) string { return "{" + key + "}:rate" }

// RateCurve is the learnt rate (µreq/s) grown µs after a cut from wmax,
// before the bounds, β in millionths. Up to recovery it is CUBIC's concave
// curve, wmax × (1 − (1−β)(1 − grown/recovery)³): β × wmax at the cut, wmax
// after recovery, flat there (where the last cut was). Past it the rate
// doubles every recovery (linearly within each doubling: wmax × 2^k × (1+f)
// for u = grown/recovery − 1 = k + f): with no 429 since it passed wmax, the
// capacity is above it, and the fleet probes for it as fast as it can react
// (its overshoot is the growth of one reaction). Each operation is rounded
// on its own, as the script's doubles are (Ldexp is exact); the result is
// at most 2^62.
func RateCurve(wmax, grown, recovery, beta int64) int64 {
	if grown > recovery {
		u := float64(grown-recovery) / float64(recovery)
		k := math.Floor(u)
		r := float64(math.Ldexp(float64(wmax), int(k)) * float64(1+float64(u-k)))
		return int64(math.Floor(min(r, 1<<62)))
	}
	x := float64(recovery-grown) / float64(recovery)
	x3 := float64(float64(x*x) * x)
	d := float64(1000000-beta) / 1000000
	f := 1 - float64(d*x3)
	return int64(math.Floor(float64(float64(wmax) * f)))
}

// RateCall is rate.lua's decision on the state st (nil: no key) for the call
// a at server time now (µs). It returns the new state and the reply.
func RateCall(st *RateState, now int64, a RateArgs) (RateState, RateReply) {
	var s RateState
	if st == nil {
		s = RateState{Wmax: a.Ceiling, Grown: a.Recovery, At: now, NT: now, KT: now}
	} else {
		s = *st
	}
	if s.KT != s.NT {
		s.K, s.R, s.OK, s.KT = 0, 0, 0, s.NT
	}
	// Growth, while used: the time the caller was held back, at most the
	// time since the last call that said so (or the last cut) and a window
	// (a fleet that went quiet grows a window at most for its silence).
	// During a hold the rate does not grow: the server said it is full.
	if a.Used > 0 {
		if now > s.At {
			d := min(now-s.At, a.Used, RateWindow)
			if now >= s.Hold {
				s.Grown += d
			}
			s.UG += d
		}
		s.At = now
	}
	s.Grown = min(s.Grown, 64*a.Recovery)
	// The fleet's send rate, over windows of RateWindow.
	s.N += count(a.Sent)
	s.K += count(a.Served)
	s.R += count(a.Rejected)
	switch {
	case now < s.NT:
		s.N, s.NT, s.UG, s.K, s.R, s.OK = 0, now, 0, 0, 0, 0
	case now-s.NT >= RateWindow:
		s.MP = s.Meas
		s.Meas = int64(math.Floor(float64(s.N) * 1e12 / float64(now-s.NT)))
		s.UW = int64(math.Floor(float64(min(s.UG, now-s.NT)) * 1e6 / float64(now-s.NT)))
		s.OK = 0
		if s.R > 0 && s.R >= s.K && now-s.NT <= 2*RateWindow {
			s.OK = int64(math.Floor(float64(s.K) * 1e12 / float64(now-s.NT)))
		}
		s.N, s.NT, s.UG, s.K, s.R = 0, now, 0, 0, 0
	}
	s.KT = s.NT
	clamp := func(r int64) int64 { return max(min(r, a.Ceiling), a.Floor) }
	rate := clamp(RateCurve(s.Wmax, s.Grown, a.Recovery, a.Beta))
	cut := false
	if s.Hold > now+a.Recovery {
		s.Hold = 0 // the server's clock went back: a hold is never longer
	}
	if a.Epoch >= 0 && a.Epoch == s.Epoch && now >= s.Hold {
		base, fromMeas := rate, false
		// The send rate is the higher of the last two windows': a
		// window in which the processes waited out their 429s' hints
		// (and said nothing) is not the fleet going quiet.
		if m := max(s.Meas, s.MP); m > 0 && 2*m < base && 2*s.UW < 1_000_000 {
			// The fleet sent less than half the rate and was held back by
			// it less than half of the last window: the rate is not used,
			// cut from what is. (While the rate is used and grows, the
			// last window's measure lags it.)
			base = m
			fromMeas = true
		}
		s.Wmax = max(base, a.Floor)
		s.Grown, s.At = 0, now // growth counts from the cut
		rate = clamp(RateCurve(s.Wmax, 0, a.Recovery, a.Beta))
		// A cut from the measure holds the next for the server's hint,
		// unless the last window was flooded, the cut is from its measure
		// (not the window's before) and the cut rate is still above twice
		// what it served: the fleet is far above the capacity (hundreds of
		// processes started at once), and the 429s to come say so.
		s.Hold = 0
		if fromMeas && (s.OK == 0 || s.Meas < s.MP || rate <= 2*s.OK) {
			s.Hold = now + max(min(a.Hold, a.Recovery), 0)
		}
		s.Epoch++
		cut = true
	}
	return s, RateReply{Rate: rate, Epoch: s.Epoch, Cut: cut, Now: now, Meas: s.Meas}
}
