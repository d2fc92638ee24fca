// Package chaos is a loopback HTTP server that injects seeded faults into the
// requests it serves and records what it did, for the reliability tests of
// backoffkit/retry: connection resets before, during and after a response,
// stalls (of the headers, of a response body, of a retryable answer's body),
// slow request reading, 5xx storms, 429s with well-formed and malicious
// Retry-After and RetryInfo hints, and graceful GOAWAY over HTTP/2.
//
// Each request may carry an id (X-Chaos-Id); the server counts how many times
// each id reached it and, per Idempotency-Key (or per id when there is no
// key), how many times the request's side effect ran. With Config.Dedupe a
// repeated key gets the stored response instead of a second effect, as an
// idempotency-aware server would do. Faults are drawn from a hash of
// (Config.Seed, id, attempt number), so a run is reproducible whatever the
// concurrency.
//
// The server listens on 127.0.0.1 only, or on an in-memory PipeListener for
// tests in a testing/synctest bubble.
package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Header names understood or set by the server.
const (
	// HeaderID names the request for the server's records and for the
	// fault draw; every attempt of one logical request carries the same id.
	HeaderID = "X-Chaos-Id"
	// HeaderBodyLen and HeaderBodySum declare the request body's length and
	// hex SHA-256; the server compares them with what it received.
	HeaderBodyLen = "X-Chaos-Body-Len"
	HeaderBodySum = "X-Chaos-Body-Sum"
	// HeaderRespLen asks for a response body of that many bytes.
	HeaderRespLen = "X-Chaos-Resp-Len"
	// HeaderSum is the hex SHA-256 of the response body (see ReadChecked).
	HeaderSum = "X-Chaos-Sum"
	// HeaderAttempt is the server's count of attempts for the id, this one
	// included: attempts are numbered as they reach the handler, which is
	// not the order the client sent them in when an attempt it gave up on
	// arrives late (see HeaderEcho).
	HeaderAttempt = "X-Chaos-Attempt"
	// HeaderFault names the fault applied to a response that has one.
	HeaderFault = "X-Chaos-Fault"
	// HeaderReplayed is "true" on a response replayed for a repeated
	// Idempotency-Key.
	HeaderReplayed = "X-Chaos-Replayed"
	// HeaderKey is the idempotency key header.
	HeaderKey = "Idempotency-Key"
	// HeaderEcho is sent back as is in the response and kept in the
	// attempt's record (Attempt.Echo): a client that numbers its attempts
	// in it can tell which attempt an answer belongs to, even when a
	// request it gave up on reaches the server after the next one.
	HeaderEcho = "X-Chaos-Echo"
)

// maxRespLen bounds HeaderRespLen.
const maxRespLen = 64 << 20

// Config configures a Server. The zero Config serves every request normally
// over HTTP/1.1 on 127.0.0.1.
type Config struct {
	// Seed seeds the fault draw and the response bodies.
	Seed uint64
	// FaultRate is the probability, in [0, 1], that an attempt gets a fault.
	FaultRate float64
	// Faults lists the faults to draw from, uniformly; a plain request
	// draws from those that are not stream faults. nil means every fault:
	// Faults() for a plain request, with StreamFaults() for a stream one.
	Faults []Fault
	// Decide, when set, picks the fault of each attempt instead of
	// FaultRate and Faults; attempt counts from 1 per id.
	Decide func(id string, attempt int) Fault
	// Dedupe makes the server answer a repeated Idempotency-Key with the
	// stored response instead of running the side effect again.
	Dedupe bool
	// HTTP2 serves unencrypted HTTP/2 (prior knowledge) besides HTTP/1.1;
	// Transport then speaks HTTP/2.
	HTTP2 bool
	// RetryAfter is the wait asked for by the well-formed Retry-After and
	// RetryInfo faults. 0 means 1 s.
	RetryAfter time.Duration
	// StallMax bounds every stall and slow read. 0 means 5 s.
	StallMax time.Duration
	// HugeBody is the size of the RetryInfoHuge body. 0 means 1 MiB.
	HugeBody int
	// Listener, when set, is served instead of a new 127.0.0.1 listener
	// (for example a PipeListener). Close closes it.
	Listener net.Listener
}

