package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The attempt context (call, attemptCtx) against the standard library's:
// the same scenario, run in a synctest bubble of its own against each, must
// leave the same record.

type attemptKey string

var (
	errParentGone = errors.New("parent gone")
	errChild      = errors.New("child's own")
	intKey        = new(int) // a caller's key of the same type as the standard library's private one
)

// stdCall is how call ran an attempt before attemptCtx: the caller's context
// as is when its deadline comes first, else context.WithDeadlineCause,
// cancelled when fn returns.
func stdCall(ctx context.Context, dl time.Time, cause error, fn func(context.Context) error) error {
	if d, ok := ctx.Deadline(); ok && !d.After(dl) {
		return fn(ctx)
	}
	actx, cancel := context.WithDeadlineCause(ctx, dl, cause)
	defer cancel()
	return fn(actx)
}

// ourCall runs fn through call, with dl as the policy's deadline
// (cause errPolicyDeadline) or, for the cause context.DeadlineExceeded, as
// the end of its AttemptTimeout.
func ourCall(ctx context.Context, dl time.Time, cause error, fn func(context.Context) error) error {
	if cause == context.DeadlineExceeded {
		now := time.Now()
		return call(ctx, &Policy{AttemptTimeout: dl.Sub(now)}, fn, time.Time{}, now)
	}
	return call(ctx, &Policy{}, fn, dl, time.Time{})
}

// nilDoneCtx is a caller's own Context type that can never be cancelled.
type nilDoneCtx struct{}

func (nilDoneCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (nilDoneCtx) Done() <-chan struct{}       { return nil }
func (nilDoneCtx) Err() error                  { return nil }
func (nilDoneCtx) Value(key any) any {
	if key == attemptKey("p") {
		return "custom"
	}
	return nil
}

// nilDoneDeadlineCtx is nilDoneCtx with a deadline: a caller's own type
// that claims one but can never be cancelled.
type nilDoneDeadlineCtx struct {
	nilDoneCtx
	d time.Time
}

func (c nilDoneDeadlineCtx) Deadline() (time.Time, bool) { return c.d, true }

// chanCtx is a caller's own Context type that can be cancelled: the
// standard library watches it with a goroutine.
type chanCtx struct {
	done chan struct{}
	err  atomic.Pointer[error]
}

func (*chanCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *chanCtx) Done() <-chan struct{}     { return c.done }
func (c *chanCtx) Err() error {
	if e := c.err.Load(); e != nil {
		return *e
	}
	return nil
}
func (c *chanCtx) Value(key any) any {
	if key == attemptKey("p") {
		return "chan"
	}
	return nil
}
func (c *chanCtx) cancel() {
	if c.err.CompareAndSwap(nil, &context.Canceled) {
		close(c.done)
	}
}

// parentKind builds the caller's context at the start of a bubble, with the
// function that cancels it (nil if nothing can).
type parentKind struct {
	name  string
	build func(start time.Time) (context.Context, func())
}

var attemptParents = []parentKind{
	{"background", func(time.Time) (context.Context, func()) { return context.Background(), nil }},
	{"value", func(time.Time) (context.Context, func()) {
		return context.WithValue(context.WithValue(context.Background(), attemptKey("p"), "v"), intKey, "int"), nil
	}},
	{"custom-nil-done", func(time.Time) (context.Context, func()) { return nilDoneCtx{}, nil }},
	{"without-cancel", func(time.Time) (context.Context, func()) {
		base, cancel := context.WithCancelCause(context.WithValue(context.Background(), attemptKey("p"), "w"))
		return context.WithoutCancel(base), func() { cancel(errParentGone) }
	}},
	{"cancellable", func(time.Time) (context.Context, func()) {
		ctx, cancel := context.WithCancelCause(context.WithValue(context.Background(), attemptKey("p"), "c"))
		return ctx, func() { cancel(errParentGone) }
	}},
	{"custom-cancellable", func(time.Time) (context.Context, func()) {
		c := &chanCtx{done: make(chan struct{})}
		return c, c.cancel
	}},
	{"earlier-deadline", func(start time.Time) (context.Context, func()) {
		ctx, cancel := context.WithDeadlineCause(context.WithValue(context.Background(), attemptKey("p"), "e"), start.Add(5*time.Second), errParentGone)
		return ctx, cancel
	}},
	// A caller's own type that can never be cancelled but has a deadline
	// after the attempt's: an attemptCtx, whose Deadline is the attempt's.
	{"custom-nil-done-later-deadline", func(start time.Time) (context.Context, func()) {
		return nilDoneDeadlineCtx{d: start.Add(15 * time.Second)}, nil
	}},
	{"later-deadline", func(start time.Time) (context.Context, func()) {
		ctx, cancel := context.WithDeadline(context.WithValue(context.Background(), attemptKey("p"), "l"), start.Add(15*time.Second))
		return ctx, cancel
	}},
}

// attemptLog is what a scenario saw, one line per look, stamped with the
// virtual time since the start.
type attemptLog struct {
	start time.Time
	mu    sync.Mutex
	lines []string
	stop  func() bool // an AfterFunc's, registered by fn, for after
}

func (l *attemptLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("%09.3fs ", time.Since(l.start).Seconds())+fmt.Sprintf(format, args...))
}

