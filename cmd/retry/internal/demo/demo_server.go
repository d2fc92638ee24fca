package demo

import (
	_ "embed"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"
)

// googleError429 is a Gemini API 429 body with google.rpc.RetryInfo
// (retryDelay "0.2s": a short hint so the demo stays quick).
//
//go:embed google-error-429.json
var googleError429 []byte

// fault is what the flaky server does with one request.
type fault uint8

const (
	faultNone     fault = iota // 200 OK at once
	fault503                   // 503 Service Unavailable
	fault429After              // 429 with Retry-After: 1
	fault429Info               // 429 with a RetryInfo body (retryDelay 0.2s)
	faultReset                 // the connection is reset (RST) before any response
	faultSlow                  // 200 OK after slowDelay
	faultCount
)

var faultNames = [faultCount]string{"ok", "503", "429 Retry-After", "429 RetryInfo", "reset", "slow"}

// faultWeights split the failure rate among the faults: 503 35 %, 429 with
// Retry-After 15 %, 429 with RetryInfo 15 %, resets 20 %, slow 15 %.
var faultWeights = [faultCount]float64{0, 0.35, 0.15, 0.15, 0.20, 0.15}

// slowDelay is how long a slow response takes.
const slowDelay = 300 * time.Millisecond

// flakyServer is the demo's loopback HTTP server. Each request draws its
// fault from a seeded source: with probability failRate one of the faults
// (by faultWeights), else a plain 200. Slow responses succeed, late.
type flakyServer struct {
	mu       sync.Mutex
	rng      *rand.Rand
	failRate float64
	served   [faultCount]int

	ln  net.Listener
	srv *http.Server
	URL string
}

// startFlakyServer listens on 127.0.0.1 (loopback only) and serves.
func startFlakyServer(seed, stream uint64, failRate float64) (*flakyServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &flakyServer{
		rng:      rand.New(rand.NewPCG(seed, stream)),
		failRate: failRate,
		ln:       ln,
		URL:      "http://" + ln.Addr().String() + "/v1/models/demo:generateContent",
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// draw picks the next fault and counts it.
func (s *flakyServer) draw() fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := faultNone
	if s.rng.Float64() < s.failRate {
		u := s.rng.Float64()
		f = faultCount - 1
		for k := fault503; k < faultCount; k++ {
			if u < faultWeights[k] {
				f = k
				break
			}
			u -= faultWeights[k]
		}
	}
	s.served[f]++
	return f
}

// counts returns how many requests got each fault so far.
func (s *flakyServer) counts() [faultCount]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served
}

func (s *flakyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch s.draw() {
	case fault503:
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
	case fault429After:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many requests", http.StatusTooManyRequests)
	case fault429Info:
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write(googleError429)
	case faultReset:
		hj, ok := w.(http.Hijacker)
		if !ok {
			http.Error(w, "cannot reset", http.StatusInternalServerError)
			return
		}
		conn, _, err := hj.Hijack()
		if err != nil {
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // close with RST, not FIN
		}
		conn.Close()
	case faultSlow:
		t := time.NewTimer(slowDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
		w.Write([]byte(`{"candidates":[{"content":{"parts":[{"text":"slow but fine"}]}}]}` + "\n"))
	default:
		w.Write([]byte(`{"candidates":[{"content":{"parts":[{"text":"ok"}]}}]}` + "\n"))
	}
}

// Close stops the server and closes its connections.
func (s *flakyServer) Close() error {
	return s.srv.Close()
}
