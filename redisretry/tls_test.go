package redisretry

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backoffkit/retry/internal/redistest"
)

// A TLS Redis (rediss://, as Memorystore with in-transit encryption): a
// redis-server with --tls-port and certificates made here with crypto/x509.

// pki is a CA and what it signed, as PEM files in a directory.
type pki struct {
	dir                  string
	ca                   string // the CA's certificate
	serverCert, serverKy string
	clientCert, clientKy string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	p := pki{dir: dir}
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redisretry test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p.ca = writePEM(t, dir, "ca.crt", "CERTIFICATE", caDER)
	sign := func(name string, serial int64, usage x509.ExtKeyUsage, ips []net.IP) (string, string) {
		k := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: ips, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return writePEM(t, dir, name+".crt", "CERTIFICATE", der), writePEM(t, dir, name+".key", "EC PRIVATE KEY", kb)
	}
	p.serverCert, p.serverKy = sign("server", 2, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	p.clientCert, p.clientKy = sign("client", 3, x509.ExtKeyUsageClientAuth, nil)
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t *testing.T, dir, name, kind string, der []byte) string {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tlsDial is the tests' dial bound: a TLS handshake under -race beside two
// CPU burners took more than the default second (in 2 of 200 first
// decisions); the bound is the client's to set, the promise is to wait for
// the connection within it.
const tlsDial = 5 * time.Second

// startTLSRedis starts a redis-server that listens with TLS only, on a free
// loopback port, asking clients for a certificate if clientAuth; it
// returns its rediss:// URL.
func startTLSRedis(t *testing.T, p pki, clientAuth bool) string {
	t.Helper()
	port := redistest.FreePort(t)
	auth := "no"
	if clientAuth {
		auth = "yes"
	}
	startRedis(t, "--port", "0", "--tls-port", strconv.Itoa(port),
		"--tls-cert-file", p.serverCert, "--tls-key-file", p.serverKy, "--tls-ca-cert-file", p.ca,
		"--tls-auth-clients", auth)
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
	q, _ := NewQuota(client, QuotaConfig{Key: key, Limit: PerSecond(100), Logger: discard, Observer: obs})
	b, _ := NewBudget(client, BudgetConfig{Key: key, Logger: discard, Observer: obs})
	d, _ := NewCooldown(client, CooldownConfig{Key: key, Logger: discard, Observer: obs})
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
	p := newPKI(t)
	url := startTLSRedis(t, p, false)
	for i := range 10 {
		if causes := firstDecision(t, ClientConfig{URL: url, CAFile: p.ca, DialTimeout: tlsDial}); len(causes) != 0 {
			t.Errorf("fresh client %d decided without Redis: %q", i, causes)
		}
	}
}

func TestTLSWrongCA(t *testing.T) {
	// A CA that did not sign the server's certificate: one clear cause,
	// the certificate's, not "did not answer within 20ms".
	p, other := newPKI(t), newPKI(t)
	url := startTLSRedis(t, p, false)
	causes := firstDecision(t, ClientConfig{URL: url, CAFile: other.ca, DialTimeout: tlsDial})
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
	p := newPKI(t)
	url := startTLSRedis(t, p, true)
	if causes := firstDecision(t, ClientConfig{URL: url, CAFile: p.ca, CertFile: p.clientCert, KeyFile: p.clientKy, DialTimeout: tlsDial}); len(causes) != 0 {
		t.Errorf("with a client certificate: %q", causes)
	}
	causes := firstDecision(t, ClientConfig{URL: url, CAFile: p.ca, DialTimeout: tlsDial})
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
	p := newPKI(t)
	url := startTLSRedis(t, p, false)
	for i := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTLSChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "REDISRETRY_TLS_CHILD="+url, "SSL_CERT_FILE="+p.ca)
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