// look records everything a holder of ctx can see; withDone also whether
// Done is closed (which derives the standard context: without it the lazy
// state is what is looked at).
func (l *attemptLog) look(label string, ctx context.Context, withDone bool) {
	dl, ok := ctx.Deadline()
	d := "none"
	if ok {
		d = dl.Sub(l.start).String()
	}
	s := fmt.Sprintf("%s: err=%v cause=%v deadline=%s p=%v int=%v missing=%v string=%q",
		label, ctx.Err(), context.Cause(ctx), d, ctx.Value(attemptKey("p")), ctx.Value(intKey), ctx.Value(attemptKey("x")), fmt.Sprint(ctx))
	if withDone {
		select {
		case <-ctx.Done():
			s += " done=closed"
		default:
			s += " done=open"
		}
	}
	l.add("%s", s)
}

// fnKind is what fn does with its context until it returns at ret; after
// runs once fn has returned, on the caller's goroutine.
type fnKind struct {
	name  string
	run   func(ctx context.Context, l *attemptLog, ret time.Duration, keep *context.Context) error
	after func(ctx context.Context, l *attemptLog)
}

func sleepTo(start time.Time, at time.Duration) { time.Sleep(time.Until(start.Add(at))) }

// waitThenLook is the after of the scenarios whose context ends with the
// attempt: the goroutines waiting on it run first, then a look.
func waitThenLook(ctx context.Context, l *attemptLog) {
	synctest.Wait()
	l.look("after", ctx, true)
}

