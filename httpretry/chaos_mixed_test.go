package httpretry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"github.com/backoffkit/retry/internal/chaos"
)

// The reliability suite: requests through httpretry against the seeded chaos
// server (internal/chaos). See TestChaosMixed for what it proves.

type chaosKind int

const (
	chaosGET chaosKind = iota
	chaosPUT
	chaosPOSTKey     // POST with its own Idempotency-Key header
	chaosPOSTAutoKey // POST through a transport with AddIdempotencyKey
	chaosPOSTNoKey   // POST without a key: repeated only after a refusal (429)
	chaosKinds
)

var chaosKindNames = [...]string{"GET", "PUT", "POST+key", "POST+autokey", "POST-nokey"}

// chaosReq is one logical request of the mix.
type chaosReq struct {
	id         string
	kind       chaosKind
	body       chaos.Body
	replayable bool // GetBody set; otherwise httpretry must buffer the body
	respLen    int64
}

// chaosResult is what the caller saw.
type chaosResult struct {
	err      error // RoundTrip's error
	status   int
	echo     string // the client's attempt number the response answers (chaos.HeaderEcho)
	attempts int    // attempts the client made (from the policy's observer)
	bodyErr  error  // reading the response body failed (a visible failure)
	corrupt  error  // the body ended cleanly but was wrong (must never happen)
	received int64
}

// logUniform returns a size in [0, max], uniform in log scale (many small,
// some large bodies).
func logUniform(r *rand.Rand, max int64) int64 {
	if r.IntN(10) == 0 {
		return 0
	}
	return int64(math.Exp(r.Float64() * math.Log(float64(max))))
}

func chaosMix(seed uint64, n int) []chaosReq {
	r := rand.New(rand.NewPCG(seed, 1))
	reqs := make([]chaosReq, n)
	for i := range reqs {
		q := chaosReq{id: "r" + strconv.Itoa(i), respLen: logUniform(r, 1<<20)}
		switch x := r.IntN(100); {
		case x < 30:
			q.kind = chaosGET
		case x < 55:
			q.kind = chaosPUT
		case x < 68:
			q.kind = chaosPOSTKey
		case x < 80:
			q.kind = chaosPOSTAutoKey
		default:
			q.kind = chaosPOSTNoKey
		}
		if q.kind != chaosGET {
			q.body = chaos.Body{Seed: r.Uint64(), Len: logUniform(r, 1<<20)}
			q.replayable = r.IntN(2) == 0
		}
		reqs[i] = q
	}
	return reqs
}

// chaosAttemptsKey holds, in a request's context, where the policy's
// observer writes how many attempts the client made (see chaosMixed).
type chaosAttemptsKey struct{}

func chaosDo(ctx context.Context, t *testing.T, plain, autoKey http.RoundTripper, base string, q chaosReq) chaosResult {
	var res chaosResult
	ctx = context.WithValue(ctx, chaosAttemptsKey{}, &res.attempts)
	method := http.MethodPost
	switch q.kind {
	case chaosGET:
		method = http.MethodGet
	case chaosPUT:
		method = http.MethodPut
	}
	req, err := http.NewRequestWithContext(ctx, method, base+"/"+q.id, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(chaos.HeaderID, q.id)
	req.Header.Set(chaos.HeaderRespLen, strconv.FormatInt(q.respLen, 10))
	if q.kind == chaosPOSTKey {
		req.Header.Set(chaos.HeaderKey, "key-"+q.id)
	}
	if method != http.MethodGet {
		q.body.Attach(req, q.replayable)
	}
	rt := plain
	if q.kind == chaosPOSTAutoKey {
		rt = autoKey
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		res.err = err
		return res
	}
	res.status = resp.StatusCode
	res.echo = resp.Header.Get(chaos.HeaderEcho)
	n, err := chaos.ReadChecked(resp)
	res.received = n
	if errors.Is(err, chaos.ErrCorrupt) {
		res.corrupt = err
	} else {
		res.bodyErr = err
	}
	return res
}

// chaosCount returns the number of requests to run: CHAOS_REQUESTS if set,
// else 10,000 (1,000 with -short).
func chaosCount(t *testing.T) int {
	if v := os.Getenv("CHAOS_REQUESTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CHAOS_REQUESTS=%q: want a positive integer", v)
		}
		return n
	}
	if testing.Short() {
		return 1000
	}
	return 10000
}

