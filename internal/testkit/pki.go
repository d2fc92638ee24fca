package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// PKI is a test certificate authority and the two certificates it signed,
// as PEM files in a temporary directory: a server certificate for
// 127.0.0.1 and localhost, and a client certificate. Each key is ECDSA
// P-256; each certificate is valid from an hour ago for a day.
type PKI struct {
	Dir                   string // the directory that holds the files
	CA                    string // the CA's certificate
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// NewPKI makes a fresh CA and its certificates in a directory removed when
// the test ends. Two calls give two CAs that do not trust each other.
func NewPKI(t testing.TB) PKI {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "backoffkit test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := PKI{Dir: dir, CA: writePEM(t, dir, "ca.crt", "CERTIFICATE", caDER)}
	sign := func(name string, serial int64, usage x509.ExtKeyUsage, ips []net.IP, dns []string) (string, string) {
		k := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: ips, DNSNames: dns,
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
	p.ServerCert, p.ServerKey = sign("server", 2, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
	p.ClientCert, p.ClientKey = sign("client", 3, x509.ExtKeyUsageClientAuth, nil, nil)
	return p
}

// RedisTLSArgs returns the redis-server arguments that make it listen with
// TLS only, on tlsPort, with p's server certificate, asking clients for a
// certificate signed by p's CA if clientAuth.
func (p PKI) RedisTLSArgs(tlsPort int, clientAuth bool) []string {
	auth := "no"
	if clientAuth {
		auth = "yes"
	}
	return []string{"--port", "0", "--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", p.ServerCert, "--tls-key-file", p.ServerKey, "--tls-ca-cert-file", p.CA,
		"--tls-auth-clients", auth}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t testing.TB, dir, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
