package chaos

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// outcome is what a plain (non-retrying) client sees of one fault.
type outcome struct {
	status  int  // 0: RoundTrip failed
	bodyErr bool // the body could not be read to its end
	effect  int  // side effects run on the server
}

var faultOutcomes = []struct {
	f    Fault
	want outcome
}{
	{None, outcome{status: 200, effect: 1}},
	{ResetBeforeRead, outcome{}},
	{ResetBeforeResponse, outcome{effect: 1}},
	{ResetAfterHeaders, outcome{status: 200, bodyErr: true, effect: 1}},
	{ResetMidBody, outcome{status: 200, bodyErr: true, effect: 1}},
	{StallHeaders, outcome{}},
	{StallBody, outcome{status: 200, bodyErr: true, effect: 1}},
	{SlowRead, outcome{}},
	{Status5xx, outcome{status: 5}}, // 5 = any 5xx
	{RetryAfterSeconds, outcome{status: 429}},
	{RetryAfterDate, outcome{status: 429}},
	{RetryAfterMalformed, outcome{status: 429}},
	{RetryAfterNegative, outcome{status: 429}},
	{RetryAfterHuge, outcome{status: 429}},
	{RetryInfo, outcome{status: 429}},
	{RetryInfoMalformed, outcome{status: 429}},
	{RetryInfoHuge, outcome{status: 429}},
	{GoAway, outcome{status: 200, effect: 1}},
	{StallStatus, outcome{status: 503}},
}

func TestFaultTableCoversEveryFault(t *testing.T) {
	seen := map[Fault]bool{}
	for _, c := range faultOutcomes {
		seen[c.f] = true
	}
	for _, f := range append(Faults(), None) {
		if !seen[f] {
			t.Errorf("fault %v has no case in faultOutcomes", f)
		}
	}
}

// runFault sends one PUT with a 4 KiB body and asks for an 8 KiB response
// under the fault, with a 1 s client timeout, and reports what the client saw.
func runFault(t *testing.T, s *Server, c *http.Client, f Fault) (outcome, *http.Response, []byte) {
	t.Helper()
	id := "req-" + f.String()
	req, _ := http.NewRequest(http.MethodPut, s.URL+"/x", nil)
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderRespLen, "8192")
	Body{Seed: 1, Len: 4096}.Attach(req, true)
	var got outcome
	resp, err := c.Do(req)
	var body []byte
	if err == nil {
		got.status = resp.StatusCode
		if resp.StatusCode == 200 {
			if _, err := ReadChecked(resp); err != nil {
				if errors.Is(err, ErrCorrupt) {
					t.Errorf("%v: %v", f, err)
				}
				got.bodyErr = true
			}
		} else {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
	}
	got.effect = s.Effects(id)
	return got, resp, body
}

func checkFaultOutcome(t *testing.T, s *Server, c *http.Client, f Fault, want outcome) {
	t.Helper()
	got, resp, body := runFault(t, s, c, f)
	if want.status == 5 && got.status >= 500 && got.status <= 504 {
		got.status = 5
	}
	if got != want {
		t.Fatalf("%v: client saw %+v, want %+v", f, got, want)
	}
	rec, ok := s.Record("req-" + f.String())
	if !ok || len(rec.Attempts) != 1 || rec.Attempts[0].Fault != f {
		t.Fatalf("%v: server record %+v, want one attempt with that fault", f, rec)
	}
	if resp == nil {
		return
	}
	ra := resp.Header.Get("Retry-After")
	switch f {
	case RetryAfterSeconds:
		if ra != "1" {
			t.Errorf("Retry-After = %q, want 1", ra)
		}
	case RetryAfterDate:
		at, err := http.ParseTime(ra)
		if d := time.Until(at); err != nil || d < -time.Second || d > time.Second {
			t.Errorf("Retry-After = %q (%v), want an HTTP-date about 1s from now", ra, err)
		}
	case RetryAfterMalformed, RetryAfterNegative, RetryAfterHuge:
		want := map[Fault]string{RetryAfterMalformed: "soon, maybe", RetryAfterNegative: "-5", RetryAfterHuge: "1000000000"}[f]
		if ra != want {
			t.Errorf("Retry-After = %q, want %q", ra, want)
		}
	case RetryInfo:
		if !strings.Contains(string(body), `"retryDelay":"1s"`) || !strings.Contains(string(body), "google.rpc.RetryInfo") {
			t.Errorf("RetryInfo body = %s", body)
		}
	case RetryInfoMalformed:
		if !strings.HasSuffix(string(body), `"retryDelay":"soo`) {
			t.Errorf("malformed RetryInfo body = %s", body)
		}
	case RetryInfoHuge:
		if len(body) < 1<<20 || !strings.Contains(string(body), `"retryDelay":"1000000000s"`) {
			t.Errorf("huge RetryInfo body: %d bytes", len(body))
		}
	case GoAway:
		if !resp.Close {
			t.Errorf("goaway over HTTP/1.1: response does not close the connection")
		}
	}
}