// Attempt is what the server did with one attempt of a request.
type Attempt struct {
	Key    string // the attempt's Idempotency-Key, "" if none
	Echo   string // the attempt's HeaderEcho, "" if none
	Fault  Fault
	Status int // the status written and flushed without error, 0 if none (reset, stall, failed write)
	// Events is, for a stream, the number of whole events written and
	// flushed without error.
	Events int
	Effect bool
	Replay bool
}

// Record is what the server saw of one request id.
type Record struct {
	Method   string
	Key      string
	Attempts []Attempt
	// BodyMismatch counts attempts whose body ended cleanly but differed
	// from the declared length or checksum.
	BodyMismatch int
}

// Stats sums up a server's activity.
type Stats struct {
	Requests       int           // attempts that reached the handler
	Faults         map[Fault]int // faults applied
	Effects        int           // side effects run
	Replays        int           // responses replayed for a repeated key
	BodyMismatches int           // bodies received truncated, doubled or corrupt
	BodyAborted    int           // bodies cut short by the client (visible failures)
	Conns          int           // connections accepted
	OpenConns      int           // connections open now
	MaxOpenConns   int           // most connections open at once
}

// Server is a running chaos server. Its methods are safe for concurrent use.
type Server struct {
	// URL is the base URL of the server, e.g. http://127.0.0.1:41234.
	URL string

	cfg          Config
	faults       []Fault // for plain requests
	streamFaults []Fault // for stream requests
	ln           net.Listener
	srv          *http.Server
	closing      chan struct{}
	handlers     sync.WaitGroup
	served       chan struct{}

	mu        sync.Mutex
	anon      int
	records   map[string]*Record
	effects   map[string]int // per key, or per id without a key
	stored    map[string]string
	faultN    map[Fault]int
	stats     Stats
	connsChng chan struct{} // closed and replaced when OpenConns changes
}

// Start validates cfg and starts a server.
func Start(cfg Config) (*Server, error) {
	if math.IsNaN(cfg.FaultRate) || cfg.FaultRate < 0 || cfg.FaultRate > 1 {
		return nil, fmt.Errorf("chaos: FaultRate %v outside [0, 1]", cfg.FaultRate)
	}
	for _, f := range cfg.Faults {
		if f == None || f >= numFaults {
			return nil, fmt.Errorf("chaos: Faults holds invalid fault %v", f)
		}
	}
	if cfg.RetryAfter < 0 || cfg.StallMax < 0 || cfg.HugeBody < 0 {
		return nil, errors.New("chaos: RetryAfter, StallMax and HugeBody must not be negative")
	}
	if cfg.RetryAfter == 0 {
		cfg.RetryAfter = time.Second
	}
	if cfg.StallMax == 0 {
		cfg.StallMax = 5 * time.Second
	}
	if cfg.HugeBody == 0 {
		cfg.HugeBody = 1 << 20
	}
	s := &Server{
		cfg:       cfg,
		faults:    cfg.Faults,
		closing:   make(chan struct{}),
		served:    make(chan struct{}),
		records:   map[string]*Record{},
		effects:   map[string]int{},
		stored:    map[string]string{},
		faultN:    map[Fault]int{},
		connsChng: make(chan struct{}),
	}
	if s.faults == nil {
		s.faults = Faults()
		s.streamFaults = append(Faults(), StreamFaults()...)
	} else {
		s.streamFaults = s.faults
		s.faults = nil
		for _, f := range s.streamFaults {
			if !f.Stream() {
				s.faults = append(s.faults, f)
			}
		}
	}
	s.ln = cfg.Listener
	if s.ln == nil {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("chaos: listen on loopback: %w", err)
		}
		s.ln = ln
	}
	s.URL = "http://" + s.ln.Addr().String()
	s.srv = &http.Server{
		Handler:   s,
		ConnState: s.connState,
		ErrorLog:  log.New(io.Discard, "", 0), // aborted connections are the point
	}
	if cfg.HTTP2 {
		s.srv.Protocols = new(http.Protocols)
		s.srv.Protocols.SetHTTP1(true)
		s.srv.Protocols.SetUnencryptedHTTP2(true)
	}
	go func() {
		defer close(s.served)
		s.srv.Serve(s.ln)
	}()
	return s, nil
}

