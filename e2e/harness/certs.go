package harness

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
	"testing"
	"time"
)

// Certs is a test PKI made at test start, written as PEM files: one CA
// that signs a server certificate (the broker's and kproxy's listener)
// and two client certificates (the clients', and kproxy's own towards
// the broker). None is checked in; each run makes new ones.
type Certs struct {
	Dir string

	CA string // the CA certificate every side trusts

	// ServerCert is valid for 127.0.0.1, ::1 and localhost, the addresses
	// every listener of the suite is on.
	ServerCert, ServerKey string

	// ClientCert (CN ClientCN) is what the client libraries present.
	ClientCert, ClientKey string
	// ProxyCert (CN ProxyCN) is what kproxy presents to the broker.
	ProxyCert, ProxyKey string
}

// Common names of the client certificates.
const (
	ClientCN = "kproxy-e2e-client"
	ProxyCN  = "kproxy-e2e-proxy"
)

// NewCerts makes the CA and its certificates in a new folder of the test.
// Keys are ECDSA P-256 in PKCS#8, the one private key format every client
// library and Kafka's PEM key store read.
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	dir := t.TempDir()
	c := &Certs{
		Dir:        dir,
		CA:         filepath.Join(dir, "ca.crt"),
		ServerCert: filepath.Join(dir, "server.crt"),
		ServerKey:  filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"),
		ClientKey:  filepath.Join(dir, "client.key"),
		ProxyCert:  filepath.Join(dir, "proxy.crt"),
		ProxyKey:   filepath.Join(dir, "proxy.key"),
	}
	// Backdated a little: a JVM or OpenSSL clock a second behind must not
	// see a certificate from the future.
	notBefore := time.Now().Add(-time.Hour)
	notAfter := time.Now().Add(24 * time.Hour)

	caKey := newKey(t)
	ca := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "kproxy e2e test CA"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("test CA: %v", err)
	}
	writePEM(t, c.CA, "CERTIFICATE", caDER)
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}

	leaf := func(cn string, usage x509.ExtKeyUsage, server bool, certFile, keyFile string) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: serial(t),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    notBefore,
			NotAfter:     notAfter,
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if server {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatalf("certificate %s: %v", cn, err)
		}
		writePEM(t, certFile, "CERTIFICATE", der)
		k, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		writePEM(t, keyFile, "PRIVATE KEY", k)
	}
	leaf("localhost", x509.ExtKeyUsageServerAuth, true, c.ServerCert, c.ServerKey)
	leaf(ClientCN, x509.ExtKeyUsageClientAuth, false, c.ClientCert, c.ClientKey)
	leaf(ProxyCN, x509.ExtKeyUsageClientAuth, false, c.ProxyCert, c.ProxyKey)
	return c
}

// Read is the content of one of the files, for configurations that take
// PEM text instead of a path.
func (c *Certs) Read(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n.Add(n, big.NewInt(1))
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