var attemptFns = []fnKind{
	{"ignores-ctx", func(ctx context.Context, l *attemptLog, ret time.Duration, keep *context.Context) error {
		*keep = ctx
		sleepTo(l.start, ret)
		return nil
	}, func(ctx context.Context, l *attemptLog) {
		l.look("after", ctx, false)
		time.Sleep(1500 * time.Millisecond)
		l.look("later", ctx, false)
		l.look("later", ctx, true)
	}},
	{"polls-err", func(ctx context.Context, l *attemptLog, ret time.Duration, keep *context.Context) error {
		*keep = ctx
		for at := time.Second; at < ret; at += 2500 * time.Millisecond {
			sleepTo(l.start, at)
			l.look("poll", ctx, false)
		}
		sleepTo(l.start, ret)
		return ctx.Err()
	}, func(ctx context.Context, l *attemptLog) {
		l.look("after", ctx, false)
		time.Sleep(time.Second)
		l.look("later", ctx, true)
	}},
	{"selects-on-done", func(ctx context.Context, l *attemptLog, ret time.Duration, keep *context.Context) error {
		*keep = ctx
		t := time.NewTimer(time.Until(l.start.Add(ret)))
		defer t.Stop()
		select {
		case <-ctx.Done():
			l.look("woken", ctx, true)
			return ctx.Err()
		case <-t.C:
			l.look("timer", ctx, true)
			return nil
		}
	}, func(ctx context.Context, l *attemptLog) {
		l.look("after", ctx, true)
	}},
	{"after-func", func(ctx context.Context, l *attemptLog, ret time.Duration, keep *context.Context) error {
		*keep = ctx
		stop := context.AfterFunc(ctx, func() { l.look("after-func", ctx, true) })
		sleepTo(l.start, 3*time.Second)
		if ret > 10*time.Second { // one is registered, then stopped, before anything happened
			l.add("stop=%v", stop())
		}
		context.AfterFunc(ctx, func() { l.look("after-func-2", ctx, false) })
		sleepTo(l.start, ret)
		return nil
	}, func(ctx context.Context, l *attemptLog) {
		synctest.Wait()
		l.look("after", ctx, false)
	}},
	{"child-and-values", func(ctx context.Context, l *attemptLog, ret time.Duration, keep *context.Context) error {
		child, cancel := context.WithCancel(ctx) // cancelled through its parent, which is the point
		vc := context.WithValue(child, attemptKey("x"), "child")
		*keep = vc
		go func() {
			<-vc.Done()
			l.look("child-done", vc, true)
			cancel()
		}()
		sleepTo(l.start, ret)
		return nil
	}, waitThenLook},
	{"after-func-stopped-late", func(ctx context.Context, l *attemptLog, ret time.Duration, keep *context.Context) error {
		*keep = ctx
		l.stop = context.AfterFunc(ctx, func() { l.look("after-func", ctx, false) })
		sleepTo(l.start, ret)
		return nil
	}, func(ctx context.Context, l *attemptLog) {
		synctest.Wait()
		l.add("stop after the attempt=%v", l.stop()) // it has run: false
		l.add("stop again=%v", l.stop())
	}},
	{"after-func-after-the-attempt", func(ctx context.Context, l *attemptLog, ret time.Duration, keep *context.Context) error {
		*keep = ctx // never asked for Done: the lazy state is handed on after
		sleepTo(l.start, ret)
		return nil
	}, func(ctx context.Context, l *attemptLog) {
		stop := context.AfterFunc(ctx, func() { l.look("after-func", ctx, false) })
		synctest.Wait()
		l.add("stop=%v", stop())
		child, cancel := context.WithCancel(ctx)
		defer cancel()
		l.look("child", child, true)
	}},
	{"children", func(ctx context.Context, l *attemptLog, ret time.Duration, keep *context.Context) error {
		*keep = ctx
		// One with a timeout before the attempt's deadline (its own timer
		// and cause), one after it (WithCancel: the parent's comes first),
		// one with a cause of its own that is never given.
		short, cancelShort := context.WithTimeoutCause(ctx, 3*time.Second, errChild)
		long, cancelLong := context.WithTimeout(ctx, 15*time.Second)
		withCause, cancelCause := context.WithCancelCause(ctx)
		for _, c := range []struct {
			name   string
			ctx    context.Context
			cancel func()
		}{
			{"short", short, cancelShort},
			{"long", long, cancelLong},
			{"with-cause", withCause, func() { cancelCause(errChild) }},
		} {
			go func() {
				<-c.ctx.Done()
				l.look("child-"+c.name, c.ctx, true)
				c.cancel()
			}()
		}
		sleepTo(l.start, ret)
		return nil
	}, waitThenLook},
	{"leaves-a-waiter", func(ctx context.Context, l *attemptLog, ret time.Duration, keep *context.Context) error {
		*keep = ctx
		go func() {
			<-ctx.Done()
			l.look("waiter", ctx, false)
		}()
		sleepTo(l.start, ret)
		return nil
	}, waitThenLook},
	{"done-after-return", func(ctx context.Context, l *attemptLog, ret time.Duration, keep *context.Context) error {
		*keep = ctx
		sleepTo(l.start, ret)
		return nil
	}, func(ctx context.Context, l *attemptLog) {
		time.Sleep(time.Second)
		l.look("stored", ctx, true)
		<-ctx.Done()
		l.look("stored", ctx, false)
	}},
	{"hundred-callers", func(ctx context.Context, l *attemptLog, ret time.Duration, keep *context.Context) error {
		*keep = ctx
		var (
			wg    sync.WaitGroup
			chans [100]<-chan struct{}
			gate  = make(chan struct{})
		)
		for i := range chans {
			wg.Go(func() {
				<-gate
				if i%2 == 0 {
					_ = ctx.Err()
				}
				chans[i] = ctx.Done()
				_ = ctx.Err()
			})
		}
		close(gate)
		wg.Wait()
		same := 0
		for _, c := range chans {
			if c == chans[0] {
				same++
			}
		}
		l.add("same channel %d of 100", same)
		for i := range chans {
			go func() {
				<-chans[i]
				l.add("caller: err=%v cause=%v", ctx.Err(), context.Cause(ctx))
			}()
		}
		sleepTo(l.start, ret)
		return nil
	}, waitThenLook},
}

