package curl

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/httpretry"
)

// This file holds retry http's -w (--write-out): curl's variables, filled
// from what the request did and what net/http/httptrace says of its
// connections.

// Transfer is what -w reports of a request; retry http fills it in as the
// request runs.
type Transfer struct {
	Method    string
	Given     *url.URL         // the URL given (curl's url)
	URL       *url.URL         // the URL fetched last (url_effective)
	Resp      *http.Response   // the last answer, nil if none came
	Answers   []*http.Response // every hop's answer, redirects first
	Retries   int
	Redirects int
	Start     time.Time     // when the request began: time_* count from it
	Total     time.Duration // time_total
	LastHop   time.Duration // when the last hop began, since start (time_redirect)
	Size      int64         // the body bytes written
	Exit      int
	ErrorMsg  string     // the closing error line's text, "" if none
	Output    string     // -o FILE; "" or "-" for stdout
	Referer   string     // the Referer sent (-H), if any
	Proxied   bool       // the last request went through a proxy
	Wire      *WireStats // what httptrace said; nil if the network was not used
}

func (t *Transfer) status() int {
	if t.Resp == nil {
		return 0
	}
	return t.Resp.StatusCode
}

// WireStats gathers what net/http/httptrace says of the attempts (see
// connected), for -w.
type WireStats struct {
	mu       sync.Mutex
	connects int          // connections made, by every attempt
	last     AttemptTrace // the last attempt that got an answer
	hops     []int64      // per hop, the bytes its last answered attempt sent: request line, header, body
	uploads  []int64      // per hop, that attempt's body bytes
}

// AttemptTrace is what httptrace said of one attempt.
type AttemptTrace struct {
	dnsDone, connectStart, connectDone, tlsDone, gotConn, firstByte time.Time

	remote, local net.Addr
	header        int64 // the header fields written, as "Name: value\r\n" each
}

// newHop starts the count of a hop's request (retry http -L).
func (w *WireStats) newHop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hops = append(w.hops, 0)
	w.uploads = append(w.uploads, 0)
}

// Trace returns the ClientTrace that records one attempt into a.
func (w *WireStats) Trace(a *AttemptTrace) *httptrace.ClientTrace {
	set := func(f func()) {
		w.mu.Lock()
		defer w.mu.Unlock()
		f()
	}
	return &httptrace.ClientTrace{
		DNSDone: func(httptrace.DNSDoneInfo) { set(func() { a.dnsDone = time.Now() }) },
		ConnectStart: func(string, string) {
			set(func() {
				if a.connectStart.IsZero() {
					a.connectStart = time.Now()
				}
			})
		},
		ConnectDone: func(_, _ string, err error) {
			if err == nil {
				set(func() { a.connectDone = time.Now(); w.connects++ })
			}
		},
		TLSHandshakeDone: func(tls.ConnectionState, error) { set(func() { a.tlsDone = time.Now() }) },
		GotConn: func(info httptrace.GotConnInfo) {
			if info.Conn != nil {
				set(func() { a.gotConn, a.remote, a.local = time.Now(), info.Conn.RemoteAddr(), info.Conn.LocalAddr() })
			}
		},
		WroteHeaderField: func(key string, values []string) {
			set(func() {
				for _, v := range values {
					a.header += int64(len(key) + len(v) + 4)
				}
			})
		},
		GotFirstResponseByte: func() { set(func() { a.firstByte = time.Now() }) },
	}
}

// Answered records a, the trace of an attempt of req that got an answer.
// The request is counted as HTTP/1.1 writes it: the request line, the
// header fields, a blank line and the body.
func (w *WireStats) Answered(a *AttemptTrace, req *http.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = *a
	body := max(req.ContentLength, 0)
	sent := int64(len(req.Method)+1+len(req.URL.RequestURI())+len(" HTTP/1.1\r\n")) + a.header + 2 + body
	if len(w.hops) == 0 {
		w.newHopLocked()
	}
	w.hops[len(w.hops)-1], w.uploads[len(w.uploads)-1] = sent, body
}

func (w *WireStats) newHopLocked() {
	w.hops = append(w.hops, 0)
	w.uploads = append(w.uploads, 0)
}

// snapshot returns the stats, safe to read.
func (w *WireStats) snapshot() (last AttemptTrace, connects int, sent, uploaded int64) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.hops {
		sent += w.hops[i]
		uploaded += w.uploads[i]
	}
	return w.last, w.connects, sent, uploaded
}

// wkind is how %{json} writes a variable.
type wkind int

const (
	wString   wkind = iota // a JSON string
	wNumber                // a JSON number
	wNullable              // a JSON string, null when empty
)