// TestFaultsInBubble checks every fault over an in-memory pipe in virtual
// time: stalls last exactly until the client's timeout, and the bubble fails
// the test if a goroutine of the server or the client is left behind.
func TestFaultsInBubble(t *testing.T) {
	for _, c := range faultOutcomes {
		t.Run(c.f.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, err := Start(Config{Decide: func(string, int) Fault { return c.f }, Listener: NewPipeListener()})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				tr := s.Transport(1)
				defer tr.CloseIdleConnections()
				start := time.Now()
				checkFaultOutcome(t, s, &http.Client{Transport: tr, Timeout: time.Second}, c.f, c.want)
				took := time.Since(start)
				switch c.f {
				case StallHeaders, StallBody, SlowRead, StallStatus:
					if took != time.Second {
						t.Errorf("stall took %v of virtual time, want the client's 1s timeout", took)
					}
				default:
					if took != 0 {
						t.Errorf("took %v of virtual time, want 0", took)
					}
				}
			})
		})
	}
}

// TestFaultsOnLoopback checks the faults that touch the TCP connection over
// real 127.0.0.1 (resets with SO_LINGER 0), with short stalls.
func TestFaultsOnLoopback(t *testing.T) {
	for _, c := range faultOutcomes {
		t.Run(c.f.String(), func(t *testing.T) {
			s, err := Start(Config{Decide: func(string, int) Fault { return c.f }, StallMax: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
				t.Fatalf("URL %s is not loopback", s.URL)
			}
			tr := s.Transport(1)
			defer tr.CloseIdleConnections()
			want := c.want
			if c.f == StallBody {
				// The server gives up first (StallMax) and resets.
				want = outcome{status: 200, bodyErr: true, effect: 1}
			}
			checkFaultOutcome(t, s, &http.Client{Transport: tr, Timeout: 10 * time.Second}, c.f, want)
		})
	}
}

// TestHTTP2GoAwayAndStreamReset checks the HTTP/2 mode: a GoAway fault closes
// the connection gracefully (the next request dials a new one) and a reset
// fault resets only the stream (the connection is kept).
func TestHTTP2GoAwayAndStreamReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		faults := []Fault{None, ResetBeforeResponse, None, GoAway, None}
		s, err := Start(Config{HTTP2: true, Listener: NewPipeListener(), Decide: func(id string, _ int) Fault {
			n, _ := strconv.Atoi(id)
			return faults[n]
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		tr := s.Transport(2)
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr}
		conns := []int{}
		for i := range faults {
			req, _ := http.NewRequest(http.MethodGet, s.URL, nil)
			req.Header.Set(HeaderID, strconv.Itoa(i))
			req.Header.Set(HeaderRespLen, "100")
			resp, err := c.Do(req)
			if faults[i] == ResetBeforeResponse {
				if err == nil {
					t.Fatalf("request %d: stream reset gave no error", i)
				}
			} else {
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if resp.ProtoMajor != 2 {
					t.Fatalf("request %d used %s, want HTTP/2", i, resp.Proto)
				}
				if _, err := ReadChecked(resp); err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
			}
			synctest.Wait() // let the GOAWAY reach the client
			conns = append(conns, s.Stats().Conns)
		}
		if want := []int{1, 1, 1, 1, 2}; !slices.Equal(conns, want) {
			t.Fatalf("connections after each request = %v, want %v (stream reset keeps the connection, GOAWAY ends it)", conns, want)
		}
		tr.CloseIdleConnections()
		if n, err := s.WaitConns(t.Context(), 0); err != nil {
			t.Fatalf("%d connections still open: %v", n, err)
		}
	})
}