// Transport returns a new transport that reaches the server (over its
// PipeListener if it has one, with HTTP/2 if Config.HTTP2), keeping up to
// idle connections alive.
func (s *Server) Transport(idle int) *http.Transport {
	t := &http.Transport{
		MaxIdleConns:        idle,
		MaxIdleConnsPerHost: idle,
		IdleConnTimeout:     time.Minute,
	}
	if pl, ok := s.ln.(*PipeListener); ok {
		t.DialContext = pl.DialContext
	}
	if s.cfg.HTTP2 {
		t.Protocols = new(http.Protocols)
		t.Protocols.SetUnencryptedHTTP2(true)
	}
	return t
}

// Close stops the server: it closes the listener and every connection, ends
// stalls, and waits for every handler to return.
func (s *Server) Close() error {
	select {
	case <-s.closing:
		return nil
	default:
	}
	close(s.closing)
	err := s.srv.Close()
	<-s.served
	s.handlers.Wait()
	return err
}

// Stats returns a summary of what the server has done so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Faults = make(map[Fault]int, len(s.faultN))
	for f, n := range s.faultN {
		st.Faults[f] = n
	}
	return st
}

// Record returns what the server saw of the request id (a copy), and whether
// it saw it at all.
func (s *Server) Record(id string) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok {
		return Record{}, false
	}
	c := *r
	c.Attempts = append([]Attempt(nil), r.Attempts...)
	return c, true
}

// Hits returns how many attempts of the request id reached the handler.
func (s *Server) Hits(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.records[id]; ok {
		return len(r.Attempts)
	}
	return 0
}

// Effects returns how many times the side effect ran for the Idempotency-Key
// key, or, for requests without a key, for the request id key.
func (s *Server) Effects(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.effects[key]
}

// OpenConns returns the number of client connections open now.
func (s *Server) OpenConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats.OpenConns
}

// WaitConns waits until at most n client connections are open, or ctx ends
// (then it returns ctx's error and the count). It polls nothing: it wakes on
// every connection state change.
func (s *Server) WaitConns(ctx context.Context, n int) (int, error) {
	for {
		s.mu.Lock()
		open, ch := s.stats.OpenConns, s.connsChng
		s.mu.Unlock()
		if open <= n {
			return open, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return open, ctx.Err()
		}
	}
}

// IdleCloser is a client transport whose idle connections can be closed,
// such as *http.Transport or *httpretry.Transport.
type IdleCloser interface{ CloseIdleConnections() }

// closeIdleEvery is how often CloseClientConns asks the transports again.
const closeIdleEvery = 10 * time.Millisecond

// CloseClientConns closes the idle connections of the client transports ts
// until the server holds no connection, or ctx ends; it returns the number
// still open and, if some are, ctx's error.
//
// One call to CloseIdleConnections is not enough over HTTP/2: net/http
// removes a finished stream from its connection in a goroutine of its own,
// possibly just after the caller has read and closed the body, and
// CloseIdleConnections skips a connection that still has a stream. Such a
// connection would stay open until the transport's IdleConnTimeout. So the
// transports are asked again on every connection state change and every
// 10 ms. A connection still open when ctx ends is busy for real: a response
// body not closed, a request still running, a leak.
func (s *Server) CloseClientConns(ctx context.Context, ts ...IdleCloser) (int, error) {
	tick := time.NewTicker(closeIdleEvery)
	defer tick.Stop()
	for {
		for _, t := range ts {
			t.CloseIdleConnections()
		}
		s.mu.Lock()
		open, ch := s.stats.OpenConns, s.connsChng
		s.mu.Unlock()
		if open == 0 {
			return 0, nil
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-ctx.Done():
			return s.OpenConns(), ctx.Err()
		}
	}
}

