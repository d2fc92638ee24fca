package demo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/cmd/retry/internal/proc"
	"github.com/backoffkit/retry/httpretry"
)

// The pieces both scenarios' runners share: a lane (one strategy against
// its own server), the totals, and the progress line while they run.

// lane is one strategy running against its own loopback server: the client
// that retries, the attempts its transport sent and the requests' results.
type lane struct {
	strategy
	url     string // the lane's server
	counter *countingTransport
	client  *http.Client
	hinted  atomic.Int64 // retries that waited as a server's hint said
	refused atomic.Int64 // retries the budget refused

	mu        sync.Mutex
	requests  int
	successes int
	cut       int // requests still running when the demo stopped waiting
	latencies []time.Duration
}

// newLane returns the lane of strategy name with policy p (its random
// source seeded from seed and the lane's index i) sending to url through
// base.
func newLane(name string, p retry.Policy, seed uint64, i int, url string, base http.RoundTripper) *lane {
	l := &lane{strategy: strategy{name, p}, url: url, counter: &countingTransport{base: base}}
	p.Rand = retry.NewRand(seed*1000 + uint64(i))
	p.Observer = func(_ context.Context, e retry.Event) {
		switch {
		case e.Kind == retry.EventRetry && e.Hint > 0:
			l.hinted.Add(1)
		case e.Kind == retry.EventGiveUp && e.Reason == retry.ReasonBudget:
			l.refused.Add(1)
		}
	}
	l.client = &http.Client{Transport: httpretry.NewTransport(l.counter, p)}
	return l
}

// startLanes starts a lane for each strategy of cfg, each with its own
// server that start(i) starts, returning the server, its URL and the
// transport to reach it. closeAll, to be called even on an error, closes the
// lanes' connections and the servers.
func startLanes[S interface{ Close() error }](cfg demoConfig, start func(i int) (S, string, http.RoundTripper, error)) (lanes []*lane, servers []S, closeAll func(), err error) {
	closeAll = func() {
		for _, l := range lanes {
			l.client.CloseIdleConnections()
		}
		for _, s := range servers {
			s.Close()
		}
	}
	for i, name := range cfg.strategies {
		p, err := demoPolicy(name, cfg.scale)
		if err != nil {
			return lanes, servers, closeAll, cli.Usagef("--strategies: %v", err)
		}
		srv, url, base, err := start(i)
		if err != nil {
			return lanes, servers, closeAll, fmt.Errorf("starting the loopback server: %v", err)
		}
		servers = append(servers, srv)
		lanes = append(lanes, newLane(name, p, cfg.seed, i, url, base))
	}
	return lanes, servers, closeAll, nil
}

// call makes one request through httpretry and reports whether it ended in
// a 2xx response with its body read.
func (l *lane) call(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.url, nil)
	if err != nil {
		return false
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err == nil && resp.StatusCode/100 == 2
}

// record counts a request that took lat and succeeded (ok) or not; a
// failed one that was cut is one the demo stopped waiting for.
func (l *lane) record(ok bool, lat time.Duration, cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests++
	if ok {
		l.successes++
	} else if cut {
		l.cut++
	}
	l.latencies = append(l.latencies, lat)
}

// snapshot returns the requests so far and those that succeeded.
func (l *lane) snapshot() (requests, successes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.requests, l.successes
}

// cutCount returns the requests the demo stopped waiting for.
func (l *lane) cutCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cut
}

// stats returns the lane's counts so far, as a row of the report (its
// server's counts and the derived fields not yet in).
func (l *lane) stats() strategyStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strategyStats{
		Name: l.name, Requests: l.requests, Successes: l.successes, GiveUps: l.requests - l.successes,
		Attempts: int(l.counter.n.Load()), HintedWaits: int(l.hinted.Load()), latencies: slices.Clone(l.latencies),
	}
}

// add adds the counts of st, a lane's row, to s, the total.
func (s *strategyStats) add(st strategyStats) {
	s.Requests += st.Requests
	s.Successes += st.Successes
	s.GiveUps += st.GiveUps
	s.Attempts += st.Attempts
	s.Served += st.Served
	s.HintedWaits += st.HintedWaits
	s.Shed += st.Shed
	s.Stalled += st.Stalled
	s.OverQuota += st.OverQuota
	s.Cut += st.Cut
	for k, n := range st.ServerFaults {
		s.ServerFaults[k] += n
	}
	s.latencies = append(s.latencies, st.latencies...)
}

// watch writes line(sending) to w until done is closed: every second, or
// five times a second on a terminal, where the line is rewritten in place
// and cleared at the end. sendFor from now it calls stopSending (no new
// request starts), and drain after that, or as soon as ctx is done, cancel
// (the requests still running end and count as give-ups); it then waits for
// done.
func watch(ctx context.Context, w io.Writer, line func(sending bool) string, sendFor, drain time.Duration, stopSending, cancel func(), done <-chan struct{}) {
	tty := proc.IsTerminal(w)
	every := time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	sendTimer := time.NewTimer(sendFor)
	defer sendTimer.Stop()
	var drainTimer <-chan time.Time
	sending := true
	lastLen := 0
	show := func() {
		l := line(sending)
		if tty {
			fmt.Fprintf(w, "\r%s%s", l, strings.Repeat(" ", max(lastLen-len(l), 0)))
			lastLen = len(l)
		} else {
			fmt.Fprintln(w, l)
		}
	}
loop:
	for {
		select {
		case <-tick.C:
			show()
		case <-sendTimer.C:
			sending = false
			stopSending()
			drainTimer = time.After(drain)
		case <-ctx.Done():
			if sending {
				sending = false
				stopSending()
			}
			cancel()
			<-done
			break loop
		case <-drainTimer:
			cancel() // cancelled requests count as give-ups
			<-done
			break loop
		case <-done:
			break loop
		}
	}
	if tty {
		fmt.Fprintf(w, "\r%s\r", strings.Repeat(" ", lastLen))
	}
}
