package httpretry

import (
	"context"
	"errors"
	"log/slog"
	"net/url"

	"github.com/backoffkit/retry"
)

// logObserver returns the transport's logging observer: one record per retry
// and per give-up, with the attempt's HTTP details and no secret. A nil l
// means slog.Default() at the time of each event.
func logObserver(l *slog.Logger, level slog.Level) retry.Observer {
	return func(ctx context.Context, e retry.Event) {
		if e.Kind == retry.EventSuccess {
			return
		}
		lg := l
		if lg == nil {
			lg = slog.Default()
		}
		if !lg.Enabled(ctx, level) {
			return
		}
		lg.LogAttrs(ctx, level, eventMessage(e), eventAttrs(e)...)
	}
}

func eventMessage(e retry.Event) string {
	if e.Kind == retry.EventRetry {
		return "httpretry: retry"
	}
	return "httpretry: giving up"
}

// eventAttrs returns the log attributes of an event: method, host, path,
// endpoint, status or class, attempt, max_attempts, wait, hint, hint_source,
// and for a give-up the reason (and why a retry was skipped).
func eventAttrs(e retry.Event) []slog.Attr {
	attrs := make([]slog.Attr, 0, 14)
	var ae *AttemptError
	if errors.As(e.Err, &ae) {
		attrs = append(attrs,
			slog.String("method", ae.Method),
			slog.String("host", ae.host),
			slog.String("path", ae.path),
			slog.String("endpoint", ae.Endpoint))
		if ae.Status != 0 {
			attrs = append(attrs, slog.Int("status", ae.Status))
		}
		if ae.Class != ClassStatus {
			attrs = append(attrs, slog.String("class", ae.Class))
			if ae.Err != nil {
				attrs = append(attrs, slog.String("error", safeErrorText(ae.Err)))
			}
		}
	} else if e.Err != nil {
		attrs = append(attrs, slog.String("error", safeErrorText(e.Err)))
	}
	attrs = append(attrs, slog.Int("attempt", e.Attempt), slog.Int("max_attempts", e.MaxAttempts))
	if e.Kind == retry.EventRetry {
		attrs = append(attrs, slog.Duration("wait", e.Wait))
		if e.Hint > 0 || (ae != nil && ae.HintSource != "") {
			attrs = append(attrs, slog.Duration("hint", e.Hint))
		}
		if ae != nil && ae.HintSource != "" {
			attrs = append(attrs, slog.String("hint_source", ae.HintSource))
		}
	} else {
		attrs = append(attrs, slog.String("reason", e.Reason.String()))
		switch {
		case errors.Is(e.Err, ErrNotIdempotent):
			attrs = append(attrs, slog.String("skipped", "not idempotent"))
		case errors.Is(e.Err, ErrBodyNotReplayable):
			attrs = append(attrs, slog.String("skipped", "body not replayable"))
		}
	}
	return append(attrs, slog.Duration("elapsed", e.Elapsed))
}

// safeErrorText returns err's message without the URL a *url.Error would
// print (it is not redacted).
func safeErrorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + " " + Redact(mustParse(ue.URL)) + ": " + ue.Err.Error()
	}
	return err.Error()
}

func mustParse(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		return &url.URL{Opaque: "(unparsable URL)"}
	}
	return u
}
