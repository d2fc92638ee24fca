package policy

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/httpretry"
)

// AttemptInfo describes a failed (or successful) attempt for the log. Each
// mode turns its attempt errors into one.
type AttemptInfo struct {
	ExitCode   *int   // command mode
	Status     int    // retry http: the response status, 0 if none
	Method     string // retry http
	URL        string // retry http, redacted
	HintSource string // retry http: "Retry-After", "RetryInfo", ...
	What       string // one phrase for the text log: "exit code 3", "503 Service Unavailable"
	Error      string // the error text for the JSON log ("" when Status or ExitCode say it all)
	WhyStop    string // for a permanent failure: why it is not retried
	Refusal    string // why the fleet's pacer refused the next attempt, if it did
	Start      bool   // command mode: the command could not be started
}

// logRecord is one line of --log-format json.
type logRecord struct {
	Time        string   `json:"time"`
	Event       string   `json:"event"`
	Attempt     int      `json:"attempt,omitempty"`
	MaxAttempts int      `json:"max_attempts,omitempty"`
	WaitMS      *int64   `json:"wait_ms,omitempty"`
	HintMS      int64    `json:"hint_ms,omitempty"`
	HintSource  string   `json:"hint_source,omitempty"`
	ExitCode    *int     `json:"exit_code,omitempty"`
	Status      int      `json:"status,omitempty"`
	Method      string   `json:"method,omitempty"`
	URL         string   `json:"url,omitempty"`
	Error       string   `json:"error,omitempty"`
	Message     string   `json:"message,omitempty"`
	Reason      string   `json:"reason,omitempty"`
	ElapsedMS   *int64   `json:"elapsed_ms,omitempty"`
	Lines       []string `json:"lines,omitempty"` // -v
}

// timeFormat is RFC 3339 with milliseconds, in UTC.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// EventLog prints the loop's events and retry's own messages on w, as text
// lines or, with --log-format json, as one JSON object per line (every line
// retry writes there, the closing one included).
type EventLog struct {
	mu     sync.Mutex
	w      io.Writer
	prog   string
	JSON   bool
	Quiet  bool // no retry log; errors, the reason a command could not start included, are still printed
	Silent bool // retry http -s: no log and no error message
	// KeepGiveUp: --quiet does not hide the give-up line (retry http: it is
	// the closing line, the error).
	KeepGiveUp bool
	Describe   func(error) AttemptInfo
	now        func() time.Time
	// refusal, when set, says why a pacer (the fleet's quota or cooldown)
	// refused the attempt the loop gave up before, "" if none did.
	refusal func() string

	GaveUp bool // a give-up line was printed
	// closing is the text of the closing error (a give-up or an error
	// line), printed or not (-s), for retry http -w's errormsg.
	closing string
	hintAt  string // the hint to print at the first retry, if any
	// retried is the attempt of the last event if it was a retry (0 if
	// not): a give-up for the same attempt (a pacer that refused the next
	// one after the wait) is then said as giving up before the next.
	retried int
}

// NewEventLog returns the event log of a run of prog, written to w in the
// format pf asks for; describe says what an attempt's error was.
func NewEventLog(w io.Writer, prog string, pf *Flags, describe func(error) AttemptInfo) *EventLog {
	return &EventLog{w: w, prog: prog, JSON: pf.logFormat == "json", Quiet: pf.Quiet, Describe: describe, now: time.Now}
}

// Observer returns the retry.Observer that prints the events.
func (l *EventLog) Observer() retry.Observer {
	return func(_ context.Context, e retry.Event) { l.Event(e) }
}

// Event writes the line of e, described by the log's Describe.
func (l *EventLog) Event(e retry.Event) {
	var info AttemptInfo
	if e.Err != nil {
		info = l.Describe(e.Err)
	}
	l.Emit(e, info)
}

