package testkit

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

type event struct {
	kind string
	n    int
}

func TestRecorder(t *testing.T) {
	r := NewRecorder(func(e event) string { return e.kind })
	if got := r.Last(); got != (event{}) {
		t.Errorf("Last of an empty recorder = %+v, want the zero event", got)
	}
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() { r.Record(event{"a", i}) })
	}
	wg.Wait()
	r.Observe(t.Context(), event{"b", 100})
	if n := len(r.Events()); n != 101 {
		t.Errorf("%d events, want 101", n)
	}
	if n := r.Count("a"); n != 100 {
		t.Errorf("Count(a) = %d, want 100", n)
	}
	if got := r.Of("b"); len(got) != 1 || got[0].n != 100 {
		t.Errorf("Of(b) = %+v", got)
	}
	if k := r.Kinds(); len(k) != 101 || k[100] != "b" {
		t.Errorf("Kinds() = %v", k)
	}
	if got := r.Last(); got != (event{"b", 100}) {
		t.Errorf("Last() = %+v", got)
	}
	ev := r.Events()
	ev[0] = event{"changed", -1}
	if r.Events()[0].kind == "changed" {
		t.Error("Events returned the recorder's own slice")
	}
}

func TestScript(t *testing.T) {
	s := NewScript(t, Status(503, "busy", "Retry-After", "1"), Status(200, "ok"))
	var codes []int
	var bodies []string
	for i := range 3 {
		resp, err := s.Client().Post(s.URL+"/p?q=1", "text/plain", strings.NewReader("body"+string(rune('0'+i))))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		codes, bodies = append(codes, resp.StatusCode), append(bodies, string(b))
		if i == 0 && resp.Header.Get("Retry-After") != "1" {
			t.Errorf("first answer's Retry-After = %q, want 1", resp.Header.Get("Retry-After"))
		}
	}
	if !slices.Equal(codes, []int{503, 200, 200}) || !slices.Equal(bodies, []string{"busy", "ok", "ok"}) {
		t.Errorf("answers %v %q, want 503 busy then 200 ok twice", codes, bodies)
	}
	if s.Hits() != 3 || s.Conns() < 1 {
		t.Errorf("hits %d conns %d, want 3 and at least 1", s.Hits(), s.Conns())
	}
	reqs := s.Requests()
	if len(reqs) != 3 || reqs[2].Method != "POST" || reqs[2].Path != "/p" || reqs[2].RawQuery != "q=1" || reqs[2].Body != "body2" {
		t.Errorf("requests %+v", reqs[len(reqs)-1])
	}
}

func TestPKI(t *testing.T) {
	p, other := NewPKI(t), NewPKI(t)
	pool := func(p PKI) *x509.CertPool {
		b, err := os.ReadFile(p.CA)
		if err != nil {
			t.Fatal(err)
		}
		cp := x509.NewCertPool()
		if !cp.AppendCertsFromPEM(b) {
			t.Fatal("CA file holds no certificate")
		}
		return cp
	}
	leaf := func(cert, key string) *x509.Certificate {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		x, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	srv, cli := leaf(p.ServerCert, p.ServerKey), leaf(p.ClientCert, p.ClientKey)
	for _, name := range []string{"127.0.0.1", "localhost"} {
		if _, err := srv.Verify(x509.VerifyOptions{Roots: pool(p), DNSName: name}); err != nil {
			t.Errorf("server certificate for %s: %v", name, err)
		}
	}
	if _, err := cli.Verify(x509.VerifyOptions{Roots: pool(p), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if _, err := srv.Verify(x509.VerifyOptions{Roots: pool(other), DNSName: "127.0.0.1"}); err == nil {
		t.Error("another PKI's CA verified the server certificate")
	}
	args := strings.Join(p.RedisTLSArgs(6390, true), " ")
	for _, want := range []string{"--port 0", "--tls-port 6390", "--tls-cert-file " + p.ServerCert, "--tls-key-file " + p.ServerKey, "--tls-ca-cert-file " + p.CA, "--tls-auth-clients yes"} {
		if !strings.Contains(args, want) {
			t.Errorf("RedisTLSArgs = %q, want %q in it", args, want)
		}
	}
	if args := strings.Join(p.RedisTLSArgs(1, false), " "); !strings.HasSuffix(args, "--tls-auth-clients no") {
		t.Errorf("RedisTLSArgs(clientAuth false) = %q", args)
	}
}

// Buffer takes writes from many goroutines while it is read (the race
// detector checks it) and loses none.
func TestBuffer(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("ab"))
				_ = b.Len()
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if b.Len() != 8*100*2 || b.String() != strings.Repeat("ab", 800) {
		t.Errorf("Len %d, String %q...; want 1600 bytes of \"ab\"", b.Len(), b.String()[:min(10, b.Len())])
	}
}

func TestInBubbleOverHTTP1And2(t *testing.T) {
	var runs []string
	InBubbleOverHTTP1And2(t, func(t *testing.T, h2 bool) {
		start := time.Now()
		time.Sleep(time.Hour) // virtual time: only in a bubble does it take exactly an hour, at once
		if d := time.Since(start); d != time.Hour {
			t.Errorf("slept %v: want exactly 1h of virtual time (a synctest bubble)", d)
		}
		runs = append(runs, fmt.Sprintf("%s h2=%v", t.Name(), h2))
	})
	want := []string{"TestInBubbleOverHTTP1And2/http2=false h2=false", "TestInBubbleOverHTTP1And2/http2=true h2=true"}
	if !slices.Equal(runs, want) {
		t.Errorf("runs %q, want %q", runs, want)
	}
}
