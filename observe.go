package retry

import (
	"context"
	"log/slog"
	"time"
)

// EventKind says what an [Event] reports.
type EventKind uint8

const (
	// EventRetry: an attempt failed with a retryable error and the loop is
	// about to wait Event.Wait before the next attempt.
	EventRetry EventKind = iota + 1
	// EventGiveUp: the loop stopped without success; Event.Reason says why.
	EventGiveUp
	// EventSuccess: an attempt succeeded. Sent only to an Observer set on
	// the Policy (the default slog observer does not log successes).
	EventSuccess
)

// String returns "retry", "give-up" or "success".
func (k EventKind) String() string {
	switch k {
	case EventRetry:
		return "retry"
	case EventGiveUp:
		return "give-up"
	case EventSuccess:
		return "success"
	}
	return "unknown"
}

// Event is what an [Observer] receives.
type Event struct {
	Kind EventKind
	// Attempt is the number of attempts made so far, the one just ended
	// included (1 after the first attempt).
	Attempt int
	// MaxAttempts is the policy's resolved Attempts.
	MaxAttempts int
	// Wait is the wait before the next attempt (EventRetry only).
	Wait time.Duration
	// Hint is the server's hint for this wait, 0 if none (EventRetry only).
	Hint time.Duration
	// Err is the attempt's error (nil on EventSuccess).
	Err error
	// Elapsed is the time since the loop started (see [Error.Elapsed]).
	Elapsed time.Duration
	// Reason says why the loop gave up (EventGiveUp only).
	Reason Reason
}

// Observer receives the loop's events. It runs on the caller's goroutine
// between attempts, so it should be quick. ctx is the call's context.
type Observer func(ctx context.Context, e Event)

// Observers returns an Observer that calls each non-nil observer in order,
// or nil when none is non-nil (so that a Policy keeps its default observer).
func Observers(obs ...Observer) Observer {
	var list []Observer
	for _, o := range obs {
		if o != nil {
			list = append(list, o)
		}
	}
	switch len(list) {
	case 0:
		return nil
	case 1:
		return list[0]
	}
	return func(ctx context.Context, e Event) {
		for _, o := range list {
			o(ctx, e)
		}
	}
}

// SlogObserver returns an Observer that logs one structured record per retry
// ("retry": attempt, max_attempts, wait, hint, error, elapsed) and one per
// give-up ("retry: giving up": the same plus reason) to l at level. A nil l
// means slog.Default() at the time of each event. Successes are not logged.
func SlogObserver(l *slog.Logger, level slog.Level) Observer {
	return func(ctx context.Context, e Event) {
		logEvent(ctx, l, level, e)
	}
}

// defaultObserve is used when Policy.Observer is nil.
func defaultObserve(ctx context.Context, e Event) {
	logEvent(ctx, nil, slog.LevelDebug, e)
}

func logEvent(ctx context.Context, l *slog.Logger, level slog.Level, e Event) {
	if e.Kind == EventSuccess {
		return
	}
	if l == nil {
		l = slog.Default()
	}
	if !l.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.Int("attempt", e.Attempt),
		slog.Int("max_attempts", e.MaxAttempts),
	}
	msg := "retry"
	if e.Kind == EventRetry {
		attrs = append(attrs, slog.Duration("wait", e.Wait))
		if e.Hint > 0 {
			attrs = append(attrs, slog.Duration("hint", e.Hint))
		}
	} else {
		msg = "retry: giving up"
		attrs = append(attrs, slog.String("reason", e.Reason.String()))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	attrs = append(attrs, slog.Duration("elapsed", e.Elapsed))
	l.LogAttrs(ctx, level, msg, attrs...)
}