// attemptRun is one scenario: the caller's context, its deadline for the
// attempt (from the start), when the caller's context is cancelled (0 never,
// negative before the call), what fn does and when it returns.
type attemptRun struct {
	parent   parentKind
	timeout  time.Duration
	cause    error
	cancelAt time.Duration
	fn       fnKind
	ret      time.Duration
}

func (r attemptRun) String() string {
	return fmt.Sprintf("parent=%s/timeout=%v/cause=%v/cancel=%v/fn=%s/ret=%v", r.parent.name, r.timeout, r.cause, r.cancelAt, r.fn.name, r.ret)
}

// horizon is when every scenario is over: after every event it schedules.
const horizon = 60 * time.Second

func (r attemptRun) play(t *testing.T, impl func(context.Context, time.Time, error, func(context.Context) error) error) []string {
	var lines []string
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		l := &attemptLog{start: start}
		parent, cancel := r.parent.build(start)
		switch {
		case cancel == nil:
		case r.cancelAt < 0:
			cancel()
		case r.cancelAt > 0:
			go func() {
				sleepTo(start, r.cancelAt)
				cancel()
			}()
		}
		var kept context.Context
		err := impl(parent, start.Add(r.timeout), r.cause, func(ctx context.Context) error {
			return r.fn.run(ctx, l, r.ret, &kept)
		})
		l.add("returned %v", err)
		r.fn.after(kept, l)
		sleepTo(start, horizon)
		synctest.Wait()
		l.look("end", kept, true)
		if kept.Err() == nil {
			t.Errorf("%v: the attempt's context is not cancelled after the attempt", r)
		}
		if cancel != nil {
			cancel()
		}
		lines = slices.Clone(l.lines)
	})
	slices.Sort(lines) // lines stamped at the same instant may come in either order
	return lines
}

func TestAttemptContextMatchesStdlib(t *testing.T) {
	var runs []attemptRun
	causes := []error{errPolicyDeadline, context.DeadlineExceeded}
	for _, p := range attemptParents {
		cancels := []time.Duration{0}
		if _, cancel := p.build(time.Now()); cancel != nil {
			cancel()
			// before the call; during, before the deadline (10 s); during
			// or after the attempt, after the deadline; after everything
			cancels = []time.Duration{0, -1, 4 * time.Second, 13 * time.Second, 30 * time.Second}
		}
		for _, c := range cancels {
			for _, f := range attemptFns {
				for _, ret := range []time.Duration{7 * time.Second, 20 * time.Second} {
					for _, cause := range causes {
						runs = append(runs, attemptRun{p, 10 * time.Second, cause, c, f, ret})
					}
				}
			}
		}
		// Hostile deadlines: passed, now, a nanosecond away, as far as a
		// time.Duration goes.
		for _, timeout := range []time.Duration{-time.Second, 0, 1, math.MaxInt64} {
			if p.name == "custom-nil-done-later-deadline" && timeout == math.MaxInt64 {
				continue // fn gets that context as is, which nothing ever ends
			}
			for _, f := range attemptFns {
				runs = append(runs, attemptRun{p, timeout, errPolicyDeadline, cancels[len(cancels)/2], f, 7 * time.Second})
			}
		}
	}
	for _, r := range runs {
		want := r.play(t, stdCall)
		got := r.play(t, ourCall)
		if !slices.Equal(got, want) {
			t.Errorf("%v:\n got:\n\t%s\nwant (context.WithDeadlineCause):\n\t%s", r, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
	}
	t.Logf("%d scenarios", len(runs))
}

// TestCancelCtxKeyProbe: the key context.Cause asks for was learnt, and an
// attempt context answers it as the standard library's contexts do. (Should a
// Go release stop asking, this fails while every lookup takes the slow,
// correct path.)
func TestCancelCtxKeyProbe(t *testing.T) {
	if cancelCtxKey == nil {
		t.Fatal("context.Cause did not ask the probe for its key")
	}
	if cancelCtxKey == any(intKey) {
		t.Fatal("the probe learnt a caller's key")
	}
	std, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := &attemptCtx{parent: context.Background(), deadline: time.Now().Add(time.Hour), cause: errPolicyDeadline}
	defer a.end()
	got, want := fmt.Sprintf("%T", a.Value(cancelCtxKey)), fmt.Sprintf("%T", std.Value(cancelCtxKey))
	if got != want || want == "<nil>" {
		t.Fatalf("Value(cancelCtxKey) is a %s, want a %s as from context.WithCancel", got, want)
	}
}

// TestAttemptContextPath: call gives fn an attemptCtx when the caller's
// context can never be cancelled, context.WithDeadlineCause's when it can,
// and the caller's own when its deadline comes first.
func TestAttemptContextPath(t *testing.T) {
	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()
	soon, cancelSoon := context.WithTimeout(context.Background(), time.Minute)
	defer cancelSoon()
	tests := []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"background", context.Background(), "*retry.attemptCtx"},
		{"value over background", context.WithValue(context.Background(), attemptKey("p"), 1), "*retry.attemptCtx"},
		{"without cancel", context.WithoutCancel(cancellable), "*retry.attemptCtx"},
		{"custom, never cancelled", nilDoneCtx{}, "*retry.attemptCtx"},
		{"cancellable", cancellable, "*context.timerCtx"},
		{"custom, cancellable", &chanCtx{done: make(chan struct{})}, "*context.timerCtx"},
		{"deadline first", soon, "*context.timerCtx"},
	}
	for _, tt := range tests {
		for _, p := range []Policy{{Attempts: 1, Deadline: time.Hour}, {Attempts: 1, AttemptTimeout: time.Hour}} {
			var got string
			var same bool
			Run(tt.ctx, p, func(ctx context.Context) error {
				got, same = fmt.Sprintf("%T", ctx), ctx == tt.ctx
				return nil
			})
			if got != tt.want || same != (tt.name == "deadline first") {
				t.Errorf("%s, %+v: fn got a %s (the caller's own: %v), want a %s", tt.name, p, got, same, tt.want)
			}
		}
	}
}

