package testcerts

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A Secret-like update swaps what the visible paths resolve to, through
// ..data, and leaves no old version behind.
func TestSecretDirUpdate(t *testing.T) {
	ca := NewCA(t, "ca")
	a, b := ca.Server(t), ca.Server(t)
	d := NewSecretDir(t, Files(a, ca))
	read := func() string {
		data, err := os.ReadFile(d.Path("tls.crt"))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	if read() != string(a.CertPEM) {
		t.Fatal("first version not visible")
	}
	if fi, err := os.Lstat(d.Path("tls.crt")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("tls.crt is not a symlink: %v", err)
	}
	d.Update(t, Files(b, ca))
	if read() != string(b.CertPEM) {
		t.Fatal("second version not visible after Update")
	}
	dirs, _ := filepath.Glob(filepath.Join(d.Dir, "..v*"))
	if len(dirs) != 1 {
		t.Fatalf("versions left: %v, want only the current one", dirs)
	}
}

// The certificates are what their names say.
func TestCertificates(t *testing.T) {
	ca := NewCA(t, "ca")
	verify := func(c *Cert, usage x509.ExtKeyUsage, name string) error {
		_, err := c.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: name, KeyUsages: []x509.ExtKeyUsage{usage}})
		return err
	}
	if err := verify(ca.Server(t), x509.ExtKeyUsageServerAuth, "localhost"); err != nil {
		t.Errorf("server certificate: %v", err)
	}
	if err := verify(ca.Server(t), x509.ExtKeyUsageServerAuth, "127.0.0.1"); err != nil {
		t.Errorf("server certificate for 127.0.0.1: %v", err)
	}
	cl := ca.Client(t, "app", "spiffe://cluster.local/ns/a/sa/b")
	if err := verify(cl, x509.ExtKeyUsageClientAuth, ""); err != nil || cl.Cert.Subject.CommonName != "app" || len(cl.Cert.URIs) != 1 {
		t.Errorf("client certificate: %v, CN %q, URIs %v", err, cl.Cert.Subject.CommonName, cl.Cert.URIs)
	}
	if exp := ca.Expired(t); !exp.Cert.NotAfter.Before(time.Now()) {
		t.Error("expired certificate has not expired")
	}
	if ca.Server(t).Serial().Cmp(ca.Server(t).Serial()) == 0 {
		t.Error("two certificates share a serial")
	}
	c := ca.Server(t)
	if _, err := c.WithOtherKey(t).TLSPair(); err == nil {
		t.Error("WithOtherKey's key matches the certificate")
	}
}