// chaosRefusal reports whether the chaos server refused the attempt with a
// 429, before the effect. Its Status is 0 when the server could not write
// the whole answer (a client that leaves a huge 429 body unread), so the
// fault tells it.
func chaosRefusal(a chaos.Attempt) bool {
	switch a.Fault {
	case chaos.RetryAfterSeconds, chaos.RetryAfterDate, chaos.RetryAfterMalformed, chaos.RetryAfterNegative,
		chaos.RetryAfterHuge, chaos.RetryInfo, chaos.RetryInfoMalformed, chaos.RetryInfoHuge:
		return !a.Effect
	}
	return false
}

// TestChaosMixed sends a seeded mix of GET, PUT and POST (with an explicit
// key, with a key added by AddIdempotencyKey, without a key) with bodies up
// to 1 MiB, half replayable with GetBody and half buffered by httpretry,
// through httpretry to a chaos server that faults 30 % of the attempts with
// every kind of fault, deduplicating by Idempotency-Key. It checks:
//
//   - a POST without a key is sent again only after a refusal (a 429,
//     which the chaos server answers before the effect): it reaches the
//     server at most once without being refused, and its side effect runs
//     at most once;
//   - a keyed request carries the same key on every attempt, and its side
//     effect runs exactly once when it succeeded (at most once otherwise);
//   - the caller gets the last attempt's response (the server's attempt
//     number matches), or an error only when the last attempt got no
//     response or timed out, and an idempotent request gives up only after
//     every attempt;
//   - no request or response body is ever received truncated or doubled
//     (SHA-256 on both sides);
//   - afterwards the server holds no more connections than the client pools,
//     none once they are closed, and no goroutine is left.
func TestChaosMixed(t *testing.T) {
	chaosMixed(t, false, chaosCount(t))
}

// TestChaosMixedHTTP2 is TestChaosMixed over unencrypted HTTP/2 on loopback,
// with a fifth of the requests: resets become stream resets and the GoAway
// fault sends a GOAWAY frame.
func TestChaosMixedHTTP2(t *testing.T) {
	chaosMixed(t, true, max(chaosCount(t)/5, 1))
}