// wvar is a -w variable.
type wvar struct {
	kind  wkind
	Value func(t *Transfer) string
	json  func(t *Transfer) string // the JSON number where it is not value (http_code: 200, not "200")
}

// WriteOutVars are the variables of -w, curl's names, each as curl 7.88
// writes it (num_retries counts the retries the policy made, redirects
// included). The time_* variables are seconds from the request's start,
// the waits between attempts included, those of the connection of the
// attempt that got the last answer. WriteOutMissing lists curl's others.
var WriteOutVars = map[string]wvar{
	"content_type": {wNullable, func(t *Transfer) string {
		if t.Resp == nil {
			return ""
		}
		return t.Resp.Header.Get("Content-Type")
	}, nil},
	"errormsg": {wNullable, func(t *Transfer) string { return t.ErrorMsg }, nil},
	"exitcode": {wNumber, func(t *Transfer) string { return strconv.Itoa(t.Exit) }, nil},
	"filename_effective": {wNullable, func(t *Transfer) string {
		if t.Output == "-" {
			return ""
		}
		return t.Output
	}, nil},
	"http_code":     {wNumber, func(t *Transfer) string { return fmt.Sprintf("%03d", t.status()) }, func(t *Transfer) string { return strconv.Itoa(t.status()) }},
	"response_code": {wNumber, func(t *Transfer) string { return fmt.Sprintf("%03d", t.status()) }, func(t *Transfer) string { return strconv.Itoa(t.status()) }},
	"http_version": {wString, func(t *Transfer) string {
		switch {
		case t.Resp == nil:
			return "0"
		case t.Resp.ProtoMajor >= 2:
			return strconv.Itoa(t.Resp.ProtoMajor)
		}
		return fmt.Sprintf("%d.%d", t.Resp.ProtoMajor, t.Resp.ProtoMinor)
	}, nil},
	"local_ip":      {wString, func(t *Transfer) string { ip, _ := t.addr(false); return ip }, nil},
	"local_port":    {wNumber, func(t *Transfer) string { _, port := t.addr(false); return strconv.Itoa(port) }, nil},
	"remote_ip":     {wString, func(t *Transfer) string { ip, _ := t.addr(true); return ip }, nil},
	"remote_port":   {wNumber, func(t *Transfer) string { _, port := t.addr(true); return strconv.Itoa(port) }, nil},
	"method":        {wString, func(t *Transfer) string { return t.Method }, nil},
	"num_connects":  {wNumber, func(t *Transfer) string { _, n, _, _ := t.Wire.snapshot(); return strconv.Itoa(n) }, nil},
	"num_headers":   {wNumber, func(t *Transfer) string { return strconv.Itoa(numHeaders(t.Resp)) }, nil},
	"num_redirects": {wNumber, func(t *Transfer) string { return strconv.Itoa(t.Redirects) }, nil},
	"num_retries":   {wNumber, func(t *Transfer) string { return strconv.Itoa(t.Retries) }, nil},
	"proxy_used": {wNumber, func(t *Transfer) string {
		if t.Proxied {
			return "1"
		}
		return "0"
	}, nil},
	"redirect_url": {wNullable, func(t *Transfer) string { return t.redirectURL() }, nil},
	"referer":      {wNullable, func(t *Transfer) string { return t.Referer }, nil},
	"scheme": {wNullable, func(t *Transfer) string {
		if t.Resp == nil {
			return ""
		}
		return strings.ToUpper(t.URL.Scheme)
	}, nil},
	"size_download": {wNumber, func(t *Transfer) string { return strconv.FormatInt(t.Size, 10) }, nil},
	"size_header": {wNumber, func(t *Transfer) string {
		n := 0
		for _, r := range t.Answers {
			n += len(headText(r))
		}
		return strconv.Itoa(n)
	}, nil},
	"size_request":    {wNumber, func(t *Transfer) string { _, _, n, _ := t.Wire.snapshot(); return strconv.FormatInt(n, 10) }, nil},
	"size_upload":     {wNumber, func(t *Transfer) string { _, _, _, n := t.Wire.snapshot(); return strconv.FormatInt(n, 10) }, nil},
	"speed_download":  {wNumber, func(t *Transfer) string { return t.speed(t.Size) }, nil},
	"speed_upload":    {wNumber, func(t *Transfer) string { _, _, _, n := t.Wire.snapshot(); return t.speed(n) }, nil},
	"time_appconnect": {wNumber, func(t *Transfer) string { a := t.Trace(); return t.seconds(a.tlsDone) }, nil},
	"time_connect":    {wNumber, func(t *Transfer) string { a := t.Trace(); return t.seconds(first(a.connectDone, a.gotConn)) }, nil},
	"time_namelookup": {wNumber, func(t *Transfer) string {
		a := t.Trace()
		return t.seconds(first(a.dnsDone, a.connectStart, a.gotConn))
	}, nil},
	"time_pretransfer":   {wNumber, func(t *Transfer) string { a := t.Trace(); return t.seconds(a.gotConn) }, nil},
	"time_starttransfer": {wNumber, func(t *Transfer) string { a := t.Trace(); return t.seconds(a.firstByte) }, nil},
	"time_redirect": {wNumber, func(t *Transfer) string {
		if t.Redirects == 0 {
			return seconds(0)
		}
		return seconds(t.LastHop)
	}, nil},
	"time_total":    {wNumber, func(t *Transfer) string { return seconds(t.Total) }, nil},
	"url":           {wString, func(t *Transfer) string { return httpretry.Redact(t.Given) }, nil},
	"url_effective": {wString, func(t *Transfer) string { return httpretry.Redact(t.URL) }, nil},
}

