package proc

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// NotifySignals relays the signals retry forwards to c until stop is called.
func NotifySignals(c chan<- os.Signal) (stop func()) {
	var sigs []os.Signal
	for _, s := range ForwardedSignals {
		// One ignored when retry started stays ignored, for retry and, as
		// inherited, for the command (nohup), unless a shell ignored it for
		// a background job (see IgnoredByShell). Go's runtime tells of
		// SIGHUP and SIGINT only: it catches the others at its start,
		// ignored or not, and forgets which were.
		if !signal.Ignored(s) || IgnoredByShell(s) {
			sigs = append(sigs, s)
		}
	}
	if len(sigs) > 0 {
		signal.Notify(c, sigs...)
	}
	return func() { signal.Stop(c) }
}

// SignalWatch cancels a context on SIGINT or SIGTERM and remembers which
// (and notes it: see ExitProcess).
type SignalWatch struct {
	Stop func() // stops watching
	got  chan os.Signal
}

// WatchSignals starts a SignalWatch that calls cancel on the first signal of
// ForwardedSignals (see NotifySignals).
func WatchSignals(cancel context.CancelFunc) *SignalWatch {
	sigs := make(chan os.Signal, 2)
	stopNotify := NotifySignals(sigs)
	w := &SignalWatch{got: make(chan os.Signal, 1)}
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			NoteSignal(s)
			w.got <- s
			cancel()
		case <-done:
		}
	}()
	w.Stop = func() { stopNotify(); close(done) }
	return w
}

// Name names the signal received ("SIGINT"), "" if none.
func (w *SignalWatch) Name() string {
	select {
	case s := <-w.got:
		w.got <- s
		if n, ok := s.(syscall.Signal); ok {
			return "SIG" + SignalName(n)
		}
		return s.String()
	default:
		return ""
	}
}

// ExitCode returns 128+N if signal N was received, else 0.
func (w *SignalWatch) ExitCode() int {
	select {
	case s := <-w.got:
		w.got <- s
		if n, ok := s.(syscall.Signal); ok {
			return 128 + int(n)
		}
		return 130
	default:
		return 0
	}
}