func chaosMixed(t *testing.T, h2 bool, n int) {
	const (
		seed     = 20240808
		workers  = 16
		attempts = 10
	)
	before := chaos.SnapshotGoroutines()

	faults := chaos.Faults()
	if h2 {
		// Not GOAWAY over HTTP/2 here: when a GOAWAY aborts a stream at the
		// instant its attempt times out, net/http's HTTP/2 RoundTrip returns
		// without waiting for the stream's body writer (waitDone gives up on
		// ctx.Done), and Transport.roundTrip's rewindBody then reads
		// readTrackingBody.didRead while that goroutine writes it: a data race
		// inside the standard library (Go 1.26, a sibling of golang/go#60041),
		// which -race reports about once in ten runs under load. GOAWAY over
		// HTTP/2 is covered by TestChaosNoLeakInBubble (in virtual time) and by
		// internal/chaos.TestHTTP2GoAwayAndStreamReset.
		faults = slices.DeleteFunc(faults, func(f chaos.Fault) bool { return f == chaos.GoAway })
	}
	s, err := chaos.Start(chaos.Config{
		Seed: seed, FaultRate: 0.3, Faults: faults, Dedupe: true, HTTP2: h2,
		RetryAfter: time.Second, StallMax: time.Second, HugeBody: 256 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := retry.Policy{
		Attempts:       attempts,
		InitialDelay:   time.Millisecond,
		MaxDelay:       4 * time.Millisecond,
		Jitter:         time.Millisecond,
		MaxRetryAfter:  5 * time.Millisecond, // the server asks for 1 s to 31 years
		AttemptTimeout: 300 * time.Millisecond,
		Rand:           retry.NewRand(seed),
		Observer: func(ctx context.Context, e retry.Event) {
			if n, ok := ctx.Value(chaosAttemptsKey{}).(*int); ok && e.Kind != retry.EventRetry {
				*n = e.Attempt // the call's last event: success or give-up
			}
		},
	}
	baseA, baseB := s.Transport(workers), s.Transport(workers)
	plain := httpretry.NewTransport(&echoAttempts{base: baseA}, p)
	autoKey := httpretry.NewTransport(&echoAttempts{base: baseB}, p, httpretry.AddIdempotencyKey())

	reqs := chaosMix(seed, n)
	results := make([]chaosResult, n)
	next := make(chan int)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for i := range next {
				results[i] = chaosDo(ctx, t, plain, autoKey, s.URL, reqs[i])
			}
		})
	}
	for i := range reqs {
		next <- i
	}
	close(next)
	wg.Wait()
	took := time.Since(start)

	// The connections: no more open than the two pools may keep, then none.
	openAfterRun := s.OpenConns()
	if openAfterRun > 2*workers {
		t.Errorf("%d server connections open after the run, more than the pools' %d", openAfterRun, 2*workers)
	}
	// Every response has been read and closed: a connection still open after
	// 10 s of closing the idle ones is busy for real (a leak).
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if open, err := s.CloseClientConns(wctx, baseA, baseB); err != nil {
		t.Errorf("%d server connections still open after closing the idle ones for 10 s", open)
	}
	st := s.Stats()
	s.Close()
	leaked := before.Leaked(10 * time.Second)
	if len(leaked) > 0 {
		t.Errorf("%d goroutines leaked, first:\n%s", len(leaked), leaked[0])
	}

	// Per-request checks.
	var (
		byKind                                        [chaosKinds]int
		okKind                                        [chaosKinds]int
		hitsHist                                      = map[int]int{}
		noKeyHits                                     = map[int]int{}
		keyed, keyedOK, keyedOnce, dupAvoided, unseen int
		bodyErrs, rtErrs, giveUpStatus, sentBytes     int64
		recvBytes                                     int64
		violations                                    []string
	)
	bad := func(q chaosReq, format string, args ...any) {
		if len(violations) < 20 {
			violations = append(violations, fmt.Sprintf("%s %s: ", chaosKindNames[q.kind], q.id)+fmt.Sprintf(format, args...))
		} else if len(violations) == 20 {
			violations = append(violations, "...")
		}
	}
	for i, q := range reqs {
		r := results[i]
		byKind[q.kind]++
		sentBytes += q.body.Len
		recvBytes += r.received
		rec, seen := s.Record(q.id)
		hits := len(rec.Attempts)
		hitsHist[hits]++
		success := r.err == nil && r.status == http.StatusOK && r.bodyErr == nil && r.corrupt == nil
		if success {
			okKind[q.kind]++
		}
		if r.corrupt != nil {
			bad(q, "silent corruption: %v", r.corrupt)
		}
		if rec.BodyMismatch > 0 {
			bad(q, "the server received %d bodies truncated or doubled", rec.BodyMismatch)
		}
		if r.err != nil {
			rtErrs++
		}
		if r.bodyErr != nil {
			bodyErrs++
		}
		if !seen {
			unseen++
			if r.err == nil {
				bad(q, "a response for a request the server never saw")
			}
			continue
		}
		// The caller gets the outcome of its last attempt. The client
		// numbers its attempts (chaos.HeaderEcho, see echoAttempts): the
		// server's own order can differ, since under load a request the
		// client gave up on may reach the handler after the next one.
		lastEcho := strconv.Itoa(r.attempts)
		if r.err == nil && r.echo != lastEcho {
			bad(q, "got the response of attempt %s of %d", r.echo, r.attempts)
		}
		// An attempt that timed out may have been answered just too late
		// (the server wrote the status, the client had already given up on
		// it): only an attempt that did not time out must have got no answer.
		for _, a := range rec.Attempts {
			if r.err != nil && a.Echo == lastEcho && a.Status != 0 && !timedOut(r.err) {
				bad(q, "error %v although the last attempt was answered %d", r.err, a.Status)
			}
		}
		if r.err == nil && r.status != http.StatusOK {
			giveUpStatus++
		}

		switch q.kind {
		case chaosPOSTNoKey:
			// Sent again only after a refusal: the chaos server answers
			// its 429s before the effect (a 503 with a hint would count
			// too, but the server's only such 503 stalls in its body, so
			// its hint is never read). So every attempt but one was
			// refused, and the effect ran at most once.
			noKeyHits[hits]++
			answered := 0
			for _, a := range rec.Attempts {
				if !chaosRefusal(a) {
					answered++
				}
			}
			if answered > 1 {
				var seen []string
				for _, a := range rec.Attempts {
					seen = append(seen, fmt.Sprintf("%v/%d", a.Fault, a.Status))
				}
				bad(q, "a POST without a key reached the server %d times, %d of them not refused: %s", hits, answered, strings.Join(seen, " "))
			}
			if eff := s.Effects(q.id); eff > 1 {
				bad(q, "a POST without a key: side effect ran %d times", eff)
			}
		case chaosPOSTKey, chaosPOSTAutoKey:
			keyed++
			key := rec.Attempts[0].Key
			for _, a := range rec.Attempts {
				if a.Key == "" || a.Key != key {
					bad(q, "keys across attempts: %q then %q", key, a.Key)
					break
				}
				if a.Replay {
					dupAvoided++
				}
			}
			eff := s.Effects(key)
			if eff > 1 {
				bad(q, "side effect ran %d times", eff)
			}
			if eff == 1 {
				keyedOnce++
			}
			if success {
				keyedOK++
				if eff != 1 {
					bad(q, "succeeded but its side effect ran %d times", eff)
				}
			}
		}
		if q.kind != chaosPOSTNoKey && !success && r.bodyErr == nil && r.attempts < attempts {
			// Every fault the chaos server applies is transient (HTTP/2 stream
			// resets included): an idempotent or keyed request never stops
			// early. (The server may see fewer attempts than the client made:
			// an attempt can time out before it reaches the handler.)
			bad(q, "gave up after %d attempts of %d (%d reached the server; err %v, status %d)", r.attempts, attempts, hits, r.err, r.status)
		}
	}
	if st.BodyMismatches != 0 {
		t.Errorf("the server received %d bodies truncated or doubled", st.BodyMismatches)
	}
	for _, v := range violations {
		t.Error(v)
	}

	// The figures of the run, for the closing note.
	t.Logf("%d requests (HTTP/2: %v), %d workers, seed %d, fault rate 0.3, %d attempts max; wall time %v (informative only)", n, h2, workers, seed, attempts, took.Round(time.Millisecond))
	for k := range chaosKinds {
		t.Logf("  %-12s %5d requests, %5d succeeded", chaosKindNames[k], byKind[k], okKind[k])
	}
	t.Logf("server: %d attempts, %d effects, %d replays (duplicates avoided by dedupe: %d), %d body mismatches, %d bodies aborted by the client",
		st.Requests, st.Effects, st.Replays, dupAvoided, st.BodyMismatches, st.BodyAborted)
	t.Logf("server connections: %d accepted, max %d open at once, %d open after the run (pools %d), 0 expected after closing: got %d",
		st.Conns, st.MaxOpenConns, openAfterRun, 2*workers, s.OpenConns())
	t.Logf("faults applied: %s", chaosFaultSummary(st.Faults))
	t.Logf("hits per request (hits: requests): %s; %d requests never reached the server (the attempt timed out first)", chaosHist(hitsHist), unseen)
	t.Logf("POST without key, hits per request: %s", chaosHist(noKeyHits))
	t.Logf("keyed requests: %d, effect ran exactly once for %d, succeeded %d (effect exactly once for all of them)", keyed, keyedOnce, keyedOK)
	t.Logf("caller outcomes: %d RoundTrip errors, %d response bodies cut (visible errors), %d final retryable statuses returned, 0 silent corruptions",
		rtErrs, bodyErrs, giveUpStatus)
	t.Logf("bytes: %d sent in request bodies (first attempts), %d received in response bodies", sentBytes, recvBytes)
	t.Logf("goroutines leaked: %d", len(leaked))
}