func (s *Server) connState(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st {
	case http.StateNew:
		s.stats.Conns++
		s.stats.OpenConns++
		s.stats.MaxOpenConns = max(s.stats.MaxOpenConns, s.stats.OpenConns)
	case http.StateClosed, http.StateHijacked:
		s.stats.OpenConns--
	default:
		return
	}
	close(s.connsChng)
	s.connsChng = make(chan struct{})
}

// hash64 mixes the seed, the id and the attempt number (SplitMix64 finaliser
// over FNV-1a).
func hash64(seed uint64, id string, attempt int, salt uint64) uint64 {
	h := fnv.New64a()
	io.WriteString(h, id)
	x := seed ^ h.Sum64() ^ uint64(attempt)*0x9e3779b97f4a7c15 ^ salt*0xbf58476d1ce4e5b9
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func (s *Server) decide(id string, attempt int, stream bool) Fault {
	if s.cfg.Decide != nil {
		f := s.cfg.Decide(id, attempt)
		if f.Stream() && !stream {
			return None
		}
		return f
	}
	faults := s.faults
	if stream {
		faults = s.streamFaults
	}
	u := float64(hash64(s.cfg.Seed, id, attempt, 1)>>11) / (1 << 53)
	if u >= s.cfg.FaultRate || len(faults) == 0 {
		return None
	}
	return faults[hash64(s.cfg.Seed, id, attempt, 2)%uint64(len(faults))]
}

// begin registers an attempt and returns the id, the attempt's index in the
// record, and its fault.
func (s *Server) begin(r *http.Request) (id string, idx int, f Fault) {
	id = r.Header.Get(HeaderID)
	s.mu.Lock()
	if id == "" {
		s.anon++
		id = "#" + strconv.Itoa(s.anon)
	}
	rec := s.records[id]
	if rec == nil {
		rec = &Record{Method: r.Method, Key: r.Header.Get(HeaderKey)}
		s.records[id] = rec
	}
	rec.Attempts = append(rec.Attempts, Attempt{Key: r.Header.Get(HeaderKey), Echo: r.Header.Get(HeaderEcho)})
	idx = len(rec.Attempts) - 1
	s.stats.Requests++
	s.mu.Unlock()
	f = s.decide(id, idx+1, r.Header.Get(HeaderStream) != "")
	s.mu.Lock()
	rec.Attempts[idx].Fault = f
	if f != None {
		s.faultN[f]++
	}
	s.mu.Unlock()
	return id, idx, f
}

func (s *Server) note(id string, idx int, fn func(a *Attempt, r *Record)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.records[id]
	fn(&r.Attempts[idx], r)
}

// ServeHTTP serves one attempt: it draws a fault, reads and checks the body,
// runs (or replays) the side effect and answers, misbehaving as drawn.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handlers.Add(1)
	defer s.handlers.Done()
	id, idx, fault := s.begin(r)
	w.Header().Set(HeaderAttempt, strconv.Itoa(idx+1))
	if v := r.Header.Get(HeaderEcho); v != "" {
		w.Header().Set(HeaderEcho, v)
	}

	switch fault {
	case ResetBeforeRead:
		s.abort(w, r)
	case StallHeaders:
		io.Copy(io.Discard, r.Body) // lets the server notice the client leaving
		s.stall(r.Context())
		s.abort(w, r)
	case SlowRead:
		s.slowRead(r)
		s.abort(w, r)
	case Status5xx, RetryAfterSeconds, RetryAfterDate, RetryAfterMalformed, RetryAfterNegative,
		RetryAfterHuge, RetryInfo, RetryInfoMalformed, RetryInfoHuge:
		if code, ok := s.answerFault(w, id, idx, fault); ok {
			s.note(id, idx, func(a *Attempt, _ *Record) { a.Status = code })
		}
	case StallStatus:
		s.stallStatus(w, r, id, idx)
	case StreamErrorFirst:
		s.streamError(w, r, id, idx)
	case StreamResetBeforeFirst:
		io.Copy(io.Discard, r.Body)
		w.Header().Set(HeaderFault, fault.String())
		w.Header().Set("Content-Type", StreamContentType(r.Header.Get(HeaderStream)))
		w.WriteHeader(http.StatusOK)
		if http.NewResponseController(w).Flush() == nil {
			s.note(id, idx, func(a *Attempt, _ *Record) { a.Status = http.StatusOK })
		}
		s.abort(w, r)
	default:
		s.serve(w, r, id, idx, fault)
	}
}

