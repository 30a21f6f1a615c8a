// Package testcerts makes certificates for tests, in memory, with
// crypto/x509: a CA, server certificates for 127.0.0.1/localhost, client
// certificates with a CN and URI SANs (SPIFFE IDs), expired ones, and keys
// that do not match. No certificate is ever checked in; every test makes
// its own, so rotation and expiry can be exercised at will. GenerateCA and
// Generate serve programs too (kbench's TLS benchmarks).
//
// Keys are ECDSA P-256: fast to generate on a loaded machine.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// serials makes every certificate of a test binary distinct, so a test can
// tell which one a handshake saw.
var serials atomic.Int64

func init() { serials.Store(time.Now().UnixNano() & 0xffffffff) }

// Cert is a certificate with its key, and both in PEM.
type Cert struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
	KeyPEM  []byte
}

// Serial is the certificate's serial number.
func (c *Cert) Serial() *big.Int { return c.Cert.SerialNumber }

// TLS returns the pair as a tls.Certificate, failing the test when the
// key does not match.
func (c *Cert) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	pair, err := c.TLSPair()
	if err != nil {
		t.Fatalf("testcerts: pair: %v", err)
	}
	return pair
}

// TLSPair returns the pair as a tls.Certificate, or why it is not one.
func (c *Cert) TLSPair() (tls.Certificate, error) { return tls.X509KeyPair(c.CertPEM, c.KeyPEM) }

// Pool returns a pool holding only this certificate (for a CA).
func (c *Cert) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Cert)
	return p
}

// Options shape a certificate. Zero values give a certificate valid from an
// hour ago for a day, for both server and client use.
type Options struct {
	CN       string
	DNSNames []string
	IPs      []net.IP
	URIs     []string // e.g. "spiffe://cluster.local/ns/payments/sa/api"
	// NotBefore and NotAfter override the validity window.
	NotBefore, NotAfter time.Time
}

// NewCA makes a self-signed CA named cn.
func NewCA(t testing.TB, cn string) *Cert {
	t.Helper()
	c, err := GenerateCA(cn)
	return must(t, c, err)
}

// Issue makes a certificate signed by ca.
func (ca *Cert) Issue(t testing.TB, o Options) *Cert {
	t.Helper()
	c, err := Generate(o, ca)
	return must(t, c, err)
}

// GenerateCA is NewCA for a program (a benchmark tool), returning the
// error instead of failing a test.
func GenerateCA(cn string) (*Cert, error) {
	tmpl, err := template(Options{CN: cn})
	if err != nil {
		return nil, err
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = nil
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return sign(tmpl, tmpl, key, key)
}

// Generate is Issue for a program, returning the error.
func Generate(o Options, ca *Cert) (*Cert, error) {
	tmpl, err := template(o)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return sign(tmpl, ca.Cert, key, ca.Key)
}

// ServerOptions are those of Server: 127.0.0.1, ::1 and localhost.
func ServerOptions() Options {
	return Options{CN: "localhost", DNSNames: []string{"localhost"},
		IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}
}

func must(t testing.TB, c *Cert, err error) *Cert {
	t.Helper()
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	return c
}

// Server makes a server certificate for 127.0.0.1, ::1 and localhost.
func (ca *Cert) Server(t testing.TB) *Cert {
	t.Helper()
	return ca.Issue(t, ServerOptions())
}

// Client makes a client certificate with subject CN cn and the given URI
// SANs.
func (ca *Cert) Client(t testing.TB, cn string, uris ...string) *Cert {
	t.Helper()
	return ca.Issue(t, Options{CN: cn, URIs: uris})
}

// Expired makes a server certificate (as Server) that expired an hour ago.
func (ca *Cert) Expired(t testing.TB) *Cert {
	t.Helper()
	now := time.Now()
	return ca.Issue(t, Options{CN: "localhost", DNSNames: []string{"localhost"},
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-time.Hour)})
}

// WithOtherKey returns c's certificate paired with a fresh key that does
// not match it.
func (c *Cert) WithOtherKey(t testing.TB) *Cert {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testcerts: key: %v", err)
	}
	kp, err := keyPEM(k)
	if err != nil {
		t.Fatalf("testcerts: key: %v", err)
	}
	return &Cert{Cert: c.Cert, Key: k, CertPEM: c.CertPEM, KeyPEM: kp}
}

// Write writes the certificate and key as PEM into dir, as certName and
// keyName, and returns their paths.
func (c *Cert) Write(t testing.TB, dir, certName, keyName string) (certPath, keyPath string) {
	t.Helper()
	certPath, keyPath = filepath.Join(dir, certName), filepath.Join(dir, keyName)
	WriteFile(t, certPath, c.CertPEM)
	WriteFile(t, keyPath, c.KeyPEM)
	return certPath, keyPath
}

// WriteFile writes data to path, failing the test on error.
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("testcerts: %v", err)
	}
}

func template(o Options) (*x509.Certificate, error) {
	now := time.Now()
	nb, na := o.NotBefore, o.NotAfter
	if nb.IsZero() {
		nb = now.Add(-time.Hour)
	}
	if na.IsZero() {
		na = now.Add(24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serials.Add(1)),
		Subject:      pkix.Name{CommonName: o.CN},
		NotBefore:    nb,
		NotAfter:     na,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     o.DNSNames,
		IPAddresses:  o.IPs,
	}
	for _, s := range o.URIs {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("URI SAN %q: %w", s, err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	return tmpl, nil
}

func sign(tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) (*Cert, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, err
	}
	return &Cert{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: kp}, nil
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