// echoAttempts numbers the attempts of each request (by chaos.HeaderID) in
// chaos.HeaderEcho, which the server sends back and records.
type echoAttempts struct {
	base http.RoundTripper
	n    sync.Map // id -> *atomic.Int32
}

func (e *echoAttempts) RoundTrip(req *http.Request) (*http.Response, error) {
	v, _ := e.n.LoadOrStore(req.Header.Get(chaos.HeaderID), new(atomic.Int32))
	r := req.Clone(req.Context()) // a RoundTripper must not modify req; the body is shared
	r.Header.Set(chaos.HeaderEcho, strconv.Itoa(int(v.(*atomic.Int32).Add(1))))
	return e.base.RoundTrip(r)
}

// timedOut reports whether the caller's error says its last attempt timed out.
func timedOut(err error) bool {
	var ae *httpretry.AttemptError
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ae) && ae.Class == httpretry.ClassTimeout)
}

func chaosHist(h map[int]int) string {
	keys := make([]int, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%d:%d ", k, h[k])
	}
	return strings.TrimSpace(b.String())
}

func chaosFaultSummary(m map[chaos.Fault]int) string {
	var b strings.Builder
	total := 0
	for _, f := range chaos.Faults() {
		fmt.Fprintf(&b, "%s=%d ", f, m[f])
		total += m[f]
	}
	fmt.Fprintf(&b, "(total %d)", total)
	return b.String()
}
