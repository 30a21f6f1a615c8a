package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kproxy/kproxy/internal/testcerts"
)

// The files a TLS benchmark's certificate directory holds: a CA, and a
// server certificate it signed for 127.0.0.1 and localhost, which every
// TLS listener of the run presents (the null broker, kproxy, HAProxy).
const (
	certCA   = "ca.crt"  // the CA every client verifies against
	certFile = "tls.crt" // the server certificate
	certKey  = "tls.key" // its key
	certPEM  = "tls.pem" // certificate then key in one file, as HAProxy's crt wants it
)

// benchCerts is a TLS benchmark's certificate directory, loaded.
type benchCerts struct {
	dir    string
	server tls.Certificate
	roots  *x509.CertPool
}

// serverConfig is what the null broker listens with.
func (c *benchCerts) serverConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{c.server}, MinVersion: tls.VersionTLS12}
}

// clientConfig is what the load generator dials with: the CA verified,
// and the certificate's name checked against the IP dialled.
func (c *benchCerts) clientConfig() *tls.Config {
	return &tls.Config{RootCAs: c.roots, MinVersion: tls.VersionTLS12}
}

func (c *benchCerts) path(name string) string { return filepath.Join(c.dir, name) }

// writeCerts makes a fresh CA and server certificate (ECDSA P-256, valid
// for a day, for 127.0.0.1, ::1 and localhost) and writes them into dir.
func writeCerts(dir string) error {
	ca, err := testcerts.GenerateCA("kbench CA")
	if err != nil {
		return err
	}
	srv, err := testcerts.Generate(testcerts.ServerOptions(), ca)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		certCA:   ca.CertPEM,
		certFile: srv.CertPEM,
		certKey:  srv.KeyPEM,
		certPEM:  append(append([]byte(nil), srv.CertPEM...), srv.KeyPEM...),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// loadCerts reads a directory writeCerts made.
func loadCerts(dir string) (*benchCerts, error) {
	c := &benchCerts{dir: dir}
	var err error
	if c.server, err = tls.LoadX509KeyPair(c.path(certFile), c.path(certKey)); err != nil {
		return nil, fmt.Errorf("%s: %w (make it with kbench certs --dir %s)", dir, err, dir)
	}
	ca, err := os.ReadFile(c.path(certCA))
	if err != nil {
		return nil, err
	}
	c.roots = x509.NewCertPool()
	if !c.roots.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s: no certificate in it", c.path(certCA))
	}
	return c, nil
}

// certsCmd writes a certificate directory for a TLS run whose other
// proxies (HAProxy) must be started before kbench compare --tls-dir.
func certsCmd(args []string) error {
	fs := flag.NewFlagSet("certs", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory to write ca.crt, tls.crt, tls.key and tls.pem (cert+key) into; made if missing")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		err := errors.New("--dir is required")
		fmt.Fprintln(fs.Output(), err)
		return usageError{err}
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	if err := writeCerts(*dir); err != nil {
		return err
	}
	fmt.Printf("kbench certs: %s (CA %s; server certificate for 127.0.0.1 and localhost, %s + %s, both in %s)\n",
		*dir, certCA, certFile, certKey, certPEM)
	return nil
}