// TestAttemptContextLeavesNothingBehind: what fn leaves waiting on its
// context (goroutines, AfterFunc, children with timers of their own) is
// released when the attempt returns, and registering it started no goroutine.
// A goroutine left blocked would make synctest.Test fail with a deadlock; a
// context left uncancelled would keep its timer.
func TestAttemptContextLeavesNothingBehind(t *testing.T) {
	for _, p := range []Policy{
		{Attempts: 1, Deadline: time.Hour},
		{Attempts: 1, AttemptTimeout: time.Hour},
		{Attempts: 3, AttemptTimeout: time.Second, Jitter: Zero}, // three attempts, each timed out
	} {
		synctest.Test(t, func(t *testing.T) {
			var (
				released atomic.Int32
				kept     []context.Context
				started  int
			)
			err := Run(context.Background(), p, func(ctx context.Context) error {
				if _, ok := ctx.(*attemptCtx); !ok {
					t.Fatalf("fn got a %T", ctx)
				}
				before := propagationGoroutines()
				context.AfterFunc(ctx, func() { released.Add(1) })
				child, cancel := context.WithCancel(ctx)
				timed, cancelTimed := context.WithTimeout(ctx, 2*time.Hour)
				context.AfterFunc(child, func() { cancel(); cancelTimed() })
				if n := newPropagationGoroutines(before); n != 0 {
					t.Errorf("registering on the attempt's context started %d goroutines", n)
				}
				for range 10 {
					started++
					go func() {
						select {
						case <-ctx.Done():
						case <-timed.Done():
						}
						released.Add(1)
					}()
				}
				kept = append(kept, ctx, child, timed)
				if p.AttemptTimeout == time.Second {
					<-ctx.Done()
					return ctx.Err()
				}
				return nil
			})
			if (err == nil) != (p.Attempts == 1) {
				t.Fatalf("%+v: err %v", p, err)
			}
			synctest.Wait()
			if got, want := int(released.Load()), started+len(kept)/3; got != want {
				t.Errorf("%+v: %d of %d waiters released", p, got, want)
			}
			for _, c := range kept {
				if c.Err() == nil {
					t.Errorf("%+v: %v not cancelled after the attempt", p, c)
				}
			}
		})
	}
}

// propagationGoroutines returns the goroutines (by id) the context package
// has started to watch a parent it cannot register with (one that is not its
// own). Those of earlier tests may still be on their way out: compare sets.
func propagationGoroutines() map[string]bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n == len(buf) {
			buf = make([]byte, 2*len(buf))
			continue
		}
		ids := map[string]bool{}
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "created by context.(*cancelCtx).propagateCancel") {
				ids[strings.Fields(g)[1]] = true // "goroutine 42 [select]:"
			}
		}
		return ids
	}
}

