package redisretry

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backoffkit/retry/internal/redistest"
	"github.com/backoffkit/retry/internal/testkit"
)

// A TLS Redis (rediss://, as Memorystore with in-transit encryption): a
// redis-server with --tls-port and certificates made here with crypto/x509.

// tlsDial is the tests' dial bound: a TLS handshake under -race beside two
// CPU burners took more than the default second (in 2 of 200 first
// decisions); the bound is the client's to set, the promise is to wait for
// the connection within it.
const tlsDial = 5 * time.Second

// startTLSRedis starts a redis-server that listens with TLS only, on a free
// loopback port, asking clients for a certificate if clientAuth; it
// returns its rediss:// URL.
func startTLSRedis(t *testing.T, p testkit.PKI, clientAuth bool) string {
	t.Helper()
	port := redistest.FreePort(t)
	startRedis(t, p.RedisTLSArgs(port, clientAuth)...)
	return "rediss://127.0.0.1:" + strconv.Itoa(port) + "/0"
}

// firstDecision makes a fresh client and quota, budget and cooldown on it, as
// a fresh process does, and returns what their first decisions saw: the
// fallbacks' causes (none when the first calls reached Redis).
func firstDecision(t *testing.T, c ClientConfig) []string {
	t.Helper()
	client, err := NewClientWith(c)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var mu sync.Mutex
	var causes []string
	obs := func(e Event) {
		if e.Kind == EventFallback {
			mu.Lock()
			causes = append(causes, e.Limiter+": "+e.Err.Error())
			mu.Unlock()
		}
	}
	key := testKey(t)
	q, _ := NewQuota(client, QuotaConfig{Settings: Settings{Key: key, Logger: discard, Observer: obs}, Limit: PerSecond(100)})
	b, _ := NewBudget(client, BudgetConfig{Settings: Settings{Key: key, Logger: discard, Observer: obs}})
	d, _ := NewCooldown(client, CooldownConfig{Settings: Settings{Key: key, Logger: discard, Observer: obs}})
	ctx := context.Background()
	if _, err := d.Reserve(ctx, time.Now(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Reserve(ctx, time.Now(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	b.Admit(true)
	// The first decisions are made: what Close does later (the budget's
	// flush, under -race beside two CPU burners, past its 20 ms) is not
	// theirs.
	mu.Lock()
	first := append([]string(nil), causes...)
	mu.Unlock()
	for _, l := range []interface{ Close() error }{q, b, d} {
		l.Close()
	}
	if first == nil && (q.Stats().Local != 0 || d.Stats().Local != 0) {
		t.Errorf("decided without Redis and no fallback said why: quota %+v, cooldown %+v", q.Stats(), d.Stats())
	}
	return first
}

func TestTLSFreshClientsReachRedis(t *testing.T) {
	// Issue 26: every fresh process spent its 20 ms on the TLS handshake
	// and decided alone. The first decision now waits for the connection
	// (within the dial's bound, 1 s), then each call has its 20 ms: 10
	// fresh clients in a row, each reaching Redis on its first decision.
	p := testkit.NewPKI(t)
	url := startTLSRedis(t, p, false)
	for i := range 10 {
		if causes := firstDecision(t, ClientConfig{URL: url, CAFile: p.CA, DialTimeout: tlsDial}); len(causes) != 0 {
			t.Errorf("fresh client %d decided without Redis: %q", i, causes)
		}
	}
}

func TestTLSWrongCA(t *testing.T) {
	// A CA that did not sign the server's certificate: one clear cause,
	// the certificate's, not "did not answer within 20ms".
	p, other := testkit.NewPKI(t), testkit.NewPKI(t)
	url := startTLSRedis(t, p, false)
	causes := firstDecision(t, ClientConfig{URL: url, CAFile: other.CA, DialTimeout: tlsDial})
	if len(causes) == 0 {
		t.Fatal("a server whose certificate the CA did not sign was reached")
	}
	for _, c := range causes {
		if !strings.Contains(c, "x509: certificate signed by unknown authority") {
			t.Errorf("fallback cause %q: want the certificate's problem", c)
		}
	}
}

func TestTLSClientCertificate(t *testing.T) {
	// A server that asks for a client certificate (--tls-auth-clients yes):
	// reached with one, refused without, and the refusal says so.
	p := testkit.NewPKI(t)
	url := startTLSRedis(t, p, true)
	if causes := firstDecision(t, ClientConfig{URL: url, CAFile: p.CA, CertFile: p.ClientCert, KeyFile: p.ClientKey, DialTimeout: tlsDial}); len(causes) != 0 {
		t.Errorf("with a client certificate: %q", causes)
	}
	causes := firstDecision(t, ClientConfig{URL: url, CAFile: p.CA, DialTimeout: tlsDial})
	if len(causes) == 0 {
		t.Fatal("reached a server that asks for a client certificate without one")
	}
	for _, c := range causes {
		if strings.Contains(c, "did not answer") {
			t.Errorf("without a client certificate: %q, want the handshake's refusal", c)
		}
	}
}

func TestTLSCAFromSSLCertFile(t *testing.T) {
	// The documented way without a library option: SSL_CERT_FILE names the
	// CA (Go reads the system's pool once per process: a child process
	// with it set, as a fresh retry process would be).
	p := testkit.NewPKI(t)
	url := startTLSRedis(t, p, false)
	for i := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTLSChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "REDISRETRY_TLS_CHILD="+url, "SSL_CERT_FILE="+p.CA)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, out)
		}
		var causes []string
		for _, line := range splitLines(out) {
			if len(line) > 0 && line[0] == '[' {
				json.Unmarshal(line, &causes)
			}
		}
		if len(causes) != 0 {
			t.Errorf("child %d with SSL_CERT_FILE: %q", i, causes)
		}
	}
}

// TestTLSChild is the body of TestTLSCAFromSSLCertFile's child processes; it
// does nothing unless started by it.
func TestTLSChild(t *testing.T) {
	url := os.Getenv("REDISRETRY_TLS_CHILD")
	if url == "" {
		t.Skip("a child process of TestTLSCAFromSSLCertFile")
	}
	causes := firstDecision(t, ClientConfig{URL: url, DialTimeout: tlsDial})
	if causes == nil {
		causes = []string{}
	}
	json.NewEncoder(os.Stdout).Encode(causes)
}