// urlPartVars are curl's url.PART and urle.PART variables (the URL given,
// the URL fetched last), added to WriteOutVars; not in %{json}, as in curl.
// A user name or password is never written: REDACTED if there is one.
var urlPartVars = map[string]func(u *url.URL) string{
	"scheme": func(u *url.URL) string { return u.Scheme },
	"user": func(u *url.URL) string {
		if u.User == nil {
			return ""
		}
		return httpretry.Redacted
	},
	"password": func(u *url.URL) string {
		if _, ok := u.User.Password(); ok {
			return httpretry.Redacted
		}
		return ""
	},
	"host": func(u *url.URL) string { return u.Hostname() },
	"port": func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if u.Scheme == "https" {
			return "443"
		}
		return "80"
	},
	"path": func(u *url.URL) string {
		if u.Path == "" {
			return "/"
		}
		return u.EscapedPath()
	},
	"query": func(u *url.URL) string {
		return strings.TrimPrefix(httpretry.Redact(&url.URL{RawQuery: u.RawQuery}), "?")
	},
	"fragment": func(u *url.URL) string { return u.Fragment },
}

func init() {
	for part, f := range urlPartVars {
		WriteOutVars["url."+part] = wvar{wString, func(t *Transfer) string { return f(t.Given) }, nil}
		WriteOutVars["urle."+part] = wvar{wString, func(t *Transfer) string { return f(t.URL) }, nil}
	}
}

// writeOutSpecial are the words of -w that are not values: %{stdout} and
// %{stderr} say where the rest goes, %{onerror} writes the rest only if
// the request failed, %{json} and %{header_json} are JSON objects.
var writeOutSpecial = map[string]bool{"stdout": true, "stderr": true, "onerror": true, "json": true, "header_json": true}

// WriteOutMissing are curl's -w variables retry http does not have (they
// print nothing, and a warning).
const WriteOutMissing = "certs, conn_id, ftp_entry_path, http_connect, num_certs, proxy_ssl_verify_result, ssl_verify_result, time_posttransfer, time_queue, tls_earlydata, urlnum, url.options, url.zoneid, urle.options, urle.zoneid, xfer_id, %output{} and %time{}"

// Trace returns what httptrace said of the attempt that got the last answer.
func (t *Transfer) Trace() AttemptTrace {
	a, _, _, _ := t.Wire.snapshot()
	return a
}

// seconds formats the time from the request's start to at, 0 if at is
// zero (it did not happen).
func (t *Transfer) seconds(at time.Time) string {
	if at.IsZero() {
		return seconds(0)
	}
	return seconds(at.Sub(t.Start))
}

// seconds formats d as curl's time_*: seconds with 6 decimals.
func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 6, 64) }

// first returns the first of ts that is not zero.
func first(ts ...time.Time) time.Time {
	for _, t := range ts {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// speed is curl's speed_*: n bytes over the whole request, per second, a
// whole number.
func (t *Transfer) speed(n int64) string {
	if t.Total <= 0 {
		return "0"
	}
	return strconv.FormatInt(int64(float64(n)/t.Total.Seconds()), 10)
}

// addr returns the IP address and port of the last answered attempt's
// connection: its remote end, or its local one.
func (t *Transfer) addr(remote bool) (string, int) {
	a := t.Trace()
	addr := a.local
	if remote {
		addr = a.remote
	}
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP.String(), tcp.Port
	}
	return "", 0
}

// redirectURL is curl's redirect_url: where the last answer, a redirect
// that was not followed (no -L, or --max-redirs met), would have led,
// secrets redacted; "" if it is none.
func (t *Transfer) redirectURL() string {
	if t.Resp == nil || !isRedirect(t.Resp.StatusCode) {
		return ""
	}
	loc, err := t.Resp.Location()
	if err != nil {
		return ""
	}
	return httpretry.Redact(loc)
}

// header is %header{name}: the values of the last answer's header name,
// joined by ", ".
func (t *Transfer) header(name string) string {
	if t.Resp == nil {
		return ""
	}
	return strings.Join(headerOf(t.Resp)[http.CanonicalHeaderKey(name)], ", ")
}

// headerJSON is %{header_json}: the last answer's header, names in lower
// case, each with its values.
func (t *Transfer) headerJSON() string {
	if t.Resp == nil {
		return "{}"
	}
	h := headerOf(t.Resp)
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range h {
			if !yield(k) {
				return
			}
		}
	})
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(jsonString(strings.ToLower(k)) + ":[")
		for j, v := range h[k] {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(jsonString(v))
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
	return b.String()
}