// newPropagationGoroutines counts those started since before was taken.
func newPropagationGoroutines(before map[string]bool) int {
	n := 0
	for id := range propagationGoroutines() {
		if !before[id] {
			n++
		}
	}
	return n
}

// TestPropagationGoroutinesSeesOne: the count above finds the goroutine
// the context package starts for a parent of a type of the caller's own.
func TestPropagationGoroutinesSeesOne(t *testing.T) {
	parent := &chanCtx{done: make(chan struct{})}
	before := propagationGoroutines()
	_, cancel := context.WithCancel(parent)
	defer cancel()
	if got := newPropagationGoroutines(before); got != 1 {
		t.Fatalf("%d propagation goroutines for a custom parent, want 1", got)
	}
}

// TestAttemptContextConcurrentCallers: 1000 calls at once, each with 10
// goroutines asking for Done, Err, Cause and a value at the same time as the
// attempt returns (run with -race). Every caller of one attempt gets the same
// channel, and sees the attempt cancelled once it has returned.
func TestAttemptContextConcurrentCallers(t *testing.T) {
	const calls, callers = 1000, 10
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			var inner sync.WaitGroup
			chans := make([]<-chan struct{}, callers)
			var seen context.Context
			err := Run(context.WithValue(context.Background(), attemptKey("p"), "v"), Policy{Attempts: 1, Deadline: time.Hour}, func(ctx context.Context) error {
				seen = ctx
				for i := range callers {
					inner.Go(func() {
						_ = ctx.Err()
						_ = context.Cause(ctx)
						if ctx.Value(attemptKey("p")) != "v" {
							t.Error("the parent's value is lost")
						}
						chans[i] = ctx.Done()
						<-chans[i]
					})
				}
				return nil
			})
			inner.Wait()
			if err != nil {
				t.Error(err)
			}
			for _, c := range chans {
				if c != chans[0] {
					t.Error("two callers of Done got different channels")
				}
			}
			if seen.Err() != context.Canceled || context.Cause(seen) != context.Canceled {
				t.Errorf("after the attempt: Err %v, Cause %v; want context canceled", seen.Err(), context.Cause(seen))
			}
		})
	}
	wg.Wait()
}

// TestAttemptContextInTheLoop: the loop gives the same result whether the
// attempt's context is an attemptCtx (a caller's context that can never be
// cancelled) or the standard library's (one that can).
func TestAttemptContextInTheLoop(t *testing.T) {
	hang := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	slow := func(context.Context) error { time.Sleep(3 * time.Second); return errFlaky }
	for _, tt := range []struct {
		name string
		p    Policy
		fn   func(context.Context) error
	}{
		{"deadline, hangs", Policy{Deadline: 10 * time.Second}, hang},
		{"attempt timeout, hangs", Policy{Attempts: 3, AttemptTimeout: 2 * time.Second, Jitter: Zero}, hang},
		{"both, hangs", Policy{Deadline: 10 * time.Second, AttemptTimeout: 4 * time.Second, Jitter: Zero}, hang},
		{"both, slow", Policy{Deadline: 10 * time.Second, AttemptTimeout: 2 * time.Second, Jitter: Zero}, slow},
		{"deadline passes in the wait", Policy{Deadline: 5 * time.Second, InitialDelay: 4 * time.Second, Jitter: Zero}, slow},
	} {
		var results [2]string
		for i, parent := range []func(t *testing.T) context.Context{
			func(*testing.T) context.Context { return context.Background() },
			func(t *testing.T) context.Context { return t.Context() },
		} {
			synctest.Test(t, func(t *testing.T) {
				var causes []string
				err := Run(parent(t), tt.p, func(ctx context.Context) error {
					err := tt.fn(ctx)
					causes = append(causes, fmt.Sprint(context.Cause(ctx)))
					return err
				})
				var re *Error
				if !errors.As(err, &re) {
					t.Fatalf("%s: err %v", tt.name, err)
				}
				results[i] = fmt.Sprintf("reason %v, %d attempts, elapsed %v, last %v, cause %v, timeout %v, attempts' causes %q",
					re.Reason, re.Attempts, re.Elapsed, re.Last, re.Cause, re.Timeout(), causes)
			})
		}
		t.Logf("%s: %s", tt.name, results[0])
		if results[0] != results[1] {
			t.Errorf("%s:\n background: %s\n cancellable: %s", tt.name, results[0], results[1])
		}
	}
}

