package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// pair is a loaded certificate and key, checked.
type pair struct {
	cert     *tls.Certificate
	notAfter time.Time // the earliest NotAfter of the chain
}

func (p *pair) String() string {
	return "certificate " + describe(p.cert.Leaf) + " until " + p.notAfter.UTC().Format(time.RFC3339)
}

// ca is a loaded CA bundle.
type ca struct {
	pool     *x509.CertPool
	n        int
	notAfter time.Time // the earliest NotAfter of the bundle
}

func (c *ca) String() string {
	return fmt.Sprintf("%d CA certificates, the first to expire at %s", c.n, c.notAfter.UTC().Format(time.RFC3339))
}

// fileError names the file a problem is in, and the field that names it,
// so a log line and `kproxy validate` point at both.
type fileError struct {
	Field string // dotted, relative to the section: "listener.cert_file"
	File  string
	Err   error
}

func (e *fileError) Error() string {
	var pe *fs.PathError
	if errors.As(e.Err, &pe) {
		return e.Err.Error() // it names the file already
	}
	return e.File + ": " + e.Err.Error()
}
func (e *fileError) Unwrap() error { return e.Err }

// parseCerts decodes every CERTIFICATE block of a PEM file.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return certs, nil
}

func earliest(certs []*x509.Certificate) time.Time {
	t := certs[0].NotAfter
	for _, c := range certs[1:] {
		if c.NotAfter.Before(t) {
			t = c.NotAfter
		}
	}
	return t
}

// parsePair checks a certificate and key the way a reload must before it
// swaps them in: the certificate file parses, the key matches its leaf, and
// the leaf has not expired at now. A leaf not yet valid is accepted: a
// freshly issued certificate may start a little after our clock.
func parsePair(at string, certFile, keyFile string, certPEM, keyPEM []byte, now time.Time) (*pair, error) {
	certs, err := parseCerts(certPEM)
	if err != nil {
		return nil, &fileError{at + "cert_file", certFile, err}
	}
	leaf := certs[0]
	if now.After(leaf.NotAfter) {
		return nil, &fileError{at + "cert_file", certFile,
			fmt.Errorf("certificate %s expired at %s", describe(leaf), leaf.NotAfter.UTC().Format(time.RFC3339))}
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, &fileError{at + "key_file", keyFile, fmt.Errorf("%w (with certificate %s)", err, certFile)}
	}
	if c.Leaf == nil {
		c.Leaf = leaf
	}
	return &pair{cert: &c, notAfter: earliest(certs)}, nil
}

// parseCA reads a CA bundle: at least one certificate, all parsable.
func parseCA(field, file string, data []byte) (*ca, error) {
	certs, err := parseCerts(data)
	if err != nil {
		return nil, &fileError{field, file, err}
	}
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return &ca{pool: p, n: len(certs), notAfter: earliest(certs)}, nil
}

// describe names a certificate for a log line.
func describe(c *x509.Certificate) string {
	return fmt.Sprintf("%q (serial %s)", c.Subject.CommonName, c.SerialNumber.Text(16))
}