// Hop logs the end of one hop of a request that follows redirects (retry
// http -L), whose loop has reported e, an [retry.EventSuccess]: as a success
// when resp is the request's final answer, else as a "redirect" event (in the
// text log only after a retry, as a success is).
func (l *EventLog) Hop(e retry.Event, resp *http.Response, final bool) {
	info := AttemptInfo{Status: resp.StatusCode}
	if resp.Request != nil {
		info.Method = resp.Request.Method
		info.URL = httpretry.Redact(resp.Request.URL)
	}
	if final {
		l.Emit(e, info)
		return
	}
	if loc, err := resp.Location(); err == nil {
		info.URL = httpretry.Redact(loc)
	} else { // a Location that is not a URL: as it is, never the hop's own URL
		info.URL = cli.RedactRawURL(resp.Header.Get("Location"))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.retried = 0
	if l.Silent || l.Quiet {
		return
	}
	if l.JSON {
		r := l.record(e, info)
		r.Event = "redirect"
		l.encode(r)
		return
	}
	if e.Attempt > 1 {
		fmt.Fprintf(l.w, "%s: attempt %d/%d succeeded: %d, a redirect to %s\n", l.prog, e.Attempt, e.MaxAttempts, info.Status, info.URL)
	}
}

// Emit logs e, described by info.
func (l *EventLog) Emit(e retry.Event, info AttemptInfo) {
	if e.Kind == retry.EventGiveUp && (e.Reason == retry.ReasonDeadline || e.Reason == retry.ReasonThrottled) && l.refusal != nil {
		info.Refusal = l.refusal()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.Kind == retry.EventGiveUp {
		l.GaveUp = true
		l.closing = httpretry.RedactText(cli.OneLine(closingText(e, info)))
	}
	retried := l.retried
	l.retried = 0
	if e.Kind == retry.EventRetry {
		l.retried = e.Attempt
	}
	if l.Silent || (l.Quiet && !(e.Kind == retry.EventGiveUp && (info.Start || l.KeepGiveUp))) {
		return
	}
	if l.JSON {
		l.writeJSON(e, info)
		l.retryHint(e)
		return
	}
	defer l.retryHint(e)
	switch e.Kind {
	case retry.EventRetry:
		hint := ""
		if e.Hint > 0 {
			src := info.HintSource
			if src == "" {
				src = "a server hint"
			}
			hint = fmt.Sprintf(" (server asked for %v via %s)", cli.RoundDur(e.Hint), src)
		}
		fmt.Fprintf(l.w, "%s: attempt %d/%d failed: %s; retrying in %v%s\n",
			l.prog, e.Attempt, e.MaxAttempts, info.What, cli.RoundDur(e.Wait), hint)
	case retry.EventGiveUp:
		what := info.What
		if e.Attempt == 0 { // refused before the first attempt
			fmt.Fprintf(l.w, "%s: giving up before the first attempt (%s)\n", l.prog, reasonText(e.Reason, info))
			return
		}
		if e.Attempt == retried { // its failure has been said: the next was refused
			fmt.Fprintf(l.w, "%s: giving up before attempt %d/%d after %v (%s)\n",
				l.prog, e.Attempt+1, e.MaxAttempts, cli.RoundDur(e.Elapsed), reasonText(e.Reason, info))
			return
		}
		fmt.Fprintf(l.w, "%s: attempt %d/%d failed: %s; giving up after %v (%s)\n",
			l.prog, e.Attempt, e.MaxAttempts, what, cli.RoundDur(e.Elapsed), reasonText(e.Reason, info))
	case retry.EventSuccess:
		if e.Attempt > 1 {
			fmt.Fprintf(l.w, "%s: attempt %d/%d succeeded\n", l.prog, e.Attempt, e.MaxAttempts)
		}
	}
}

// closingText says what a give-up event e (described by info) ends on.
func closingText(e retry.Event, info AttemptInfo) string {
	if e.Attempt == 0 {
		return "giving up before the first attempt (" + reasonText(e.Reason, info) + ")"
	}
	return fmt.Sprintf("attempt %d/%d failed: %s; gave up (%s)", e.Attempt, e.MaxAttempts, info.What, reasonText(e.Reason, info))
}

// ClosingError returns the text of the closing error, "" if none.
func (l *EventLog) ClosingError() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closing
}

// Note prints a line of retry's own (a hint, a warning): as text, or as a
// JSON object {"event": kind, "message": msg}. Nothing with --quiet.
func (l *EventLog) Note(kind, msg string) { l.say(kind, msg, l.Quiet || l.Silent) }

// fleetState prints a change of the fleet's coordination (Redis unavailable,
// available again): as note does, but with --quiet and -sS too, and
// hidden only by -s alone. It is no retry log: it says the fleet's limits
// are no longer (or again) shared, which a script that asks for errors
// (-fsS) needs to know, as curl's -S shows its errors.
func (l *EventLog) fleetState(msg string) { l.say("fleet", msg, l.Silent) }

// Warn prints a warning of retry's own, even with --quiet or -s (as
// curl's warnings about -w): as text, or as {"event": "warning", ...}.
func (l *EventLog) Warn(msg string) { l.say("warning", msg, false) }

// say prints msg unless hide: as text ("retry: msg"), or as a JSON object
// {"event": event, "message": msg}. (Quiet and Silent, which decide hide,
// are set before the log is used.)
func (l *EventLog) say(event, msg string, hide bool) {
	if hide {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.JSON {
		l.encode(logRecord{Event: event, Message: msg})
		return
	}
	fmt.Fprintf(l.w, "%s: %s\n", l.prog, msg)
}

// Fail prints the one closing line for err (a usage error, or a failure that
// sent no give-up event) and returns the exit status for it: 2 for usage
// errors, an *cli.ExitError's own, 1 otherwise. Usage errors are printed even
// with --quiet.
func (l *EventLog) Fail(err error) int {
	code := cli.ExitGaveUp
	var ue *cli.UsageError
	var ee *cli.ExitError
	switch {
	case errors.As(err, &ue):
		code = cli.ExitUsage
	case errors.As(err, &ee):
		code = ee.Code
	}
	l.FailCode(err, code)
	return code
}

// FailCode prints the closing line for err, exiting with code.
func (l *EventLog) FailCode(err error, code int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	msg := httpretry.RedactText(cli.OneLine(err.Error()))
	l.closing = msg
	if l.Silent && code != cli.ExitUsage {
		return
	}
	if l.JSON {
		event := "error"
		if code == cli.ExitUsage {
			event = "usage-error"
		}
		l.encode(logRecord{Event: event, Error: msg, ExitCode: &code})
		return
	}
	if code == cli.ExitUsage {
		fmt.Fprintf(l.w, "%s: %s (see '%s --help')\n", l.prog, msg, l.prog)
		return
	}
	fmt.Fprintf(l.w, "%s: %s\n", l.prog, msg)
}

// Hint prepares a one-line hint, printed at the first retry (see
// retryHint), when the policy's jitter is larger than its initial delay:
// the first waits are then mostly random and can shrink (976ms then
// 809ms), which looks like a bug in the backoff.
func (l *EventLog) Hint(p retry.Policy) {
	if p.Attempts < 2 || p.InitialDelay <= 0 || p.Jitter <= p.InitialDelay {
		return
	}
	if p.MaxDelay > 0 && p.MaxDelay <= p.InitialDelay {
		return // every wait is MaxDelay: nothing random to see
	}
	if p.Shape != retry.ShapeGoogle && p.Shape != retry.ShapeJitterAtCap {
		return // the other shapes do not add Jitter
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hintAt = fmt.Sprintf("hint: --jitter %v > --initial-delay %v", cli.RoundDur(p.Jitter), cli.RoundDur(p.InitialDelay))
	if why := ": early waits are random"; len(l.prog)+2+len(l.hintAt)+len(why) <= 80 {
		l.hintAt += why // within 80 columns
	}
}

// retryHint prints the hint, if any, after the first retry's line. Call it
// with l.mu held.
func (l *EventLog) retryHint(e retry.Event) {
	if e.Kind != retry.EventRetry || l.hintAt == "" {
		return
	}
	if l.JSON {
		l.encode(logRecord{Event: "hint", Message: l.hintAt})
	} else {
		fmt.Fprintf(l.w, "%s: %s\n", l.prog, l.hintAt)
	}
	l.hintAt = ""
}

func (l *EventLog) writeJSON(e retry.Event, info AttemptInfo) {
	l.encode(l.record(e, info))
}

// record is the JSON log record of e, described by info.
func (l *EventLog) record(e retry.Event, info AttemptInfo) logRecord {
	elapsed := e.Elapsed.Milliseconds()
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
		ElapsedMS:   &elapsed,
	}
	switch e.Kind {
	case retry.EventRetry:
		ms := e.Wait.Milliseconds()
		r.WaitMS = &ms
		r.HintMS = e.Hint.Milliseconds()
	case retry.EventGiveUp:
		r.Reason = e.Reason.String()
		if e.Reason == retry.ReasonContext {
			r.Reason = "interrupted" // as the text log says: a signal, not a Go context
		}
		if info.WhyStop != "" && e.Reason == retry.ReasonPermanent {
			r.Error = strings.TrimSpace(r.Error + " (" + info.WhyStop + ")")
		}
		if info.Refusal != "" {
			r.Message = info.Refusal
		}
	}
	return r
}

// encode writes r as one JSON line, stamped with the time.
func (l *EventLog) encode(r logRecord) {
	r.Time = l.now().UTC().Format(timeFormat)
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	fmt.Fprintf(l.w, "%s\n", b)
}

// reasonText says in words why the loop gave up.
func reasonText(r retry.Reason, info AttemptInfo) string {
	if info.Refusal != "" {
		return info.Refusal
	}
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

// Verbose prints -v lines (curl's "> " request and "< " response headers)
// as they are, or as one JSON object {"event": kind, "lines": [...]}. -v
// shows them even with --quiet or -s, as curl does.
func (l *EventLog) Verbose(kind string, lines []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.JSON {
		r := logRecord{Event: kind, Lines: lines}
		l.encode(r)
		return
	}
	for _, s := range lines {
		fmt.Fprintln(l.w, s)
	}
}

// ScanLogFormat returns the value of the last valid --log-format among
// args as fs would parse them ("" if none), without parsing them: a usage
// error found before or after --log-format json is then still reported as
// JSON. It reads args up to "--" and, unless interspersed (retry http takes
// flags after the URL), up to the first argument that is not a flag; it
// skips the value of every flag of fs that takes one.
func ScanLogFormat(fs *flag.FlagSet, args []string, interspersed bool) string {
	format := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			if interspersed {
				continue
			}
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				break
			}
			i++
			value = args[i]
		}
		if name == "log-format" && (value == "json" || value == "text") {
			format = value
		}
	}
	return format
}

