package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/backoffkit/retry"
)

// attemptInfo describes a failed (or successful) attempt for the log. Each
// mode turns its attempt errors into one.
type attemptInfo struct {
	ExitCode   *int   // command mode
	Status     int    // retry http: the response status, 0 if none
	Method     string // retry http
	URL        string // retry http, redacted
	HintSource string // retry http: "Retry-After", "RetryInfo", ...
	What       string // one phrase for the text log: "exit code 3", "503 Service Unavailable"
	Error      string // the error text for the JSON log ("" when Status or ExitCode say it all)
	WhyStop    string // for a permanent failure: why it is not retried
}

// logRecord is one line of --log-format json.
type logRecord struct {
	Event       string `json:"event"`
	Attempt     int    `json:"attempt"`
	MaxAttempts int    `json:"max_attempts"`
	WaitMS      *int64 `json:"wait_ms,omitempty"`
	HintMS      int64  `json:"hint_ms,omitempty"`
	HintSource  string `json:"hint_source,omitempty"`
	ExitCode    *int   `json:"exit_code,omitempty"`
	Status      int    `json:"status,omitempty"`
	Method      string `json:"method,omitempty"`
	URL         string `json:"url,omitempty"`
	Error       string `json:"error,omitempty"`
	Reason      string `json:"reason,omitempty"`
	ElapsedMS   int64  `json:"elapsed_ms"`
}

// eventLog prints the loop's events on w, as text or JSON lines.
type eventLog struct {
	mu       sync.Mutex
	w        io.Writer
	prog     string
	json     bool
	quiet    bool
	describe func(error) attemptInfo
}

func newEventLog(w io.Writer, prog string, pf *policyFlags, describe func(error) attemptInfo) *eventLog {
	return &eventLog{w: w, prog: prog, json: pf.logFormat == "json", quiet: pf.quiet, describe: describe}
}

// observer returns the retry.Observer that prints the events.
func (l *eventLog) observer() retry.Observer {
	return func(_ context.Context, e retry.Event) { l.event(e) }
}

func (l *eventLog) event(e retry.Event) {
	if l.quiet {
		return
	}
	var info attemptInfo
	if e.Err != nil {
		info = l.describe(e.Err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.json {
		l.writeJSON(e, info)
		return
	}
	switch e.Kind {
	case retry.EventRetry:
		hint := ""
		if e.Hint > 0 {
			src := info.HintSource
			if src == "" {
				src = "a server hint"
			}
			hint = fmt.Sprintf(" (server asked for %v via %s)", roundDur(e.Hint), src)
		}
		fmt.Fprintf(l.w, "%s: attempt %d/%d failed: %s; retrying in %v%s\n",
			l.prog, e.Attempt, e.MaxAttempts, info.What, roundDur(e.Wait), hint)
	case retry.EventGiveUp:
		fmt.Fprintf(l.w, "%s: giving up after attempt %d/%d: %s (%s)\n",
			l.prog, e.Attempt, e.MaxAttempts, info.What, reasonText(e.Reason, info))
	case retry.EventSuccess:
		if e.Attempt > 1 {
			fmt.Fprintf(l.w, "%s: attempt %d/%d succeeded\n", l.prog, e.Attempt, e.MaxAttempts)
		}
	}
}

// note prints a free-form line (text) or a {"event": kind, "error": msg}
// object (JSON), unless quiet.
func (l *eventLog) note(kind, msg string) {
	if l.quiet {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.json {
		b, _ := json.Marshal(map[string]string{"event": kind, "message": msg})
		fmt.Fprintf(l.w, "%s\n", b)
		return
	}
	fmt.Fprintf(l.w, "%s: %s\n", l.prog, msg)
}

func (l *eventLog) writeJSON(e retry.Event, info attemptInfo) {
	r := logRecord{
		Event:       e.Kind.String(),
		Attempt:     e.Attempt,
		MaxAttempts: e.MaxAttempts,
		HintSource:  info.HintSource,
		ExitCode:    info.ExitCode,
		Status:      info.Status,
		Method:      info.Method,
		URL:         info.URL,
		Error:       info.Error,
		ElapsedMS:   e.Elapsed.Milliseconds(),
	}
	switch e.Kind {
	case retry.EventRetry:
		ms := e.Wait.Milliseconds()
		r.WaitMS = &ms
		r.HintMS = e.Hint.Milliseconds()
	case retry.EventGiveUp:
		r.Reason = e.Reason.String()
		if info.WhyStop != "" && e.Reason == retry.ReasonPermanent {
			r.Error = strings.TrimSpace(r.Error + " (" + info.WhyStop + ")")
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	fmt.Fprintf(l.w, "%s\n", b)
}

// reasonText says in words why the loop gave up.
func reasonText(r retry.Reason, info attemptInfo) string {
	switch r {
	case retry.ReasonAttempts:
		return "no attempts left"
	case retry.ReasonDeadline:
		return "the deadline has passed or would pass before the next attempt"
	case retry.ReasonContext:
		return "interrupted"
	case retry.ReasonPermanent:
		if info.WhyStop != "" {
			return "not retried: " + info.WhyStop
		}
		return "not retryable"
	case retry.ReasonBudget:
		return "retry budget exhausted"
	case retry.ReasonThrottled:
		return "throttled by the client"
	}
	return r.String()
}

// roundDur rounds d for display: to 1 ms, or 10 ms above 10 s.
func roundDur(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