// serve reads and checks the body, runs the effect and answers, applying an
// after-the-effect fault if one was drawn.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, id string, idx int, fault Fault) {
	h := sha256.New()
	n, err := io.Copy(h, r.Body)
	if err != nil {
		s.mu.Lock()
		s.stats.BodyAborted++
		s.mu.Unlock()
		return
	}
	if want := r.Header.Get(HeaderBodySum); want != "" {
		wantLen, _ := strconv.ParseInt(r.Header.Get(HeaderBodyLen), 10, 64)
		if hex.EncodeToString(h.Sum(nil)) != want || n != wantLen {
			s.note(id, idx, func(_ *Attempt, rec *Record) { rec.BodyMismatch++ })
			s.mu.Lock()
			s.stats.BodyMismatches++
			s.mu.Unlock()
			http.Error(w, fmt.Sprintf("chaos: body of %d bytes does not match the declared length/checksum", n), http.StatusUnprocessableEntity)
			if http.NewResponseController(w).Flush() == nil {
				s.note(id, idx, func(a *Attempt, _ *Record) { a.Status = http.StatusUnprocessableEntity })
			}
			return
		}
	}

	// The side effect, at most once per key when deduplicating.
	key := r.Header.Get(HeaderKey)
	scope := key
	if scope == "" {
		scope = id
	}
	s.mu.Lock()
	replay := key != "" && s.cfg.Dedupe && s.effects[scope] > 0
	if replay {
		s.stats.Replays++
	} else {
		s.effects[scope]++
		s.stats.Effects++
	}
	rec := s.records[id]
	rec.Attempts[idx].Effect = !replay
	rec.Attempts[idx].Replay = replay
	s.mu.Unlock()

	if format := r.Header.Get(HeaderStream); format != "" {
		s.serveStream(w, r, id, idx, fault, format)
		return
	}
	size, _ := strconv.ParseInt(r.Header.Get(HeaderRespLen), 10, 64)
	size = min(max(size, 0), maxRespLen)
	body := make([]byte, size)
	rd := Body{Seed: hash64(s.cfg.Seed, id, 0, 3), Len: size}.Open()
	io.ReadFull(rd, body)
	sum := sha256.Sum256(body)

	hd := w.Header()
	hd.Set(HeaderSum, hex.EncodeToString(sum[:]))
	hd.Set("Content-Length", strconv.FormatInt(size, 10))
	hd.Set("Content-Type", "application/octet-stream")
	if replay {
		hd.Set(HeaderReplayed, "true")
	}
	if fault != None {
		hd.Set(HeaderFault, fault.String())
	}
	if s.breakResponse(w, r, fault, body[:size/2], nil) {
		return
	}
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(body); err == nil && rc.Flush() == nil {
		s.note(id, idx, func(a *Attempt, _ *Record) { a.Status = http.StatusOK })
	}
}

