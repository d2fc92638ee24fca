package backend

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Store is an in-memory Redis that runs the scripts on their Go models: what
// each script reads and writes (the quota's schedule with its expiry, the
// members scored by their last call, the budget's slots, the cooldown) is
// kept as the script keeps it. A Store is safe for concurrent use; its zero
// value is empty and ready.
type Store struct {
	mu      sync.Mutex
	quotas  map[string]*schedule
	members map[string]*memberSet
	windows map[string]*BudgetWindow // by the requests key
	cools   map[string]int64         // ms of server time
	rates   map[string]*rateEntry
	counts  StoreStats
}

// schedule is a quota's hash {tat, at, limit, n} and its expiry, as gcra.lua
// keeps it.
type schedule struct {
	tat, at int64  // µs of server time
	expMS   int64  // the key expires after this ms
	limit   string // the limit of the last call that reserved ("": none)
	n       int64  // the members as last counted, if hasN
	hasN    bool
}

// memberSet is a sorted set of process ids scored by their last call (ms),
// with the order of the calls, so that the members older than a bound are
// removed without looking at the others (the server's clock does not go
// back within a Store's use; if it does, they are removed later).
type memberSet struct {
	last  map[string]int64
	order []memberCall // in the order of the calls, from head on
	head  int
}

type memberCall struct {
	id string
	ms int64
}

// StoreStats counts what a Store did.
type StoreStats struct {
	Calls    [6]int64 // per Script
	Reserved int64    // µs of schedule reserved by gcra.lua, over every quota
	Returned int64    // µs of schedule given back by gcra_return.lua
}

func (s *Store) init() {
	if s.quotas == nil {
		s.quotas = map[string]*schedule{}
		s.members = map[string]*memberSet{}
		s.windows = map[string]*BudgetWindow{}
		s.cools = map[string]int64{}
		s.rates = map[string]*rateEntry{}
	}
}

// Apply runs c at server time now (taken to the microsecond) and returns the
// script's reply.
func (s *Store) Apply(now time.Time, c Call) Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	if int(c.Script) < len(s.counts.Calls) {
		s.counts.Calls[c.Script]++
	}
	us := now.UnixMicro()
	switch c.Script {
	case GCRA:
		return Reply{GCRA: s.gcra(us, c.Quota, c.GCRA)}
	case GCRAReturn:
		return Reply{Return: s.gcraReturn(us, c.Quota, c.Return)}
	case Budget:
		return Reply{Budget: s.budget(now, c.Budget, c.BudgetArgs)}
	case Cooldown:
		return Reply{Cooldown: s.cooldown(us/1000, c.Cooldown, c.HintMS)}
	case Rate:
		return Reply{Rate: s.rate(us, c.RateKey, c.RateArgs)}
	}
	return Reply{}
}

// live returns the schedule at key if it has not expired at now (µs).
func (s *Store) live(key string, now int64) *schedule {
	q := s.quotas[key]
	if q != nil && now/1000 > q.expMS {
		delete(s.quotas, key)
		return nil
	}
	return q
}

func (s *Store) gcra(now int64, k QuotaKeys, a GCRAArgs) GCRAReply {
	var tat, at int64
	var other string
	q := s.live(k.TAT, now)
	if q != nil {
		tat, at = q.tat, q.at
		if a.Limit != "" && q.limit != a.Limit {
			other = q.limit
		}
	}
	members, pending := int64(0), false
	beat := !a.Lazy || q == nil || !q.hasN
	if beat {
		members = s.beat(now/1000, k.Members, a)
		pending = q != nil && (!q.hasN || q.n != members)
	} else {
		members = q.n
	}
	if at > now {
		tat -= at - now // the server's clock went back since
	}
	ok, wait, from, to := GCRACall(tat, now, a)
	if ok && a.Inc > 0 {
		next := &schedule{tat: to, at: now, expMS: now/1000 + GCRATTL(to, now, a.Offset), limit: a.Limit, n: members, hasN: beat}
		if q != nil {
			if a.Limit == "" {
				next.limit = q.limit // HSET leaves the field
			}
			if !beat {
				next.n, next.hasN = q.n, q.hasN
			}
		}
		s.quotas[k.TAT] = next
		s.counts.Reserved += to - from
	} else if pending {
		q.n, q.hasN = members, true
	}
	return GCRAReply{OK: ok, Wait: wait, From: from, To: to, Now: now, Members: members, Other: other}
}