// RouteStdLog sends the lines of the standard log package, which net/http
// writes to (a Transport's "Unsolicited response received on idle HTTP
// channel", a Server's errors), to the event log, their secrets redacted:
// as "retry http: ..." lines, or as {"event": "log", "message": ...}
// objects when the log is JSON, so that every line on stderr is one; none
// with --quiet or -s. It returns a function that restores the log package.
func (l *EventLog) RouteStdLog() (restore func()) {
	w, flags, prefix := log.Writer(), log.Flags(), log.Prefix()
	log.SetOutput(stdLogWriter{l})
	log.SetFlags(0)
	log.SetPrefix("")
	return func() {
		log.SetOutput(w)
		log.SetFlags(flags)
		log.SetPrefix(prefix)
	}
}

// stdLogWriter turns each line written by a log.Logger into a line of the
// event log, its secrets redacted.
type stdLogWriter struct{ l *EventLog }

func (w stdLogWriter) Write(p []byte) (int, error) {
	l := w.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Quiet || l.Silent {
		return len(p), nil
	}
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if l.JSON {
			l.encode(logRecord{Event: "log", Message: httpretry.RedactText(line)})
		} else {
			fmt.Fprintf(l.w, "%s: %s\n", l.prog, httpretry.RedactText(line))
		}
	}
	return len(p), nil
}