// answerFault answers a status fault and returns the status code and whether
// the answer was written (and flushed) without error.
func (s *Server) answerFault(w http.ResponseWriter, id string, idx int, f Fault) (int, bool) {
	hd := w.Header()
	hd.Set(HeaderFault, f.String())
	code := http.StatusTooManyRequests
	var body string
	ra := s.cfg.RetryAfter
	switch f {
	case Status5xx:
		code = [...]int{500, 502, 503, 504}[hash64(s.cfg.Seed, id, idx+1, 4)%4]
		body = "chaos: " + http.StatusText(code) + "\n"
	case RetryAfterSeconds:
		hd.Set("Retry-After", strconv.FormatInt(int64((ra+time.Second-1)/time.Second), 10))
	case RetryAfterDate:
		hd.Set("Retry-After", time.Now().Add(ra).UTC().Format(http.TimeFormat))
	case RetryAfterMalformed:
		hd.Set("Retry-After", "soon, maybe")
	case RetryAfterNegative:
		hd.Set("Retry-After", "-5")
	case RetryAfterHuge:
		hd.Set("Retry-After", "1000000000")
	case RetryInfo:
		body = retryInfoBody(strconv.FormatFloat(ra.Seconds(), 'f', -1, 64)+"s", "")
	case RetryInfoMalformed:
		body = `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"soo`
	case RetryInfoHuge:
		body = retryInfoBody("1000000000s", strings.Repeat("x", s.cfg.HugeBody))
	}
	if strings.HasPrefix(body, "{") {
		hd.Set("Content-Type", "application/json; charset=UTF-8")
	} else {
		hd.Set("Content-Type", "text/plain; charset=utf-8")
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	if _, err := io.WriteString(w, body); err != nil {
		return code, false
	}
	return code, http.NewResponseController(w).Flush() == nil
}

// stallStatus answers 503 with half of a RetryInfo body, then stalls and
// resets.
func (s *Server) stallStatus(w http.ResponseWriter, r *http.Request, id string, idx int) {
	body := retryInfoBody(strconv.FormatFloat(s.cfg.RetryAfter.Seconds(), 'f', -1, 64)+"s", "")
	hd := w.Header()
	hd.Set(HeaderFault, StallStatus.String())
	hd.Set("Content-Type", "application/json; charset=UTF-8")
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusServiceUnavailable)
	_, err := io.WriteString(w, body[:len(body)/2])
	if err == nil && http.NewResponseController(w).Flush() == nil {
		s.note(id, idx, func(a *Attempt, _ *Record) { a.Status = http.StatusServiceUnavailable })
	}
	s.stall(r.Context())
	s.abort(w, r)
}

// retryInfoBody is a Google API error body carrying a google.rpc.RetryInfo.
func retryInfoBody(delay, pad string) string {
	return `{"error":{"code":429,"message":"chaos: resource exhausted` + pad + `","status":"RESOURCE_EXHAUSTED",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"` + delay + `"}]}}`
}

// stall blocks until ctx ends (the client left), StallMax passes or the
// server closes.
func (s *Server) stall(ctx context.Context) {
	t := time.NewTimer(s.cfg.StallMax)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-s.closing:
	}
}

// slowRead reads the request body 16 bytes every 10 ms until the client
// leaves, StallMax passes or the server closes; then it keeps stalling.
func (s *Server) slowRead(r *http.Request) {
	t := time.NewTimer(s.cfg.StallMax)
	defer t.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var buf [16]byte
	eof := false
	for {
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
			return
		case <-s.closing:
			return
		case <-tick.C:
		}
		if eof {
			continue
		}
		if _, err := r.Body.Read(buf[:]); err != nil {
			if err != io.EOF {
				return // the client left
			}
			eof = true
		}
	}
}

// abort cuts the connection: a TCP reset over HTTP/1.1 (the connection is
// hijacked and closed with SO_LINGER 0), a stream reset over HTTP/2.
// breakResponse applies the faults that break a body and a stream alike:
// it resets the connection before the headers or after them, or writes half
// (calling sent once half has reached the client) and then stalls
// (StallBody) or resets; on GoAway it marks the answer the connection's last.
// It reports whether the response is over.
func (s *Server) breakResponse(w http.ResponseWriter, r *http.Request, fault Fault, half []byte, sent func()) bool {
	rc := http.NewResponseController(w)
	switch fault {
	case ResetBeforeResponse:
	case ResetAfterHeaders:
		w.WriteHeader(http.StatusOK)
		rc.Flush()
	case ResetMidBody, StallBody:
		w.WriteHeader(http.StatusOK)
		if _, err := w.Write(half); err == nil && rc.Flush() == nil && sent != nil {
			sent()
		}
		if fault == StallBody {
			s.stall(r.Context())
		}
	case GoAway:
		w.Header().Set("Connection", "close")
		return false
	default:
		return false
	}
	s.abort(w, r)
	return true
}

func (s *Server) abort(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor >= 2 {
		panic(http.ErrAbortHandler)
	}
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