// beat is gcra.lua's heartbeat at nowms: it adds a.Member to the members at
// key, forgets those older than a.MemberTTL and counts them.
func (s *Store) beat(nowms int64, key string, a GCRAArgs) int64 {
	m := s.members[key]
	if m == nil {
		m = &memberSet{last: map[string]int64{}}
		s.members[key] = m
	}
	m.last[a.Member] = nowms
	m.order = append(m.order, memberCall{a.Member, nowms})
	m.forget(nowms - a.MemberTTL)
	return int64(len(m.last))
}

// forget removes the members whose last call was before bound (ms), as
// ZREMRANGEBYSCORE -inf (bound does. The calls of a member that left
// (removed from last) or called again later are skipped.
func (m *memberSet) forget(bound int64) {
	for ; m.head < len(m.order) && m.order[m.head].ms < bound; m.head++ {
		if c := m.order[m.head]; m.last[c.id] == c.ms {
			delete(m.last, c.id)
		}
	}
	if m.head > 1024 && m.head > len(m.order)/2 {
		m.order = append(m.order[:0], m.order[m.head:]...)
		m.head = 0
	}
}

// gcraReturn is gcra_return.lua: the give-back of the unused end of the
// block that ends at a.To, then a.Member's leave (if named): it is removed
// from the members, those older than a.MemberTTL are forgotten, and the
// schedule, if it still exists, keeps the count (none when nobody is left).
func (s *Store) gcraReturn(now int64, k QuotaKeys, a ReturnArgs) ReturnReply {
	r := ReturnReply{Members: -1}
	q := s.live(k.TAT, now)
	if q != nil && q.tat == a.To && a.Unused > 0 {
		r.Returned = true
		nw := a.To - a.Unused
		left := nw - now
		if q.at > now {
			left -= q.at - now
		}
		s.counts.Returned += a.Unused
		if left <= 0 {
			delete(s.quotas, k.TAT)
			q = nil
		} else {
			q.tat = nw
			q.expMS = now/1000 + FloorDiv(left, 1000) + 1
		}
	}
	if a.Member == "" {
		return r
	}
	r.Members = 0
	if m := s.members[k.Members]; m != nil {
		delete(m.last, a.Member) // ZREM: its calls in order are skipped now
		m.forget(now/1000 - a.MemberTTL)
		r.Members = int64(len(m.last))
	}
	switch {
	case q != nil && r.Members == 0:
		q.n, q.hasN = 0, false // HDEL: the next call is a heartbeat
	case q != nil:
		q.n, q.hasN = r.Members, true
	}
	return r
}

func (s *Store) budget(now time.Time, k BudgetKeys, a BudgetArgs) BudgetReply {
	w := s.windows[k.Requests]
	if w == nil {
		w = &BudgetWindow{}
		s.windows[k.Requests] = w
	}
	// The window's parameters come with every call, as ARGV.
	w.Slot, w.Slots, w.Ratio, w.Floor = time.Duration(a.SlotMS)*time.Millisecond, a.Slots, a.Ratio, a.Floor
	return w.Apply(now, BudgetCall{Add: a.Add, Want: a.Want, GiveBack: a.Back, GiveBackEpoch: a.BackEpoch})
}

func (s *Store) cooldown(nowms int64, key string, hintMS int64) CooldownReply {
	cur := s.cools[key]
	if hintMS > 0 && nowms+hintMS > cur {
		cur = nowms + hintMS
		s.cools[key] = cur
	}
	if cur <= nowms {
		delete(s.cools, key) // expired (SET ... PX hint)
		return CooldownReply{Now: nowms}
	}
	return CooldownReply{Remaining: cur - nowms, Now: nowms}
}

// Flush empties the store, as FLUSHALL (or a restart of a Redis that keeps
// no data) does.
func (s *Store) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quotas, s.members, s.windows, s.cools, s.rates = nil, nil, nil, nil, nil
	s.init()
}