// TestAttemptContextWithNetHTTP: net/http honours the attempt's context when
// it is an attemptCtx: a request to a server that never answers is cut at the
// attempt timeout, on the client and (by the closed connection) on the
// server, and retried.
func TestAttemptContextWithNetHTTP(t *testing.T) {
	var started, ended atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started.Add(1)
		if r.URL.Path == "/ok" {
			return
		}
		<-r.Context().Done() // the client went away
		ended.Add(1)
	}))
	defer srv.Close()
	get := func(path string) func(context.Context) error {
		return func(ctx context.Context) error {
			if _, ok := ctx.(*attemptCtx); !ok {
				t.Errorf("fn got a %T", ctx)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
			if err != nil {
				return err
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			_, err = io.Copy(io.Discard, resp.Body)
			return err
		}
	}
	if err := Run(context.Background(), Policy{AttemptTimeout: time.Minute}, get("/ok")); err != nil {
		t.Fatalf("a request answered at once: %v", err)
	}
	started.Store(0)
	p := Policy{Attempts: 2, AttemptTimeout: 200 * time.Millisecond, InitialDelay: time.Millisecond, Jitter: Zero}
	err := Run(context.Background(), p, get("/hang"))
	var re *Error
	if !errors.As(err, &re) || re.Reason != ReasonAttempts || re.Attempts != 2 || !errors.Is(re.Last, context.DeadlineExceeded) {
		t.Fatalf("err %v: want two attempts, each cut by the attempt timeout", err)
	}
	srv.Close() // waits for the handlers: both saw their client go away
	if started.Load() != 2 || ended.Load() != 2 {
		t.Fatalf("server: %d requests, %d ended by the client; want 2 and 2", started.Load(), ended.Load())
	}
}

// TestAttemptContextCancelledOnPanic: an attempt that panics still cancels
// its context on the way out, as the deferred cancel func did.
func TestAttemptContextCancelledOnPanic(t *testing.T) {
	for _, withDone := range []bool{false, true} {
		var kept context.Context
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Fatalf("recovered %v", r)
				}
			}()
			Run(context.Background(), Policy{Deadline: time.Hour}, func(ctx context.Context) error {
				kept = ctx
				if withDone {
					_ = ctx.Done()
				}
				panic("boom")
			})
		}()
		if _, ok := kept.(*attemptCtx); !ok || kept.Err() != context.Canceled || context.Cause(kept) != context.Canceled {
			t.Errorf("Done asked: %v: after the panic, a %T with Err %v, Cause %v; want context canceled", withDone, kept, kept.Err(), context.Cause(kept))
		}
	}
}

// TestAttemptContextRaces: Err, Done, Cause and end racing each other around
// the deadline (run with -race). Whoever decides first, every caller sees
// nil and then one error for good, the same one, with its cause; and the
// context is done once end has returned.
func TestAttemptContextRaces(t *testing.T) {
	rnd := NewRand(1)
	for i := range 2000 {
		a := &attemptCtx{parent: context.Background(), deadline: time.Now().Add(time.Duration(rnd() * float64(100*time.Microsecond))), cause: errPolicyDeadline}
		var (
			wg    sync.WaitGroup
			ended = make(chan struct{})
			final [4]error
		)
		for g := range final {
			wg.Go(func() {
				var seen error
				for {
					if g == 3 && seen == nil && rnd() < 0.01 {
						<-a.Done()
						if a.Err() == nil {
							t.Errorf("run %d: Done closed, Err nil", i)
						}
					}
					err := a.Err()
					switch {
					case seen != nil && err != seen:
						t.Errorf("run %d: Err was %v, then %v", i, seen, err)
						return
					case err != nil:
						want := error(context.Canceled)
						if err == context.DeadlineExceeded {
							want = errPolicyDeadline
						}
						if c := context.Cause(a); c != want {
							t.Errorf("run %d: Err %v, Cause %v", i, err, c)
						}
						seen = err
					}
					select {
					case <-ended:
						// end has returned: a look now must see the
						// attempt over (the one above may have been
						// before end), and the same error as before.
						err := a.Err()
						if err == nil || seen != nil && err != seen {
							t.Errorf("run %d: Err %v after the attempt (earlier %v)", i, err, seen)
						}
						final[g] = err
						return
					default:
					}
				}
			})
		}
		for rnd() < 0.999 {
			_ = a.Err() // let the others run a little
		}
		a.end()
		close(ended)
		wg.Wait()
		for _, e := range final[1:] {
			if e != final[0] {
				t.Fatalf("run %d: callers disagree: %v", i, final)
			}
		}
	}
}

