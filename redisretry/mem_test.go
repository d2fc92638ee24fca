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
	"github.com/backoffkit/retry/internal/testkit"
	"github.com/backoffkit/retry/redisretry/internal/backend"
)

// memBackend runs the scripts' Go models in memory (backend.Store), for
// tests in a synctest bubble (whose clock is fake). It can fail or hang like
// a sick server.
type memBackend struct {
	store backend.Store

	calls atomic.Int64
	fail  atomic.Pointer[error] // every call returns it when set
	hang  atomic.Pointer[chan struct{}]

	// latency, when set, returns how long a call takes on its way to the
	// server and back (in the bubble's time). Keep both below the limiter's
	// Timeout: a reply that arrives at the very instant a timer fires would
	// race it (timers firing together run in no fixed order).
	latency func() (there, back time.Duration)
	// latencyOf, when set, is latency by the call, for a scenario that
	// slows one kind of call down (it replaces latency).
	latencyOf func(c backend.Call) (there, back time.Duration)
}

func newMem() *memBackend { return &memBackend{} }

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

func (m *memBackend) run(ctx context.Context, c backend.Call) (backend.Reply, error) {
	m.calls.Add(1)
	if h := m.hang.Load(); h != nil {
		<-*h // a stalled server: the caller's context does not help
	}
	if e := m.fail.Load(); e != nil {
		return backend.Reply{}, *e
	}
	var there, back time.Duration
	switch {
	case m.latencyOf != nil:
		there, back = m.latencyOf(c)
	case m.latency != nil && c.Script == backend.GCRA:
		there, back = m.latency()
	}
	if there > 0 || back > 0 {
		time.Sleep(there)
		defer time.Sleep(back) // after the script: the reply travels back
	}
	return m.store.Apply(time.Now(), c), nil
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
type events = testkit.Recorder[Event, EventKind]

func newEvents() *events { return testkit.NewRecorder(func(e Event) EventKind { return e.Kind }) }

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

// leakFree runs f in a synctest bubble and then checks that every goroutine
// started since f began has ended: the goroutines left are reported as an
// error. f closes what it opened itself, not through t.Cleanup (the check
// runs before the cleanups would). A test that f ends with t.Fatal skips
// the check. (A leak is reported at the check's line here, the test named
// by its FAIL line and the goroutine's stack: the bubble's goroutine has
// no frame of the test above it for t.Helper to reach.)
func leakFree(t *testing.T, f func(t *testing.T)) {
	synctest.Test(t, func(t *testing.T) {
		check := noLeaks(t)
		f(t)
		check()
	})
}