// TAT returns the schedule's theoretical arrival time of the quota keys
// (µs of server time) as of now, and false when the key does not exist.
func (s *Store) TAT(k QuotaKeys, now time.Time) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	q := s.live(k.TAT, now.UnixMicro())
	if q == nil {
		return 0, false
	}
	return q.tat, true
}

// Stats returns the store's counters.
func (s *Store) Stats() StoreStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// SetSchedule writes a quota's schedule as gcra.lua keeps it: tat and at in
// µs of server time and the limit of the last call that reserved ("" for
// none), expiring when gcra.lua would make it expire from now. It is for
// tests that start from a given state.
func (s *Store) SetSchedule(key string, tat, at int64, limit string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	us := now.UnixMicro()
	s.quotas[key] = &schedule{tat: tat, at: at, expMS: us/1000 + FloorDiv(max(tat-us, 0), 1000) + 1, limit: limit}
}

// SetMembers writes a quota's members as gcra.lua keeps them: each id's last
// call, ms of server time, in the order given by the times. It is for tests
// that start from a given state.
func (s *Store) SetMembers(key string, last map[string]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	m := &memberSet{last: map[string]int64{}}
	for id, ms := range last {
		m.last[id] = ms
		m.order = append(m.order, memberCall{id, ms})
	}
	slices.SortFunc(m.order, func(a, b memberCall) int { return cmp.Compare(a.ms, b.ms) })
	s.members[key] = m
}

// SetCount writes the count of members a quota's schedule keeps (its field
// n), if the schedule exists.
func (s *Store) SetCount(key string, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	if q := s.quotas[key]; q != nil {
		q.n, q.hasN = n, true
	}
}

// Count returns the count of members the schedule at key keeps as of now,
// and false when it keeps none (or does not exist).
func (s *Store) Count(key string, now time.Time) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	q := s.live(key, now.UnixMicro())
	if q == nil || !q.hasN {
		return 0, false
	}
	return q.n, true
}

// Members returns the ids of a quota's members, sorted (those older than the
// TTL are forgotten only by the scripts' calls, as in Redis).
func (s *Store) Members(key string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	if m := s.members[key]; m != nil {
		for id := range m.last {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// SetBudget writes a budget's counts per epoch and the configuration of the
// last call ("" for none), as budget.lua keeps them.
func (s *Store) SetBudget(k BudgetKeys, requests, retries map[int64]int64, config string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	w := &BudgetWindow{Requests: map[int64]int64{}, Retries: map[int64]int64{}, Config: config}
	for e, n := range requests {
		w.Requests[e] = n
	}
	for e, n := range retries {
		w.Retries[e] = n
	}
	s.windows[k.Requests] = w
}

// Budget returns a copy of a budget's counts per epoch.
func (s *Store) Budget(k BudgetKeys) (requests, retries map[int64]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	requests, retries = map[int64]int64{}, map[int64]int64{}
	if w := s.windows[k.Requests]; w != nil {
		for e, n := range w.Requests {
			requests[e] = n
		}
		for e, n := range w.Retries {
			retries[e] = n
		}
	}
	return requests, retries
}

// SetCooldown writes the end of a cooldown (ms of server time).
func (s *Store) SetCooldown(key string, untilMS int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	s.cools[key] = untilMS
}

// rateEntry is rate.lua's hash and its expiry.
type rateEntry struct {
	st    RateState
	expMS int64 // the key expires after this ms
}

func (s *Store) rate(now int64, key string, a RateArgs) RateReply {
	var st *RateState
	if e := s.rates[key]; e != nil && now/1000 <= e.expMS {
		st = &e.st
	}
	ns, r := RateCall(st, now, a)
	s.rates[key] = &rateEntry{st: ns, expMS: now/1000 + a.TTL}
	return r
}

// SetRate writes the learnt rate's state as rate.lua keeps it, expiring
// ttlMS after now.
func (s *Store) SetRate(key string, st RateState, now time.Time, ttlMS int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	s.rates[key] = &rateEntry{st: st, expMS: now.UnixMilli() + ttlMS}
}

// RateOf returns the learnt rate's state at key, and false if there is none
// at now.
func (s *Store) RateOf(key string, now time.Time) (RateState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	e := s.rates[key]
	if e == nil || now.UnixMilli() > e.expMS {
		return RateState{}, false
	}
	return e.st, true
}