// TestAttemptContextTie: an attempt that returns at the very instant of its
// deadline, or asks Err then, sees the deadline as passed (as
// context.WithDeadline does for a deadline that is not after now), for good
// and with the policy's cause. The standard library's context may say either
// at that instant (its timer and the return race): what ours says is one of
// the two.
func TestAttemptContextTie(t *testing.T) {
	for _, c := range []struct {
		cause error
		asks  bool // fn asks Err at the deadline before it returns
	}{{errPolicyDeadline, false}, {errPolicyDeadline, true}, {context.DeadlineExceeded, false}, {context.DeadlineExceeded, true}} {
		cause := c.cause
		for _, impl := range []struct {
			name string
			call func(context.Context, time.Time, error, func(context.Context) error) error
		}{{"ours", ourCall}, {"std", stdCall}} {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				var kept context.Context
				var atTheDeadline error
				impl.call(context.Background(), start.Add(10*time.Second), cause, func(ctx context.Context) error {
					kept = ctx
					sleepTo(start, 10*time.Second)
					if c.asks {
						atTheDeadline = ctx.Err()
					}
					return nil
				})
				after, afterCause := kept.Err(), context.Cause(kept)
				<-kept.Done() // closed already, whichever won
				switch {
				case impl.name == "std" && after == context.Canceled && afterCause == context.Canceled:
					// the return came first
				case after != context.DeadlineExceeded || afterCause != cause:
					t.Errorf("%s, cause %v: at the deadline Err %v, then Err %v, Cause %v; want context deadline exceeded and %v", impl.name, cause, atTheDeadline, after, afterCause, cause)
				case impl.name == "ours" && c.asks && atTheDeadline != context.DeadlineExceeded:
					t.Errorf("ours: Err at the deadline %v, want context deadline exceeded", atTheDeadline)
				}
			})
		}
	}
}

// TestAttemptContextNoTimerUnlessDone: an attempt that never asks for its
// context's Done channel (nor for the private key context.Cause and
// context.AfterFunc look up) runs without a standard context under it, so
// without a timer; one that asks gets one whose timer is stopped when the
// attempt returns (a timerCtx stops its timer when cancelled).
func TestAttemptContextNoTimerUnlessDone(t *testing.T) {
	for _, tt := range []struct {
		name    string
		use     func(ctx context.Context)
		derives bool
	}{
		{"ignores it", func(context.Context) {}, false},
		{"Err, Deadline, Value, String", func(ctx context.Context) {
			_ = ctx.Err()
			_, _ = ctx.Deadline()
			_ = ctx.Value(attemptKey("p"))
			_ = ctx.Value(intKey)
			_ = fmt.Sprint(ctx)
		}, false},
		{"WithValue, WithoutCancel", func(ctx context.Context) {
			_ = context.WithoutCancel(context.WithValue(ctx, attemptKey("x"), 1)).Value(attemptKey("p"))
		}, false},
		{"Done", func(ctx context.Context) { _ = ctx.Done() }, true},
		{"Cause", func(ctx context.Context) { _ = context.Cause(ctx) }, false}, // Err is nil: Cause does not look further
		{"AfterFunc", func(ctx context.Context) { context.AfterFunc(ctx, func() {}) }, true},
		{"WithCancel", func(ctx context.Context) { _, cancel := context.WithCancel(ctx); defer cancel() }, true},
	} {
		var kept *attemptCtx
		err := Run(context.WithValue(context.Background(), attemptKey("p"), "v"), Policy{Attempts: 1, Deadline: time.Hour}, func(ctx context.Context) error {
			kept, _ = ctx.(*attemptCtx)
			tt.use(ctx)
			return nil
		})
		if err != nil || kept == nil {
			t.Fatalf("%s: err %v, fn got an attemptCtx: %v", tt.name, err, kept != nil)
		}
		if kept.derived.Load() != tt.derives {
			t.Errorf("%s: a standard context under the attempt's: %v, want %v", tt.name, kept.derived.Load(), tt.derives)
		}
		if tt.derives && kept.inner.Err() != context.Canceled {
			t.Errorf("%s: the standard context's Err %v after the attempt, want context canceled (its timer stopped)", tt.name, kept.inner.Err())
		}
	}
}