// json is %{json}: every variable but header_json and the URL parts, by
// name.
func (t *Transfer) json() string {
	var b strings.Builder
	b.WriteByte('{')
	names := make([]string, 0, len(WriteOutVars))
	for name := range WriteOutVars {
		if !strings.HasPrefix(name, "url.") && !strings.HasPrefix(name, "urle.") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for i, name := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		v := WriteOutVars[name]
		b.WriteString(jsonString(name) + ":")
		s := v.Value(t)
		switch {
		case v.json != nil:
			b.WriteString(v.json(t))
		case v.kind == wNumber:
			b.WriteString(s)
		case v.kind == wNullable && s == "":
			b.WriteString("null")
		default:
			b.WriteString(jsonString(s))
		}
	}
	b.WriteByte('}')
	return b.String()
}

// jsonString returns s as a JSON string, <, > and & as they are.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// ReadWriteOut reads a -w format (@FILE reads it from a file) and returns
// it with a warning for each unknown variable (curl warns, prints nothing
// in its place and goes on).
func ReadWriteOut(s string) (format string, warnings []string, err error) {
	if name, ok := strings.CutPrefix(s, "@"); ok {
		b, err := readFileArg(name)
		if err != nil {
			return "", nil, cli.Usagef("-w @%s: cannot read: %v", name, cli.UnwrapPath(err))
		}
		s = string(b)
	}
	rest := s
	for {
		i := strings.Index(rest, "%{")
		if i < 0 {
			return s, warnings, nil
		}
		name, after, ok := strings.Cut(rest[i+2:], "}")
		if !ok {
			return s, warnings, nil // printed as it is
		}
		lname := strings.ToLower(name) // any case, as curl
		if _, known := WriteOutVars[lname]; !known && !writeOutSpecial[lname] {
			warnings = append(warnings, fmt.Sprintf("unknown --write-out variable: '%s'", name))
		}
		rest = after
	}
}

// WriteOut writes the -w format for t: %{name} and %header{name} expanded,
// %% and the escapes \n \r \t \\ as curl does; %{stderr} and %{stdout} say
// where the rest goes, %{onerror} drops the rest if the request
// succeeded.
func WriteOut(format string, t *Transfer, stdout, stderr io.Writer) {
	var b strings.Builder
	w := stdout
	flush := func() {
		io.WriteString(w, b.String())
		b.Reset()
	}
	defer flush()
	for i := 0; i < len(format); i++ {
		c := format[i]
		switch {
		case c == '%' && strings.HasPrefix(format[i:], "%header{") && strings.Contains(format[i:], "}"):
			name, _, _ := strings.Cut(format[i+len("%header{"):], "}")
			b.WriteString(t.header(name))
			i += len("%header{") + len(name)
		case c == '%' && strings.HasPrefix(format[i:], "%{") && strings.Contains(format[i:], "}"):
			name, _, _ := strings.Cut(format[i+2:], "}")
			i += len(name) + 2
			switch lname := strings.ToLower(name); lname {
			case "stdout", "stderr":
				flush()
				w = stdout
				if lname == "stderr" {
					w = stderr
				}
			case "onerror":
				if t.Exit == 0 {
					return // what came before is written
				}
			case "json":
				b.WriteString(t.json())
			case "header_json":
				b.WriteString(t.headerJSON())
			default:
				if v, ok := WriteOutVars[lname]; ok {
					b.WriteString(v.Value(t))
				}
			}
		case c == '%' && strings.HasPrefix(format[i:], "%%"):
			b.WriteByte('%')
			i++
		case c == '\\' && i+1 < len(format):
			switch format[i+1] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case '\\':
				b.WriteByte('\\')
			default:
				b.WriteByte(c)
				continue
			}
			i++
		default:
			b.WriteByte(c)
		}
	}
}
