package chaos

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestStreamFaults checks each stream fault in each format, with a plain
// (non-retrying) client over a pipe in virtual time: what the client
// receives, whether the effect ran, and how long it took.
func TestStreamFaults(t *testing.T) {
	type want struct {
		status     int
		seqs       int  // events received
		errorEvent bool // the first event is an error object
		readErr    bool // the body failed
		effect     int
		took       time.Duration
	}
	cases := []struct {
		f    Fault
		want want
	}{
		{None, want{status: 200, seqs: 5, effect: 1}},
		{StreamErrorFirst, want{status: 200, errorEvent: true}},
		{StreamResetBeforeFirst, want{status: 200, readErr: true}},
		{StreamResetAfterFirst, want{status: 200, seqs: 1, readErr: true, effect: 1}},
		{StreamSlowFirst, want{status: 200, seqs: 5, effect: 1, took: 3 * time.Second}},
		{ResetMidBody, want{status: 200, seqs: -1, readErr: true, effect: 1}}, // some events
		{Status5xx, want{status: 5}},
	}
	for _, format := range []string{StreamSSE, StreamNDJSON, StreamJSON} {
		for _, c := range cases {
			t.Run(format+"/"+c.f.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s, err := Start(Config{Decide: func(string, int) Fault { return c.f }, Listener: NewPipeListener(),
						StallMax: 3 * time.Second, RetryAfter: 7 * time.Second})
					if err != nil {
						t.Fatal(err)
					}
					defer s.Close()
					tr := s.Transport(1)
					defer tr.CloseIdleConnections()
					req, _ := http.NewRequest(http.MethodPost, "http://chaos/stream", strings.NewReader("{}"))
					req.Header.Set(HeaderID, "s")
					req.Header.Set(HeaderStream, format)
					req.Header.Set(HeaderEvents, "5")
					start := time.Now()
					resp, err := tr.RoundTrip(req)
					if err != nil {
						t.Fatal(err)
					}
					status := resp.StatusCode
					if status >= 500 {
						status = 5
						resp.Body.Close()
					}
					var res StreamResult
					if resp.StatusCode == 200 {
						res, err = ReadStream(resp)
						if err != nil {
							t.Fatalf("ReadStream: %v", err)
						}
					}
					got := want{status: status, seqs: len(res.Seqs), errorEvent: res.ErrorEvent, readErr: res.Err != nil,
						effect: s.Effects("s"), took: time.Since(start)}
					w := c.want
					if w.seqs == -1 && got.seqs < 5 {
						got.seqs = -1
					}
					if got != w {
						t.Fatalf("got %+v, want %+v", got, w)
					}
					if c.f == StreamErrorFirst {
						if rec, _ := s.Record("s"); rec.Attempts[0].Status != 200 {
							t.Errorf("record %+v", rec)
						}
					}
				})
			})
		}
	}
}

// TestStreamFaultsOnlyForStreams: a plain request never gets a stream fault,
// a stream request can; the draw stays seeded.
func TestStreamFaultsOnlyForStreams(t *testing.T) {
	s := &Server{cfg: Config{Seed: 5, FaultRate: 1}}
	s.faults, s.streamFaults = Faults(), append(Faults(), StreamFaults()...)
	streamSeen := 0
	for i := range 2000 {
		id := "id" + strconv.Itoa(i)
		if f := s.decide(id, 1, false); f.Stream() || f == None {
			t.Fatalf("plain request drew %v", f)
		}
		if f := s.decide(id, 1, true); f.Stream() {
			streamSeen++
		}
	}
	if streamSeen < 200 {
		t.Fatalf("stream requests drew a stream fault %d times of 2000", streamSeen)
	}
	s2, err := Start(Config{Faults: []Fault{StreamErrorFirst, Status5xx}, Listener: NewPipeListener()})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if len(s2.faults) != 1 || s2.faults[0] != Status5xx || len(s2.streamFaults) != 2 {
		t.Fatalf("plain faults %v, stream faults %v", s2.faults, s2.streamFaults)
	}
}

// TestReadStreamCatchesDuplicates: ReadStream reports a duplicated, missing
// or reordered event, and a clean end before the last event, as corrupt; a
// stream cut by an error is only short.
func TestReadStreamCatchesDuplicates(t *testing.T) {
	ev := func(i int) string { return `{"seq":` + strconv.Itoa(i) + `,"id":"x","text":"t"}` }
	sse := func(seqs ...int) string {
		var b strings.Builder
		for _, i := range seqs {
			b.WriteString("data: " + ev(i) + "\r\n\r\n")
		}
		return b.String()
	}
	tests := []struct {
		name    string
		ct      string
		body    string
		events  string
		cut     bool
		corrupt bool
		seqs    int
	}{
		{"complete", "text/event-stream", sse(0, 1, 2), "3", false, false, 3},
		{"duplicate", "text/event-stream", sse(0, 0, 1, 2), "3", false, true, 0},
		{"gap", "text/event-stream", sse(0, 2), "3", false, true, 0},
		{"clean end too early", "text/event-stream", sse(0, 1), "3", false, true, 0},
		{"cut", "text/event-stream", sse(0, 1) + "data: {\"seq\":2", "3", true, false, 2},
		{"ndjson", "application/x-ndjson", ev(0) + "\n" + ev(1) + "\n", "2", false, false, 2},
		{"ndjson duplicate", "application/x-ndjson", ev(0) + "\n" + ev(0) + "\n", "2", false, true, 0},
		{"array", "application/json", "[" + ev(0) + ",\r\n" + ev(1) + "]", "2", false, false, 2},
		{"array restarted", "application/json", "[" + ev(0) + ",\r\n" + ev(0) + "]", "2", false, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(tt.body)
			if tt.cut {
				body = io.MultiReader(body, errReader{errors.New("connection reset")})
			}
			resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {tt.ct}, HeaderEvents: {tt.events}},
				Body: io.NopCloser(body)}
			res, err := ReadStream(resp)
			if errors.Is(err, ErrStreamCorrupt) != tt.corrupt {
				t.Fatalf("err %v, corrupt want %v", err, tt.corrupt)
			}
			if !tt.corrupt && (len(res.Seqs) != tt.seqs || (res.Err != nil) != tt.cut) {
				t.Fatalf("result %+v, want %d events, cut %v", res, tt.seqs, tt.cut)
			}
		})
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