func TestDedupeReplaysStoredResponse(t *testing.T) {
	for _, dedupe := range []bool{false, true} {
		t.Run("dedupe="+strconv.FormatBool(dedupe), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, err := Start(Config{Dedupe: dedupe, Listener: NewPipeListener()})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				tr := s.Transport(1)
				defer tr.CloseIdleConnections()
				var sums []string
				for range 3 {
					req, _ := http.NewRequest(http.MethodPost, s.URL, strings.NewReader("hello"))
					req.Header.Set(HeaderID, "same")
					req.Header.Set(HeaderKey, "k1")
					req.Header.Set(HeaderRespLen, "64")
					resp, err := tr.RoundTrip(req)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := ReadChecked(resp); err != nil {
						t.Fatal(err)
					}
					sums = append(sums, resp.Header.Get(HeaderSum))
				}
				wantEffects := 3
				if dedupe {
					wantEffects = 1
				}
				if got := s.Effects("k1"); got != wantEffects {
					t.Errorf("effects for k1 = %d, want %d", got, wantEffects)
				}
				if s.Hits("same") != 3 {
					t.Errorf("hits = %d, want 3", s.Hits("same"))
				}
				if st := s.Stats(); st.Replays != 3-wantEffects {
					t.Errorf("replays = %d, want %d", st.Replays, 3-wantEffects)
				}
				if sums[0] != sums[1] || sums[1] != sums[2] {
					t.Errorf("responses differ: %v", sums)
				}
			})
		})
	}
}

func TestBodyMismatchIsDetected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := Start(Config{Listener: NewPipeListener()})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		tr := s.Transport(1)
		defer tr.CloseIdleConnections()
		b := Body{Seed: 9, Len: 1000}
		for _, tc := range []struct {
			name string
			body string
			want int
		}{
			{"intact", "", 200},
			{"truncated", "x", 422},
			{"doubled", "xx", 422},
		} {
			req, _ := http.NewRequest(http.MethodPut, s.URL, nil)
			req.Header.Set(HeaderID, tc.name)
			b.Attach(req, false)
			if tc.body != "" {
				// Declares b but sends something else, chunked.
				full, _ := io.ReadAll(b.Open())
				sent := full[:500]
				if tc.body == "xx" {
					sent = append(full, full...)
				}
				req.Body = io.NopCloser(strings.NewReader(string(sent)))
				req.ContentLength = -1
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
			}
		}
		if st := s.Stats(); st.BodyMismatches != 2 || st.Effects != 1 {
			t.Errorf("stats %+v, want 2 mismatches and 1 effect", st)
		}
	})
}

func TestReadCheckedCatchesSilentTruncation(t *testing.T) {
	body := "0123456789"
	good := "84d89877f0d4041efb6bf91a16f0248f2fd573e6af05c19f96bedb9f882f7882"
	for _, tc := range []struct {
		name, body string
		cl         int64
		corrupt    bool
	}{
		{"intact", body, 10, false},
		{"truncated", body[:5], -1, true},
		{"doubled", body + body, -1, true},
		{"length lies", body, 11, true},
	} {
		resp := &http.Response{Header: http.Header{HeaderSum: {good}}, ContentLength: tc.cl,
			Body: io.NopCloser(strings.NewReader(tc.body))}
		_, err := ReadChecked(resp)
		if errors.Is(err, ErrCorrupt) != tc.corrupt {
			t.Errorf("%s: err = %v, corrupt want %v", tc.name, err, tc.corrupt)
		}
	}
}

func TestFaultDrawIsSeededAndRated(t *testing.T) {
	draw := func(seed uint64, rate float64) ([]Fault, int) {
		s := &Server{cfg: Config{Seed: seed, FaultRate: rate}, faults: Faults()}
		var out []Fault
		faulty := 0
		for i := range 10000 {
			f := s.decide("id"+strconv.Itoa(i%100), i/100+1, false)
			out = append(out, f)
			if f != None {
				faulty++
			}
		}
		return out, faulty
	}
	a, na := draw(1, 0.3)
	b, _ := draw(1, 0.3)
	c, _ := draw(2, 0.3)
	same := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, draw %d differs: %v vs %v", i, a[i], b[i])
		}
		if a[i] == c[i] {
			same++
		}
	}
	if same == len(a) {
		t.Error("different seeds gave the same draws")
	}
	if na < 2800 || na > 3200 {
		t.Errorf("%d faults in 10000 draws at rate 0.3", na)
	}
	if _, n := draw(1, 0); n != 0 {
		t.Errorf("rate 0 drew %d faults", n)
	}
	if _, n := draw(1, 1); n != 10000 {
		t.Errorf("rate 1 drew %d faults, want 10000", n)
	}
}

func TestStartRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{FaultRate: -0.1},
		{FaultRate: 1.5},
		{Faults: []Fault{None}},
		{Faults: []Fault{numFaults}},
		{StallMax: -1},
	} {
		if s, err := Start(cfg); err == nil {
			s.Close()
			t.Errorf("Start(%+v) accepted a bad config", cfg)
		} else if !strings.HasPrefix(err.Error(), "chaos: ") {
			t.Errorf("error %q does not say where it comes from", err)
		}
	}
}

func TestParseFault(t *testing.T) {
	for _, f := range append(Faults(), None) {
		got, err := ParseFault(f.String())
		if err != nil || got != f {
			t.Errorf("ParseFault(%q) = %v, %v", f.String(), got, err)
		}
	}
	if _, err := ParseFault("meteor"); err == nil || !strings.Contains(err.Error(), `"meteor"`) {
		t.Errorf("ParseFault(meteor) error = %v", err)
	}
}

// TestLoopbackLeavesNoConnectionOrGoroutine runs requests under every fault
// over loopback and checks that, once the client closes its idle
// connections, the server has no connection open and no goroutine remains.
func TestLoopbackLeavesNoConnectionOrGoroutine(t *testing.T) {
	before := SnapshotGoroutines()
	s, err := Start(Config{Seed: 3, FaultRate: 0.5, StallMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tr := s.Transport(4)
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	for i := range 60 {
		req, _ := http.NewRequest(http.MethodGet, s.URL, nil)
		req.Header.Set(HeaderID, strconv.Itoa(i))
		req.Header.Set(HeaderRespLen, "1000")
		if resp, err := c.Do(req); err == nil {
			ReadChecked(resp)
		}
	}
	tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n, err := s.WaitConns(ctx, 0); err != nil {
		t.Errorf("%d server connections still open after CloseIdleConnections", n)
	}
	st := s.Stats()
	s.Close()
	if leaked := before.Leaked(5 * time.Second); len(leaked) > 0 {
		t.Errorf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
	}
	// net/http itself resends a GET once when a reused connection breaks
	// before any response, so an id may be seen twice, never more.
	if st.Requests < 60 || st.Conns < 2 {
		t.Errorf("stats %+v: want at least 60 requests over several connections", st)
	}
	for i := range 60 {
		if h := s.Hits(strconv.Itoa(i)); h < 1 || h > 2 {
			t.Errorf("request %d reached the server %d times", i, h)
		}
	}
}

// TestCloseClientConnsReportsBusyConn is the mutation check of
// CloseClientConns: a connection whose response body is still open is busy,
// and CloseClientConns must report it when its context ends, over HTTP/1.1
// and HTTP/2; once the body is closed it must close every connection.
func TestCloseClientConnsReportsBusyConn(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "http1", true: "http2"}[h2], func(t *testing.T) {
			// The response stalls mid-body until the client leaves.
			s, err := Start(Config{HTTP2: h2, StallMax: time.Hour,
				Decide: func(string, int) Fault { return StallBody }})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			tr := s.Transport(4)
			defer tr.CloseIdleConnections()
			req, _ := http.NewRequest(http.MethodGet, s.URL+"/busy", nil)
			req.Header.Set(HeaderRespLen, "4096")
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			open, err := s.CloseClientConns(ctx, tr)
			cancel()
			if err == nil || open != 1 {
				t.Errorf("with a response body open: CloseClientConns = %d, %v; want 1 and an error", open, err)
			}
			resp.Body.Close()
			if open, err := s.CloseClientConns(t.Context(), tr); err != nil || open != 0 {
				t.Errorf("after closing the body: CloseClientConns = %d, %v; want 0, nil", open, err)
			}
		})
	}
}
