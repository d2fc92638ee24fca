package redisretry

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry/internal/chaos"
)

// memBackend runs the scripts' Go models in memory, for tests in a synctest
// bubble (whose clock is fake). It can fail or hang like a sick server.
type memBackend struct {
	mu      sync.Mutex
	tat     map[string]time.Time
	members map[string]map[string]time.Time
	windows map[string]*BudgetWindow
	cools   map[string]time.Time

	calls atomic.Int64
	fail  atomic.Pointer[error] // every call returns it when set
	hang  atomic.Pointer[chan struct{}]

	// latency, when set, returns how long a call takes on its way to the
	// server and back (in the bubble's time). Keep both below the limiter's
	// Timeout: a reply that arrives at the very instant a timer fires would
	// race it (timers firing together run in no fixed order).
	latency func() (there, back time.Duration)
}

func newMem() *memBackend {
	return &memBackend{tat: map[string]time.Time{}, members: map[string]map[string]time.Time{},
		windows: map[string]*BudgetWindow{}, cools: map[string]time.Time{}}
}

func (m *memBackend) setFail(err error) {
	if err == nil {
		m.fail.Store(nil)
	} else {
		m.fail.Store(&err)
	}
}

// setHang makes every call block until the returned function is called.
func (m *memBackend) setHang() (release func()) {
	ch := make(chan struct{})
	m.hang.Store(&ch)
	return func() { m.hang.Store(nil); close(ch) }
}

func (m *memBackend) enter(ctx context.Context) error {
	m.calls.Add(1)
	if h := m.hang.Load(); h != nil {
		<-*h // a stalled server: the caller's context does not help
	}
	if e := m.fail.Load(); e != nil {
		return *e
	}
	return nil
}

func (m *memBackend) gcra(ctx context.Context, k quotaKeys, a gcraArgs) (gcraReply, error) {
	if err := m.enter(ctx); err != nil {
		return gcraReply{}, err
	}
	if m.latency != nil {
		there, back := m.latency()
		time.Sleep(there)
		defer time.Sleep(back) // after the script: the reply travels back
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	ms := m.members[k.members]
	if ms == nil {
		ms = map[string]time.Time{}
		m.members[k.members] = ms
	}
	ms[a.member] = now
	for id, t := range ms {
		if now.Sub(t) > time.Duration(a.memberTTL)*time.Millisecond {
			delete(ms, id)
		}
	}
	r := GCRA(m.tat[k.tat], now, time.Duration(a.inc)*time.Microsecond, time.Duration(a.tol)*time.Microsecond, time.Duration(a.maxWait)*time.Microsecond)
	if a.maxWait < 0 {
		r = GCRA(m.tat[k.tat], now, time.Duration(a.inc)*time.Microsecond, time.Duration(a.tol)*time.Microsecond, -1)
	}
	if r.OK && a.inc > 0 {
		m.tat[k.tat] = r.To
	}
	return gcraReply{ok: r.OK, wait: us(r.Wait), from: r.From.UnixMicro(), to: r.To.UnixMicro(), now: now.UnixMicro(), members: int64(len(ms))}, nil
}

func (m *memBackend) gcraReturn(ctx context.Context, k quotaKeys, to, unused int64) (bool, error) {
	if err := m.enter(ctx); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.tat[k.tat]; !ok || cur.UnixMicro() != to || unused <= 0 {
		return false, nil
	}
	m.tat[k.tat] = time.UnixMicro(to - unused)
	return true, nil
}

func (m *memBackend) budget(ctx context.Context, k budgetKeys, a budgetArgs) (budgetReply, error) {
	if err := m.enter(ctx); err != nil {
		return budgetReply{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.windows[k.requests]
	if w == nil {
		w = &BudgetWindow{Slot: time.Duration(a.slotMS) * time.Millisecond, Slots: a.slots, Ratio: a.ratio, Floor: a.floor}
		m.windows[k.requests] = w
	}
	now := time.Now()
	r := w.Apply(now, BudgetCall{Add: a.add, Want: a.want, GiveBack: a.back, GiveBackEpoch: a.backEpoch})
	return budgetReply{r, now.UnixMilli()}, nil
}

func (m *memBackend) cooldown(ctx context.Context, key string, hintMS int64) (cooldownReply, error) {
	if err := m.enter(ctx); err != nil {
		return cooldownReply{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	u := CooldownUntil(m.cools[key], now, time.Duration(hintMS)*time.Millisecond)
	m.cools[key] = u
	var left int64
	if u.After(now) {
		left = u.Sub(now).Milliseconds()
	}
	return cooldownReply{remaining: left, now: now.UnixMilli()}, nil
}

// logCounter is a slog handler that keeps the messages it gets.
type logCounter struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "limiter" || a.Key == "error" {
			msg += " " + a.Key + "=" + a.Value.String()
		}
		return true
	})
	l.msgs = append(l.msgs, msg)
	return nil
}
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler      { return l }

func (l *logCounter) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

// events collects an Observer's events.
type events struct {
	mu sync.Mutex
	ev []Event
}

func (e *events) observe(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ev = append(e.ev, ev)
}

func (e *events) count(k EventKind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.ev {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

// noLeaks, called first in a synctest bubble, returns a check to call once
// every limiter is closed: it fails the test if a goroutine started since is
// still there (a refill, a probe, a Redis call that Close did not wait for).
func noLeaks(t *testing.T) func() {
	before := chaos.SnapshotGoroutines()
	return func() {
		t.Helper()
		synctest.Wait() // goroutines on their way out finish
		if leaked := before.Leaked(0); len(leaked) > 0 {
			t.Errorf("%d goroutines left after Close:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
	}
}
